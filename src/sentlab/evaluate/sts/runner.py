"""Evaluate one model (a hub id / folder + pooling, or a trained ``models/<method>``) on the STS protocol.

:func:`evaluate_sts` returns an :class:`STSResult` (the flat metrics, ``STS12`` … ``Avg`` as Spearman × 100 plus
labelled extras, the per-pair cosines, the bootstrap, the MLflow params) and writes nothing; the stages compose
the writers of :mod:`.writers` over it (pipeline/evaluate.py, :mod:`sentlab.evaluate.baselines.stage`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import torch

from ...assets.resolve import load_model
from ...nn.encoder import SentenceEncoder, resolve_workers
from ...nn.encoder_head import read_head
from ...errors import SentlabError
from .cosines import bootstrap_intervals, confidence_intervals

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


def resolve_device_precision(device: str = "auto", precision: str = "auto") -> tuple[torch.device, str]:
    """``evaluate.device`` / ``evaluate.precision`` in force: ``auto`` is CUDA when available, else CPU;
    precision ``auto`` is exact fp32 on every device (on a GPU it costs little); bf16 autocast is an opt-in
    (``evaluate.precision: bf16``), recorded as approximate (:func:`precision_record`)."""
    if device not in ("auto", "cpu", "cuda") or precision not in ("auto", "fp32", "bf16"):
        raise SentlabError(f"evaluate.device {device!r} / evaluate.precision {precision!r}: allowed auto|cpu|cuda and "
                           f"auto|fp32|bf16.")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise SentlabError("evaluate.device is `cuda` but no CUDA device is available; "
                           "set evaluate.device: auto or cpu.")
    if precision == "auto":
        precision = "fp32"
    return torch.device(device), precision


def precision_record(enc: SentenceEncoder) -> dict:
    """What the metrics JSON says about how the embeddings were computed."""
    exact = enc.precision == "fp32"
    return {"device": enc.device.type, "precision": enc.precision,
            "numerics": "exact (fp32)" if exact else "approximate (bf16 autocast; fp32 pooling and cosine)"}


def evaluation_pooling(setting: Optional[str], info: dict) -> Optional[str]:
    """The pooling ``evaluate.pooling`` (``setting``) asks for a trained model whose ``sentlab.json`` is ``info``:
    None, its own pooling with its test-time head, when the setting is null or names that pooling (the numbers do
    not move); else the setting: the bare encoder pooled that way, without retraining (the embedding cache keys
    it apart: the pooling is part of :func:`~sentlab.evaluate.sts.cache.cache_key`)."""
    return None if setting in (None, info.get("pooling", "cls")) else setting


def build_encoders(model: str, pooling: Optional[str] = None, precision: str = "auto", max_length: Optional[int] = None,
                   name: Optional[str] = None, device: str = "auto", workers="auto") -> dict[str, SentenceEncoder]:
    """Encoders to evaluate for ``model``: the main one under ``name`` plus any extra rows
    recorded in a trained model's ``sentlab.json`` (e.g. the POS/BOW channels). ``device`` and
    ``precision`` as :func:`resolve_device_precision`; ``workers`` as ``evaluate.workers``
    (:func:`~sentlab.nn.encoder.resolve_workers`)."""
    dev, precision = resolve_device_precision(device, precision)
    root = Path(model)
    info = read_model_info(root) if root.is_dir() else None
    # any sentence-transformers folder: pool as its modules do
    if info is None and pooling is None and root.is_dir():
        from ...export.st import st_pooling_info

        info = st_pooling_info(root)
        if info is not None:
            name = name or root.name
            model = str(root / info["subfolder"])
            max_length = max_length or info.get("max_length")
    net, tok = load_model(model, device=dev.type)
    net.eval()
    workers = resolve_workers(workers, dev)
    name = name or Path(model).name
    pool = pooling or (info or {}).get("pooling", "cls")
    # the model's test-time head (supervised SimCSE's MLP) goes with its own pooling; --pooling scores the bare encoder
    head = read_head(root / info["head"]) if pooling is None and (info or {}).get("head") else None
    enc = SentenceEncoder(net, tok, pooling=pool, template=(info or {}).get("template"),
                          end_period=bool((info or {}).get("end_period")), precision=precision,
                          max_length=max_length, name=name, device=dev, workers=workers, head=head)
    encoders = {name: enc}
    for channel, (lo, hi) in ((info or {}).get("channels") or {}).items():
        encoders[f"{name}_{channel}"] = SentenceEncoder(net, tok, pooling=pool, template=enc.template,
                                                        end_period=enc.end_period,
                                                        precision=precision, max_length=max_length,
                                                        dims=(int(lo), int(hi)), head=head,
                                                        name=f"{name}_{channel}", device=dev, workers=workers)
    return encoders


def diagnose(table, lookup, params, name: str, figures_dir: Optional[Path] = None) -> dict:
    """Diagnostics (docs/evaluation.md) of one evaluated encoder from its evaluation lookup (no second encoding
    pass); the density figure goes to ``figures_dir/<name>_density.png`` when a folder is given."""
    from .diagnostics import run_diagnostics

    diag, dens = run_diagnostics(table, lookup, params.evaluate, max_pairs=params.evaluate.max_pairs)
    if figures_dir is not None:
        from .figures import density_figure

        fig = density_figure(dens["gold"], dens["cos"], Path(figures_dir) / f"{name}_density.png",
                             title=f"{name}: cosine density on STS-B test by gold level")
        diag["density"]["figure"] = fig.as_posix()
    return diag


def evaluate_encoders(encoders: dict[str, SentenceEncoder], table, params, figures_dir: Optional[Path] = None,
                      embeddings: Optional[dict] = None, lookups: Optional[dict] = None) -> dict:
    """Evaluate the main encoder (first) and any extra rows; one metrics dict.

    The main encoder's results are the flat top-level keys; extra rows (e.g.
    channels of one model) go under ``extra_rows``. With ``evaluate.diagnostics``
    each row also gets ``diagnostics`` (computed from the embeddings the
    evaluation already made); only the main row's density figure is drawn.
    ``embeddings`` (main row only) is a precomputed lookup (the whitening baseline).
    ``lookups``, when given, receives each row's sentence -> embedding lookup by name.
    """
    from .protocol import evaluate_table

    ep = params.evaluate
    out: dict = {}
    main_enc, main_lookup = None, None
    for i, (name, enc) in enumerate(encoders.items()):
        given = embeddings if i == 0 else _channel_lookup(enc, main_enc, main_lookup)
        res, lookup = evaluate_table(enc, table, batch_size=ep.batch_size, max_pairs=ep.max_pairs,
                                     return_embeddings=True, embeddings=given)
        if i == 0:
            main_enc, main_lookup = enc, lookup
        if lookups is not None:
            lookups[name] = lookup
        if ep.diagnostics:
            res["diagnostics"] = diagnose(table, lookup, params, name, figures_dir if i == 0 else None)
        if i == 0:
            out.update(res)
        else:
            out.setdefault("extra_rows", {})[name] = res
    return out


def _channel_lookup(enc: SentenceEncoder, main: Optional[SentenceEncoder], lookup: Optional[dict]) -> Optional[dict]:
    """A channel row (``dims`` of the main encoder's own embedding) is a slice of the main row's
    embeddings: no second encoding pass. None when ``enc`` is not such a slice."""
    if (main is None or lookup is None or enc.dims is None or main.dims is not None or main.post is not None
            or enc.post is not None or enc.model is not main.model or enc.pooling != main.pooling
            or enc.template != main.template or enc.end_period != main.end_period or enc.precision != main.precision
            or enc.max_length != main.max_length):
        return None
    lo, hi = enc.dims
    return {s: v[lo:hi] for s, v in lookup.items()}


def metrics_backbone(params, kind: str, extra_metrics: Optional[dict]) -> str:
    """The backbone a metrics file records: a trained model's own (its method line's ``backbone``), else
    ``model.backbone`` (the baselines, a method without its own)."""
    own = ((extra_metrics or {}).get("method") or {}).get("backbone") if kind == "trained" else None
    vectors = ((extra_metrics or {}).get("word_vectors") or {}).get("name")   # the GloVe baseline: no backbone
    return own or vectors or params.model.backbone


@dataclass
class STSResult:
    """One model evaluated on the STS protocol (:func:`evaluate_sts`), before anything is written: the stage
    composes the writers of :mod:`.writers` (the metrics JSON, the per-pair cosines and bootstrap, MTEB's result
    JSON, the MLflow run) over it, the way sentence-transformers' evaluators return scores and leave the files to
    their callers."""

    name: str
    model: str                      # what was evaluated: a hub id or folder (a vector set for GloVe)
    kind: str                       # trained | baseline
    metrics: dict                   # the metrics JSON, key for key as written
    timings: dict                   # wall-clock seconds: MLflow only, never in a file a stage depends on
    cosines: Any                    # the per-pair cosines (:func:`pair_cosine_table`, a DataFrame)
    intervals: dict                 # the bootstrap distributions behind ``ci95``
    lookup: dict                    # the main row's sentence -> embedding (MTEB's scores are computed from it)
    table: Any                      # the STS table evaluated
    run_params: dict                # the MLflow run's params
    seed: int                       # the bootstrap's seed
    max_pairs: Optional[int] = None  # evaluate.max_pairs (a sample of each task: no MTEB result)
    normalize_mteb: bool = False    # MTEB's distances on normalised vectors (mteb_results.normalizes)
    profile: str = ""


def stage_encoders(model: str, pooling: Optional[str], params, name: str) -> dict[str, SentenceEncoder]:
    """:func:`build_encoders` with the stage's ``evaluate`` settings (precision, max_length, device, workers)."""
    ep = params.evaluate
    return build_encoders(model, pooling=pooling, precision=ep.precision, max_length=ep.max_length, name=name,
                          device=ep.device, workers=ep.workers)


