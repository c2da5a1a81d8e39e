"""Confidence intervals and significance tests of STS results, from the per-pair cosines.

Nothing here encodes a sentence: every statistic works on the cosines the evaluate stage cached
(``reports/cosines/<model>.parquet``) and the gold scores beside them. scipy.stats does the
statistics; this module only supplies the statistic (a Spearman vectorised over resamples) and the
bookkeeping:

* :func:`spearman_ci` — the 95 % bootstrap CI of one model's Spearman on one task, percentile interval,
  :data:`N_RESAMPLES` resamples, seeded. With ``clusters`` (the evaluate stage passes them: pairs that share a
  sentence, :func:`sentlab.evaluate.sts.cosines.sentence_clusters`) the **clusters** are resampled with replacement
  and each drawn cluster brings all its pairs (:func:`cluster_spearman_distribution`): pairs that share a
  sentence are not independent (98 % of SICK-R test pairs share one with another pair, 28-47 % in STS12-16),
  and resampling them one by one understates the CI. Without ``clusters``: ``scipy.stats.bootstrap`` over
  pairs;
* :func:`avg_ci` — the CI of the 7-task average: each task's bootstrap distribution, averaged
  resample by resample (tasks are disjoint sets of pairs, resampled independently);
* :func:`paired_difference` — two models on the same pairs: per task, the paired bootstrap CI of the
  difference of their Spearmans and its bootstrap p; for the task average, the CI and a two-sided
  p-value from ``scipy.stats.permutation_test``
  (``permutation_type="samples"``: under the null hypothesis the two models' outputs for a pair
  are exchangeable, so each pair's two values are swapped at random). The cosines of two models
  live on different scales (an anisotropic model has all its cosines near 1), so each model's
  cosines are replaced by their normalised ranks before swapping; Spearman depends on ranks only,
  so the observed difference is unchanged;
* :func:`seed_difference` — two methods' seed samples (one number per seed): Welch's t-test
  (``scipy.stats.ttest_ind(equal_var=False)``);
* :func:`seed_summary` — mean ± std (n) of a seed sample and its 95 % prediction interval for one
  more run (mean ± t·std·√(1 + 1/n)): the range a single published run of the same recipe is
  expected in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator, Optional, Sequence

import numpy as np
from scipy import stats

N_RESAMPLES = 1000
CONFIDENCE = 0.95
ALPHA = 0.05


def spearman_vec(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """Spearman × 100 of ``x`` and ``y`` along ``axis`` (Pearson of the average ranks, as
    ``scipy.stats.spearmanr``), for a whole batch of resamples at once."""
    rx = stats.rankdata(x, axis=axis)
    ry = stats.rankdata(y, axis=axis)
    rx = rx - rx.mean(axis=axis, keepdims=True)
    ry = ry - ry.mean(axis=axis, keepdims=True)
    den = np.sqrt((rx * rx).sum(axis=axis) * (ry * ry).sum(axis=axis))
    return 100.0 * (rx * ry).sum(axis=axis) / np.where(den == 0, np.nan, den)


def dense_ranks(x: Sequence[float]) -> tuple[np.ndarray, int]:
    """``x`` as integer dense ranks (equal values share one) and their count: Spearman is the same on
    them, and resamples of them are ranked by counting (:func:`_average_ranks`) instead of sorting."""
    _, inv = np.unique(np.asarray(x, dtype=np.float64), return_inverse=True)
    return inv.astype(np.int64), int(inv.max()) + 1 if len(inv) else 0


def _average_ranks(x: np.ndarray, k: int) -> np.ndarray:
    """Average ranks (ties share their mean rank, as ``scipy.stats.rankdata``) along the last axis of
    integer codes in ``[0, k)``: per row, the count of smaller codes plus (ties + 1) / 2 — one
    ``bincount`` per batch of resamples, no sort."""
    codes = np.asarray(x).astype(np.int64)
    flat = codes.reshape(-1, codes.shape[-1])
    rows, n = flat.shape
    offset = (flat + k * np.arange(rows)[:, None]).ravel()
    counts = np.bincount(offset, minlength=rows * k)
    before = np.cumsum(counts) - counts                     # codes smaller than each, over all rows so far
    ranks = before[offset] - np.repeat(np.arange(rows) * n, n) + (counts[offset] + 1) / 2   # minus earlier rows
    return ranks.reshape(codes.shape)


def _pearson100(rx: np.ndarray, ry: np.ndarray) -> np.ndarray:
    rx = rx - rx.mean(axis=-1, keepdims=True)
    ry = ry - ry.mean(axis=-1, keepdims=True)
    den = np.sqrt((rx * rx).sum(axis=-1) * (ry * ry).sum(axis=-1))
    return 100.0 * (rx * ry).sum(axis=-1) / np.where(den == 0, np.nan, den)


def _coded_spearman(kx: int, ky: int):
    """Spearman × 100 of integer-coded samples (:func:`dense_ranks`), vectorised over resamples."""
    def statistic(x, y, axis=-1):
        return _pearson100(_average_ranks(x, kx), _average_ranks(y, ky))
    return statistic


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


@dataclass(frozen=True)
class Interval:
    value: float
    low: float
    high: float
    distribution: Optional[np.ndarray] = None   # the bootstrap distribution (to combine tasks)

    def as_list(self) -> list[float]:
        return [round(float(self.low), 4), round(float(self.high), 4)]


def _weighted_average_ranks(codes: np.ndarray, k: int, w: np.ndarray) -> np.ndarray:
    """Average ranks of integer codes in ``[0, k)`` (one row of codes) when pair ``j`` of resample ``r`` is
    repeated ``w[r, j]`` times: per resample, the weight of smaller codes plus (weight of ties + 1) / 2 —
    what :func:`_average_ranks` gives on the repeated sample, without building it."""
    rows, n = w.shape
    offset = (codes[None, :] + k * np.arange(rows)[:, None]).ravel()
    counts = np.bincount(offset, weights=w.ravel(), minlength=rows * k)
    before = np.cumsum(counts) - counts
    start = before[k * np.arange(rows)]                   # weight of all earlier resamples
    return (before[offset].reshape(rows, n) - start[:, None] + (counts[offset].reshape(rows, n) + 1) / 2)


def _weighted_pearson100(rx: np.ndarray, ry: np.ndarray, w: np.ndarray) -> np.ndarray:
    tot = w.sum(axis=-1, keepdims=True)
    rx = rx - (w * rx).sum(axis=-1, keepdims=True) / tot
    ry = ry - (w * ry).sum(axis=-1, keepdims=True) / tot
    den = np.sqrt((w * rx * rx).sum(axis=-1) * (w * ry * ry).sum(axis=-1))
    return 100.0 * (w * rx * ry).sum(axis=-1) / np.where(den == 0, np.nan, den)


def cluster_weights(clusters: Sequence[int], n_resamples: int, rng: np.random.Generator,
                    batch: int = 250) -> Iterator[np.ndarray]:
    """Batches of pair weights (resamples × pairs) of a cluster bootstrap: per resample, as many clusters as
    there are, drawn with replacement; a pair's weight is how often its cluster was drawn."""
    ids, inv = np.unique(np.asarray(clusters), return_inverse=True)
    c = len(ids)
    for start in range(0, n_resamples, batch):
        r = min(batch, n_resamples - start)
        draws = rng.integers(0, c, size=(r, c))
        counts = np.zeros((r, c))
        np.add.at(counts, (np.repeat(np.arange(r), c), draws.ravel()), 1.0)
        yield counts[:, inv]


