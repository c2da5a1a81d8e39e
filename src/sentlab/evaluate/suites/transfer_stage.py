"""The stage ``transfer@<name>``: SentEval's transfer tasks on one model's frozen embeddings.

``<name>`` is a model of the stage list (``models/<name>``, evaluated with its own pooling, as the STS stage
does) or a backbone pooling ``base-<pooling>`` (L2P-CSR Table 2's "CLS" and "Mean" rows). The embeddings go
through the embedding cache (a re-run for a classifier change encodes nothing again); the protocol is
:mod:`sentlab.evaluate.suites.transfer` (SimCSE's SentEval settings), every split cut to a seeded sample of
``transfer.max_examples`` when the profile sets one (the quick profile; the JSON and the report say so).
Output: ``reports/metrics/transfer/<name>.json`` (accuracy per task, MRPC's F1, the average, the per-task
details), and the same numbers in MLflow (a run ``transfer/<name>``, and as ``transfer.*`` beside the dev curve
of the run that trained the model).
"""

from __future__ import annotations

import numpy as np


def embedder(enc, batch_size: int):
    """``embed(sentences) -> [n, D]`` of ``enc`` (each distinct sentence encoded once; through the embedding cache
    where one is active): what the transfer, retrieval and reranking evaluators take."""
    from ..sts.protocol import embed_unique

    def embed(sentences):
        lookup = embed_unique(enc, sentences, batch_size=batch_size)
        return np.stack([lookup[s] for s in sentences])

    return embed


def transfer_metrics(enc, tasks, batch_size: int, max_examples=None, progress: bool = True) -> dict:
    """``{MR: acc, ..., MRPC_F1, TransferAvg, transfer: {task: details}}`` of ``enc`` (a
    :class:`~sentlab.nn.encoder.SentenceEncoder`), encoded through the embedding cache."""
    from ..sts.cache import embedding_cache
    from .transfer import evaluate_transfer

    with embedding_cache():
        res = evaluate_transfer(embedder(enc, batch_size), tasks=tasks, max_examples=max_examples, progress=progress)
    flat = {t: v["acc"] for t, v in res.items() if t != "Avg"}
    if "MRPC" in res:
        flat["MRPC_F1"] = res["MRPC"]["f1"]
    return {**flat, "TransferAvg": res["Avg"], "transfer": {t: v for t, v in res.items() if t != "Avg"}}


def run_transfer_stage(name: str) -> dict:
    """``transfer@<name>`` in the repository's working directory; returns the metrics written."""
    from ...config.stage_params import stage_params
    from .suite_stage import frozen_encoder, record, stage_of, use_training_threads

    params = stage_params(stage_of("transfer", name))
    use_training_threads(params)
    tp = params.transfer
    enc, model, info, head = frozen_encoder(params, name, "transfer",
                                            "SentEval transfer, SimCSE's settings (kfold 10, logistic regression, "
                                            "Adam, batch 64, tenacity 5, epoch size 4)")
    metrics = {**head, "max_examples": tp.max_examples,
               **transfer_metrics(enc, list(tp.tasks), tp.batch_size, tp.max_examples)}
    record("transfer", name, metrics, {**tp.model_dump(), "pooling": enc.pooling}, info, model)
    return metrics
