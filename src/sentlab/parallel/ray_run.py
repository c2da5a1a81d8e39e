"""``sentlab run --jobs N [--address ADDRESS]``: the pipeline with its independent stages in parallel on Ray.

1. The shared upstream stages (``sources``, ``prepare``, ``annotate``) run once, in the workspace.
2. The stale stages below them are split into chains (:mod:`.graph`); each chain is one Ray task asking for
   ``runtime.gpus_per_task`` GPUs (``auto``: its share from the plan's step times) and ``runtime.cpus_per_task``
   CPUs, submitted longest planned first (:mod:`.schedule`), run in its own checkout (:mod:`.task`, removed as
   soon as the chain has finished), retried by Ray (``runtime.task_retries``) when its worker dies.
3. One ``dvc repro`` in the workspace restores every chain's outputs from DVC's run cache (none runs
   again), writes ``dvc.lock`` (its only writer) and runs the final stages (``report``, ``export``).

A failed stage stops only its chain (and the chains that need its outputs); the other chains' results are
restored; the failed stages are listed with their logs and the exit status is 1. MLflow: one tracking server
for the run (:mod:`.tracking_server`), the parent run created before the fan-out.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import time
from pathlib import Path

from ..errors import SentlabError
from ..runtime.io import write_json
from ..provenance import failures
from ..provenance.run_results import RESULTS
from . import SHARED, STATE_DIR
from .graph import Plan, plan_for, stage_names
from . import gpus as placement
from .schedule import AUTO, chain_gpus, chain_seconds, check_nproc, costs_for, submission_order
from .stop import on_sigterm, say, stop_chains
from .task import run_chain, write_state
from .tracking_server import tracking_server
from .workspace_lock import exclusive_run
from .worktree import bundle, cache_dir, make_worktree, node_env, remove_worktree, run_dvc, task_env

RAN = re.compile(r"^Running stage '([^']+)'", re.M)
REPORT = ("report",)   # what a targeted run (``--table``) builds afterwards from what exists, outside DVC


def import_ray():
    try:
        import ray
    except ImportError:
        raise SentlabError("`sentlab run --jobs N` (make repro JOBS=N) runs stages through Ray, which is not "
                           "installed: pip install 'sentlab[ray]' (make repro JOBS=N installs it).") from None
    return ray


def chain_env(root: Path, local: bool, remote: bool) -> dict[str, str]:
    """A chain's environment (:func:`.worktree.task_env`); where the workers see this workspace (not ``remote``), the
    workspace's embedding cache folder rather than each worktree's own, so the baseline chains share one forward
    pass of the backbone (:mod:`sentlab.evaluate.sts.cache`). The user's ``SENTLAB_EMBEDDING_CACHE`` (or ``off``)
    wins."""
    env = task_env(local)
    if remote:
        return env
    from ..evaluate.sts.cache import DEFAULT_ROOT, ENV

    return {ENV: str(Path(root).resolve() / DEFAULT_ROOT), **env}


def oversubscribed(jobs: int, threads: int | None, address: str | None) -> bool:
    """Say so when ``jobs`` local tasks of ``threads``-thread trainings ask for more threads than the CPU has
    cores (they still run, slower). The count is the profile's (``train.num_threads``): a training's bits depend
    on it, so the runner never changes it."""
    cores = os.cpu_count() or 1
    if address or not threads or jobs * threads <= cores:
        return False
    say(f"{jobs} jobs of {threads}-thread trainings (params.yaml train.num_threads) share {cores} cores: they run, "
        f"slower; `train.num_threads: {max(1, cores // jobs)}` fits them (other last bits than {threads} threads, "
        f"so re-run the serial baseline with it too)")
    return True


def start_ray(ray, jobs: int, address: str | None, gpus: float | None, cpus_per_task: float) -> dict:
    """Connect to ``address``, or start a Ray of this run's own declaring ``gpus`` GPUs (None: Ray detects them) and
    one slot per GPU (:mod:`.gpus`: where each chain's share goes). The runner's SIGTERM handler is installed again
    afterwards (:func:`on_sigterm`)."""
    try:
        return _start_ray(ray, jobs, address, gpus, cpus_per_task)
    finally:
        on_sigterm()


def _start_ray(ray, jobs, address, gpus, cpus_per_task) -> dict:
    if address:
        ray.init(address=address, log_to_driver=False)
        return ray.cluster_resources()
    # address="local": a Ray of this run's own, never a cluster RAY_ADDRESS or `ray start` left on the machine
    opts = dict(address="local", num_cpus=max(1, jobs) * cpus_per_task, include_dashboard=False, log_to_driver=False,
                object_store_memory=200 * 2 ** 20)
    if gpus is None:   # the count Ray detects, then the slots for it (a custom resource is declared at the start)
        ray.init(**opts)
        gpus = ray.cluster_resources().get("GPU", 0)
        if not gpus:
            return ray.cluster_resources()
        ray.shutdown()
    ray.init(**opts, num_gpus=gpus, resources=placement.slot_resources(int(gpus)))
    return ray.cluster_resources()


def gpus_text(g) -> str:
    return "auto (from the plan's step times)" if g == AUTO else f"{g:g}"


def fan_out(ray, root: Path, p: Plan, rt, state: Path, resources: dict, remote: bool, run_id: str,
            local: bool = True, costs: dict | None = None, keep_worktrees: bool = False) -> dict:
    """Submit every chain, longest planned first, each asking for its GPU share (:mod:`.schedule`; ``costs``:
    :func:`.schedule.stage_costs`, None: DVC's order) on the GPU with the most room (:mod:`.gpus`); returns chain id
    -> result, as they finish. A chain's worktree is removed as soon as it has finished (unless ``keep_worktrees``;
    a failed chain's stays)."""
    has_gpu = resources.get("GPU", 0) > 0
    if rt.gpus_per_task and not has_gpu:
        say("the Ray cluster has no GPU: tasks run on CPUs only")
    seconds = {c.id: chain_seconds(c, costs) for c in p.chains}
    order = submission_order(p.chains, seconds)
    if costs is not None:
        shown = [f"{c.id} {seconds[c.id] / 3600:.2f} h x {chain_gpus(c, rt.gpus_per_task, rt.nproc, costs):g} GPU"
                 for c in order]
        say("chains longest planned first (planned GPU-h x GPUs asked): " + ", ".join(shown[:12])
            + (f", ... ({len(shown) - 12} more)" if len(shown) > 12 else ""))
    threads = max(1, int(rt.cpus_per_task))   # a training sets its own: train.num_threads
    common = {"root": str(root), "state_dir": str(state), "env": chain_env(root, local, remote), "threads": threads,
              "run_id": run_id}
    if not remote:
        common["cache"] = cache_dir(root)
    else:
        common.update(remote=remote, bundle=ray.put(bundle(root)))   # once in the object store, not per task
    fn = ray.remote(run_chain)
    want = {c.id: chain_gpus(c, rt.gpus_per_task, rt.nproc, costs) if has_gpu else 0.0 for c in order}
    placement.check(resources, list(want.values()))
    slots = placement.slot_capacity(resources) if has_gpu else {}
    placer = placement.Placer(slots) if slots else None
    specs = {}
    for c in order:
        specs[c.id] = {**common, "id": c.id, "stages": c.stages, "restore": c.restore, "checkout": c.checkout,
                       "worktree": str(state / "worktrees" / c.id)}
        if not remote:
            make_worktree(root, specs[c.id]["worktree"], common["cache"])
        for s in c.stages:
            write_state(state, s, status="queued", chain=c.id, log=str(state / "logs" / f"{s}.log"))
    # submitted when its upstream chains have finished, a task's CPUs are free and its share fits a GPU now
    # (:mod:`.gpus`): the longest waiting chain first, a shorter one where the longer does not fit yet
    at_once = max(1, int(resources.get("CPU", 1) // rt.cpus_per_task))
    results: dict[str, dict] = {}
    waiting, running = list(order), {}
    while waiting or running:
        for c in list(waiting):
            if len(running) >= at_once:
                break
            if any(n not in results for n in c.needs):
                continue
            upstream = [results[n] for n in c.needs]
            gpus = 0.0 if any(u.get("status") != "done" for u in upstream) else want[c.id]   # skipped: no GPU
            taken = placer.place(gpus) if placer is not None else {}
            if taken is None:
                continue
            spec = {**specs[c.id], "gpu_slots": sorted(taken)} if placer is not None else specs[c.id]
            opts = placement.ray_options(taken) if placer is not None else {"num_gpus": gpus}
            ref = fn.options(**opts, num_cpus=rt.cpus_per_task, max_retries=rt.task_retries, retry_exceptions=False,
                             name=f"chain:{c.id}").remote(spec, *upstream)
            running[ref] = (c, taken)
            waiting.remove(c)
        if not running:
            asks = ", ".join(f"{c.id} asks for {want[c.id]:g} GPUs" for c in waiting)
            raise SentlabError(f"No chain can start: {asks}, more than the Ray cluster's {resources.get('GPU', 0):g} "
                               f"GPUs hold on one node. "
                               f"Lower params.yaml `runtime.gpus_per_task` (or `runtime.nproc`), or add GPUs.")
        try:
            done, _ = ray.wait(list(running), num_returns=1, timeout=1.0)
        except (SystemExit, KeyboardInterrupt):   # SIGTERM (a scheduler's time limit), Ctrl-C: trainings checkpoint
            stop_chains(ray, {r: c for r, (c, _) in running.items()}, len(waiting))
            raise
        if not done:
            continue
        c, taken = running.pop(done[0])
        if placer is not None:
            placer.release(taken)
        try:
            res = ray.get(done[0])
        except Exception as e:  # noqa: BLE001 - the worker died past its retries, or the task's own error
            res = {"chain": c.id, "status": "failed", "failed": c.stages[0], "log": str(state / "logs"),
                   "reason": f"{type(e).__name__}: {str(e)[:500]}", "stages": {}}
            for s in c.stages:
                write_state(state, s, status="failed", reason=res["reason"])
        for name, text in (res.pop("log_text", None) or {}).items():   # a remote worker's logs
            (state / "logs" / name).write_text(text)
        if remote:   # the worker's log paths are on its node: its logs came back into ours
            here = {k: str(state / "logs" / Path(v).name) for k, v in (("log", res.get("log")),) if v}
            res.update(here)
            for s, st in res.get("stages", {}).items():
                if st.get("log"):
                    st["log"] = str(state / "logs" / Path(st["log"]).name)
                write_state(state, s, **st, chain=c.id)
        results[c.id] = res
        if res["status"] == "done" and not remote and not keep_worktrees:
            remove_worktree(root, state / "worktrees" / c.id)   # now: a long run's disk holds running chains only
        took = ", ".join(f"{s} {v.get('seconds', '-')} s" for s, v in res.get("stages", {}).items())
        say(f"[{len(results)}/{len(order)}] {c.id}: {res['status']} ({took}) on {res.get('host')} "
            f"CUDA_VISIBLE_DEVICES={res.get('cuda_visible_devices')}"
            + (f" -- {res['failed']} failed, log {res['log']}" if res["status"] == "failed" else ""))
    return results


def run(root: str | Path = ".", jobs: int = 2, address: str | None = None, gpus: float | None = None,
        remote: bool = False, keep_worktrees: bool = False, targets: list[str] | None = None,
        final: bool = True, lock: bool = True) -> int:
    """The pipeline in parallel (see the module docstring); returns the exit status. ``targets``: only those stages
    and what they need, then the report from what exists (``sentlab run --table``). ``final`` False (``--no-final``):
    the chains only, in DVC's run cache; a later ``dvc repro`` (a CPU job after a GPU one) restores them and runs
    ``report`` and ``export``. ``lock`` False: the caller holds the workspace's coordinator lock (``sentlab repro``,
    :mod:`.workspace_lock`)."""
    from ..config.stage_params import runtime_params, training_threads

    root = Path(root).resolve()
    rt = runtime_params(root)
    check_nproc(rt)   # before anything runs: DDP ranks need a GPU each in the task that holds the training
    oversubscribed(jobs, training_threads(root), address)
    ray = import_ray()
    on_sigterm()
    state = root / STATE_DIR
    state.mkdir(parents=True, exist_ok=True)
    # a second `sentlab run` here would delete this one's logs and reuse its worktrees
    with exclusive_run(state) if lock else contextlib.nullcontext():
        return _run_locked(root, jobs, address, gpus, remote, keep_worktrees, rt, ray, state, targets, final)


def _run_locked(root: Path, jobs, address, gpus, remote, keep_worktrees, rt, ray, state: Path, targets=None,
                final=True) -> int:
    from .. import tracking
    from ..tracking import runs as tracking_runs

    import socket

    from ..tracking import process_start_time

    if (state / "logs").is_dir():   # the last run's logs (a killed or requeued one's) stay readable: logs.previous
        shutil.rmtree(state / "logs.previous", ignore_errors=True)
        (state / "logs").rename(state / "logs.previous")
    for sub in ("stages", "logs", RESULTS):   # RESULTS: what the report reads of each finished stage
        shutil.rmtree(state / sub, ignore_errors=True)
        (state / sub).mkdir(parents=True)
    run_id = time.strftime("%Y%m%d-%H%M%S")
    info = {"run_id": run_id, "pid": os.getpid(), "host": socket.gethostname(),   # status elsewhere: not our pid
            "pid_start": process_start_time(os.getpid()), "started": time.time(), "jobs": jobs, "address": address,
            "remote": remote}
    write_json(state / "run.json", info)
    with tracking_server(root, state / "logs" / "mlflow-server.log") as uri:
        from ..tracking.budget import probe

        probe()   # this run's one wait on the tracking server: every stage reads the verdict (tracking.budget)
        own_parent = not os.environ.get(tracking.PARENT_ENV)
        if own_parent:
            profile = (root / "params.yaml").read_text().split("profile:", 1)[-1].split()[0]
            try:
                os.environ[tracking.PARENT_ENV] = tracking_runs.start_parent(
                    params={"profile": profile, "jobs": jobs}, tags={"sentlab.parallel": "ray"})
            except Exception as e:  # noqa: BLE001 - tracking never stops the run
                tracking.degrade("create the run's parent run", e)
                own_parent = False
        say(f"MLflow: {uri} (parent run {os.environ.get(tracking.PARENT_ENV) or 'none: tracking is off'})")
        if address and "127.0.0.1" in uri:
            say("WARNING: MLflow's server for this run listens on this machine's loopback; workers on other "
                "machines reach it only if they are this machine: export MLFLOW_TRACKING_URI=http://<server> (a "
                "tracking server every node reaches) for a cluster")
        rc = None
        try:
            rc = _run(ray, root, jobs, address, gpus, remote, keep_worktrees, rt, state, run_id, targets, final)
        finally:
            if ray.is_initialized():
                ray.shutdown()
            if own_parent:
                status = "KILLED" if rc is None else "FINISHED" if rc == 0 else "FAILED"
                try:
                    tracking_runs.end_parent(os.environ.pop(tracking.PARENT_ENV), status)
                except Exception as e:  # noqa: BLE001 - a side channel: the run's exit status stands
                    tracking.degrade("close the run's parent run", e)
            ended = time.time()
            write_json(state / "run.json", {**info, "pid": None, "ended": ended, "rc": rc,
                                            "seconds": round(ended - info["started"], 1)})
    return rc


def _run(ray, root: Path, jobs, address, gpus, remote, keep, rt, state: Path, run_id: str, targets=None,
         final=True) -> int:
    logs = state / "logs"
    env = node_env({}, None)
    shared = [s for s in SHARED if s in stage_names(root)]
    say(f"shared stages {', '.join(shared)} in the workspace (log {logs / 'shared.log'})")
    began = time.time()
    rc = run_dvc(["repro", *shared], root, logs / "shared.log", env, guard=False)
    if rc:
        say(f"the shared stages failed (exit {rc}); log {logs / 'shared.log'}")
        for why in filter(None, (failures.failed_since(s, began, root) for s in shared)):
            print(why, file=sys.stderr, flush=True)   # its paragraph: a GPU profile where torch sees no GPU stops here
        return rc
    p = plan_for(root, targets=targets)
    if targets is not None:
        p.final = [s for s in REPORT if s in p.order]   # built from what exists, outside DVC, after the targets
    say(f"{len(p.chains)} chains ({len(p.parallel)} stages) in parallel, then {', '.join(p.final) or 'nothing'}")
    results = {}
    if p.chains:
        if remote:
            push = [s for s in p.order if s in {x for c in p.chains for x in c.checkout}]
            if run_dvc(["push", *push], root, logs / "push.log", env, guard=False):
                say(f"dvc push of the shared outputs failed: log {logs / 'push.log'}")
                return 1
        resources = start_ray(ray, jobs, address, gpus, rt.cpus_per_task)
        say(f"Ray: {resources.get('CPU', 0):g} CPUs, {resources.get('GPU', 0):g} GPUs; per task "
            f"{rt.cpus_per_task:g} CPUs, {gpus_text(rt.gpus_per_task)} GPUs, {rt.task_retries} retries")
        costs, why = costs_for(root)
        if costs is None:
            say(f"the plan cannot cost this pipeline ({why}): chains in DVC's order"
                + (", a whole GPU each (runtime.gpus_per_task: auto)" if rt.gpus_per_task == AUTO else ""))
        results = fan_out(ray, root, p, rt, state, resources, remote, run_id, local=address is None, costs=costs,
                          keep_worktrees=keep)
    done = [s for r in results.values() if r["status"] == "done" for s in r["stages"]]
    failed = {r["failed"]: r for r in results.values() if r["status"] == "failed"}
    skipped = [s for r in results.values() if r["status"] != "done" for s, v in r["stages"].items()
               if v.get("status") == "skipped"]
    if not final:   # --no-final: the chains' outputs stay in the run cache for a later `dvc repro`
        for s, r in failed.items():
            say(f"FAILED: {s}, log {r['log']}" + (f" ({r['reason']})" if r.get("reason") else ""))
        say(f"{len(done)} stages in parallel, in DVC's run cache (--no-final): `dvc repro` in this workspace restores "
            f"them (none runs again) and runs {', '.join(p.final) or 'nothing else'}")
        return 1 if failed else 0
    final_log = logs / "final.log"
    if failed:
        repro = done
        say(f"{len(failed)} chain(s) failed: restoring the {len(done)} stages that ran; then {', '.join(p.final)} "
            f"from what finished")
    else:
        repro = list(targets or [])
        say(f"final dvc repro in the workspace (log {final_log})")
    rc = 0
    if repro or not failed:
        pull = ["--pull"] if remote else []
        rc = run_dvc(["repro", *pull, *repro], root, final_log, env, guard=False)
        again = sorted(set(RAN.findall(final_log.read_text(errors="replace"))) & set(p.parallel))
        if again:
            say(f"WARNING: ran again in the workspace (their run-cache entries were missing): {', '.join(again)}")
        for s in done:
            write_state(state, s, status="restored" if rc == 0 else "done")
    partial = {}
    if (failed or targets is not None) and rc == 0 and p.final:
        partial = partial_outputs(root, p.final, logs, env)
        say("built from what finished, outside DVC (their rows name the failed stages; the next run that completes "
            "records them in dvc.lock): " + ", ".join(f"{s} {'ok' if c == 0 else f'exit {c}'} (log "
                                                     f"{logs / (s + '.partial.log')})" for s, c in partial.items()))
    if failed or rc:
        lines = [f"  {s}: log {r['log']}" + (f" ({r['reason']})" if r.get("reason") else "")
                 for s, r in failed.items()]
        if rc:
            lines.append(f"  final dvc repro: exit {rc}, log {final_log}")
        lines += [f"  {s}: not run (needs a failed stage)" for s in skipped]
        say("FAILED stages:\n" + "\n".join(lines) + "\n`sentlab status` shows every stage; run again to retry "
            "the failed ones (the rest is up to date).")
        return 1
    say(f"done: {len(done)} stages in parallel, restored from the run cache; dvc.lock written")
    return 0


def partial_outputs(root: Path, final: list[str], logs: Path, env: dict) -> dict[str, int]:
    """Run the final stages' commands (``report``, ``export``: dvc.yaml's ``cmd``) in the workspace outside DVC, whose
    dependencies include the failed stages' outputs: they build from what finished and name each failed stage with its
    log (:mod:`sentlab.provenance.failures`, which reads this run's stage states). Returns stage -> exit."""
    import subprocess

    import yaml

    stages = (yaml.safe_load((root / "dvc.yaml").read_text(encoding="utf-8")) or {}).get("stages") or {}
    out = {}
    for s in final:
        cmd = (stages.get(s) or {}).get("cmd") if isinstance(stages.get(s), dict) else None
        if not isinstance(cmd, str):
            continue
        with open(logs / f"{s}.partial.log", "w") as f:
            out[s] = subprocess.run(cmd, shell=True, cwd=root, stdout=f, stderr=subprocess.STDOUT,  # noqa: S602
                                    env={k: v for k, v in env.items() if k != "DVC_STAGE"}).returncode
    return out