def cluster_spearman_distribution(cos: Sequence[float], gold: Sequence[float], clusters: Sequence[int],
                                  seed: int = 0, n_resamples: int = N_RESAMPLES) -> np.ndarray:
    """Bootstrap distribution of Spearman × 100 with the clusters of ``clusters`` (one id per pair) as the
    resampling unit (:func:`cluster_weights`); the ranks of each resample are those of the repeated sample
    (:func:`_weighted_average_ranks`), so the statistic is exactly Spearman on the resampled pairs."""
    (cx, kx), (gy, ky) = dense_ranks(cos), dense_ranks(gold)
    out = [_weighted_pearson100(_weighted_average_ranks(cx, kx, w), _weighted_average_ranks(gy, ky, w), w)
           for w in cluster_weights(clusters, n_resamples, _rng(seed))]
    return np.concatenate(out)


def spearman_ci(cos: Sequence[float], gold: Sequence[float], seed: int = 0,
                n_resamples: int = N_RESAMPLES, clusters: Optional[Sequence[int]] = None) -> Interval:
    """95 % percentile bootstrap CI of Spearman × 100: clusters of pairs resampled with replacement when
    ``clusters`` is given (:func:`cluster_spearman_distribution`), else pairs (``scipy.stats.bootstrap``)."""
    if clusters is not None:
        dist = cluster_spearman_distribution(cos, gold, clusters, seed, n_resamples)
        lo, hi = np.nanpercentile(dist, [100 * (1 - CONFIDENCE) / 2, 100 * (1 + CONFIDENCE) / 2])
        value = float(spearman_vec(np.asarray(cos, dtype=np.float64), np.asarray(gold, dtype=np.float64)))
        return Interval(value, float(lo), float(hi), dist)
    (cx, kx), (gy, ky) = dense_ranks(cos), dense_ranks(gold)
    res = stats.bootstrap((cx, gy), _coded_spearman(kx, ky), paired=True, vectorized=True, n_resamples=n_resamples,
                          confidence_level=CONFIDENCE, method="percentile", random_state=_rng(seed))
    value = float(spearman_vec(np.asarray(cos, dtype=np.float64), np.asarray(gold, dtype=np.float64)))
    return Interval(value, float(res.confidence_interval.low), float(res.confidence_interval.high),
                    res.bootstrap_distribution)


