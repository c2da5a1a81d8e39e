"""The scratch copy: the workspace's source files in a folder of their own, where every stage runs.

No ``dvc.lock``, ``data/``, ``models/``, ``reports/`` or ``mlflow.db`` of the workspace is read or written:
the copy is what a fresh clone plus the new sources holds, and the stage processes' MLflow store lies in it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from ..errors import SentlabError


def workspace_files(workspace: Path) -> list[str]:
    """Tracked and untracked-not-ignored files of ``workspace`` (what a fresh clone plus new sources holds)."""
    try:
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=workspace, check=True,
                             capture_output=True).stdout.decode()
    except (OSError, subprocess.CalledProcessError) as e:
        raise SentlabError(f"The preflight copies the files git knows in {workspace}, but `git ls-files` failed "
                           f"there ({e}). Run it from the repository root of a git checkout.") from None
    return [f for f in out.split("\0") if f and (workspace / f).is_file()]


def check_location(workspace: Path, scratch: Path) -> None:
    """Refuse a scratch folder that is the workspace or inside its tracked tree."""
    inside = workspace in scratch.parents and not str(scratch.relative_to(workspace)).startswith(".")
    if scratch == workspace or inside:
        raise SentlabError(f"The preflight's scratch folder {scratch} must not be the workspace or inside its "
                           f"tracked tree; pick a folder elsewhere (--scratch).")


def make_scratch(workspace: Path, dest: Path) -> Path:
    """Copy the workspace's source files to ``dest`` (no dvc.lock: a fresh clone's first run), as a git repo."""
    check_location(workspace, dest)
    dest.mkdir(parents=True, exist_ok=True)
    for rel in workspace_files(workspace):
        if rel == "dvc.lock":
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(workspace / rel, dest / rel)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    return dest


def scratch_env(scratch: Path) -> dict:
    """The stage processes' environment: this Python's scripts first on PATH, MLflow in the scratch folder."""
    env = dict(os.environ)
    env.pop("SENTLAB_PARENT_RUN_ID", None)
    bindir = str(Path(sys.executable).parent)
    if env.get("PYTHONPATH"):  # the stages run in the scratch folder: a relative entry would point into it
        env["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in env["PYTHONPATH"].split(os.pathsep) if p)
    env.update(PATH=bindir + os.pathsep + env.get("PATH", ""),
               MLFLOW_TRACKING_URI=f"sqlite:///{scratch / 'mlflow.db'}",
               SENTLAB_LOG=env.get("SENTLAB_LOG", "WARNING"), TOKENIZERS_PARALLELISM="false")
    return env
