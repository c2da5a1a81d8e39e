"""The projection of the full run from the slice's measures (linear estimates, on this machine).

Training: the full run's steps (the real profile's corpus size, batch, epochs and max_steps, through
:func:`sentlab.train.loop.plan_steps`) x seconds per step scaled by the batch ratio, plus its dev
evaluations; memory = the peak plus its in-step part (peak minus the resident size after the first step)
scaled by the batch ratio. Evaluation: its encoding time scaled by the number of pairs. prepare/annotate:
scaled by the corpus size (annotate's memory by the shard size: it holds one shard at a time).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from ..errors import SentlabError
from .table import Row

# Upstream sizes of the corpora a full run trains on, for the projection when the data here is a sample:
# SimCSE's wiki1m_for_simcse.txt has 10^6 lines, its nli_for_simcse.csv 275,601 triples (SimCSE §4.1, 5.1).
UPSTREAM_ROWS = {"train": 1_000_000, "nli": 275_601}


def _sts_counts(scratch: Path) -> dict:
    import pandas as pd

    f = scratch / "data" / "sts" / "sts.parquet"
    if not f.is_file():
        return {}
    t = pd.read_parquet(f, columns=["task", "split"])
    return {f"{a}/{b}": int(n) for (a, b), n in t.groupby(["task", "split"]).size().items()}


def model_params(real, spec):
    """The method Params the model ``spec`` (a :class:`~sentlab.config.models.ModelSpec`) trains with in the real
    profile."""
    from ..methods.blocks import method_params

    return method_params(real, spec.method, spec.overrides(real))


def full_corpus(mparams, real, corpus: Optional[dict], slice_plan: dict) -> int:
    """Sentences the full run trains on: its corpus (the ``corpus`` phase's name) at full size, as the method
    takes from it (:meth:`~sentlab.methods.base.MethodParams.train_sentences`)."""
    name = (corpus or {}).get("name", "train")
    if name == "nli":
        n = UPSTREAM_ROWS["nli"]
    elif name == "train":
        n = min(real.prepare.size, UPSTREAM_ROWS["train"])
    else:  # a corpus prepare writes whole (e.g. the distinct STS sentences): as in the slice
        n = slice_plan["sentences"]
    return mparams.train_sentences(n)


def _train(row: Row, p: dict, real, sl: dict, spec, dev_full: int) -> None:
    from ..train.loop import plan_steps
    from ..train.run import resolve_train

    slice_plan = p["plans"][-1]
    try:  # collect, never stop: a row without a projection says why
        if spec is None:
            raise SentlabError(f"{row.stage} is not a model of the profile's stage list")
        mparams = model_params(real, spec)
        cfg = resolve_train(real, mparams)
        _, total = plan_steps(full_corpus(mparams, real, (p.get("corpora") or [None])[-1], slice_plan), cfg)
    except SentlabError as e:
        row.note = (row.note + "; " if row.note else "") + f"projection: {e}"
        return
    batch_ratio = (cfg.batch_size * cfg.grad_accum) / (slice_plan["batch_size"] * slice_plan["grad_accum"])
    evals = total // cfg.eval_every + 1
    # one dev evaluation in the slice (eval_every = max_steps): its seconds per sentence x the full dev set
    dev_s = p["enc_seconds"] * (dev_full / max(1, sl["dev_max_pairs"])) * evals
    row.full_steps, row.projected_s = total, total * p["sec_per_step"] * batch_ratio + dev_s
    peak, steady = p.get("peak_rss_mb"), p.get("rss_after_first_step_mb")
    if peak and steady:
        row.projected_peak_mb = peak + max(0.0, peak - steady) * (batch_ratio - 1)
    if p.get("cuda_peak_mb"):
        row.projected_cuda_mb = p["cuda_peak_mb"] * batch_ratio  # an upper bound: weights do not scale


def project(rows: list[Row], real, sl: dict, scratch: Path, models: Optional[dict] = None) -> None:
    """Fill each row's projection for the full run of the real profile (``real``: its Params; ``models``: its
    stage list's models, ``sentlab.stages.stage_list.models_for(real)``)."""
    if models is None:
        from ..stages.stage_list import models_for

        models = models_for(real)
    counts = _sts_counts(scratch)
    test = {k: v for k, v in counts.items() if not k.endswith("/dev") and not k.endswith("/train")}
    dev_full = real.train.dev_max_pairs or counts.get("STSBenchmark/dev", 0)
    mp = real.evaluate.max_pairs
    full_pairs = sum(min(v, mp) if mp else v for v in test.values())

    def eval_ratio(pairs: int) -> float:  # the full run's evaluated pairs over the slice's (at the row's max_pairs)
        return full_pairs / max(1, sum(min(v, pairs) for v in test.values())) if test else 1.0
    size_ratio = min(real.prepare.size, UPSTREAM_ROWS["train"]) / max(1, min(sl["size"], real.prepare.size))
    for row in rows:
        p = row.probe
        if row.status != "ok" or not p:
            continue
        if p.get("plans") and p.get("sec_per_step"):
            _train(row, p, real, sl, models.get(row.stage.split("@", 1)[-1]), dev_full)
        elif p.get("enc_sentences") and row.stage.startswith("evaluate"):
            fixed = max(0.0, row.seconds - p["enc_seconds"])
            row.projected_s = fixed + p["enc_seconds"] * eval_ratio(row.eval_pairs or sl["max_pairs"])
            row.projected_peak_mb = p.get("peak_rss_mb")
        elif row.stage.startswith("glue@"):   # fine-tunings the probe does not time step by step
            why = "projection: none for GLUE (the slice's steps on one seed; the full run: every epoch, every seed)"
            row.note = row.note if why in row.note else (row.note + "; " if row.note else "") + why
        elif row.stage in ("prepare", "annotate"):
            row.projected_s = row.seconds * size_ratio
            mem_ratio = size_ratio
            if row.stage == "annotate":  # annotation holds one shard at a time: memory follows the shard size
                shard = real.annotate.shard_size
                mem_ratio = min(real.prepare.size, shard) / max(1, min(sl["size"], real.prepare.size, shard))
            start = p.get("start_rss_mb") or 0.0
            if p.get("peak_rss_mb"):
                row.projected_peak_mb = start + (p["peak_rss_mb"] - start) * mem_ratio
        else:
            row.projected_s, row.projected_peak_mb = row.seconds, p.get("peak_rss_mb")
