"""Evaluate one model (a hub id / folder + pooling, or a trained ``models/<method>``).

Writes the flat metrics JSON (``STS12`` … ``Avg`` as Spearman × 100, plus
labelled extras) atomically and logs the run to MLflow.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Optional

import torch

from ..assets import load_model
from ..encoder import SentenceEncoder
from ..errors import SentlabError

log = logging.getLogger(__name__)

NOT_RUN = "not run in this profile"


def read_model_info(path: Path) -> Optional[dict]:
    f = Path(path) / "sentlab.json"
    if not f.is_file():
        return None
    try:
        return json.loads(f.read_text())
    except ValueError as e:
        raise SentlabError(f"{f} is not valid JSON ({e}); re-run the train stage that wrote it.") from None


def build_encoders(model: str, pooling: Optional[str] = None, precision: str = "fp32", max_length: Optional[int] = None,
                   name: Optional[str] = None, device: str = "cpu") -> dict[str, SentenceEncoder]:
    """Encoders to evaluate for ``model``: the main one under ``name`` plus any extra rows
    recorded in a trained model's ``sentlab.json`` (e.g. the POS/BOW channels)."""
    info = read_model_info(Path(model)) if Path(model).is_dir() else None
    net, tok = load_model(model, device=device)
    net.eval()
    name = name or Path(model).name
    pool = pooling or (info or {}).get("pooling", "cls")
    enc = SentenceEncoder(net, tok, pooling=pool, template=(info or {}).get("template"), precision=precision,
                          max_length=max_length, name=name, device=torch.device(device))
    encoders = {name: enc}
    for channel, (lo, hi) in ((info or {}).get("channels") or {}).items():
        encoders[f"{name}_{channel}"] = SentenceEncoder(net, tok, pooling=pool, template=enc.template, precision=precision,
                                                        max_length=max_length, dims=(int(lo), int(hi)),
                                                        name=f"{name}_{channel}", device=torch.device(device))
    return encoders


def evaluate_encoders(encoders: dict[str, SentenceEncoder], table, params) -> dict:
    """Evaluate the main encoder (first) and any extra rows; one metrics dict.

    The main encoder's results are the flat top-level keys; extra rows (e.g.
    channels of one model) go under ``extra_rows``.
    """
    from .protocol import evaluate_table

    out: dict = {}
    for i, (name, enc) in enumerate(encoders.items()):
        res = evaluate_table(enc, table, batch_size=params.evaluate.batch_size, max_pairs=params.evaluate.max_pairs)
        if i == 0:
            out.update(res)
        else:
            out.setdefault("extra_rows", {})[name] = res
    return out


def evaluate_and_record(name: str, model: str, pooling: Optional[str], params, table, out_path: Path,
                        kind: str, extra_params: Optional[dict] = None) -> dict:
    """Evaluate, write ``out_path`` atomically, log an MLflow run named ``name``."""
    from .. import tracking
    from ..io import write_json

    encoders = build_encoders(model, pooling=pooling, precision=params.evaluate.precision,
                              max_length=params.evaluate.max_length, name=name)
    metrics = evaluate_encoders(encoders, table, params)
    metrics = {"model": name, "kind": kind, "backbone": params.model.backbone, "profile": params.profile,
               "status": "evaluated", **metrics}
    run_params = {"model": model, "pooling": pooling or encoders[name].pooling, "kind": kind,
                  "profile": params.profile, "evaluate": params.evaluate.model_dump(), **(extra_params or {})}
    with tracking.run(f"eval/{name}", params=run_params, tags={"sentlab.stage": "evaluate", "sentlab.model": name}):
        tracking.log_metrics({k: v for k, v in metrics.items() if k not in ("per_task", "extra_rows")})
        for row, res in (metrics.get("extra_rows") or {}).items():
            tracking.log_metrics({f"{row}.{k}": v for k, v in res.items() if k not in ("per_task",)})
    write_json(out_path, metrics)
    return metrics


def write_not_run(name: str, params, out_path: Path, reason: str = NOT_RUN) -> dict:
    from ..io import write_json

    metrics = {"model": name, "kind": "trained", "backbone": params.model.backbone, "profile": params.profile,
               "status": reason}
    write_json(out_path, metrics)
    return metrics
