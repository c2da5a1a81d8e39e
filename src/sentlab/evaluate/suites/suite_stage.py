"""What the evaluation-suite stages share (dvc.yaml's ``transfer``, ``glue`` and ``retrieval`` groups,
:data:`sentlab.stages.stage_list.SUITES`): ``<suite>@<name>`` evaluates one model of the stage list
(``models/<name>``) or the backbone (``base-<pooling>``), writes ``reports/metrics/<suite>/<name>.json`` (a temporary
file renamed into place) and logs its numbers to MLflow: a run ``<suite>/<name>``, and as ``<suite>.*`` beside the
dev curve of the run that trained the model."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

OUT = Path("reports/metrics")


def stage_of(suite: str, name: str) -> str:
    """The dvc.yaml stage that evaluates ``name`` in ``suite`` (the group ``<suite>``, its item ``<name>``)."""
    return f"{suite}@{name}"


def suite_model(params, name: str, suite: str) -> tuple[str, Optional[str], Optional[dict]]:
    """(what to load, pooling, the model's sentlab.json) of ``name``: ``base-<pooling>`` is the backbone
    (``params.model.backbone``), else the trained ``models/<name>``, which must hold a trained model."""
    from ...errors import SentlabError
    from ..sts.runner import read_model_info

    if name.startswith("base-"):
        return params.model.backbone, name[len("base-"):], None
    model = str(Path("models") / name)
    info = read_model_info(Path(model))
    if info is None or info.get("status") != "trained":
        raise SentlabError(f"models/{name} holds no trained model ({(info or {}).get('status', 'missing')}): "
                           f"run `dvc repro train@{name}` first, or remove `{name}` from {suite}.models.")
    return model, None, info


def use_training_threads(params) -> None:
    """A suite that trains on a CPU (transfer's classifiers, GLUE's fine-tuning) runs on ``train.num_threads``, as a
    method's training does: its last bits depend on the thread count (``TrainParams.num_threads``), so a parallel
    run's task and a serial run give the same numbers."""
    import torch

    if params.train.num_threads:
        torch.set_num_threads(params.train.num_threads)


def frozen_encoder(params, name: str, suite: str, protocol: str):
    """(the encoder, what it loads, the model's sentlab.json, the metrics every frozen-embedding suite records) of
    ``name`` with the ``evaluate`` section's device, precision, length and workers (transfer, retrieval)."""
    from ..sts.runner import build_encoders, precision_record

    ep = params.evaluate
    model, pooling, info = suite_model(params, name, suite)
    enc = build_encoders(model, pooling=pooling, precision=ep.precision, max_length=ep.max_length, name=name,
                         device=ep.device, workers=ep.workers)[name]
    head = {"model": name, "backbone": params.model.backbone, "profile": params.profile, "pooling": enc.pooling,
            "status": "evaluated", **precision_record(enc), "protocol": protocol}
    return enc, model, info, head


def missing_data(loaders: dict) -> dict:
    """``{task: data}`` of ``loaders`` (task -> a function loading it); every task whose data is not here is
    collected first, then one :class:`~sentlab.errors.AssetMissingError` names them all with their fetch
    commands (a stage never skips a task silently: its row in the report says "needs data" until it runs)."""
    from ...errors import AssetMissingError

    out, missing = {}, []
    for task, load in loaders.items():
        try:
            out[task] = load()
        except AssetMissingError as e:
            missing.append(f"{task}: {e}")
    if missing:
        raise AssetMissingError(" ".join(missing) + " (Drop the task from the suite's `tasks` to run without it.)")
    return out


def _metric_name(key: str) -> str:
    return re.sub(r"[^0-9A-Za-z_\-. /]", "_", key.replace("@", "_at"))


def record(suite: str, name: str, metrics: dict, settings: dict, info: Optional[dict], model: str) -> None:
    """Write ``reports/metrics/<suite>/<name>.json`` (temp path + rename), then log ``metrics``' numbers to MLflow
    (run ``<suite>/<name>``; the training run of ``name`` as ``<suite>.*``): a tracking failure costs no result."""
    from ... import tracking
    from ...runtime.io import write_json

    flat = {_metric_name(k): v for k, v in metrics.items() if isinstance(v, float)}
    write_json(OUT / suite / f"{name}.json", metrics)   # the output first: tracking may fail or wait
    with tracking.run(f"{suite}/{name}", params={"model": model, suite: settings},
                      tags={"sentlab.stage": f"evaluate_{suite}", "sentlab.model": name,
                            "sentlab.profile": str(metrics.get("profile", ""))}):
        tracking.log_metrics(flat)
    if info and info.get("run_key"):
        train_run = tracking.find_training_run(name, info["run_key"])
        if train_run is not None:
            tracking.log_to_run(train_run, flat, prefix=f"{suite}.")
