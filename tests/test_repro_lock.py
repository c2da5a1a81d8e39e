"""`make repro` holds one workspace lock from its profile check to the end of its pipeline (issue #64: "make repro
JOBS=N with another profile rewrites params.yaml under a running sentlab run", its serial path).

Real processes, the repository's Makefile run by `make` in a scratch workspace: a fake `dvc` first on PATH (the
recipe's venv) holds the first run in the window between the profile check and DVC taking its lock (a real `dvc
repro` takes `.dvc/tmp/lock` some seconds after it starts); a second `make repro` with another profile starts then.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

FAKE_DVC = """#!{python}
# A `dvc` whose first call stops before taking DVC's lock until the test says go; every call records what it saw.
import json, os, sys, time
from pathlib import Path

import yaml
import zc.lockfile

root = Path.cwd()
try:
    os.rename(root / "hold", root / "held")   # the first call only
    first = True
except FileNotFoundError:
    first = False
if first:
    (root / "started").write_text(str(os.getppid()))   # the process that started it
    deadline = time.monotonic() + 120
    while not (root / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
lock = zc.lockfile.LockFile(str(root / ".dvc" / "tmp" / "lock"))   # what `dvc repro` holds for its run
if os.environ.get("FAKE_SOURCES_FAILS"):   # the first stage refused, as a stage records it (stages.entry)
    from sentlab.provenance.failures import record_failure
    record_failure("sources", 2, os.environ["FAKE_SOURCES_FAILS"], root=root)
with open(root / "dvc-calls.jsonl", "a") as fh:
    fh.write(json.dumps({{"argv": sys.argv[1:], "profile": yaml.safe_load(open("params.yaml"))["profile"],
                         "parent": os.environ.get("SENTLAB_PARENT_RUN_ID")}}) + "\\n")
lock.close()
sys.exit(int(os.environ.get("FAKE_DVC_RC", "0")))
"""

FAKE_STAGE = """import json, os, sys
from pathlib import Path

with open("partial.jsonl", "a") as fh:
    fh.write(json.dumps({"script": sys.argv[0], "parent": os.environ.get("SENTLAB_PARENT_RUN_ID")}) + "\\n")
"""


@pytest.fixture
def workspace(tmp_path):
    if shutil.which("make") is None:
        pytest.skip("needs `make` on PATH (the recipe under test is the Makefile's)")
    ws = tmp_path / "ws"
    shutil.copytree(REPO / "profiles", ws / "profiles")
    for f in ("params.yaml", "Makefile"):
        shutil.copy(REPO / f, ws / f)
    (ws / ".dvc" / "tmp").mkdir(parents=True)
    (ws / "pipeline").mkdir()
    for script in ("report.py", "export.py"):
        (ws / "pipeline" / script).write_text(FAKE_STAGE)
    bin_ = ws / "venv" / "bin"
    bin_.mkdir(parents=True)
    (bin_ / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_ / "dvc").write_text(FAKE_DVC.format(python=sys.executable))
    for f in bin_.iterdir():
        f.chmod(0o755)
    (ws / "venv" / ".installed").touch()
    return ws


def _make(ws: Path, *args: str, **env) -> subprocess.Popen:
    full = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "SHARED": str(ws / "none"),
            "MLFLOW_TRACKING_URI": "http://127.0.0.1:9", **env}   # port 9: refused at once, tracking off
    return subprocess.Popen(["make", "-o", "venv/.installed", "repro", "VENV=venv", *args], cwd=ws, env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _calls(ws: Path, name: str = "dvc-calls.jsonl") -> list[dict]:
    f = ws / name
    return [json.loads(line) for line in f.read_text().splitlines()] if f.is_file() else []


def test_a_second_make_repro_with_another_profile_is_refused_and_params_yaml_is_untouched(workspace):
    ws = workspace
    before = (ws / "params.yaml").read_text()
    assert "\nprofile: quick" in before
    (ws / "hold").touch()
    first = _make(ws, "PROFILE=quick")
    try:
        deadline = time.monotonic() + 120
        while not (ws / "started").is_file():       # the first run is in its window: past its profile check,
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()[0]   # no DVC lock yet
            time.sleep(0.1)
        second = _make(ws, "PROFILE=smoke")
        out2, _ = second.communicate(timeout=120)
        after_second = (ws / "params.yaml").read_text()
        (ws / "go").touch()
        out1, _ = first.communicate(timeout=120)
    finally:
        (ws / "go").touch()
        for p in (first,):
            if p.poll() is None:
                p.kill()
    assert after_second == before, "the second make repro rewrote params.yaml under the first"
    assert second.returncode != 0, out2
    holder = int((ws / "started").read_text())   # the first's `sentlab repro`, which runs dvc
    assert f"sentlab: error: Another pipeline run (`make repro PROFILE=quick`, pid {holder})" in out2, out2
    assert "params.yaml is not rewritten (to profile `smoke`)" in out2 and "Traceback" not in out2
    assert first.returncode == 0, out1
    assert [c["profile"] for c in _calls(ws)] == ["quick"]       # the first ran with its own profile; the second none
    assert _calls(ws)[0]["argv"] == ["repro", "--keep-going"]
    assert (ws / "params.yaml").read_text() == before


def test_make_repro_keeps_its_parent_run_and_builds_the_report_after_a_failure(workspace, tmp_path):
    """The recipe's behaviour, kept: a parent MLflow run whose id the stages get, `dvc repro --keep-going`, the report
    and exports built from what finished when stages failed (with the parent's id), the parent closed FAILED, the
    exit status dvc's; then a second run (the lock released) switches profile."""
    ws = workspace
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run = _make(ws, "PROFILE=quick", FAKE_DVC_RC="3", MLFLOW_TRACKING_URI=store)
    out, _ = run.communicate(timeout=300)
    assert run.returncode == 2, out             # make's status for a failed recipe
    assert "some stages failed" in out
    calls = _calls(ws)
    assert len(calls) == 1 and calls[0]["argv"] == ["repro", "--keep-going"] and calls[0]["parent"]
    parent = calls[0]["parent"]
    assert _calls(ws, "partial.jsonl") == [{"script": "pipeline/report.py", "parent": parent},
                                           {"script": "pipeline/export.py", "parent": parent}]
    from mlflow.tracking import MlflowClient

    got = MlflowClient(tracking_uri=store).get_run(parent)
    assert got.info.status == "FAILED" and got.data.params["profile"] == "quick"
    assert got.data.tags["sentlab.stage"] == "pipeline"

    again = _make(ws, "PROFILE=smoke")   # nothing holds the lock now: the profile switches
    out, _ = again.communicate(timeout=300)
    assert again.returncode == 0, out
    assert "\nprofile: smoke" in (ws / "params.yaml").read_text()
    assert [c["profile"] for c in _calls(ws)] == ["quick", "smoke"]


@pytest.mark.parametrize("stale", [False, True])
def test_a_run_that_sources_stopped_builds_no_report_and_ends_with_its_paragraph(workspace, stale):
    """Before: `make repro PROFILE=paper-lite` on a machine without a GPU stopped at `sources` (nothing ran), then
    built a report of 0 rows over reports/ (an earlier report replaced) and ran the export, which raised the
    paragraph again. Now nothing is built and the paragraph is the last line. A `sources` record older than the run
    (it failed in an earlier run, which this one did not reach) does not count."""
    ws = workspace
    paragraph = ("sentlab: error: params.yaml `runtime.device: cuda` (the profile is meant for GPUs) but torch sees "
                 "no GPU")
    if stale:
        from sentlab.provenance.failures import record_failure
        rec = record_failure("sources", 2, paragraph, root=ws).with_suffix(".json")
        rec.write_text(json.dumps({**json.loads(rec.read_text()), "time": time.time() - 3600}))   # an hour ago
        run = _make(ws, "PROFILE=quick", FAKE_DVC_RC="1")
    else:
        run = _make(ws, "PROFILE=quick", FAKE_DVC_RC="1", FAKE_SOURCES_FAILS=paragraph)
    out, _ = run.communicate(timeout=300)
    assert run.returncode == 2, out
    if stale:
        assert "some stages failed" in out and len(_calls(ws, "partial.jsonl")) == 2
        return
    assert _calls(ws, "partial.jsonl") == [] and "some stages failed" not in out
    assert "nothing ran: `sources`, which every other stage needs, stopped the run" in out
    assert [ln for ln in out.splitlines() if not ln.startswith("make")][-1] == paragraph
