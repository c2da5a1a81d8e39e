"""runtime.heap (issue 15): glibc's malloc keeps freed blocks instead of page-faulting big ones in again."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from sentlab.config import TrainParams
from sentlab.errors import SentlabError
from sentlab.train import heap as H

# an 80 MB block (above glibc's largest mmap threshold, 32 MB) allocated, written and freed, then a 64 MB one:
# the minor page faults of the second tell whether the first one's pages were kept. The first is the larger
# so that the second fits in it whatever lands beside it: torch asks for 64-byte-aligned memory, and a
# same-size request does not fit a freed chunk that could not merge with its neighbours (in 6 of 8 runs here)
PROBE = """
import json, resource, sys, torch
from sentlab.train.heap import apply_heap
apply_heap(sys.argv[1])
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
torch.zeros(20 * 2**20).add_(1)
before = faults()
torch.zeros(16 * 2**20).add_(1)
print(json.dumps({"faults": faults() - before}))
"""


def _second_round_faults(setting: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE, setting], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["faults"]


def _thp_always() -> bool:
    f = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    return f.is_file() and "[always]" in f.read_text()


@pytest.mark.skipif(not H.glibc(), reason="needs glibc's malloc (Linux): runtime.heap retain is glibc-only")
def test_retain_keeps_a_freed_64_mb_block_mapped():
    retained = _second_round_faults("retain")
    assert retained < 1000  # 16,384 pages of 4 KB would fault in again
    if not _thp_always():  # with transparent huge pages always on, a fresh mapping faults 2 MB at a time
        assert _second_round_faults("system") > 8000


def test_resolve_heap_and_the_param(monkeypatch):
    monkeypatch.setattr(H, "glibc", lambda: True)
    assert H.resolve_heap("auto", torch.device("cpu")) == "retain"
    assert H.resolve_heap("auto", torch.device("cuda")) == "system"
    assert H.resolve_heap("system", torch.device("cpu")) == "system"
    monkeypatch.setattr(H, "glibc", lambda: False)
    assert H.resolve_heap("auto", torch.device("cpu")) == "system"
    with pytest.raises(SentlabError, match="runtime.heap: retain needs glibc"):
        H.resolve_heap("retain", torch.device("cpu"))
    assert H.apply_heap("system") is False
    assert TrainParams().heap == "auto"
    with pytest.raises(ValueError):
        TrainParams(heap="jemalloc")


def test_the_train_stage_applies_and_records_the_resolved_heap(tmp_path, tok, monkeypatch):
    from _support.training import factory, fake_dev_eval, make_root, params

    from sentlab.train import run

    applied = []
    monkeypatch.setattr(run, "apply_heap", applied.append)  # the test process keeps its own malloc
    monkeypatch.setattr(H, "glibc", lambda: True)
    info = run.train_method(params(max_steps=1, eval_every=1, heap="auto"), "simcse", root=make_root(tmp_path),
                            dev_eval=fake_dev_eval(), encoder_factory=factory(tok), tracking=False, progress=False)
    assert applied == ["retain"] and info["heap"] == "retain"
    saved = json.loads((tmp_path / "models" / "simcse" / "sentlab.json").read_text())
    assert saved["heap"] == "retain"