def avg_ci(intervals: Sequence[Interval]) -> Interval:
    """The CI of the plain average of several tasks' Spearmans from their bootstrap distributions."""
    dist = np.mean(np.stack([i.distribution for i in intervals]), axis=0)
    lo, hi = np.percentile(dist, [100 * (1 - CONFIDENCE) / 2, 100 * (1 + CONFIDENCE) / 2])
    return Interval(float(np.mean([i.value for i in intervals])), float(lo), float(hi), dist)


@dataclass(frozen=True)
class Difference:
    diff: float            # Spearman(A) − Spearman(B), × 100
    low: float
    high: float
    p: float               # two-sided
    test: str
    p_adjusted: Optional[float] = None   # after a multiple-comparison correction (the report: Holm per table)

    @property
    def significant(self) -> bool:
        """p (the adjusted p when one was set) below :data:`ALPHA`."""
        p = self.p if self.p_adjusted is None else self.p_adjusted
        return bool(p < ALPHA)


def _bootstrap_p(dist: np.ndarray) -> float:
    """Two-sided p of "no difference" from a bootstrap distribution of the difference: twice the share of
    resamples on the far side of 0 (the CI excludes 0 exactly when p < 1 − confidence)."""
    dist = dist[np.isfinite(dist)]
    return float(min(1.0, 2 * min(np.mean(dist <= 0), np.mean(dist >= 0)))) if len(dist) else float("nan")


def paired_difference(tasks: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]], seed: int = 0,
                      n_resamples: int = N_RESAMPLES, permutation: bool = True) -> dict[str, Difference]:
    """Model A vs model B on the same pairs. ``tasks`` maps a task to ``(cos_a, cos_b, gold)``.

    Returns one :class:`Difference` per task (Spearman(A) − Spearman(B): the paired bootstrap CI —
    pairs resampled within the task, both models together — and its bootstrap p) and, under
    ``"Avg"``, the difference of the task average: CI from the tasks' bootstrap distributions averaged
    resample by resample, p from the paired permutation test over every pair of every task (see the
    module docstring; ``permutation=False``: the bootstrap p instead)."""
    names = list(tasks)
    a = [np.asarray(tasks[t][0], dtype=np.float64) for t in names]
    b = [np.asarray(tasks[t][1], dtype=np.float64) for t in names]
    g = [np.asarray(tasks[t][2], dtype=np.float64) for t in names]
    rng = _rng(seed)
    out: dict[str, Difference] = {}
    dists = []
    for t, at, bt, gt in zip(names, a, b, g):
        (ca, ka), (cb, kb), (cg, kg) = dense_ranks(at), dense_ranks(bt), dense_ranks(gt)

        def diff_stat(x, y, z, axis=-1, ka=ka, kb=kb, kg=kg):
            rz = _average_ranks(z, kg)
            return _pearson100(_average_ranks(x, ka), rz) - _pearson100(_average_ranks(y, kb), rz)

        res = stats.bootstrap((ca, cb, cg), diff_stat, paired=True, vectorized=True, n_resamples=n_resamples,
                              confidence_level=CONFIDENCE, method="percentile", random_state=rng)
        dist = res.bootstrap_distribution
        dists.append(dist)
        out[t] = Difference(float(spearman_vec(at, gt) - spearman_vec(bt, gt)), float(res.confidence_interval.low),
                            float(res.confidence_interval.high), _bootstrap_p(dist),
                            f"paired bootstrap over pairs ({n_resamples} resamples)")
    dist = np.mean(np.stack(dists), axis=0)
    lo, hi = np.percentile(dist, [100 * (1 - CONFIDENCE) / 2, 100 * (1 + CONFIDENCE) / 2])
    diff = float(np.mean([out[t].diff for t in names]))
    if not permutation:
        out["Avg"] = Difference(diff, float(lo), float(hi), _bootstrap_p(dist),
                                f"paired bootstrap over pairs ({n_resamples} resamples)")
        return out
    bounds = np.cumsum([0] + [len(x) for x in g])
    gold_ranks = [stats.rankdata(gt) for gt in g]  # fixed under permutation: ranked once
    # each model's cosines as codes 2·rank (A) and 2·rank + 1 (B) within each task: the two grids never tie,
    # Spearman on either model's own codes equals its Spearman on cosines, and swapping a pair's two codes
    # exchanges comparable values
    ca = np.concatenate([2 * (stats.rankdata(x, method="ordinal") - 1) for x in a])
    cb = np.concatenate([2 * (stats.rankdata(x, method="ordinal") - 1) + 1 for x in b])

    def statistic(x, y, axis=-1):
        return np.mean([_pearson100(_average_ranks(x[..., s:e], 2 * (e - s)), gr)
                        - _pearson100(_average_ranks(y[..., s:e], 2 * (e - s)), gr)
                        for s, e, gr in zip(bounds[:-1], bounds[1:], gold_ranks)], axis=0)

    perm = stats.permutation_test((ca, cb), statistic, permutation_type="samples", vectorized=True,
                                  n_resamples=n_resamples, alternative="two-sided", random_state=rng, batch=250)
    out["Avg"] = Difference(diff, float(lo), float(hi), float(perm.pvalue),
                            f"paired permutation test over pairs ({n_resamples} permutations)")
    return out


