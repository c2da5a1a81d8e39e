"""Diagnostics that explain *why* an embedding works (SPEC §2).

Alignment and uniformity (Wang & Isola, 2020) on normalised embeddings f:

* alignment  = mean over positive pairs of ||f(x) − f(x+)||²
* uniformity = log mean over pairs of distinct sentences of exp(−t ||f(x) − f(y)||²), t = 2
"""

from __future__ import annotations

import numpy as np


def _normalise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-12, None)


def alignment(x: np.ndarray, y: np.ndarray) -> float:
    """Mean squared distance between normalised positive pairs (rows of ``x`` and ``y``)."""
    if len(x) == 0:
        return float("nan")
    d = _normalise(x) - _normalise(y)
    return float(np.mean(np.sum(d * d, axis=1)))


def uniformity(x: np.ndarray, t: float = 2.0) -> float:
    """log E[exp(−t ||f(a) − f(b)||²)] over all pairs of distinct rows of ``x``."""
    f = _normalise(x)
    n = len(f)
    if n < 2:
        return float("nan")
    sq = np.clip(2.0 - 2.0 * (f @ f.T), 0.0, None)  # ||a-b||² of unit vectors
    iu = np.triu_indices(n, k=1)
    vals = -t * sq[iu]
    m = vals.max()
    return float(m + np.log(np.mean(np.exp(vals - m))))


def alignment_uniformity(emb1: np.ndarray, emb2: np.ndarray, scores: np.ndarray, sentences1, sentences2,
                         pos_min_score: float = 4.0) -> dict[str, float]:
    """Both measures on an STS split: positives = pairs with gold ≥ ``pos_min_score``,
    uniformity over the distinct sentences of the split."""
    scores = np.asarray(scores)
    pos = scores >= pos_min_score
    align = alignment(emb1[pos], emb2[pos])
    seen: dict[str, np.ndarray] = {}
    for s, e in zip(list(sentences1) + list(sentences2), list(emb1) + list(emb2)):
        seen.setdefault(s, e)
    uni = uniformity(np.stack(list(seen.values()))) if seen else float("nan")
    return {"alignment": align, "uniformity": uni}
