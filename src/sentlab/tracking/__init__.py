"""MLflow in one place: the store, the stage runs and their names. The package's modules:

* this module — the client, the store, a stage's run (:func:`run`) and the runs view a researcher compares in;
* :mod:`sentlab.tracking.runs` — the runs around the stage runs: the pipeline's parent runs, each model's method run,
  the lookups of earlier runs and the sweep of orphaned ones;
* :mod:`sentlab.tracking.store` — where a SQLite store keeps its artifacts;
* :mod:`sentlab.tracking.budget` — one wait on a tracking server per pipeline run, shared by its stages;
* :mod:`sentlab.tracking.names` — run names; :mod:`sentlab.tracking.uri` — where the store is.

Its floor: above the data (the runs view names the STS tasks of :mod:`sentlab.data.sts`), beside the methods, under
the training and the evaluations that log to it (docs/architecture.md).

Default store: an embedded SQLite file ``mlflow.db`` in the working directory
(the repository root when DVC runs a stage); ``MLFLOW_TRACKING_URI`` overrides
it with any tracking server. Open the default store with::

    mlflow ui --backend-store-uri sqlite:///mlflow.db
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Iterator, Mapping

from .names import TRAIN_KEYS, run_name  # noqa: F401 - part of this module's interface
from .uri import store_root, tracking_uri  # noqa: F401 - part of this module's interface

EXPERIMENT = os.environ.get("SENTLAB_MLFLOW_EXPERIMENT", "sentlab")
# MLflow 3's experiment-kind tag: model training, so the UI lands on the runs table
EXPERIMENT_KIND_TAG, EXPERIMENT_KIND = "mlflow.experimentKind", "custom_model_development"

# The runs view a researcher compares in (MLflow's shared-view experiment tag, opened by :func:`runs_view_path`).
# MLflow >= 3.1x decides GenAI vs model training from the sidebar's workflow type (GenAI by default, remembered in
# the browser) rather than the experiment kind: the link sets it.
RUNS_VIEW_KEY = "sentlab"
RUNS_VIEW_TAG = f"mlflow.sharedViewState.{RUNS_VIEW_KEY}"


def runs_view() -> dict:
    """The training runs, flat (each seed its own row), ranked by test.Avg, with the seven STS results, Avg and the
    best dev as columns."""
    from ..data.sts import TASKS

    return {"searchFilter": "tags.stage = 'train'", "orderByKey": "metrics.`test.Avg`", "orderByAsc": False,
            "startTime": "ALL", "lifecycleFilter": "Active", "datasetsFilter": [], "modelVersionFilter": "All Runs",
            "selectedColumns": ["attributes.`Run Name`"] + [f"metrics.`test.{k}`" for k in (*TASKS, "Avg")]
                               + ["metrics.`best_stsb_dev`"],
            "runsExpanded": {}, "runsPinned": [], "runsHidden": [], "runListHidden": False, "viewMaximized": False,
            "isAccordionReordered": False, "groupBy": None, "groupsExpanded": {}}


def runs_view_path(experiment_id: str) -> str:
    """The UI path (after the server's address) of the runs view: ``/#/experiments/<id>/runs?...``."""
    return f"/#/experiments/{experiment_id}/runs?workflowType=machine_learning&viewStateShareKey={RUNS_VIEW_KEY}"


def ui_link(server: str = "http://127.0.0.1:5000") -> str:
    """The address of the runs view of this store's experiment on ``server`` (``make mlflow-ui`` prints it); sets
    the experiment's tags first, so a store written by an older sentlab opens the same way."""
    mlflow = _mlflow()
    return server.rstrip("/") + runs_view_path(mlflow.get_experiment_by_name(EXPERIMENT).experiment_id)


def provenance_tags() -> dict[str, str]:
    """Tags tying a run to the code and the DVC experiment that produced it: the git commit and
    dirty flag of the repository, and DVC's experiment name and baseline commit when run by
    ``dvc exp run``."""
    from ..provenance.environment import git_state

    tags: dict[str, str] = {}
    root = store_root()
    git = git_state()
    if git["dirty"] != "unknown":
        tags["mlflow.source.git.commit"] = git["commit"]
        tags["sentlab.git_dirty"] = git["dirty"]
    tags["sentlab.git_commit"] = git["commit"]
    for env, tag in (("DVC_EXP_NAME", "sentlab.dvc_exp_name"), ("DVC_EXP_BASELINE_REV", "sentlab.dvc_exp_baseline"),
                     ("DVC_STAGE", "sentlab.dvc_stage")):
        if os.environ.get(env):
            tags[tag] = os.environ[env]
    tags["sentlab.repo_root"] = str(root)
    return tags


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping):
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


