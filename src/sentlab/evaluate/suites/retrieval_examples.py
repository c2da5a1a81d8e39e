"""PaSeR Table 6's retrieval examples: for a few QQP queries, the top-``k`` corpus questions of a model's ranking,
each with its cosine and whether it is a labelled duplicate of the query.

:func:`~.retrieval.retrieval` adds them to its result under ``examples`` (:class:`ExampleSettings`, params.yaml
``retrieval.examples``; None or ``show: false``: none), so
``sentlab evaluate --tasks retrieval --json F`` and the retrieval stage write them in
``retrieval.QQP.examples`` of the metrics JSON; the report's PaSeR Table 6 page
(:mod:`sentlab.report.retrieval_examples`) shows them per query, model beside model.

Which queries (recorded as each query's ``source``):

* ``paper``: PaSeR prints its two Table 6 queries (:data:`PASER_TABLE6`). Each is
  used when the QQP retrieval set holds it as a query (a ``q1`` with a labelled duplicate in the corpus), matched
  ignoring case and runs of whitespace; one that it does not hold is listed under ``paper_missing``.
* ``seeded``: then ``n_seeded`` more queries drawn with ``seed`` (numpy ``default_rng``) from the other queries,
  sorted first so that the draw does not depend on the file's row order: the same file and seed give the same
  queries for every model, so their hits line up side by side.
* ``given``: ``ExampleSettings(queries=[...])`` names the queries instead (each must be a query of the set).

The ranking is the metric's: cosine over the distinct corpus texts, ties by corpus order, a corpus text identical to
the query not ranked when ``exclude_identical``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ...errors import SentlabError
from ...config.sections import RetrievalExamplesParams as ExampleSettings   # k, paper, n_seeded, seed, queries, show


# PaSeR Table 6 (§5.1): QQP retrieval examples, as printed: for two queries, the top 3 questions each model
# retrieves, in rank order (the paper prints no scores and marks no duplicates). report.retrieval_examples shows them
# beside the reproduced hits; paper_queries() looks the queries up in QQP.
PASER_TABLE6_MODELS = ("SimCSE-BERTbase", "PaSeR-BERTbase")
PASER_TABLE6 = (
    {"query": "What can one do to relieve severe chronic pain?",
     "hits": {"SimCSE-BERTbase": ("Is it possible to come to terms with a life of chronic pain?",
                                  "What is the best way to avoid pain?",
                                  "How would you/do you cope with chronic pain?"),
              "PaSeR-BERTbase": ("What has worked for you to help relieve chronic pain?",
                                 "How can I get rid of chronic and acute back pain?",
                                 "What is the best way to ease period pain?")}},
    {"query": "Is there a biological reason that people cry when they are emotional?",
     "hits": {"SimCSE-BERTbase": ("Why do people cry when they feel happy?",
                                  "Why do some people cry more than others?",
                                  "Why do some people like crying so much?"),
              "PaSeR-BERTbase": ("Why do some people cry when they get angry?",
                                 "Why do people cry when they feel happy?",
                                 "Why do some people like crying so much?")}},
)


def paper_queries() -> list[str]:
    return [e["query"] for e in PASER_TABLE6]


def query_key(text: str) -> str:
    return " ".join(text.split()).casefold()


def select_queries(qs: Sequence[str], cfg: ExampleSettings) -> tuple[list[tuple[str, str]], list[str]]:
    """(``[(query, source)]``, the paper's queries not among ``qs``): the queries to show, from ``qs`` (the
    retrieval set's queries, those with a relevant document)."""
    if cfg.queries is not None:
        known = set(qs)
        bad = [q for q in cfg.queries if q not in known]
        if bad:
            raise SentlabError(f"example query {bad[0]!r} is no QQP query with a labelled duplicate: name a q1 of "
                               f"quora_duplicate_questions.tsv that has one.")
        return [(q, "given") for q in dict.fromkeys(cfg.queries)], []
    by_key = {}
    for q in qs:
        by_key.setdefault(query_key(q), q)
    chosen: list[tuple[str, str]] = []
    missing = []
    for p in paper_queries() if cfg.paper else ():
        hit = by_key.get(query_key(p))
        if hit is None:
            missing.append(p)
        elif hit not in {q for q, _ in chosen}:
            chosen.append((hit, "paper"))
    taken = {q for q, _ in chosen}
    rest = sorted(q for q in set(qs) if q not in taken)
    n = min(cfg.n_seeded, len(rest))
    if n:
        idx = np.random.default_rng(cfg.seed).choice(len(rest), size=n, replace=False)
        chosen += [(rest[i], "seeded") for i in sorted(idx)]
    return chosen, missing


def top_hits(scores: np.ndarray, k: int) -> np.ndarray:
    """The indices of the ``k`` best ``scores`` (one row), best first, ties by index (:func:`~.retrieval.retrieval`'s
    order); ``-inf`` entries (excluded texts) never."""
    order = np.argsort(-scores, kind="stable")            # a full sort: a tie at rank k keeps corpus order too
    return order[:max(0, min(k, int(np.isfinite(scores).sum())))]


def examples(queries: dict[str, set[str]], corpus: list[str], emb: dict[str, np.ndarray], C: np.ndarray,
             cfg: ExampleSettings, exclude_identical: bool = True) -> dict:
    """``{k, n_seeded, seed, paper_missing, queries: [{query, source, relevant, hits: [{rank, text, score,
    duplicate}]}]}``: ``corpus`` the distinct corpus texts, ``C`` their unit embeddings (rows), ``emb`` every
    query's unit embedding. The queries are chosen among the metric's: those with a relevant corpus text other
    than themselves."""
    pos = {t: i for i, t in enumerate(corpus)}

    def relevant(q: str) -> set[str]:
        return {t for t in queries[q] if t in pos and not (exclude_identical and t == q)}

    chosen, missing = select_queries([q for q in queries if relevant(q)], cfg)   # the metric's queries
    out = []
    for q, source in chosen:
        s = C @ emb[q]
        if exclude_identical and q in pos:
            s[pos[q]] = -np.inf
        rel = relevant(q)
        hits = [{"rank": r + 1, "text": corpus[i], "score": round(float(s[i]), 4), "duplicate": corpus[i] in rel}
                for r, i in enumerate(top_hits(s, cfg.k))]
        out.append({"query": q, "source": source, "relevant": len(rel), "hits": hits})
    return {"k": cfg.k, "n_seeded": cfg.n_seeded, "seed": cfg.seed, "paper_missing": missing, "queries": out}
