"""Failures stay local (issue #54 §5): which stages failed, with their logs, so that the report and the exports
are built from what finished and every missing row names the stage that failed and where its log is.

Two sources, one view:

* a stage run by DVC (``dvc repro --keep-going``: the other chains go on) records its own failure:
  :func:`sentlab.stages.entry.run_stage` writes ``.dvc/tmp/sentlab/failed/<stage>.json`` and
  ``<stage>.log`` (the error paragraph or the traceback) when the stage (``DVC_STAGE``) exits non-zero, and
  removes them when it runs again;
* ``sentlab run`` (the parallel runner) keeps each stage's state and log in ``.dvc/tmp/sentlab/stages`` and
  ``logs`` (:mod:`sentlab.parallel`): ``failed``, or ``skipped`` (it needs a failed stage).

A record only explains an output that is missing: a stage that ran since has its output (and a stale record
explains nothing).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Optional

STATE_DIR = ".dvc/tmp/sentlab"
FAILED = "failed"


def _stage_file(stage: str) -> str:
    return stage.replace("/", "_")


def _root(root=None) -> Path:
    return Path(root or os.environ.get("DVC_ROOT") or ".")


def clear_failure(stage: str, root=None) -> None:
    d = _root(root) / STATE_DIR / FAILED
    for suffix in (".json", ".log"):
        (d / f"{_stage_file(stage)}{suffix}").unlink(missing_ok=True)


def record_failure(stage: str, rc: int, text: str, root=None) -> Path:
    """Write the failure record of ``stage`` (exit ``rc``, its error ``text``); returns the log's path."""
    d = _root(root) / STATE_DIR / FAILED
    d.mkdir(parents=True, exist_ok=True)
    log = d / f"{_stage_file(stage)}.log"
    log.write_text(text.rstrip() + "\n", encoding="utf-8")
    (d / f"{_stage_file(stage)}.json").write_text(json.dumps(
        {"stage": stage, "status": "failed", "rc": rc, "log": str(log.resolve()), "reason": text.strip()[:500],
         "time": time.time()}, indent=1), encoding="utf-8")
    return log


def failed_stages(root=None) -> dict[str, dict]:
    """``{stage: {"status": "failed"|"skipped", "log": path or None, "reason": text}}`` of both sources."""
    root = _root(root)
    out: dict[str, dict] = {}
    for f in sorted((root / STATE_DIR / "stages").glob("*.json")):   # the parallel runner's
        try:
            st = json.loads(f.read_text())
        except ValueError:
            continue
        if st.get("status") in ("failed", "skipped"):
            out[f.stem] = {"status": st["status"], "log": st.get("log"), "reason": st.get("reason", "")}
    for f in sorted((root / STATE_DIR / FAILED).glob("*.json")):      # a DVC-run stage's own record
        try:
            st = json.loads(f.read_text())
        except ValueError:
            continue
        out[st.get("stage", f.stem)] = {"status": "failed", "log": st.get("log"), "reason": st.get("reason", "")}
    return out


def failed_since(stage: str, since: float, root=None) -> Optional[str]:
    """The error text of ``stage``'s own record (a DVC-run stage's) when it failed at ``since`` or later, else None."""
    d = _root(root) / STATE_DIR / FAILED
    try:
        rec = json.loads((d / f"{_stage_file(stage)}.json").read_text())
        if rec.get("time", 0) < since:
            return None
        return Path(rec["log"]).read_text(encoding="utf-8").strip() or rec.get("reason", "")
    except (OSError, ValueError, KeyError):
        return None


def _say(stage: str, rec: dict) -> str:
    log = f", log {rec['log']}" if rec.get("log") else ""
    if rec["status"] == "skipped":
        return f"not run: {stage} needs a stage that failed{log}"
    if rec["status"] == "done":     # a parallel run's report (run_results): a --remote task's, on the DVC remote
        return f"not here yet: {stage} finished on another node (the run's final dvc repro restores it)"
    if rec["status"] != "failed":   # a parallel run's report built while it runs or after a kill (run_results)
        return f"not finished: {stage} {rec['status']}{log}"
    return f"failed: {stage}{log}"


def missing_reason(name: str, failures: dict[str, dict], models: Optional[dict] = None) -> Optional[str]:
    """Why model ``name`` (or baseline ``base-<b>``) has no metrics: the failed stage that should have made them
    (its own train / evaluate stage, the model it starts from, or a shared stage), or None. ``models``: the stage
    list's models (``name -> ModelSpec``, :func:`sentlab.config.models.load_models`)."""
    from ..config.models import evaluate_stage, train_stage

    if name.startswith("base-"):
        own = [f"evaluate_baseline@{name[5:]}"]
    else:
        own = [train_stage(name), evaluate_stage(name)]
    for stage in own:
        if stage in failures:
            return _say(stage, failures[stage])
    spec = (models or {}).get(name)
    start = spec.init_model if spec is not None else None
    if start:
        why = missing_reason(start, failures, models)
        if why:
            return f"{why} (it starts from models/{start})"
    for stage in ("sources", "prepare", "annotate"):
        if stage in failures:
            return _say(stage, failures[stage])
    return None