# A tracking server that does not answer: MLflow's client retries each call for ~4 minutes by default. A stage
# waits at most about a minute on it (2 retries, 20 s a request) and then stops calling (:func:`degrade`).
HTTP_BOUNDS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
               "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}
_DEGRADED: list[str] = []   # the first failure's description, once tracking failed in this process


def degraded() -> bool:
    """True once a tracking call failed in this process, or this pipeline run's tracking server was found
    unreachable (:mod:`sentlab.tracking.budget`): later calls are skipped (the wait stays bounded)."""
    if not _DEGRADED:
        from .budget import shared_verdict

        why = shared_verdict()
        if why:
            degrade("reach the tracking server (this pipeline run's probe)", ConnectionError(why), share=False)
    return bool(_DEGRADED)


def degrade(what: str, e: BaseException, share: bool = True) -> None:
    """Tracking failed: one warning, and no further MLflow call from this process; on a tracking server, the
    stages after this one skip it too (``share``: :func:`sentlab.tracking.budget.remember_unreachable`). The
    stage's outputs (model, metrics file) never depend on tracking: they are written as if MLflow were off."""
    if not _DEGRADED:
        _DEGRADED.append(f"{what}: {type(e).__name__}: {str(e)[:200]}")
        if share:
            from .budget import remember_unreachable

            remember_unreachable(f"{what}: {type(e).__name__}: {str(e)[:200]}", e)
        logging.getLogger(__name__).warning(
            "MLflow could not %s (%s: %s). The stage goes on without tracking: its outputs are written as usual, "
            "later MLflow calls of this process are skipped. Check the tracking store (%s).", what,
            type(e).__name__, str(e)[:200], tracking_uri())


def owner_tags(pid: int | None = None) -> dict[str, str]:
    """Who holds a run open: this host, the process id and its start time (a reused pid is not the same owner).
    :func:`sentlab.tracking.runs.sweep_orphans` closes a RUNNING run whose owner is gone, and only such a run."""
    import socket

    pid = pid or os.getpid()
    return {"sentlab.host": socket.gethostname(), "sentlab.pid": str(pid), "sentlab.pid_start": process_start_time(pid)}


