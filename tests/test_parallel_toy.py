"""`sentlab run` on a pipeline of sentlab's shape whose stages take milliseconds (tests/fixtures/toy_pipeline):
the same outputs as a serial `dvc repro`, a clean `dvc status`, every parallel stage restored from the run
cache, each chain on its own (fake) GPU. The runner's faults (a failed stage reported with its log while the
others are kept, a killed worker retried and resuming its checkpoint) and two Ray nodes through a directory DVC
remote take one to two minutes each on 2 cores (benchmarks/RESULTS.md), beyond CI's 20 minutes:
`python benchmarks/parallel_faults.py` checks them on the same toy (docs/scale-ray.md, "Tests and checks")."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="`ray` is not installed: pip install 'sentlab[ray]' (the parallel runner's "
                                        "optional extra)")

sys.path.insert(0, str(Path(__file__).parent))
from toy import PARALLEL, STATE, clean, make_toy, outputs, restored, sentlab_run, sentlab_status  # noqa: E402
from toy import serial_outputs  # noqa: E402


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    return serial_outputs(tmp_path_factory.mktemp("toy"))


def test_two_jobs_same_outputs_clean_status(serial, tmp_path):
    repo, env = make_toy(tmp_path, "repo")
    run = sentlab_run(repo, env, "--jobs", "2", "--gpus", "2")
    assert run.returncode == 0, run.stderr[-4000:]
    assert outputs(repo) == serial and clean(repo)
    assert restored(repo) == PARALLEL                          # every parallel stage, none run again
    states = {p.stem: json.loads(p.read_text()) for p in (repo / STATE / "stages").glob("*.json")}
    assert set(states) == PARALLEL and all(s["status"] == "restored" for s in states.values())
    assert {s["cuda_visible_devices"] for s in states.values()} <= {"0", "1"}
    assert "c: done" in run.stderr and "train@a" in (repo / STATE / "logs/c.restore.log").read_text()
    assert not list((repo / STATE / "worktrees").iterdir())   # the done chains' worktrees are gone
    # each stage's report inputs kept as it finished (sentlab report --from-run reads them): the metrics as restored
    kept = {p.parent.name: json.loads(p.read_text())["files"] for p in (repo / STATE / "results").glob("*/kept.json")}
    assert set(kept) == PARALLEL and kept["evaluate@b"] == ["reports/metrics/b.json"]
    assert (repo / STATE / "results/evaluate@b/reports/metrics/b.json").read_bytes() == \
        (repo / "reports/metrics/b.json").read_bytes()
    status = sentlab_status(repo, env)
    assert status.returncode == 0 and "11 up to date" in status.stdout, status.stdout
