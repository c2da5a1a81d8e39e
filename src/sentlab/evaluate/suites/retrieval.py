"""Semantic retrieval (QQP) and reranking (AskUbuntu) of PaSeR Table 3, on frozen sentence embeddings.

Both score a candidate by the cosine of its embedding with the query's and rank by it (ties: corpus order).

* **AskUbuntu reranking** (Lei et al. 2016's test set, as TSDAE evaluates it): each query comes with its 20
  candidates and the ids of the similar ones among them; questions are their titles. Per query the average
  precision of the ranked 20 and the reciprocal rank of the first similar one within the top 10; MAP and MRR@10
  are their means × 100 over the queries with at least one similar candidate.
* **QQP retrieval** as PaSeR builds it (§4.1): every ``q2`` of the Quora release is the corpus (distinct texts),
  every ``q1`` with at least one duplicate ``q2`` a query whose relevant documents are its duplicates. Where the
  paper is silent, sentlab decides (arguments, recorded in the result): average precision over the top
  ``map_at`` (100, sentence-transformers' ``InformationRetrievalEvaluator``), divided by ``min(relevant,
  map_at)``; a corpus text identical to the query is not ranked (``exclude_identical``: the query would find
  itself). The result's ``examples`` are PaSeR Table 6's: the top hits of a few queries, the paper's own where QQP
  holds them, then seeded ones (:mod:`.retrieval_examples`).

The data are resolved like every source (:mod:`sentlab.assets.resolve`): the mirror, the cache, then the upstream
files (``qqp``: Quora's ``quora_duplicate_questions.tsv``; ``askubuntu_text`` / ``askubuntu_test``: the
``taolei87/askubuntu`` release). Neither is in this project's offline mirror: their table rows say which
command fetches them.
"""

from __future__ import annotations

import csv
import gzip
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np

from ...assets import resolve as assets
from ...errors import SentlabError
from .retrieval_examples import ExampleSettings, examples as retrieval_examples

Embed = Callable[[list[str]], np.ndarray]

for _name, _path, _url, _desc in (
        ("qqp", "QQP/quora_duplicate_questions.tsv",
         "http://qim.fs.quoracdn.net/quora_duplicate_questions.tsv", "Quora Question Pairs (retrieval)"),
        ("askubuntu_text", "askubuntu/text_tokenized.txt.gz",
         "https://github.com/taolei87/askubuntu/raw/master/text_tokenized.txt.gz", "AskUbuntu questions"),
        ("askubuntu_test", "askubuntu/test.txt",
         "https://github.com/taolei87/askubuntu/raw/master/test.txt", "AskUbuntu test queries (reranking)")):
    assets.ASSETS.setdefault(_name, assets.DataAsset(_name, (_path,), _url, description=_desc))


@dataclass(frozen=True)
class RerankQuery:
    query: str
    candidates: tuple[str, ...]
    positive: frozenset[int]          # indices into ``candidates``


def average_precision(hits: np.ndarray, n_relevant: int) -> float:
    """AP of one ranking: ``hits`` the relevance (0/1) of the ranked items, ``n_relevant`` the denominator."""
    if n_relevant == 0:
        return 0.0
    ranks = np.flatnonzero(hits) + 1
    return float(np.sum(np.arange(1, len(ranks) + 1) / ranks) / n_relevant)


def reciprocal_rank(hits: np.ndarray, at: int) -> float:
    first = np.flatnonzero(hits[:at])
    return 1.0 / (first[0] + 1) if len(first) else 0.0


def _normalise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def _lookup(embed: Embed, texts: Sequence[str]) -> dict[str, np.ndarray]:
    uniq = sorted(set(texts))
    return dict(zip(uniq, _normalise(embed(uniq))))


def reranking(queries: Sequence[RerankQuery], embed: Embed, mrr_at: int = 10) -> dict:
    """``{MAP, MRR@10, queries}`` (× 100) of reranking each query's candidates by cosine."""
    queries = [q for q in queries if q.positive]
    if not queries:
        raise SentlabError("No reranking query has a positive candidate: the test file is empty or malformed.")
    emb = _lookup(embed, [t for q in queries for t in (q.query, *q.candidates)])
    aps, rrs = [], []
    for q in queries:
        scores = np.stack([emb[c] for c in q.candidates]) @ emb[q.query]
        order = np.argsort(-scores, kind="stable")
        hits = np.array([i in q.positive for i in order], dtype=np.int64)
        aps.append(average_precision(hits, len(q.positive)))
        rrs.append(reciprocal_rank(hits, mrr_at))
    return {"MAP": round(100 * float(np.mean(aps)), 2), f"MRR@{mrr_at}": round(100 * float(np.mean(rrs)), 2),
            "queries": len(queries)}