def process_start_time(pid: int) -> str:
    """A process's start time (clock ticks since boot; empty where /proc cannot say)."""
    try:   # /proc/<pid>/stat field 22: the start time in clock ticks since boot
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def process_alive(pid: int, started: str = "") -> bool:
    """Whether process ``pid`` of this host runs and, given ``started`` (its :func:`process_start_time`), is the
    process that started then: a reused pid is another process. A process of another user counts as running; so
    does one whose start time cannot be read (never take a live owner or writer for dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    now = process_start_time(pid) if started else ""
    return not started or not now or now == started


def _mlflow():
    for name in ("mlflow", "alembic", "sqlalchemy"):
        logging.getLogger(name).setLevel(logging.WARNING)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    for k, v in HTTP_BOUNDS.items():
        os.environ.setdefault(k, v)
    import mlflow

    mlflow.set_tracking_uri(tracking_uri())
    from .store import create_experiment_beside_store, keep_artifacts_with_store

    create_experiment_beside_store(mlflow, EXPERIMENT, tracking_uri())
    exp = mlflow.set_experiment(EXPERIMENT)
    if keep_artifacts_with_store(exp, tracking_uri()):
        exp = mlflow.get_experiment(exp.experiment_id)
    view = json.dumps(runs_view(), sort_keys=True)
    for tag, value in ((EXPERIMENT_KIND_TAG, EXPERIMENT_KIND), (RUNS_VIEW_TAG, view)):
        if exp.tags.get(tag) != value:  # the UI opens on the runs table with the test columns, not GenAI traces
            mlflow.MlflowClient().set_experiment_tag(exp.experiment_id, tag, value)
    return mlflow


class _Run:
    """What :func:`run` yields: the run's logging calls, each guarded (a failure degrades tracking, never the
    stage); every call is a no-op when the run could not be started."""

    def __init__(self, mlflow=None):
        self._mlflow = mlflow

    def __getattr__(self, name: str):
        def call(*a, **kw):
            if self._mlflow is None or degraded():
                return None
            try:
                return getattr(self._mlflow, name)(*a, **kw)
            except Exception as e:  # noqa: BLE001 - the store is a side channel
                degrade(name.replace("_", " "), e)
                return None
        return call


@contextlib.contextmanager
def run(name: str, params: Mapping[str, Any] | None = None, tags: Mapping[str, str] | None = None,
        parent_run_id: str | None = None, resume_run_id: str | None = None,
        system_metrics: bool = False) -> Iterator[_Run]:
    """Start an MLflow run named ``name``; params are flattened (``train.lr``). ``resume_run_id``
    (:func:`sentlab.tracking.runs.interrupted_training_run`) continues that run instead: the params it already has
    stay, a runtime setting that differs now is tagged ``sentlab.resumed_with.<key>``. The run is tagged with its
    owner process (:func:`owner_tags`). A failure to start, log or end the run is one warning and the body
    runs on (:func:`degrade`): tracking never costs a result. The run ends FINISHED, FAILED (an exception in
    the body) or KILLED (KeyboardInterrupt). ``system_metrics``: MLflow's system metrics (``system/`` CPU, memory,
    disk, network, GPU; psutil) sampled while the run is open, every ``MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL``
    seconds (MLflow's default 10)."""
    started = None
    if not degraded():
        try:
            started = _start(name, params, tags, parent_run_id, resume_run_id, system_metrics)
        except Exception as e:  # noqa: BLE001 - the store is a side channel
            degrade(f"start the run {name!r}", e)
    status = "FINISHED"
    try:
        yield _Run(started)
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    except BaseException:
        status = "FAILED"
        raise
    finally:
        if started is not None and not degraded():
            try:
                started.end_run(status=status)
            except Exception as e:  # noqa: BLE001
                degrade(f"end the run {name!r}", e)


def _start(name, params, tags, parent_run_id, resume_run_id, system_metrics=False):
    mlflow = _mlflow()
    parent_run_id = parent_run_id or os.environ.get("SENTLAB_PARENT_RUN_ID")
    all_tags = {**provenance_tags(), **owner_tags(), **(tags or {})}
    if parent_run_id:
        all_tags["mlflow.parentRunId"] = parent_run_id
    logged: dict = {}
    if resume_run_id:
        logged = mlflow.MlflowClient().get_run(resume_run_id).data.params
        all_tags["sentlab.resumed"] = "true"
    mlflow.start_run(run_id=resume_run_id, run_name=None if resume_run_id else name,
                     tags=None if resume_run_id else all_tags, log_system_metrics=system_metrics)
    try:
        if resume_run_id:
            mlflow.set_tags(all_tags)
        if params:
            flat = {k: ("None" if v is None else str(v))[:6000] for k, v in flatten(params).items()}
            changed = {f"sentlab.resumed_with.{k}": v for k, v in flat.items() if k in logged and logged[k] != v}
            if changed:
                mlflow.set_tags(changed)
            items = [(k, v) for k, v in flat.items() if k not in logged]
            for i in range(0, len(items), 100):
                mlflow.log_params(dict(items[i: i + 100]))
    except BaseException:
        with contextlib.suppress(Exception):
            mlflow.end_run(status="FAILED")
        raise
    return mlflow


def log_metrics(metrics: Mapping[str, Any], step: int | None = None) -> None:
    """Log the numeric entries of ``metrics`` (nested keys flattened) to the active run.

    Logging is a side channel: a failure (a tracking server gone away, a locked SQLite store) is
    reported once as a warning, this process logs nothing more (:func:`degrade`) and training goes on; the
    curve CSV and the model are the outputs. Without an active run nothing is logged (MLflow would start one).
    """
    import math

    import mlflow

    flat = {k.replace("/", "_"): float(v) for k, v in flatten(metrics).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))}
    if not flat or degraded() or mlflow.active_run() is None:   # no run: never let MLflow start one here
        return
    try:
        mlflow.log_metrics(flat, step=step)
    except Exception as e:  # noqa: BLE001 - any store error: warn once, keep training
        degrade(f"log metrics at step {step}", e)


