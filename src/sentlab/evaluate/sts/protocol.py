"""The STS evaluation protocol of docs/evaluation.md (SimCSE's), with each distinct sentence encoded once.

* similarity: cosine; score: Spearman × 100;
* STS12–16: the "all" setting (one Spearman over the concatenation of every
  subset's scored pairs); SentEval's per-subset ``mean`` and ``wmean`` are
  reported beside it, labelled;
* STS-B and SICK-R: their test splits; STS-B dev for model selection;
* Avg.: the plain mean of the seven.

Speed: the sentences of all tasks are pooled, deduplicated, tokenised once, sorted by
token count and encoded once in token-budgeted batches (``SentenceEncoder.encode``);
per-pair cosines are then gathered from that one matrix. Spearman comes from :func:`scipy.stats.spearmanr`.
"""

from __future__ import annotations

import time
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from ...data.sts import TASKS, eval_split

SAMPLE_SEED = 0  # the seed of every pair sample (:func:`sample_pairs`)


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    num = np.sum(a * b, axis=1)
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return num / np.clip(den, 1e-12, None)


def spearman100(pred: Sequence[float], gold: Sequence[float]) -> float:
    if len(pred) < 2:
        return float("nan")
    return float(spearmanr(pred, gold).statistic * 100)


def embed_unique(encoder, sentences: Iterable[str], batch_size: int = 128) -> dict[str, np.ndarray]:
    """Encode each distinct sentence once; returns sentence -> embedding.

    Inside :func:`sentlab.evaluate.sts.cache.embedding_cache` a sentlab encoder's embeddings come from
    (and go to) the content-addressed embedding cache, bit-identical to encoding them here."""
    from ...nn.encoder import SentenceEncoder
    from .cache import active_cache

    uniq = list(dict.fromkeys(sentences))
    cache = active_cache()
    if cache is not None and isinstance(encoder, SentenceEncoder):
        emb = cache.embed(encoder, uniq, batch_size=batch_size)
    else:
        emb = encoder.encode(uniq, batch_size=batch_size, show_progress_bar=True)
    return dict(zip(uniq, emb))


def pair_cosines(pairs: pd.DataFrame, lookup: dict[str, np.ndarray]) -> np.ndarray:
    a = np.stack([lookup[s] for s in pairs.sentence1])
    b = np.stack([lookup[s] for s in pairs.sentence2])
    return cosine_rows(a, b)


def score_task(pairs: pd.DataFrame, cos: np.ndarray) -> dict:
    """Spearman on the concatenation ("all") and SentEval's per-subset mean/wmean."""
    gold = pairs.score.to_numpy()
    out = {"all": spearman100(cos, gold), "pairs": int(len(pairs)), "subsets": {}}
    per, weights = [], []
    for subset, idx in pairs.groupby("subset", sort=False).indices.items():
        s = spearman100(cos[idx], gold[idx])
        out["subsets"][subset] = {"spearman": s, "pairs": int(len(idx))}
        per.append(s)
        weights.append(len(idx))
    out["mean"] = float(np.mean(per)) if per else float("nan")
    out["wmean"] = float(np.average(per, weights=weights)) if per else float("nan")
    return out


def sample_pairs(pairs: pd.DataFrame, n: int | None, seed: int = SAMPLE_SEED, by: str = "subset") -> pd.DataFrame:
    """A seeded sample of ``n`` pairs stratified by ``by`` (the genre for STS-B: ``main-captions``,
    ``main-forum``, ``main-news``; the source file for STS12–16), in the table's order.

    Each group gets ``n × its share`` pairs, rounded by largest remainder so the counts sum to ``n``;
    the pairs inside a group are drawn with ``numpy.random.default_rng(seed)``. The first ``n`` rows
    would see one genre only (STS-B dev starts with 625 captions). Every caller (the training loop's
    dev check, ``evaluate.max_pairs``, the diagnostics) uses this one function and seed, so the
    same ``n`` always gives the same pairs. ``n`` None or ≥ the pairs: all of them.
    """
    if n is None or n >= len(pairs):
        return pairs
    groups = pairs[by].to_numpy()
    names, sizes = np.unique(groups, return_counts=True)
    quota = sizes * n / len(pairs)
    counts = np.floor(quota).astype(int)
    extra = np.argsort(-(quota - counts), kind="stable")[: n - counts.sum()]
    counts[extra] += 1
    rng = np.random.default_rng(seed)
    picks = [rng.choice(np.flatnonzero(groups == g), size=k, replace=False) for g, k in zip(names, counts)]
    return pairs.iloc[np.sort(np.concatenate(picks))]


