"""Where a SQLite MLflow store keeps its artifacts: beside the store, in ``<store folder>/mlruns``, also for a
fresh store named by ``MLFLOW_TRACKING_URI`` elsewhere and for a workspace copied with its ``mlflow.db``."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path


def create_experiment_beside_store(mlflow, experiment: str, uri: str) -> None:
    """A new experiment of a SQLite store keeps its artifacts in ``<store folder>/mlruns/<experiment>`` (MLflow's
    default is ``./mlruns`` of the process's working directory, which differs when ``MLFLOW_TRACKING_URI`` names
    a store elsewhere, e.g. benchmarks/stage_times.py's scratch store)."""
    if not uri.startswith("sqlite:///") or mlflow.get_experiment_by_name(experiment) is not None:
        return
    home = Path(uri[len("sqlite:///"):]).parent / "mlruns"
    try:
        mlflow.create_experiment(experiment, artifact_location=str(home / experiment))
    except mlflow.exceptions.MlflowException:  # created meanwhile by a concurrent stage
        pass


def keep_artifacts_with_store(exp, uri: str) -> bool:
    """MLflow stores an experiment's artifact folder (and each run's) as an absolute path: a workspace copied
    with its ``mlflow.db`` went on writing artifacts into the ORIGINAL's ``mlruns/``. For a SQLite store whose
    experiment keeps its artifacts in an ``mlruns`` folder other than the one beside the store, point the
    experiment and its runs at ``<store folder>/mlruns`` (said in a warning); True when it did. A location
    that is not an ``mlruns`` folder (chosen by the user) or not local is left alone."""
    if not uri.startswith("sqlite:///"):
        return False
    db = Path(uri[len("sqlite:///"):])
    home = db.parent / "mlruns"
    loc = exp.artifact_location or ""
    if "://" in loc and not loc.startswith("file://"):
        return False
    old = Path(loc[len("file://"):] if loc.startswith("file://") else loc).parent
    if old.name != "mlruns" or old == home:
        return False
    import sqlite3

    with contextlib.closing(sqlite3.connect(db)) as con, con:
        con.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = ?",
                    (str(home / exp.experiment_id), int(exp.experiment_id)))
        con.execute("UPDATE runs SET artifact_uri = ? || substr(artifact_uri, ?) WHERE experiment_id = ? "
                    "AND substr(artifact_uri, 1, ?) = ?", (str(home), len(str(old)) + 1, int(exp.experiment_id),
                                                          len(str(old)), str(old)))
    logging.getLogger("sentlab.tracking").warning(
        "MLflow: the store %s kept its artifacts in %s (it was copied from another workspace); its experiment "
        "and runs now keep them in %s, beside the store (copy the old folder's contents there for earlier "
        "runs' artifacts).", db, old, home)
    return True
