"""The fitted baselines' encoders: the backbone with BERT-whitening's transform or BERT-flow's flow as its ``post``,
fitted on the STS evaluation pool, NLI sentences or the training corpus (``evaluate.whitening`` /
``evaluate.bert_flow``), for :mod:`.stage` to evaluate with :func:`sentlab.evaluate.sts.runner.evaluate_sts`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

import numpy as np

from ...nn.encoder import SentenceEncoder
from ..sts.runner import build_encoders

log = logging.getLogger(__name__)


def whitening_encoder(params, table, name: str = "base-whitening") -> tuple[SentenceEncoder, Optional[dict], dict]:
    """The BERT-whitening baseline (docs/methods.md#baselines, :mod:`sentlab.evaluate.baselines.whitening`).

    Returns ``(encoder, embeddings, info)``: the backbone with ``evaluate.whitening.pooling``
    and the fitted transform as its ``post``; for ``fit_on: sts_pool`` also the whitened
    lookup of the evaluation pool (the raw pool embeddings were needed for the fit, so the
    evaluation reuses them instead of encoding again); ``info`` says what it was fitted on.
    """
    import dataclasses

    from ..sts.protocol import TASKS, embed_unique, pool_sentences, select_splits
    from .whitening import Whitening, corpus_sample, whiten_lookup

    ep = params.evaluate
    wp = ep.whitening
    raw = build_encoders(params.model.backbone, pooling=wp.pooling, precision=ep.precision, max_length=ep.max_length,
                         name=name, device=ep.device, workers=ep.workers)[name]
    embeddings = None
    if wp.fit_on == "sts_pool":
        pool = pool_sentences(select_splits(table, [*TASKS, "STSBenchmark-dev"], ep.max_pairs))
        raw_lookup = embed_unique(raw, pool, batch_size=ep.batch_size)
        wh = Whitening.fit(np.stack([raw_lookup[s] for s in pool]), dim=wp.dim)
        source = "sts_pool: the distinct sentences of the 7 test sets + STS-B dev"
    elif wp.fit_on == "nli":
        sample = nli_fit_sentences(wp.sample_size, params.seed, "evaluate.whitening.fit_on")
        wh = Whitening.fit(fit_embeddings(raw, sample, ep.batch_size), dim=wp.dim)
        source = nli_source(wp.sample_size, len(sample), params.seed)
    else:
        sample = corpus_sample(Path("data/corpus/train.parquet"), wp.sample_size, params.seed)
        wh = Whitening.fit(fit_embeddings(raw, sample, ep.batch_size), dim=wp.dim)
        source = f"corpus: seeded sample of data/corpus/train.parquet (seed {params.seed})"
    enc = dataclasses.replace(raw, post=wh)
    if wp.fit_on == "sts_pool":
        embeddings = whiten_lookup(raw_lookup, wh)
    info = {"fit_on": wp.fit_on, "fit_source": source, "pooling": wp.pooling, "dim": wp.dim, **wh.info()}
    log.info("whitening fitted on %s: %d sentences, %d -> %d dims", wp.fit_on, wh.fit_size, wh.W.shape[0], wh.out_dim)
    return enc, embeddings, info


NLI_CORPUS = Path("data/corpus/nli.parquet")


def fit_embeddings(raw: SentenceEncoder, sentences: list[str], batch_size: int) -> np.ndarray:
    """``raw.encode(sentences)`` through the active embedding cache (bit-identical): whitening and BERT-flow fitted
    on the same NLI or corpus sentences with the same pooling share one forward pass (``fit_on: nli`` in the paper
    profile); without a cache (``SENTLAB_EMBEDDING_CACHE=off``), each encodes them."""
    from ..sts.cache import active_cache

    cache = active_cache()
    if cache is None:
        return raw.encode(sentences, batch_size=batch_size)
    return cache.embed(raw, sentences, batch_size=batch_size)


def nli_fit_sentences(sample_size: Optional[int], seed: int, key: str) -> list[str]:
    """The NLI fit set of whitening / BERT-flow (``fit_on: nli``): the distinct sentences of
    ``data/corpus/nli.parquet`` (:func:`sentlab.data.nli.nli_sentences`), or a seeded sample of ``sample_size``."""
    from ...data.nli import nli_sentences
    from .flow import fit_sentences

    return fit_sentences(nli_sentences(NLI_CORPUS, key), sample_size, seed)


def nli_source(sample_size: Optional[int], n: int, seed: int) -> str:
    label = nli_label(NLI_CORPUS)
    what = "all" if sample_size is None or n < sample_size else f"a seeded sample (seed {seed}) of"
    return f"nli: {what} the distinct sentences of {NLI_CORPUS} ({label}), {n}"


def nli_label(path: Path) -> str:
    import pyarrow.parquet as pq

    meta = pq.read_schema(path).metadata or {}
    return meta.get(b"sentlab.nli_label", b"NLI").decode()


def flow_encoder(params, table, name: str = "base-bert_flow",
                 progress: bool = True) -> tuple[SentenceEncoder, dict, dict]:
    """The BERT-flow baseline (docs/methods.md#bert-flow, :mod:`sentlab.evaluate.baselines.flow`).

    Returns ``(encoder, embeddings, info)``: the backbone with ``evaluate.bert_flow.pooling`` and the fitted flow as its
    ``post``; the flowed lookup of the evaluation pool (the raw pool embeddings were needed for the fit, so the
    evaluation reuses them); ``info`` says what it was fitted on and how the likelihood moved. The fit runs on the
    CPU in fp32 (seeded: the same flow on every machine)."""
    import dataclasses
    import time

    from .flow import Flow, flow_lookup
    from ..sts.protocol import TASKS, embed_unique, pool_sentences, select_splits

    ep, fp = params.evaluate, params.evaluate.bert_flow
    raw = build_encoders(params.model.backbone, pooling=fp.pooling, precision=ep.precision, max_length=ep.max_length,
                         name=name, device=ep.device, workers=ep.workers)[name]
    pool = pool_sentences(select_splits(table, [*TASKS, "STSBenchmark-dev"], ep.max_pairs))
    raw_lookup = embed_unique(raw, pool, batch_size=ep.batch_size)
    if fp.fit_on == "nli":   # SimCSE App. C's "NLI" fit: the flow never sees the evaluation sentences
        sample = nli_fit_sentences(fp.sample_size, params.seed, "evaluate.bert_flow.fit_on")
        fit_x, source = fit_embeddings(raw, sample, ep.batch_size), nli_source(fp.sample_size, len(sample),
                                                                                 params.seed)
    else:
        fit_x = np.stack([raw_lookup[s] for s in pool])
        source = "sts_pool: the distinct sentences of the 7 test sets + STS-B dev"
    t0 = time.perf_counter()
    flow = Flow.fit(fit_x, fp, seed=params.seed, progress=progress)
    fit_s = time.perf_counter() - t0
    info = {"fit_on": fp.fit_on, "fit_source": source, "bias_correction": fp.bias_correction,
            "pooling": fp.pooling, "seed": params.seed, **flow.info()}   # no wall time: the JSON stays byte-stable
    log.info("flow fitted on %d sentences in %d steps (%.1f s): NLL/dim %.3f -> %.3f", flow.fit_size, flow.steps,
             fit_s, flow.nll_start, flow.nll_end)
    return dataclasses.replace(raw, post=flow), flow_lookup(raw_lookup, flow), info