def evaluate_sts(encoders: dict[str, SentenceEncoder], table, params, *, model: str, kind: str,
                 extra_metrics: Optional[dict] = None, extra_params: Optional[dict] = None,
                 embeddings: Optional[dict] = None, figures_dir: Optional[Path] = None) -> STSResult:
    """Evaluate ``encoders`` (the main row first: its name is the result's) on ``table``; writes nothing but the
    density figure (``figures_dir``, with ``evaluate.diagnostics``).

    ``model`` is what was evaluated (the MLflow param; the baselines' backbone or vector set); ``extra_metrics`` go
    into the JSON (how a whitening was fitted, a trained model's ``method`` block), ``extra_params`` into the MLflow
    run; ``embeddings`` is a precomputed lookup of the main row (the fitted baselines). The JSON records the device
    and precision (:func:`precision_record`), the 95 % bootstrap CI of each task (``ci95``) and the environment
    fingerprint; the timings are taken out of it (:func:`pop_timings`)."""
    from ...provenance.environment import environment_fingerprint
    from . import mteb_results
    from .protocol import TASKS

    name = next(iter(encoders))
    main = encoders[name]
    lookups: dict = {}
    metrics = evaluate_encoders(encoders, table, params, figures_dir=figures_dir, embeddings=embeddings,
                                lookups=lookups)
    frame = pair_cosine_table(main, lookups[name], table, params)
    intervals = bootstrap_intervals(frame, [*TASKS, "STSBenchmark-dev"], seed=params.seed)
    metrics = {"model": name, "kind": kind, "backbone": metrics_backbone(params, kind, extra_metrics),
               "profile": params.profile,
               "status": "evaluated", **precision_record(main), **(extra_metrics or {}), **metrics,
               "ci95": confidence_intervals(frame, TASKS, intervals=intervals), "bootstrap_seed": params.seed,
               "fingerprint": environment_fingerprint(main.device, main.precision, threads=main.batch_threads,
                                                      data_files=[Path("data/sts/sts.parquet")])}
    timings = pop_timings(metrics)
    run_params = {"model": model, "pooling": main.pooling, "kind": kind, "evaluate": params.evaluate.model_dump(),
                  **(extra_params or {})}
    return STSResult(name=name, model=model, kind=kind, metrics=metrics, timings=timings, cosines=frame,
                     intervals=intervals, lookup=lookups[name], table=table, run_params=run_params, seed=params.seed,
                     max_pairs=params.evaluate.max_pairs, profile=params.profile,
                     normalize_mteb=getattr(main, "post", None) is None and mteb_results.normalizes(model))