def retrieval(queries: dict[str, set[str]], corpus: Sequence[str], embed: Embed, map_at: int = 100,
              mrr_at: int = 10, exclude_identical: bool = True, chunk: int = 256,
              examples: Optional[ExampleSettings] = ExampleSettings()) -> dict:
    """``{MAP, MRR@10, queries, corpus, examples}`` (× 100): each query (text -> its relevant corpus texts) ranks
    the whole corpus by cosine; top-``max(map_at, mrr_at)`` kept per query, in chunks of ``chunk`` queries.
    ``examples``: PaSeR Table 6's top hits of a few queries (:func:`.retrieval_examples.examples`; None or
    ``show: false``: none)."""
    corpus = list(dict.fromkeys(corpus))
    pos = {t: i for i, t in enumerate(corpus)}
    qs = [q for q, rel in queries.items() if rel]
    emb = _lookup(embed, [*qs, *corpus])
    C = np.stack([emb[t] for t in corpus])
    ex = (retrieval_examples(queries, corpus, emb, C, examples, exclude_identical)
          if examples is not None and examples.show else None)
    k = min(max(map_at, mrr_at) + 1, len(corpus))
    aps, rrs = [], []
    for s in range(0, len(qs), chunk):
        block = qs[s:s + chunk]
        S = np.stack([emb[q] for q in block]) @ C.T
        if exclude_identical:
            for r, q in enumerate(block):
                if q in pos:
                    S[r, pos[q]] = -np.inf
        top = np.argpartition(-S, k - 1, axis=1)[:, :k]
        for r, q in enumerate(block):
            idx = top[r][np.lexsort((top[r], -S[r, top[r]]))]    # by score, ties by corpus order
            rel = {pos[t] for t in queries[q] if t in pos and not (exclude_identical and t == q)}
            if not rel:
                continue
            hits = np.array([i in rel for i in idx], dtype=np.int64)
            aps.append(average_precision(hits[:map_at], min(len(rel), map_at)))
            rrs.append(reciprocal_rank(hits, mrr_at))
    out = {"MAP": round(100 * float(np.mean(aps)), 2), f"MRR@{mrr_at}": round(100 * float(np.mean(rrs)), 2),
           "queries": len(aps), "corpus": len(corpus), "map_at": map_at, "exclude_identical": exclude_identical}
    if ex is not None:
        out["examples"] = ex
    return out


def load_qqp(path: Optional[Path] = None) -> tuple[dict[str, set[str]], list[str]]:
    """(query -> duplicate q2 texts, corpus of every q2) from Quora's TSV (``id qid1 qid2 question1 question2
    is_duplicate``, a header row)."""
    path = Path(path) if path else assets.resolve_data("qqp").path
    queries: dict[str, set[str]] = {}
    corpus: list[str] = []
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_MINIMAL)
        need = {"question1", "question2", "is_duplicate"}
        if not need <= set(reader.fieldnames or ()):
            raise SentlabError(f"{path} has no {', '.join(sorted(need))} header columns: it is not Quora's "
                               f"quora_duplicate_questions.tsv. Fetch it again: `{assets.data_fetch_command('qqp')}`.")
        for row in reader:
            q1, q2 = (row["question1"] or "").strip(), (row["question2"] or "").strip()
            if not q1 or not q2:
                continue
            corpus.append(q2)
            if row["is_duplicate"] == "1":
                queries.setdefault(q1, set()).add(q2)
    return queries, corpus


def load_askubuntu(text_path: Optional[Path] = None, test_path: Optional[Path] = None) -> list[RerankQuery]:
    """The test queries of ``taolei87/askubuntu`` (``qid TAB similar ids TAB 20 candidate ids TAB bm25 scores``),
    questions by their titles (``text_tokenized.txt.gz``: ``id TAB title TAB body``)."""
    text_path = Path(text_path) if text_path else assets.resolve_data("askubuntu_text").path
    test_path = Path(test_path) if test_path else assets.resolve_data("askubuntu_test").path
    with gzip.open(text_path, "rb") as f:
        titles = {}
        for line in io.TextIOWrapper(f, encoding="utf-8"):
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 2:
                titles[parts[0]] = parts[1].strip()
    out = []
    for n, line in enumerate(test_path.read_text(encoding="utf-8").splitlines(), 1):
        parts = line.split("\t")
        if len(parts) < 3:
            raise SentlabError(f"{test_path} line {n} is not `qid TAB similar ids TAB candidate ids TAB scores`: "
                               f"fetch it again (`{assets.data_fetch_command('askubuntu_test')}`).")
        qid, sim, cands = parts[0], set(parts[1].split()), parts[2].split()
        missing = [i for i in [qid, *cands] if i not in titles]
        if missing:
            raise SentlabError(f"{test_path} line {n} names question {missing[0]}, which {text_path} does not hold: "
                               f"the two files are from different releases.")
        out.append(RerankQuery(titles[qid], tuple(titles[c] for c in cands),
                               frozenset(i for i, c in enumerate(cands) if c in sim)))
    return out
