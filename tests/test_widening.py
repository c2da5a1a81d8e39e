"""Issue #65 §2: widening a profile re-runs only what it adds. The profile's name (params.yaml ``profile``) is a label
each stage records, not a param any stage declares: a profile that ``extends:`` the one that ran, or the same profile
under another file name, leaves every stage that ran up to date in ``dvc status``.

The workspace is a copy of the repository's files with the smoke profile in force and every stage's outputs and
inputs stood in by small files, committed to dvc.lock (``dvc commit``) as if ``dvc repro`` had made them: DVC compares
the lock's params and hashes with the workspace's exactly as it does after a real run, in seconds instead of the
smoke run's minutes (tests/test_pipeline_smoke.py runs the stages themselves)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ALWAYS = {"sources": ["always changed"]}   # `sources` looks at the files outside the repository at every repro


def _run(ws: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run([sys.executable, "-m", *args], cwd=ws, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def _status(ws: Path) -> dict:
    return json.loads(_run(ws, "dvc", "status", "--json"))


def _stand_in_outputs(ws: Path) -> None:
    """A small file (a folder holding one) at every output and input path of every stage that is not there yet."""
    from dvc.repo import Repo

    with Repo(str(ws)) as repo:
        for stage in repo.index.stages:
            for item in [*stage.deps, *stage.outs]:
                p = Path(item.fs_path)
                if p.exists():
                    continue
                if p.suffix:
                    p.parent.mkdir(parents=True, exist_ok=True)
                    p.write_text("{}\n")
                else:
                    (p / "stand-in").parent.mkdir(parents=True, exist_ok=True)
                    (p / "stand-in").write_text("{}\n")


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> Path:
    """The smoke profile's pipeline, every stage up to date in dvc.lock."""
    from sentlab.preflight.scratch import make_scratch

    ws = make_scratch(REPO, tmp_path_factory.mktemp("widening") / "ws")
    _run(ws, "sentlab.cli", "profile", "smoke")
    _stand_in_outputs(ws)
    _run(ws, "dvc", "commit", "--force")
    assert _status(ws) == ALWAYS
    return ws


def _switch(ws: Path, name: str, text: str) -> None:
    (ws / "profiles" / f"{name}.yaml").write_text(text, encoding="utf-8")
    _run(ws, "sentlab.cli", "profile", name)


def test_renaming_the_profile_re_runs_nothing(ran):
    _switch(ran, "smoke-renamed", (ran / "profiles/smoke.yaml").read_text(encoding="utf-8"))
    assert _status(ran) == ALWAYS
    _switch(ran, "smoke", (ran / "profiles/smoke.yaml").read_text(encoding="utf-8"))


def test_a_profile_extending_the_one_that_ran_re_runs_only_its_new_stages(ran):
    """One line more (a second PT-BERT seed): its training and evaluation are new; the report and the export, which
    summarise every model, re-run because the set of models (``seeds``) changed, and for nothing else."""
    _switch(ran, "smoke-wider", "extends: smoke\nseeds: {per_method: {ptbert: 2}}\n")
    status = _status(ran)
    assert set(status) == {"sources", "train@ptbert-s43", "evaluate@ptbert-s43", "report", "export"}, status
    for summary in ("report", "export"):
        assert status[summary] == [{"changed deps": {"params.yaml": {"seeds": "modified"}}}], status[summary]
    _switch(ran, "smoke", (ran / "profiles/smoke.yaml").read_text(encoding="utf-8"))


def test_no_stage_declares_the_profile_name():
    """The name is read as a record (:data:`sentlab.config.stage_params.RECORDS`), never declared."""
    import yaml

    from sentlab.config.stage_params import RECORDS

    stages = yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    declaring = sorted(name for name, st in stages.items()
                       if set(RECORDS) & set((st.get("do", st)).get("params", [])))
    assert declaring == []
