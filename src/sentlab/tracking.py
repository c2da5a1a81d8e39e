"""MLflow in one place.

Default store: an embedded SQLite file ``mlflow.db`` in the working directory
(the repository root when DVC runs a stage); ``MLFLOW_TRACKING_URI`` overrides
it with any tracking server. Open the default store with::

    mlflow ui --backend-store-uri sqlite:///mlflow.db
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any, Iterator, Mapping

EXPERIMENT = os.environ.get("SENTLAB_MLFLOW_EXPERIMENT", "sentlab")


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path.cwd() / 'mlflow.db'}"


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping):
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


def _mlflow():
    for name in ("mlflow", "alembic", "sqlalchemy"):
        logging.getLogger(name).setLevel(logging.WARNING)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    import mlflow

    mlflow.set_tracking_uri(tracking_uri())
    mlflow.set_experiment(EXPERIMENT)
    return mlflow


@contextlib.contextmanager
def run(name: str, params: Mapping[str, Any] | None = None, tags: Mapping[str, str] | None = None,
        parent_run_id: str | None = None) -> Iterator[Any]:
    """Start an MLflow run named ``name``; params are flattened (``train.lr``)."""
    mlflow = _mlflow()
    parent_run_id = parent_run_id or os.environ.get("SENTLAB_PARENT_RUN_ID")
    all_tags = dict(tags or {})
    if parent_run_id:
        all_tags["mlflow.parentRunId"] = parent_run_id
    with mlflow.start_run(run_name=name, tags=all_tags) as active:
        if params:
            flat = {k: ("None" if v is None else str(v))[:6000] for k, v in flatten(params).items()}
            items = list(flat.items())
            for i in range(0, len(items), 100):
                mlflow.log_params(dict(items[i: i + 100]))
        yield mlflow


def log_metrics(metrics: Mapping[str, Any], step: int | None = None) -> None:
    """Log the numeric entries of ``metrics`` (nested keys flattened) to the active run."""
    import math

    import mlflow

    flat = {k.replace("/", "_"): float(v) for k, v in flatten(metrics).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))}
    if flat:
        mlflow.log_metrics(flat, step=step)
