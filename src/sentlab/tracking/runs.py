"""The runs around the stage runs (:mod:`sentlab.tracking`): the pipeline's parent run and each model's method
run, the lookups of earlier runs (an interrupted training to resume, a model's runs for the report), and the sweep
of runs whose process is gone. Every call goes through :mod:`sentlab.tracking`'s client and store."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any, Mapping

from .. import tracking as T


def owner_alive(tags: Mapping[str, str]) -> bool | None:
    """Whether the process that holds a run open still runs: True / False for a run of this host that names its
    owner, None when that cannot be known here (another host's run, or one from before owners were tagged)."""
    import socket

    if tags.get("sentlab.host") != socket.gethostname() or not str(tags.get("sentlab.pid", "")).isdigit():
        return None
    return T.process_alive(int(tags["sentlab.pid"]), tags.get("sentlab.pid_start") or "")


def sweep_orphans() -> int:
    """Mark KILLED every RUNNING run of the experiment whose owner process is gone (a killed training, evaluation,
    pipeline parent): runs of live processes, and runs whose owner cannot be checked from here, stay. Called by the
    sources stage (every ``dvc repro``) and ``sentlab mlflow end-parent``. Returns how many it closed; 0 when no
    store exists yet or it cannot be reached (a side channel)."""
    uri = T.tracking_uri()
    if T.degraded():   # this process, or this pipeline run's probe, found the store unreachable
        return 0
    if uri.startswith("sqlite:///"):   # a look without importing MLflow (seconds at every dvc repro)
        import sqlite3

        db = Path(uri[len("sqlite:///"):])
        if not db.is_file():
            return 0
        try:
            with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as con:
                if not con.execute("SELECT count(*) FROM runs WHERE status = 'RUNNING'").fetchone()[0]:
                    return 0
        except sqlite3.Error:
            pass   # an older or other schema: ask MLflow
    closed = 0
    try:
        c = T.client()
        for r in c.search_runs([T.experiment_id()], "attributes.status = 'RUNNING'", max_results=1000):
            if owner_alive(r.data.tags) is False:
                c.set_tag(r.info.run_id, "sentlab.swept", "its process is gone")
                c.set_terminated(r.info.run_id, status="KILLED")
                logging.getLogger(__name__).warning("MLflow: run %s (%s) marked KILLED: the process that held it "
                                                    "open is gone", r.info.run_id, r.info.run_name)
                closed += 1
    except Exception as e:  # noqa: BLE001 - the store is a side channel
        T.degrade("look for runs left RUNNING", e)
    return closed


def start_parent(name: str | None = None, params: Mapping[str, Any] | None = None,
                 tags: Mapping[str, str] | None = None, owner_pid: int | None = None) -> str:
    """Create (and leave open) the parent run of one pipeline run; returns its id. ``owner_pid``: the process
    that closes it (the Makefile recipe's shell for ``sentlab mlflow start-parent``; default this one).

    The Makefile exports it as ``SENTLAB_PARENT_RUN_ID`` around ``dvc repro``; :func:`run`
    then nests every stage's run under it; :func:`end_parent` closes it.
    """
    import time

    if T.degraded():
        raise RuntimeError(f"tracking is off for this pipeline run: {T._DEGRADED[0]}")
    c = T.client()
    name = name or time.strftime("pipeline %Y-%m-%d %H:%M:%S")
    tags = {**T.provenance_tags(), **T.owner_tags(owner_pid), "sentlab.stage": "pipeline", **(tags or {})}
    r = c.create_run(T.experiment_id(), run_name=name, tags=tags)
    flat = {k: ("None" if v is None else str(v))[:6000] for k, v in T.flatten(params or {}).items()}
    for k, v in flat.items():
        c.log_param(r.info.run_id, k, v)
    return r.info.run_id


def method_parent(model: str) -> str | None:
    """The run grouping every seed of ``model`` (tags ``sentlab.stage = method``, ``sentlab.model``), under
    the pipeline's parent run when there is one; created on first use. The seeds' training runs nest
    under it and the report logs the seed aggregate (mean, std, n per task) on it. None when the store
    cannot be reached (a side channel: training goes on)."""
    if T.degraded():
        return None
    parent = os.environ.get(T.PARENT_ENV)
    query = f"tags.`sentlab.stage` = 'method' and tags.`sentlab.model` = '{model}'"
    if parent:
        query += f" and tags.mlflow.parentRunId = '{parent}'"
    try:
        c = T.client()
        found = c.search_runs([T.experiment_id()], query, order_by=["attributes.start_time DESC"], max_results=1)
        if found:
            return found[0].info.run_id
        tags = {"sentlab.stage": "method", "sentlab.model": model, **({"mlflow.parentRunId": parent} if parent else {})}
        run = c.create_run(T.experiment_id(), run_name=f"{model} (all seeds)", tags=tags)
        c.set_terminated(run.info.run_id)
        return run.info.run_id
    except Exception as e:  # noqa: BLE001 - the store is a side channel
        T.degrade(f"find or create the method run of {model}", e)
        return None


def interrupted_training_run(model: str, run_key: str, resumable: bool) -> str | None:
    """The training runs of ``model`` a killed process left RUNNING (or an interrupted one marked FAILED):
    when this run resumes a checkpoint (``resumable``), the newest of them with the same ``run_key`` is
    continued (its id returned), so the dev curve before and after the kill is one run; every other
    RUNNING one is marked KILLED. None when there is none, or the store cannot be reached."""
    log = logging.getLogger(__name__)
    if T.degraded():
        return None
    keep = None
    try:   # every call on the store, the writes included (a write-locked store): the training goes on untracked
        c = T.client()
        query = f"tags.stage = 'train' and tags.`sentlab.model` = '{model}'"
        runs = [r for r in c.search_runs([T.experiment_id()], query, order_by=["attributes.start_time DESC"])
                if r.info.status in ("RUNNING", "FAILED")]
        for r in runs:
            if r.info.status == "RUNNING" and owner_alive(r.data.tags):
                continue   # a live process holds it (the same model trained elsewhere): neither resumed nor killed
            if keep is None and resumable and r.data.tags.get("sentlab.run_key") == run_key:
                keep = r.info.run_id
                log.info("MLflow: resuming run %s of %s (interrupted)", keep, model)
            elif r.info.status == "RUNNING":
                log.warning("MLflow: marking run %s of %s KILLED (left RUNNING by an interrupted training)",
                            r.info.run_id, model)
                c.set_terminated(r.info.run_id, status="KILLED")
    except Exception as e:  # noqa: BLE001 - the store is a side channel
        T.degrade(f"look for or close interrupted runs of {model}", e)
        return None
    return keep


def end_parent(run_id: str, status: str = "FINISHED") -> None:
    """Close the parent run (``FINISHED`` | ``FAILED`` | ``KILLED``)."""
    if status not in ("FINISHED", "FAILED", "KILLED"):
        raise ValueError(f"status must be FINISHED, FAILED or KILLED, got {status!r}")
    if T.degraded():
        raise RuntimeError(f"tracking is off for this pipeline run: {T._DEGRADED[0]}")
    T.client().set_terminated(run_id, status=status)


def find_runs(model: str | None = None, stage: str | None = None, parent_run_id: str | None = None,
              max_results: int = 50) -> list:
    """Runs of the sentlab experiment, newest first, filtered by the model they are about
    (tag ``sentlab.model``, else the run name), the stage tag and the parent run."""
    c = T.client()
    filters = []
    if stage:
        filters.append(f"tags.stage = '{stage}'" if stage == "train" else f"tags.`sentlab.stage` = '{stage}'")
    if parent_run_id:
        filters.append(f"tags.mlflow.parentRunId = '{parent_run_id}'")
    base = " and ".join(filters)
    newest = {"order_by": ["attributes.start_time DESC"], "max_results": max_results}
    if model is None:
        return c.search_runs([T.experiment_id()], base, **newest)
    for key in (f"tags.`sentlab.model` = '{model}'", f"attributes.run_name = '{model}'"):
        q = " and ".join(x for x in (base, key) if x)
        found = c.search_runs([T.experiment_id()], q, **newest)
        if found:
            return found
    return []
