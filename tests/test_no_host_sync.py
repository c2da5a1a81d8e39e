"""On a GPU a step must not wait for the device: no tensor is read back to the host per micro-batch.

On CPU the loop reads each step's loss at once (``read_every_step``, for the progress bar); the device
path reads only at evaluation/checkpoint steps. These tests run the device path on CPU and count every
read-back (``.item()``, ``float()``, ``int()``, ``bool()``, ``.tolist()``, ``.numpy()``, ``.cpu()``)
made by sentlab's own code during the steps between two evaluations; the last test runs it on CUDA with
torch's sync debug mode where a GPU is present.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import sentlab
from sentlab.config import TrainParams
from sentlab.methods import get_method
from sentlab.train.data import Corpus
from sentlab.train.loop import train_loop
from tiny import sentences, tiny_bert

READS = ("item", "__float__", "__int__", "__bool__", "tolist", "numpy", "cpu", "__index__")
# sentlab's own source folder: a checkout named ``sentlab`` has "/sentlab/" in its .venv's paths too
OURS = str(Path(sentlab.__file__).resolve().parent) + os.sep


def in_prepare() -> bool:
    """Inside a method's prepare() (CPU tensors, in DataLoader workers on a GPU machine): not a device read."""
    f = sys._getframe(2)
    while f is not None:
        if f.f_code.co_name == "prepare" and f.f_code.co_filename.startswith(OURS + "methods"):
            return True
        f = f.f_back
    return False


class ReadCounter:
    """Counts read-backs whose caller is a sentlab module (HF's own checks are not ours to remove)."""

    def __init__(self, monkeypatch):
        self.calls: list[str] = []
        for name in READS:
            orig = getattr(torch.Tensor, name)

            def wrapper(t, *a, _orig=orig, _name=name, **kw):
                caller = sys._getframe(1).f_code.co_filename
                if caller.startswith(OURS) and not in_prepare():
                    self.calls.append(f"{_name} from {caller}:{sys._getframe(1).f_lineno}")
                return _orig(t, *a, **kw)

            monkeypatch.setattr(torch.Tensor, name, wrapper)


CASES = {
    "simcse": {},
    "moco": {"queue_size": 24},
    "moco_deletion": {"queue_size": 24},
    "ptbert": {"queue_size": 24, "pseudo_len": 8},
    "ct": {"negatives": 3},
    "l2p": {"layers": 1, "steps": 2},
    "esimcse": {"queue_size": 16},
    "simcse_pp": {},
    # not yet: PromptBERT's [MASK] pooling checks on the device that no [MASK] was truncated away (one read per step)
}


@pytest.mark.parametrize("method_id", sorted(CASES))
def test_no_read_back_between_evaluations(method_id, tok, tmp_path, monkeypatch):
    cfg = TrainParams(batch_size=8, max_length=16, lr=1e-3, eval_every=4, max_steps=4, device="cpu")
    cls = get_method(method_id)
    torch.manual_seed(0)
    m = cls(tiny_bert(tok, 0, initializer_range=0.2), tok, cls.Params(**CASES[method_id]).resolved(cfg), seed=0)
    counter = ReadCounter(monkeypatch)
    per_step = {}

    def snapshot(step, record):
        per_step[step] = len(counter.calls)
        assert ("loss" in record) == (step == 4)  # read at the evaluation step only

    train_loop(m, Corpus(ids=np.arange(40), texts=sentences(40)), cfg, seed=0,
               dev_eval=lambda enc: {"stsb_dev": 0.0}, ckpt_dir=tmp_path, progress=False, callbacks=[snapshot],
               read_every_step=False)
    assert per_step[1] == per_step[2] == per_step[3] == 0, counter.calls[:5]
    assert per_step[4] > 0  # the evaluation step reads the losses (the counter sees reads)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.set_sync_debug_mode)")