def difference_from_bootstrap(dist_a: np.ndarray, dist_b: np.ndarray, diff: float, n_tasks: int = 1) -> Difference:
    """The paired bootstrap of Spearman(A) − Spearman(B) from the two models' own bootstrap
    distributions drawn with the same resamples of the same pairs (same seed, same pairs: what the
    evaluate stage stores, :func:`sentlab.evaluate.sts.cosines.bootstrap_intervals`): resample by resample,
    their difference is the paired bootstrap distribution, so comparing any two models costs a
    subtraction. ``dist_*`` may be a task average of such distributions (the Avg. column)."""
    dist = np.asarray(dist_a) - np.asarray(dist_b)
    lo, hi = np.percentile(dist, [100 * (1 - CONFIDENCE) / 2, 100 * (1 + CONFIDENCE) / 2])
    return Difference(float(diff), float(lo), float(hi), _bootstrap_p(dist),
                      f"paired cluster bootstrap over the test pairs ({len(dist):,} shared resamples"
                      f"{', per task' if n_tasks > 1 else ''})")


def seed_difference(a: Sequence[float], b: Sequence[float]) -> Difference:
    """Two methods' seed samples: Welch's t-test (needs ≥ 2 seeds each), CI of the mean difference
    from the same test."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"Welch's t-test needs at least 2 seeds per method (got {len(a)} and {len(b)})")
    res = stats.ttest_ind(a, b, equal_var=False)
    ci = res.confidence_interval(CONFIDENCE)
    return Difference(float(a.mean() - b.mean()), float(ci.low), float(ci.high), float(res.pvalue),
                      f"Welch's t-test over seeds (n = {len(a)} vs {len(b)})")


@dataclass(frozen=True)
class SeedSummary:
    mean: float
    std: float              # sample standard deviation (ddof = 1)
    n: int
    low: float              # 95 % prediction interval of one more run
    high: float

    def text(self, digits: int = 2) -> str:
        return f"{self.mean:.{digits}f} ± {self.std:.{digits}f} ({self.n})"


def seed_summary(values: Sequence[float]) -> SeedSummary:
    v = np.asarray(values, dtype=np.float64)
    if len(v) < 2:
        raise ValueError("a seed summary needs at least 2 seeds")
    mean, std = float(v.mean()), float(v.std(ddof=1))
    half = float(stats.t.ppf((1 + CONFIDENCE) / 2, len(v) - 1)) * std * math.sqrt(1 + 1 / len(v))
    return SeedSummary(mean, std, len(v), mean - half, mean + half)
