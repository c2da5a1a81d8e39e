"""The Ray task: one chain of stages in its own checkout.

:func:`run_chain` runs on a Ray worker. Its stages see only the GPUs the coordinator placed the chain on
(``spec["gpu_slots"]``, :mod:`.gpus`), or those Ray gave the task (``CUDA_VISIBLE_DEVICES``, a cluster without
slots). With the workspace's filesystem (one machine, or a shared one) the checkout
is the worktree the coordinator made and the stage states and logs go to the workspace's
``.dvc/tmp/sentlab``; without it (``remote``) the task unpacks the workspace's files, pulls the outputs its
stages read from the DVC remote and pushes its outputs and run-cache entries back. A stage that fails ends
its chain (the chains that need it are skipped) and is reported, not raised: the other chains go on. A
killed worker is Ray's to retry (``max_retries``); the retry runs in the same checkout, where the training
resumes from its checkpoint (``checkpoints/<model>/``) and the stages already done are up to date. What the report
reads of each stage that succeeded is copied to the workspace at once (:mod:`sentlab.provenance.run_results`):
``sentlab report --from-run`` builds the report from it at any time.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from pathlib import Path

from .worktree import make_worktree, node_env, run_dvc, unpack


def write_state(state_dir: str | Path | None, stage: str, **fields) -> None:
    """``<state_dir>/stages/<stage>.json``: what ``sentlab status`` shows for a stage of a running pipeline."""
    if not state_dir:
        return
    path = Path(state_dir) / "stages" / f"{stage}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    old = json.loads(path.read_text()) if path.is_file() else {}
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({**old, **fields, "updated": time.time()}, indent=1))
    os.replace(tmp, path)


def keep_stage_results(wt: Path, stage: str, root: str, log: Path) -> None:
    """:func:`sentlab.provenance.run_results.keep_results` of a stage that succeeded (``sentlab report --from-run``
    reads them before the run's final ``dvc repro``); a copy that fails is said in the stage's log, the stage stands."""
    from ..provenance.run_results import keep_results

    try:
        keep_results(wt, stage, root)
    except OSError as e:
        with open(log, "a") as fh:
            fh.write(f"# sentlab run: {stage}'s results not kept for `sentlab report --from-run` ({e}); the final "
                     f"`dvc repro` restores them\n")


def _gpu_ids() -> list:
    try:
        import ray

        return [str(g) for g in ray.get_gpu_ids()]
    except Exception:  # noqa: BLE001 - outside Ray (tests call the function directly)
        return []


def run_chain(spec: dict, *upstream: dict) -> dict:
    """Run ``spec['stages']`` (after restoring ``spec['restore']``); returns the chain's result (never raises
    for a stage that fails)."""
    chain = spec["id"]
    res = {"chain": chain, "status": "done", "stages": {}, "host": socket.gethostname(), "pid": os.getpid(),
           "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "gpu_ids": _gpu_ids(),
           "attempt_started": time.time()}
    gpu = {}
    if spec.get("gpu_slots") is not None:   # placed by the coordinator (.gpus): the node's GPUs at those slots
        from .gpus import chain_devices

        gpu["CUDA_VISIBLE_DEVICES"] = chain_devices(spec["gpu_slots"])
        res.update(cuda_visible_devices=gpu["CUDA_VISIBLE_DEVICES"], gpu_ids=[str(i) for i in spec["gpu_slots"]])
    shared = spec.get("state_dir") if not spec.get("remote") else None
    failed_up = [u["chain"] for u in upstream if u.get("status") != "done"]
    if failed_up:
        for s in spec["stages"]:
            write_state(shared, s, status="skipped", reason=f"needs chain {', '.join(failed_up)}, which failed")
            res["stages"][s] = {"status": "skipped"}
        return {**res, "status": "skipped", "reason": f"upstream chain(s) failed: {', '.join(failed_up)}"}
    env = {**node_env(spec.get("env", {}), spec.get("threads")), **gpu}
    if spec.get("remote"):
        base = Path(tempfile.gettempdir()) / "sentlab-worktrees" / spec["run_id"]
        data = spec["bundle"]
        if not isinstance(data, bytes):   # the ObjectRef the coordinator put once
            import ray

            data = ray.get(data)
        wt = unpack(data, base / chain)
        logs = wt / ".dvc/tmp/sentlab/logs"
    else:
        wt = make_worktree(spec["root"], spec["worktree"], spec.get("cache"))
        logs = Path(spec["state_dir"]) / "logs"
    prep_log = logs / f"{chain}.setup.log"
    logs.mkdir(parents=True, exist_ok=True)
    with open(prep_log, "a") as fh:
        fh.write(f"# chain {chain} on {res['host']} pid {os.getpid()}: CUDA_VISIBLE_DEVICES="
                 f"{res['cuda_visible_devices']} (Ray GPU ids {res['gpu_ids']}), {spec.get('threads')} threads\n")
    if spec.get("remote"):
        setup = [["pull", *spec["checkout"]]]
    else:
        setup = [["checkout", *spec["checkout"]]] if spec["checkout"] else []
    for args in setup:
        if run_dvc(args, wt, prep_log, env) != 0:
            for s in spec["stages"]:
                write_state(shared, s, status="failed", log=str(prep_log), reason="setup failed")
                res["stages"][s] = {"status": "failed", "log": str(prep_log)}
            return {**res, "status": "failed", "failed": spec["stages"][0], "log": str(prep_log)}
    for stage in [*spec.get("restore", []), *spec["stages"]]:
        own = stage in spec["stages"]
        log = logs / (f"{stage}.log" if own else f"{chain}.restore.log")
        t0 = time.time()
        if own:
            write_state(shared, stage, status="running", log=str(log), host=res["host"], pid=os.getpid(),
                        started=t0, chain=chain, cuda_visible_devices=res["cuda_visible_devices"])
        rc = run_dvc(["repro", "--single-item", *(["--pull"] if spec.get("remote") else []), stage], wt, log, env)
        secs = round(time.time() - t0, 1)
        if own and rc == 0 and not spec.get("remote"):   # what the report reads of it, in the workspace now
            keep_stage_results(wt, stage, spec["root"], log)
        if own:
            res["stages"][stage] = {"status": "done" if rc == 0 else "failed", "log": str(log), "seconds": secs}
            write_state(shared, stage, status=res["stages"][stage]["status"], ended=time.time(), seconds=secs, rc=rc)
        if rc != 0:
            for s in spec["stages"]:
                if s not in res["stages"]:
                    res["stages"][s] = {"status": "skipped"}
                    write_state(shared, s, status="skipped", reason=f"{stage} failed")
            if spec.get("remote"):
                res["log_text"] = {str(p.name): p.read_text(errors="replace")[-20000:] for p in logs.glob("*.log")}
            return {**res, "status": "failed", "failed": stage, "log": str(log), "rc": rc}
    if spec.get("remote"):
        push_log = logs / f"{chain}.push.log"
        if run_dvc(["push", "--run-cache", *spec["stages"]], wt, push_log, env) != 0:
            res["log_text"] = {push_log.name: push_log.read_text(errors="replace")[-20000:]}
            return {**res, "status": "failed", "failed": spec["stages"][-1], "log": str(push_log),
                    "reason": "dvc push failed"}
        import shutil

        shutil.rmtree(wt, ignore_errors=True)   # everything it made is on the remote now
    return res