@pytest.mark.parametrize("method_id", sorted(CASES))
def test_cuda_steps_make_no_synchronising_call(method_id, tok, tmp_path):
    cfg = TrainParams(batch_size=8, max_length=16, lr=1e-3, eval_every=4, max_steps=4, device="cuda")
    cls = get_method(method_id)
    m = cls(tiny_bert(tok, 0, initializer_range=0.2), tok, cls.Params(**CASES[method_id]).resolved(cfg), seed=0)
    synced = []

    def arm(step, record):  # warn on every synchronising call during the steps between evaluations
        torch.cuda.set_sync_debug_mode("warn" if step < 3 else 0)

    with _collect(synced):
        train_loop(m, Corpus(ids=np.arange(40), texts=sentences(40)), cfg, seed=0,
                   dev_eval=lambda enc: {"stsb_dev": 0.0}, ckpt_dir=tmp_path, progress=False, callbacks=[arm])
    torch.cuda.set_sync_debug_mode(0)
    ours = [w for w in synced if w.split(":")[0].startswith(OURS)]
    assert not ours, ours[:5]


class _collect:
    def __init__(self, out):
        self.out = out

    def __enter__(self):
        import warnings

        self._cm = warnings.catch_warnings(record=True)
        self._rec = self._cm.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        self.out.extend(f"{w.filename}:{w.lineno} {w.message}" for w in self._rec)
        return self._cm.__exit__(*exc)


@pytest.mark.parametrize("method_id", ["moco_deletion", "l2p", "esimcse"])
def test_prepare_in_dataloader_workers_gives_the_same_numbers(method_id, tok, tmp_path):
    """Tokenisation/augmentation run by the DataLoader's collate_fn in 2 worker processes (as on a GPU
    machine) give the same losses as in the main process: augmentations draw from Batch.rng / the
    micro-batch index, never from a worker's own RNG state."""
    losses = {}
    for workers in (0, 2):
        cfg = TrainParams(batch_size=8, max_length=16, lr=1e-3, eval_every=3, max_steps=3, device="cpu",
                          loader_workers=workers)
        cls = get_method(method_id)
        torch.manual_seed(0)
        params = ({"queue_size": 24} if method_id.startswith("moco") else {"queue_size": 16}
                  if method_id == "esimcse" else {"layers": 1, "steps": 2})
        m = cls(tiny_bert(tok, 0, initializer_range=0.2), tok, cls.Params(**params).resolved(cfg), seed=0)
        res = train_loop(m, Corpus(ids=np.arange(40), texts=sentences(40)), cfg, seed=0,
                         dev_eval=lambda enc: {"stsb_dev": 0.0}, ckpt_dir=tmp_path / str(workers), progress=False)
        losses[workers] = res.losses
    assert len(losses[0]) == 3 and losses[0] == losses[2]


def test_loader_workers_fork_under_a_forkserver_default(tok, tmp_path):
    """The GPU preflight's MoCo / PT-BERT stages died with "Can't pickle local object" because their stage
    processes inherit ``forkserver`` as the default start method (``spawn`` on macOS, ``forkserver`` in
    Python 3.14): the DataLoader then pickles its collate function, the method with its model, into each
    worker. Workers are forked where the platform can: a run in a forkserver-default process trains, with
    the losses of the main-process run."""
    import multiprocessing as mp

    from sentlab.train.batches import micro_batch_loader

    if "fork" not in mp.get_all_start_methods():
        pytest.skip("needs the fork start method (Linux)")
    cfg = TrainParams(batch_size=8, max_length=16, lr=1e-3, eval_every=3, max_steps=3, device="cpu",
                      loader_workers=2)
    cls = get_method("moco_deletion")
    torch.manual_seed(0)
    m = cls(tiny_bert(tok, 0, initializer_range=0.2), tok, cls.Params(queue_size=24).resolved(cfg), seed=0)
    corpus = Corpus(ids=np.arange(40), texts=sentences(40))
    mp.set_start_method("forkserver", force=True)   # the default a preflight stage process inherits
    try:
        loader = micro_batch_loader(m, corpus, cfg, seed=0, steps_per_epoch=5, start=0, end=2, rank=0, world=1,
                                    device=torch.device("cpu"))
        assert loader.multiprocessing_context.get_start_method() == "fork"
        assert len(list(loader)) == 2                 # both prepared micro-batches come back from the workers
    finally:
        mp.set_start_method(None, force=True)
