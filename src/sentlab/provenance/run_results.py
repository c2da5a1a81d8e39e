"""What a parallel run has finished, where the report can read it at any time (issue #65 §5).

Under ``sentlab run --jobs N`` (:mod:`sentlab.parallel`) each chain of stages runs in its own checkout, and nothing
reaches the workspace before the run's final ``dvc repro`` restores every stage from DVC's run cache: a run killed
after a day has no report. So each Ray task, as soon as one of its stages has succeeded, copies what the report
reads of that stage's outputs (the stage's ``outs`` in its checkout's ``dvc.lock``: the files under ``reports/``,
and of a ``models/<name>`` folder only :data:`MODEL_FILES`, never the weights) to
``.dvc/tmp/sentlab/results/<stage>/`` in the workspace, one folder renamed into place (a killed copy leaves
nothing half-written), with ``kept.json`` listing the files. ``sentlab report --from-run``
(:mod:`sentlab.report.run_report`) builds the report from the workspace's outputs with these laid over them,
into a folder of its own, never the workspace's ``reports/`` that DVC owns. A run with the workspace's
filesystem only (one machine or a shared filesystem; ``--remote`` tasks push to the DVC remote instead).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from ..runtime.io import atomic_path
from .failures import STATE_DIR, _stage_file

RESULTS = "results"
MODEL_FILES = ("sentlab.json", "reconstruction.json")   # what sentlab.report reads of a model folder
REPORT_INPUTS = ("reports/metrics", "reports/cosines", "reports/curves")   # what it reads of reports/


def stage_outs(lock_file: Path, stage: str) -> list[str]:
    """The output paths of ``stage`` (``train@simcse``) in a ``dvc.lock`` ([] when the stage is not in it)."""
    import yaml

    if not lock_file.is_file():
        return []
    lock = yaml.safe_load(lock_file.read_text(encoding="utf-8")) or {}
    entry = (lock.get("stages") or {}).get(stage) or {}
    return [o["path"] for o in entry.get("outs") or [] if isinstance(o, dict) and o.get("path")]


def report_files(root: Path, out: str) -> list[str]:
    """The files the report reads of output ``out`` under ``root`` (paths relative to ``root``)."""
    parts = Path(out).parts
    if len(parts) == 2 and parts[0] == "models":
        return [f"{out}/{f}" for f in MODEL_FILES if (root / out / f).is_file()]
    if parts[:1] != ("reports",):
        return []
    p = root / out
    if p.is_file():
        return [out]
    return sorted(f.relative_to(root).as_posix() for f in p.rglob("*") if f.is_file()) if p.is_dir() else []


def results_dir(root: str | Path) -> Path:
    return Path(root) / STATE_DIR / RESULTS


def keep_results(worktree: str | Path, stage: str, root: str | Path) -> Path:
    """Copy what the report reads of ``stage``'s outputs in ``worktree`` to the workspace ``root``'s results folder
    (one folder renamed into place); returns it."""
    worktree = Path(worktree)
    files = [f for out in stage_outs(worktree / "dvc.lock", stage) for f in report_files(worktree, out)]
    dest = results_dir(root) / _stage_file(stage)
    with atomic_path(dest, is_dir=True) as tmp:
        for f in files:
            (tmp / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(worktree / f, tmp / f)
        (tmp / "kept.json").write_text(json.dumps({"stage": stage, "files": files, "time": time.time()}, indent=1))
    return dest


def kept_results(root: str | Path) -> dict[str, Path]:
    """``{stage: its folder}`` of every stage the last ``sentlab run`` has finished and kept."""
    out = {}
    for kept in sorted(results_dir(root).glob("*/kept.json")):
        try:
            out[json.loads(kept.read_text())["stage"]] = kept.parent
        except (OSError, ValueError, KeyError):   # not written by keep_results (which renames a whole folder)
            continue
    return out
