"""The toy pipeline (tests/fixtures/toy_pipeline: sentlab's shape, stages of milliseconds) for the parallel
runner's checks: tests/test_parallel_toy.py (CI) and benchmarks/parallel_faults.py (faults, two Ray nodes)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).parent / "fixtures" / "toy_pipeline"
SRC = Path(__file__).resolve().parents[1] / "src"
STATE = ".dvc/tmp/sentlab"
GIT = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
       "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}
# the stages `sentlab run` runs in parallel (the rest: the shared stages before, the report after)
PARALLEL = {f"{k}@{m}" for k in ("train", "evaluate") for m in "abc"} | {"evaluate_baseline@mean"}


def make_toy(tmp: Path, name: str) -> tuple[Path, dict]:
    """A git repository with the toy pipeline in ``tmp/name``, and the environment its commands run in."""
    repo = tmp / name
    shutil.copytree(FIXTURE, repo)
    (repo / "dvc.yaml.txt").rename(repo / "dvc.yaml")   # not dvc.yaml in the fixture: the repository's DVC would see it
    (repo / ".gitignore").write_text("/data/\n/models/\n/reports/\n/checkpoints/\n/mlflow.db\n/mlruns/\n")
    env = {**os.environ, **GIT, "PYTHONPATH": str(SRC), "MLFLOW_TRACKING_URI": f"sqlite:///{repo / 'mlflow.db'}",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for k in ("SENTLAB_PARENT_RUN_ID", "TOY_FAIL", "TOY_SLOW"):
        env.pop(k, None)
    subprocess.run(["git", "init", "-q"], cwd=repo, env=env, check=True)
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=repo, env=env, check=True)
    for args in (["add", "-A"], ["commit", "-qm", "toy"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True)
    return repo, env


def serial_outputs(tmp: Path) -> dict[str, bytes]:
    """The reference: a plain serial `dvc repro` of a fresh toy's outputs."""
    repo, env = make_toy(tmp, "serial")
    subprocess.run([sys.executable, "-m", "dvc", "repro"], cwd=repo, env=env, check=True, capture_output=True)
    return outputs(repo)


def outputs(repo: Path) -> dict[str, bytes]:
    return {str(p.relative_to(repo)): p.read_bytes() for p in sorted((repo / "reports").rglob("*")) if p.is_file()}


def sentlab_run(repo: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sentlab.cli", "run", *args], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=900)


def sentlab_status(repo: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sentlab.cli", "status", *args], cwd=repo, env=env,
                          capture_output=True, text=True)


def clean(repo: Path) -> bool:
    """`dvc status` names nothing but the always-changed stages."""
    from sentlab.parallel.graph import changed_stages

    return not changed_stages(repo)


def restored(repo: Path) -> set[str]:
    """The stages the final `dvc repro` restored from the run cache."""
    final = (repo / STATE / "logs/final.log").read_text()
    return {ln.split("'")[1] for ln in final.splitlines() if "is cached - skipping run" in ln}
