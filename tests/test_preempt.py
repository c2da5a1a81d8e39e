"""Issue #65 §3: a training that receives SIGTERM (a scheduler's time limit: SLURM's ``--signal=TERM@<s>``, the
parallel runner's guard) writes its resume checkpoint after the step it is in, exits 143 with one paragraph, and
the same run started again resumes from that step and ends with the numbers of an uninterrupted run."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from sentlab.train.run import train_method
from _support.training import factory, fake_dev_eval, make_root, params, read_curve

pytestmark = pytest.mark.usefixtures("one_thread")
TESTS = Path(__file__).resolve().parent
# no checkpoint of its own before the end (eval_every 5 > the SIGTERM's step 3): what is on disk after the signal is
# the handler's
P = dict(max_steps=6, eval_every=5, num_threads=1)

CHILD = """
import sys, time
sys.path.insert(0, {tests!r})
from pathlib import Path
from sentlab.train import preempt
from sentlab.train.run import train_method
from _support.training import factory, fake_dev_eval, params
from transformers import AutoTokenizer
from sentlab.assets.resolve import resolve_model

tok = AutoTokenizer.from_pretrained(resolve_model("sentence-transformers/all-MiniLM-L6-v2"))
root = Path({root!r})

def wait_at_3(step, record):   # step 3 tells the test it is there and waits for the signal (at most 120 s)
    if step == 3:
        (root / "at-step-3").write_text("")
        t = time.time()
        while not preempt._received and time.time() - t < 120:
            time.sleep(0.05)

from sentlab.stages.entry import run_stage   # what pipeline/train.py runs its stage in
sys.exit(run_stage(lambda: train_method(params(**{p!r}), "simcse", root=root, dev_eval=fake_dev_eval(),
                                        encoder_factory=factory(tok), tracking=False, progress=False,
                                        callbacks=[wait_at_3])))
"""


def test_sigterm_writes_the_resume_checkpoint_and_a_later_run_resumes_it(tmp_path, tok):
    a = make_root(tmp_path / "a")   # uninterrupted
    train_method(params(**P), "simcse", root=a, dev_eval=fake_dev_eval(), encoder_factory=factory(tok),
                 tracking=False, progress=False)

    b = make_root(tmp_path / "b")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", CHILD.format(tests=str(TESTS), root=str(b), p=P)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while not (b / "at-step-3").exists():
        assert proc.poll() is None, f"the training ended before step 3: {proc.communicate()[1][-3000:]}"
        assert time.time() < deadline, "the training did not reach step 3 in 300 s"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert "stopped by SIGTERM after step 3 of 6" in err and "continues from step 3" in err
    ckpts = list((b / "checkpoints" / "simcse").glob("*/last/state.json"))
    assert len(ckpts) == 1 and json.loads(ckpts[0].read_text())["step"] == 3
    assert not (b / "models" / "simcse").exists()   # nothing published by the stopped run

    info = train_method(params(**P), "simcse", root=b, dev_eval=fake_dev_eval(), encoder_factory=factory(tok),
                        tracking=False, progress=False)
    assert info["resumed_from_step"] == 3 and info["steps"] == 6
    wa = load_file(a / "models" / "simcse" / "model.safetensors")
    wb = load_file(b / "models" / "simcse" / "model.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert read_curve(a / "reports/curves/simcse.csv") == read_curve(b / "reports/curves/simcse.csv")


def test_the_handler_is_removed_after_the_training(tmp_path, tok):
    before = signal.getsignal(signal.SIGTERM)
    train_method(params(max_steps=2, eval_every=2), "simcse", root=make_root(tmp_path), dev_eval=fake_dev_eval(),
                 encoder_factory=factory(tok), tracking=False, progress=False)
    assert signal.getsignal(signal.SIGTERM) is before