def find_training_run(model: str, run_key: str) -> str | None:
    """The id of the newest training run of ``model`` tagged with ``run_key`` (the key its
    ``sentlab.json`` records), or None (another store, a run deleted, tracking unreachable)."""
    if degraded():
        return None
    try:
        found = client().search_runs(
            [experiment_id()], f"tags.stage = 'train' and tags.`sentlab.model` = '{model}' and "
                               f"tags.`sentlab.run_key` = '{run_key}'", order_by=["attributes.start_time DESC"],
            max_results=1)
    except Exception as e:  # noqa: BLE001 - the store is a side channel
        degrade(f"look up the training run of {model}", e)
        return None
    return found[0].info.run_id if found else None


def corpus_input(path: str | os.PathLike, name: str, digest: str):
    """The training corpus as an MLflow dataset (``mlflow.log_input``: the run's Datasets column), named after the
    corpus, its digest the content fingerprint training keys its run on, its source the parquet file."""
    import warnings

    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.meta_dataset import MetaDataset

    with warnings.catch_warnings():   # a file URI matches two equivalent local sources: MLflow warns, picks one
        warnings.simplefilter("ignore", UserWarning)
        source = resolve_dataset_source(Path(path).resolve().as_uri())
    return MetaDataset(source, name=name, digest=digest[:36])


def log_corpus_input(run: "_Run", path: str | os.PathLike, name: str, digest: str, sentences: int) -> None:
    """Log the training corpus on ``run`` (:func:`corpus_input`, context ``training``, tagged with its sentence
    count). Describing the dataset is guarded like every logging call: a failure is :func:`degrade`'s one warning
    and the training goes on."""
    if degraded():
        return
    try:
        dataset = corpus_input(path, name, digest)
    except Exception as e:  # noqa: BLE001 - the store is a side channel
        degrade("describe the training corpus as a dataset", e)
        return
    run.log_input(dataset, context="training", tags={"sentences": str(sentences)})


def log_to_run(run_id: str, metrics: Mapping[str, Any], prefix: str = "test.") -> bool:
    """Log ``metrics`` (numeric entries, keys prefixed) on the finished run ``run_id``: the test
    results of a model go on the training run that produced it, beside its dev curve, so runs
    compared in the MLflow UI carry their test numbers. The run is not reopened (the client logs on it as it
    is): its Duration stays the training's own. Returns False (warning once) when the run cannot be reached;
    the metrics JSON is the output either way."""
    import math
    import time

    from mlflow.entities import Metric

    if degraded():
        return False
    flat = {f"{prefix}{k}".replace("/", "_"): float(v) for k, v in flatten(metrics).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))}
    try:
        now = int(time.time() * 1000)
        client().log_batch(run_id, metrics=[Metric(k, v, now, 0) for k, v in flat.items()])
        return True
    except Exception as e:  # noqa: BLE001 - a run from another store, deleted, ...: warn, go on
        logging.getLogger(__name__).warning(
            "MLflow run %s (the training run of this model) could not be reached (%s: %s); test results are "
            "logged on the eval run only.", run_id, type(e).__name__, str(e)[:200])
        return False


# --- parent run per pipeline run -----------------------------------------------------------------
PARENT_ENV = "SENTLAB_PARENT_RUN_ID"


def client():
    """An ``MlflowClient`` on :func:`tracking_uri` (the experiment created if needed)."""
    mlflow = _mlflow()
    return mlflow.MlflowClient(tracking_uri=tracking_uri())


def experiment_id() -> str:
    mlflow = _mlflow()
    return mlflow.get_experiment_by_name(EXPERIMENT).experiment_id
