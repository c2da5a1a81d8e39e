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

from ...assets import load_model
from ...encoder import SentenceEncoder, resolve_workers
from ...encoder_head import read_head
from ...errors import SentlabError
from .cosines import bootstrap_intervals, bootstrap_path, confidence_intervals, write_bootstrap, write_cosines

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
    (:func:`~sentlab.encoder.resolve_workers`)."""
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


def evaluate_and_record(name: str, model: str, pooling: Optional[str], params, table, out_path: Path,
                        kind: str, extra_params: Optional[dict] = None, figures_dir: Optional[Path] = None,
                        encoders: Optional[dict[str, SentenceEncoder]] = None, embeddings: Optional[dict] = None,
                        extra_metrics: Optional[dict] = None, cosines_dir: Optional[Path] = None) -> dict:
    """Evaluate, write ``out_path`` atomically, log an MLflow run named ``name``.

    ``encoders`` (prebuilt, e.g. the whitening baseline) replaces building them from ``model``;
    ``extra_metrics`` are stored in the JSON (e.g. how the whitening was fitted, a trained model's
    ``method`` block). The JSON records the device and precision (:func:`precision_record`), the
    95 % bootstrap CI of each task (``ci95``) and the environment fingerprint; the per-pair cosines
    (and, as ``<name>.bootstrap.parquet``, the bootstrap distributions behind ``ci95``) go to
    ``cosines_dir/<name>.parquet`` (:func:`pair_cosine_table`; default: ``reports/cosines`` beside
    ``reports/metrics``, else a ``cosines`` folder beside ``out_path``); MTEB's result JSON of its STS tasks to
    ``reports/mteb/sentlab__<name>/`` (:func:`sentlab.evaluate.sts.mteb_results.write_stage`; the same rule of place).
    """
    from ... import tracking
    from ...io import write_json
    from .diagnostics import flat_diagnostics

    if encoders is None:
        ep = params.evaluate
        encoders = build_encoders(model, pooling=pooling, precision=ep.precision, max_length=ep.max_length, name=name,
                                  device=ep.device, workers=ep.workers)
    lookups: dict = {}
    metrics = evaluate_encoders(encoders, table, params, figures_dir=figures_dir, embeddings=embeddings,
                                lookups=lookups)
    frame = pair_cosine_table(encoders[name], lookups[name], table, params)
    from .protocol import TASKS

    intervals = bootstrap_intervals(frame, [*TASKS, "STSBenchmark-dev"], seed=params.seed)
    from ...provenance.environment import environment_fingerprint

    metrics = {"model": name, "kind": kind, "backbone": metrics_backbone(params, kind, extra_metrics),
               "profile": params.profile,
               "status": "evaluated", **precision_record(encoders[name]), **(extra_metrics or {}), **metrics,
               "ci95": confidence_intervals(frame, TASKS, intervals=intervals), "bootstrap_seed": params.seed,
               "fingerprint": environment_fingerprint(encoders[name].device, encoders[name].precision,
                                                      threads=encoders[name].batch_threads,
                                                      data_files=[Path("data/sts/sts.parquet")])}
    timings = pop_timings(metrics)
    run_params = {"model": model, "pooling": pooling or encoders[name].pooling, "kind": kind,
                  "evaluate": params.evaluate.model_dump(), **(extra_params or {})}
    skip = ("per_task", "extra_rows", "diagnostics", "whitening", "flow", "word_vectors", "method", "ci95",
            "fingerprint", "bootstrap_seed")
    out_path = Path(out_path)
    if cosines_dir is None:
        cosines_dir = (out_path.parent.parent / "cosines" if out_path.parent.name == "metrics"
                       else out_path.parent / "cosines")
    write_cosines(Path(cosines_dir) / f"{name}.parquet", frame)
    write_bootstrap(bootstrap_path(Path(cosines_dir) / f"{name}.parquet"), intervals, params.seed)
    from . import mteb_results   # MTEB's result JSON of the STS tasks, as `sentlab evaluate --format mteb`

    mteb_results.write_stage(name, table, lookups[name], timings.get("encode_seconds"),
                             normalize=getattr(encoders[name], "post", None) is None and mteb_results.normalizes(model),
                             out=out_path.parent.parent / "mteb" if out_path.parent.name == "metrics"
                             else out_path.parent / "mteb", max_pairs=params.evaluate.max_pairs)
    write_json(out_path, metrics)
    # the outputs first: tracking is a side channel that may fail or wait (sentlab.tracking.degrade)
    from ...provenance.environment import fingerprint_tags

    with tracking.run(f"eval/{name}", params=run_params, tags={"sentlab.stage": "evaluate", "sentlab.model": name,
                                                                "sentlab.profile": params.profile,
                                                                **fingerprint_tags(metrics["fingerprint"])}) as ml:
        tracking.log_metrics({k: v for k, v in metrics.items() if k not in skip})
        tracking.log_metrics(timings)
        if "diagnostics" in metrics:
            tracking.log_metrics(flat_diagnostics(metrics["diagnostics"]))
            fig = metrics["diagnostics"]["density"].get("figure")
            if fig:
                ml.log_artifact(fig, artifact_path="figures")
        for row, res in (metrics.get("extra_rows") or {}).items():
            tracking.log_metrics({f"{row}.{k}": v for k, v in res.items() if k not in skip})
            if "diagnostics" in res:
                tracking.log_metrics({f"{row}.{k}": v for k, v in flat_diagnostics(res["diagnostics"]).items()})
        info = read_model_info(Path(model)) if kind == "trained" else None
        train_run = tracking.find_training_run(name, info.get("run_key")) if info and info.get("run_key") else None
        if train_run is not None:  # the test results beside the dev curve of the run that trained the model
            tracking.log_to_run(train_run, {k: v for k, v in metrics.items() if k not in skip})
    return metrics


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
