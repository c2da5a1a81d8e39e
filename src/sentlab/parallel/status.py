"""``sentlab status``: every stage of the profile in force, up to date / stale / queued / running / failed,
with its log (a stage that failed under a plain ``dvc repro --keep-going`` too: its own record,
:mod:`sentlab.provenance.failures`).

Up to date and stale come from DVC (``dvc status --json``, closed downstream: a stage below a stale one runs
again too); queued, running, failed and skipped from the state the tasks of the last ``sentlab run`` wrote
(``.dvc/tmp/sentlab/stages/<stage>.json``), shown while the stage is still stale (a failed stage that ran
since is up to date).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from . import STATE_DIR
from .graph import DvcBusy, changed_stages, descendants, stage_edges, stage_names


def coordinator_alive(run: dict) -> bool | None:
    """Whether the last ``sentlab run``'s coordinator (``run.json``) still runs: True / False on the host it runs on,
    None on another one (a login node reading a compute node's run over a shared filesystem: the pid means nothing
    here, issue #65 §3), where the stages' own states are shown as they are."""
    import socket

    pid = run.get("pid")
    if not pid:
        return False
    if run.get("host") and run["host"] != socket.gethostname():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    except (OSError, ValueError):
        return False
    from ..tracking import process_start_time

    return not run.get("pid_start") or process_start_time(int(pid)) == run["pid_start"]   # not a reused pid


def read_run_json(state: Path) -> dict:
    """The coordinator's ``run.json`` ({} when absent or unreadable: a killed writer's truncated file)."""
    try:
        return json.loads((state / "run.json").read_text())
    except (OSError, ValueError):
        return {}


def stage_status(root: str | Path = ".") -> tuple[list[dict], dict]:
    """(one row per stage: stage, status, log, detail; the last run's run.json)."""
    root = Path(root).resolve()
    state = root / STATE_DIR
    names = stage_names(root)
    try:
        stale = descendants(stage_edges(root), changed_stages(root))
    except DvcBusy:   # the run's shared or final `dvc repro` holds the lock: the tasks' states alone
        stale = None
    run = read_run_json(state)   # {} for a truncated one (a killed writer's): the stages' own files still say
    active = coordinator_alive(run)
    recorded = {}
    for f in sorted((state / "failed").glob("*.json")):
        try:
            rec = json.loads(f.read_text())
        except ValueError:
            continue
        recorded[rec.get("stage", f.stem)] = rec
    rows = []
    for s in names:
        f = state / "stages" / f"{s}.json"
        try:
            st = json.loads(f.read_text()) if f.is_file() else {}
        except ValueError:   # written while the writer was killed
            st = {"status": "unknown", "reason": f"{f} is unreadable (a killed writer's)"}
        own = recorded.get(s)   # a failure the stage recorded itself under `dvc repro` (sentlab.provenance.failures)
        if own and (not st or st.get("updated", 0) < own.get("time", 0)):
            last = (own.get("reason") or "").strip().splitlines()[-1:] or [""]
            st = {"status": "failed", "log": own.get("log"), "reason": last[0][:300]}
        status, detail = ("stale" if stale is None or s in stale else "up to date"), ""
        if stale is None and not st:
            status, detail = "unknown", "a dvc repro holds the workspace's lock"
        if (stale is None or s in stale) and st:
            task = st.get("status")
            if task in ("running", "queued") and active is not False:
                status = task
                if task == "running":
                    detail = f"on {st.get('host')}, {time.time() - st.get('started', time.time()):.0f} s, " \
                             f"CUDA_VISIBLE_DEVICES={st.get('cuda_visible_devices')}"
            elif task in ("failed", "skipped"):
                status = task
                detail = st.get("reason", "") or (f"exit {st['rc']}" if "rc" in st else "")
            elif task == "done":
                status, detail = "stale", "computed, not yet restored into the workspace"
            elif task == "restored":
                status = "up to date"
        log = st.get("log")
        if not (status in ("running", "failed") or (log and Path(log).is_file())):
            log = None
        rows.append({"stage": s, "status": status, "log": log if status != "up to date" else None,
                     "detail": detail})
    return rows, {**run, "active": active}


def print_status(root: str | Path = ".", as_json: bool = False) -> int:
    rows, run = stage_status(root)
    if as_json:
        print(json.dumps({"run": run, "stages": rows}, indent=1))
        return 0
    width = max(len(r["stage"]) for r in rows) if rows else 10
    for r in rows:
        extra = "  ".join(x for x in (r["detail"], f"log {r['log']}" if r["log"] else "") if x)
        print(f"{r['stage']:<{width}}  {r['status']:<10}  {extra}".rstrip())
    counts = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    what = ", ".join(f"{n} {k}" for k, n in counts.items())
    if run.get("run_id"):
        what += f"; last `sentlab run` {run['run_id']}" + (
            " (running)" if run["active"] else f" (exit {run.get('rc')})" if run["active"] is False else
            f" (its coordinator, pid {run.get('pid')}, runs on {run.get('host')}: not checked from here; `squeue` "
            f"says whether its job still runs)")
    print(what)
    return 1 if counts.get("failed") else 0
