"""The stage ``retrieval@<name>``: PaSeR Table 3's QQP retrieval and AskUbuntu reranking of one model's
frozen embeddings (:mod:`sentlab.evaluate.suites.retrieval`), encoded through the embedding cache.

``<name>`` is a model of the stage list (``models/<name>``, its own pooling) or a backbone pooling
``base-<pooling>``. The data of every task of ``retrieval.tasks`` is resolved before anything is encoded: a task
whose data is not here fails the stage with its fetch command (neither is in this project's offline mirror).
Output: ``reports/metrics/retrieval/<name>.json`` (MAP and MRR@10 × 100 per task, the details under
``retrieval``), and the same numbers in MLflow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .retrieval_examples import ExampleSettings


def retrieval_metrics(enc, tasks, data: dict, batch_size: int, map_at: int = 100,
                      exclude_identical: bool = True, examples: ExampleSettings | None = None) -> dict:
    """``{QQP_MAP, QQP_MRR@10, AskUbuntu_MAP, AskUbuntu_MRR@10, retrieval: {task: details}}`` of ``enc`` on the
    loaded ``data`` (task -> what :func:`~sentlab.evaluate.suites.retrieval.load_qqp` / ``load_askubuntu`` return);
    ``examples`` (params.yaml ``retrieval.examples``; None: none) are QQP's Table 6 examples."""
    from ..sts.cache import embedding_cache
    from .retrieval import reranking, retrieval
    from .transfer_stage import embedder

    embed = embedder(enc, batch_size)
    out: dict = {"retrieval": {}}
    with embedding_cache():
        for task in tasks:
            if task == "QQP":
                r = retrieval(*data[task], embed, map_at=map_at, exclude_identical=exclude_identical,
                              examples=examples)
            else:
                r = reranking(data[task], embed)
            out[f"{task}_MAP"], out[f"{task}_MRR@10"] = r["MAP"], r["MRR@10"]
            out["retrieval"][task] = r
    return out


def run_retrieval_stage(name: str) -> dict:
    """``retrieval@<name>`` in the repository's working directory; returns the metrics written."""
    from ...config.stage_params import stage_params
    from .retrieval import load_askubuntu, load_qqp
    from .suite_stage import frozen_encoder, missing_data, record, stage_of, suite_model

    params = stage_params(stage_of("retrieval", name))
    rp = params.retrieval
    suite_model(params, name, "retrieval")   # a model that is not trained fails before the data are read
    tasks = list(rp.tasks)
    data = missing_data({t: (load_qqp if t == "QQP" else load_askubuntu) for t in tasks})
    enc, model, info, head = frozen_encoder(params, name, "retrieval",
                                            "cosine ranking: QQP retrieval (every q2 the corpus, MAP@map_at, "
                                            "MRR@10), AskUbuntu reranking (20 candidates a query, MAP, MRR@10)")
    metrics = {**head, "map_at": rp.map_at, "exclude_identical": rp.exclude_identical,
               **retrieval_metrics(enc, tasks, data, rp.batch_size, rp.map_at, rp.exclude_identical, rp.examples)}
    record("retrieval", name, metrics, {**rp.model_dump(), "pooling": enc.pooling}, info, model)
    return metrics
