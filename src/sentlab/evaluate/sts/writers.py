"""The writers of an STS evaluation: each turns an :class:`~sentlab.evaluate.sts.runner.STSResult` into one output.

* :func:`write_cosine_files` — the per-pair cosines (``reports/cosines/<name>.parquet``: the report's CIs, paired
  tests and protocol table read them) and, beside, the bootstrap distributions behind ``ci95``
  (``<name>.bootstrap.parquet``);
* :func:`write_mteb_files` — MTEB's result JSON of the STS tasks (``reports/mteb/sentlab__<name>/``, as
  ``sentlab evaluate --format mteb``; a README saying why where the table is partial or sampled);
* :func:`write_metrics_json` — the metrics JSON (``reports/metrics/<name>.json``, atomic);
* :func:`log_mlflow` — the ``eval/<name>`` MLflow run, and the test scores on the run that trained the model.

A stage composes them over its :class:`StageOutputs` (:data:`STAGE_WRITERS`, in that order: the files first,
tracking last, as a side channel that may fail or wait: :mod:`sentlab.tracking`). Where the files go is the
stage's to say (:meth:`StageOutputs.of`), never guessed from the metrics path.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from .cosines import bootstrap_path, write_bootstrap, write_cosines
from .runner import STSResult, read_model_info

REPORTS = Path("reports")
# metric keys MLflow does not get as scalars (nested blocks, the record of how the numbers were made)
NOT_LOGGED = ("per_task", "extra_rows", "diagnostics", "whitening", "flow", "word_vectors", "method", "ci95",
              "fingerprint", "bootstrap_seed")


@dataclass(frozen=True)
class StageOutputs:
    """Where an evaluation's files go: the metrics JSON, the cosines table (the bootstrap beside it) and the folder
    that holds ``sentlab__<name>/`` of MTEB's results."""

    metrics: Path
    cosines: Path
    mteb: Path

    @classmethod
    def of(cls, name: str, reports: Path = REPORTS) -> "StageOutputs":
        """The pipeline's layout under ``reports`` (dvc.yaml's evaluate and evaluate_baseline outs)."""
        reports = Path(reports)
        return cls(metrics=reports / "metrics" / f"{name}.json", cosines=reports / "cosines" / f"{name}.parquet",
                   mteb=reports / "mteb")


def write_cosine_files(result: STSResult, out: StageOutputs) -> None:
    write_cosines(out.cosines, result.cosines)
    write_bootstrap(bootstrap_path(out.cosines), result.intervals, result.seed)


def write_mteb_files(result: STSResult, out: StageOutputs) -> None:
    from . import mteb_results

    mteb_results.write_stage(result.name, result.table, result.lookup, result.timings.get("encode_seconds"),
                             normalize=result.normalize_mteb, out=out.mteb, max_pairs=result.max_pairs)


def write_metrics_json(result: STSResult, out: StageOutputs) -> None:
    from ...runtime.io import write_json

    write_json(out.metrics, result.metrics)


def log_mlflow(result: STSResult, out: StageOutputs | None = None) -> None:
    """The ``eval/<name>`` run: the scalar metrics, the timings, the diagnostics and the density figure; a trained
    model's test scores also go to the run that trained it (beside its dev curve)."""
    from ... import tracking
    from ...provenance.environment import fingerprint_tags
    from .diagnostics import flat_diagnostics

    metrics = result.metrics
    tags = {"sentlab.stage": "evaluate", "sentlab.model": result.name, "sentlab.profile": result.profile,
            **fingerprint_tags(metrics["fingerprint"])}
    with tracking.run(f"eval/{result.name}", params=result.run_params, tags=tags) as ml:
        tracking.log_metrics({k: v for k, v in metrics.items() if k not in NOT_LOGGED})
        tracking.log_metrics(result.timings)
        if "diagnostics" in metrics:
            tracking.log_metrics(flat_diagnostics(metrics["diagnostics"]))
            fig = metrics["diagnostics"]["density"].get("figure")
            if fig:
                ml.log_artifact(fig, artifact_path="figures")
        for row, res in (metrics.get("extra_rows") or {}).items():
            tracking.log_metrics({f"{row}.{k}": v for k, v in res.items() if k not in NOT_LOGGED})
            if "diagnostics" in res:
                tracking.log_metrics({f"{row}.{k}": v for k, v in flat_diagnostics(res["diagnostics"]).items()})
        info = read_model_info(Path(result.model)) if result.kind == "trained" else None
        key = (info or {}).get("run_key")
        train_run = tracking.find_training_run(result.name, key) if key else None
        if train_run is not None:
            tracking.log_to_run(train_run, {k: v for k, v in metrics.items() if k not in NOT_LOGGED})


Writer = Callable[[STSResult, StageOutputs], None]
STAGE_WRITERS: tuple[Writer, ...] = (write_cosine_files, write_mteb_files, write_metrics_json, log_mlflow)
"""What an evaluate stage writes, in order: the files first, MLflow last."""


def write_all(result: STSResult, out: StageOutputs, writers: Sequence[Writer] = STAGE_WRITERS) -> dict:
    """Each writer over ``result`` in turn; returns the metrics written."""
    for write in writers:
        write(result, out)
    return result.metrics