def pop_timings(metrics: dict) -> dict:
    """Take the wall-clock timings (``encode_seconds``, also of each extra row) out of ``metrics``: they go to
    MLflow only. The metrics JSON holds what the numbers are, so re-evaluating an unchanged model writes the
    same bytes and the report and export stages, which depend on it, stay up to date."""
    out = {}
    if "encode_seconds" in metrics:
        out["encode_seconds"] = metrics.pop("encode_seconds")
    for row, res in (metrics.get("extra_rows") or {}).items():
        if isinstance(res, dict) and "encode_seconds" in res:
            out[f"{row}.encode_seconds"] = res.pop("encode_seconds")
    return out


def pair_cosine_table(encoder: SentenceEncoder, lookup: dict, table, params):
    """The per-pair cosines of the seven tasks, STS-B dev and every SICK pair (:mod:`.cosines`): the
    evaluation's own embeddings, plus the SICK train/trial sentences it had not encoded."""
    from .cosines import SICK_ALL, cosine_frame, sick_all
    from .protocol import TASKS, embed_unique, sample_pairs, select_splits

    ep = params.evaluate
    splits = select_splits(table, [*TASKS, "STSBenchmark-dev"], ep.max_pairs)
    splits[SICK_ALL] = sample_pairs(sick_all(table), ep.max_pairs)
    missing = [s for s in dict.fromkeys((*splits[SICK_ALL].sentence1, *splits[SICK_ALL].sentence2)) if s not in lookup]
    if missing:
        lookup = {**lookup, **embed_unique(encoder, missing, batch_size=ep.batch_size)}
    return cosine_frame(splits, lookup)