def select_splits(table: pd.DataFrame, names: Sequence[str], max_pairs: int | None = None) -> dict[str, pd.DataFrame]:
    """The evaluation pairs of each task in ``names`` (``STSBenchmark-dev`` for the dev split).

    ``max_pairs`` takes :func:`sample_pairs` of each (smoke runs); the same call always
    returns the same pairs, so diagnostics see exactly the pairs the scores came from.
    """
    splits = {t: sample_pairs(eval_split(table, t), max_pairs) for t in names}
    for t, df in splits.items():
        if df.empty:
            from ...errors import SentlabError

            raise SentlabError(f"The STS table has no evaluation pairs for {t}. "
                               f"Re-run the prepare stage (`dvc repro prepare`).")
    return splits


def pool_sentences(splits: dict[str, pd.DataFrame]) -> list[str]:
    """The distinct sentences of ``splits``, in first-seen order (what :func:`evaluate_table` encodes)."""
    return list(dict.fromkeys(s for df in splits.values() for s in (*df.sentence1, *df.sentence2)))


def evaluate_table(encoder, table: pd.DataFrame, batch_size: int = 128, tasks: Sequence[str] = TASKS,
                   with_dev: bool = True, return_embeddings: bool = False, max_pairs: int | None = None,
                   embeddings: dict[str, np.ndarray] | None = None):
    """Run the seven tasks (+ STS-B dev) on ``encoder``; returns the metrics dict.

    The flat keys ``STS12`` … ``SICKRelatedness`` and ``Avg`` are Spearman × 100
    ("all" setting); ``STSBenchmark-dev`` is the model-selection score;
    ``per_task`` holds pair counts and the labelled per-subset mean/wmean.
    With ``return_embeddings`` the sentence -> embedding lookup is returned too
    (diagnostics reuse it instead of encoding again). ``max_pairs`` evaluates a
    seeded sample of each task (smoke runs only; recorded in the output).
    ``embeddings`` is an already computed lookup covering every evaluation
    sentence (e.g. whitened pool embeddings); ``encoder`` is then not called.
    """
    names = list(tasks) + (["STSBenchmark-dev"] if with_dev else [])
    splits = select_splits(table, names, max_pairs)
    pool = pool_sentences(splits)
    t0 = time.perf_counter()
    if embeddings is None:
        lookup = embed_unique(encoder, pool, batch_size=batch_size)
    else:
        missing = [s for s in pool if s not in embeddings]
        if missing:
            raise ValueError(f"`embeddings` lacks {len(missing)} evaluation sentences (first: {missing[0]!r})")
        lookup = embeddings
    seconds = time.perf_counter() - t0
    results: dict = {}
    per_task: dict = {}
    for t, df in splits.items():
        cos = pair_cosines(df, lookup)
        sc = score_task(df, cos)
        results[t] = round(sc["all"], 4)
        per_task[t] = {"pairs": sc["pairs"], "mean": round(sc["mean"], 4), "wmean": round(sc["wmean"], 4),
                       "subsets": {k: {"spearman": round(v["spearman"], 4), "pairs": v["pairs"]}
                                   for k, v in sc["subsets"].items()}}
    results["Avg"] = round(float(np.mean([results[t] for t in tasks])), 4)
    results["per_task"] = per_task
    results["encode_seconds"] = round(seconds, 2)
    results["distinct_sentences"] = len(pool)
    if max_pairs is not None:
        results["subsampled_pairs_per_task"] = max_pairs
    if return_embeddings:
        return results, lookup
    return results


def senteval_style(encoder, table: pd.DataFrame, batch_size: int = 128, tasks: Sequence[str] = TASKS) -> dict:
    """Reference loop for the benchmark: each task's pairs encoded batch by batch in file order
    (duplicates encoded again), as SentEval does."""
    results = {}
    for t in tasks:
        df = eval_split(table, t)
        cos = []
        for start in range(0, len(df), batch_size):
            chunk = df.iloc[start: start + batch_size]
            a = encoder.encode(list(chunk.sentence1), batch_size=batch_size, sort_by_length=False,
                               show_progress_bar=False)
            b = encoder.encode(list(chunk.sentence2), batch_size=batch_size, sort_by_length=False,
                               show_progress_bar=False)
            cos.append(cosine_rows(a, b))
        results[t] = spearman100(np.concatenate(cos), df.score.to_numpy())
    results["Avg"] = float(np.mean([results[t] for t in tasks]))
    return results
