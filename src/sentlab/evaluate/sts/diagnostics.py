"""Diagnostics that explain *why* an embedding works (docs/evaluation.md#diagnostics).

Alignment and uniformity (Wang & Isola, 2020) on normalised embeddings f:

* alignment  = mean over positive pairs of ||f(x) − f(x+)||²
* uniformity = log mean over pairs of distinct sentences of exp(−t ||f(x) − f(y)||²), t = 2

Hard length subset (PT-BERT, Jiang et al. ACL 2022, Sec. 3.1, Tables 1 and 5c):
from STS12–16 keep the positive pairs (gold ≥ ``pos_min_score``) whose lengths
differ by more than ``pos_len_diff_gt`` whitespace words and the negative pairs
(gold ≤ ``neg_max_score``) whose lengths differ by less than ``neg_len_diff_lt``
words; Spearman per task on that subset, beside the full set. The paper does
not define positive/negative: the thresholds are params (``evaluate.hard_subset``).

Cosine density by similarity level (PaSeR, Appendix C, Table 10 and Fig. 5):
STS-B test split into gold bins [0,1), [1,2), [2,3), [3,4), [4,5] (the last one
closed); mean and (population, ddof = 0) variance of the cosine per bin.

Everything here works on the sentence -> embedding lookup that
:func:`sentlab.evaluate.sts.protocol.evaluate_table` already computed
(``return_embeddings=True``): no sentence is encoded a second time.

Example::

    res, lookup = evaluate_table(encoder, table, return_embeddings=True)
    diag = run_diagnostics(table, lookup, params.evaluate)
    diag["alignment_uniformity"]["STSBenchmark-test"]["uniformity"]
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ...config.tasks import STS_ALL   # STS12-16 (declared once): the hard length subset's tasks
DENSITY_EDGES = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0)
AU_SPLITS = ("STSBenchmark", "STSBenchmark-dev")
# Names of the STS-B splits in the metrics JSON (the evaluation tables call the test split "STSBenchmark").
SPLIT_LABEL = {"STSBenchmark": "STSBenchmark-test", "STSBenchmark-dev": "STSBenchmark-dev"}


def _normalise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-12, None)


def alignment(x: np.ndarray, y: np.ndarray) -> float:
    """Mean squared distance between normalised positive pairs (rows of ``x`` and ``y``)."""
    if len(x) == 0:
        return float("nan")
    d = _normalise(x) - _normalise(y)
    return float(np.mean(np.sum(d * d, axis=1)))


def uniformity(x: np.ndarray, t: float = 2.0, block: int = 2048) -> float:
    """log E[exp(−t ||f(a) − f(b)||²)] over all pairs of distinct rows of ``x``.

    Computed block by block (memory O(block × n)) with a stable log-sum-exp.
    """
    f = _normalise(x)
    n = len(f)
    if n < 2:
        return float("nan")
    logs = []  # per block: log of the sum of exp over its pairs (i < j)
    for start in range(0, n - 1, block):
        rows = f[start: start + block]
        sq = np.clip(2.0 - 2.0 * (rows @ f.T), 0.0, None)  # ||a-b||² of unit vectors
        i = np.arange(start, start + len(rows))[:, None]
        vals = -t * sq[np.arange(n)[None, :] > i]  # strictly upper triangle: each pair once
        if vals.size:
            m = vals.max()
            logs.append(m + np.log(np.sum(np.exp(vals - m))))
    total = np.logaddexp.reduce(np.array(logs))
    return float(total - np.log(n * (n - 1) / 2))


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


def evaluate_dev(encoder, table: pd.DataFrame, max_pairs: int | None = None, batch_size: int = 128,
                 pos_min_score: float = 4.0) -> dict:
    """STS-B dev Spearman × 100 plus alignment and uniformity (the training loop's periodic check).

    ``max_pairs`` (``train.dev_max_pairs``): the genre-stratified seeded sample of
    :func:`~sentlab.evaluate.sts.protocol.sample_pairs`.
    """
    from ...data.sts import eval_split
    from .protocol import cosine_rows, embed_unique, sample_pairs, spearman100

    dev = sample_pairs(eval_split(table, "STSBenchmark-dev"), max_pairs)
    lookup = embed_unique(encoder, [*dev.sentence1, *dev.sentence2], batch_size=batch_size)
    a = np.stack([lookup[s] for s in dev.sentence1])
    b = np.stack([lookup[s] for s in dev.sentence2])
    out = {"stsb_dev": spearman100(cosine_rows(a, b), dev.score.to_numpy())}
    out.update(alignment_uniformity(a, b, dev.score.to_numpy(), dev.sentence1, dev.sentence2, pos_min_score))
    return out



def make_dev_evaluator(sts_path: str | Path, max_pairs: int | None, batch_size: int = 128, workers="auto"):
    """``encoder -> {"stsb_dev", "alignment", "uniformity"}``: :func:`evaluate_dev` on STS-B dev of the table at
    ``sts_path``, encoded with ``workers`` (``evaluate.workers``: on CPU, batches on single-threaded workers, as the
    evaluate stage). The dev check the training loop runs, handed to ``sentlab.train.run`` by its callers
    (``pipeline/train.py``, ``sentlab train``): train/ imports no evaluator."""
    import dataclasses

    from ...data.sts import read_sts_table
    from ...nn.encoder import resolve_workers
    from ...errors import SentlabError

    sts_path = Path(sts_path)
    if not sts_path.is_file():
        raise SentlabError(f"STS table {sts_path} not found; run the sts stage first (dvc repro) — the dev "
                           f"evaluation during training reads STS-B dev from it.")
    table = read_sts_table(sts_path)

    def dev_eval(encoder):
        encoder = dataclasses.replace(encoder, workers=resolve_workers(workers, encoder.device))
        return evaluate_dev(encoder, table, max_pairs=max_pairs, batch_size=batch_size)

    return dev_eval

def split_alignment_uniformity(pairs: pd.DataFrame, lookup: dict[str, np.ndarray], pos_min_score: float = 4.0) -> dict:
    """:func:`alignment_uniformity` on one split's pairs from the lookup, with the counts it used."""
    a = np.stack([lookup[s] for s in pairs.sentence1])
    b = np.stack([lookup[s] for s in pairs.sentence2])
    out = alignment_uniformity(a, b, pairs.score.to_numpy(), pairs.sentence1, pairs.sentence2, pos_min_score)
    out["positive_pairs"] = int((pairs.score.to_numpy() >= pos_min_score).sum())
    out["sentences"] = len(set(pairs.sentence1) | set(pairs.sentence2))
    return out


def word_length_difference(pairs: pd.DataFrame) -> np.ndarray:
    """|len(sentence1) − len(sentence2)| in whitespace words."""
    n1 = pairs.sentence1.str.split().str.len().to_numpy()
    n2 = pairs.sentence2.str.split().str.len().to_numpy()
    return np.abs(n1 - n2)


def hard_subset_mask(pairs: pd.DataFrame, pos_min_score: float = 4.0, neg_max_score: float = 2.0,
                     pos_len_diff_gt: int = 5, neg_len_diff_lt: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks (positives, negatives) of PT-BERT's hard length subset.

    Positives: gold ≥ ``pos_min_score`` and length difference > ``pos_len_diff_gt`` words;
    negatives: gold ≤ ``neg_max_score`` and length difference < ``neg_len_diff_lt`` words.
    """
    diff = word_length_difference(pairs)
    gold = pairs.score.to_numpy()
    pos = (gold >= pos_min_score) & (diff > pos_len_diff_gt)
    neg = (gold <= neg_max_score) & (diff < neg_len_diff_lt)
    return pos, neg


def hard_subset_scores(splits: dict[str, pd.DataFrame], lookup: dict[str, np.ndarray], hp,
                       tasks: Sequence[str] = STS_ALL) -> dict:
    """Spearman × 100 per task on the hard subset and on the full set ("all" setting), side by side.

    ``hp`` is :class:`sentlab.config.HardSubsetParams` (or anything with its four fields).
    """
    from .protocol import pair_cosines, spearman100

    out: dict = {"thresholds": {k: getattr(hp, k) for k in ("pos_min_score", "neg_max_score", "pos_len_diff_gt",
                                                            "neg_len_diff_lt")},
                 "length_unit": "whitespace words", "tasks": {}}
    for t in tasks:
        df = splits[t]
        cos = pair_cosines(df, lookup)
        pos, neg = hard_subset_mask(df, hp.pos_min_score, hp.neg_max_score, hp.pos_len_diff_gt, hp.neg_len_diff_lt)
        keep = pos | neg
        gold = df.score.to_numpy()
        out["tasks"][t] = {"subset": round(spearman100(cos[keep], gold[keep]), 4),
                           "full": round(spearman100(cos, gold), 4),
                           "subset_pairs": int(keep.sum()), "positives": int(pos.sum()), "negatives": int(neg.sum()),
                           "full_pairs": int(len(df))}
    for k in ("subset", "full"):
        vals = [out["tasks"][t][k] for t in tasks]
        out[f"Avg_{k}"] = round(float(np.mean(vals)), 4)
    return out


def density_bins(gold: np.ndarray, cos: np.ndarray, edges: Sequence[float] = DENSITY_EDGES) -> list[dict]:
    """Mean and variance (ddof = 0) of ``cos`` per gold bin [e0,e1), …, [e_{k-1}, e_k] (last bin closed)."""
    gold = np.asarray(gold, dtype=np.float64)
    cos = np.asarray(cos, dtype=np.float64)
    idx = bin_index(gold, edges)
    out = []
    for b in range(len(edges) - 1):
        c = cos[idx == b]
        lo, hi = edges[b], edges[b + 1]
        out.append({"level": f"{lo:g}-{hi:g}", "lo": lo, "hi": hi, "closed_right": b == len(edges) - 2,
                    "pairs": int(len(c)), "mean": float(c.mean()) if len(c) else float("nan"),
                    "var": float(c.var()) if len(c) else float("nan")})
    return out


def bin_index(gold: np.ndarray, edges: Sequence[float] = DENSITY_EDGES) -> np.ndarray:
    """Bin of each gold score: b where edges[b] ≤ g < edges[b+1]; the last bin includes its right edge;
    −1 outside [edges[0], edges[-1]]."""
    gold = np.asarray(gold, dtype=np.float64)
    edges = np.asarray(edges, dtype=np.float64)
    idx = np.searchsorted(edges, gold, side="right") - 1
    idx[gold == edges[-1]] = len(edges) - 2
    idx[(gold < edges[0]) | (gold > edges[-1])] = -1
    return idx


def run_diagnostics(table: pd.DataFrame, lookup: dict[str, np.ndarray], ep, max_pairs: int | None = None,
                    with_dev: bool = True) -> tuple[dict, dict]:
    """All diagnostics (docs/evaluation.md#diagnostics) of one model from its evaluation lookup.

    ``ep`` is :class:`sentlab.config.EvaluateParams`; ``max_pairs`` must be the
    value the evaluation used (the same seeded sample of pairs is taken).
    Returns ``(diagnostics, density_data)``: the JSON-ready dict and, for the
    figure, ``{"gold": ..., "cos": ...}`` of STS-B test.
    """
    from .protocol import pair_cosines, select_splits

    names = [*STS_ALL, "STSBenchmark"] + (["STSBenchmark-dev"] if with_dev else [])
    splits = select_splits(table, names, max_pairs)
    pos_min = ep.hard_subset.pos_min_score
    au = {SPLIT_LABEL[s]: {k: (round(v, 6) if isinstance(v, float) else v)
                           for k, v in split_alignment_uniformity(splits[s], lookup, pos_min).items()}
          for s in AU_SPLITS if s in splits}
    test = splits["STSBenchmark"]
    cos = pair_cosines(test, lookup)
    gold = test.score.to_numpy()
    bins = [{k: (round(v, 6) if isinstance(v, float) else v) for k, v in b.items()} for b in density_bins(gold, cos)]
    diag = {"alignment_uniformity": {"positive_min_score": pos_min, "t": 2.0, "normalised": True, **au},
            "hard_subset": hard_subset_scores(splits, lookup, ep.hard_subset),
            "density": {"split": "STSBenchmark-test", "variance": "population (ddof=0)", "bins": bins}}
    if max_pairs is not None:
        diag["subsampled_pairs_per_task"] = max_pairs
    return diag, {"gold": gold, "cos": cos}


def flat_diagnostics(diag: dict) -> dict[str, float]:
    """Scalar view for MLflow: ``align.STSBenchmark-test`` …, ``hard.STS12`` …, ``density.4-5.mean`` …"""
    out: dict[str, float] = {}
    for split, v in diag["alignment_uniformity"].items():
        if isinstance(v, dict):
            out[f"alignment.{split}"] = v["alignment"]
            out[f"uniformity.{split}"] = v["uniformity"]
    hs = diag["hard_subset"]
    for t, v in hs["tasks"].items():
        out[f"hard_subset.{t}"] = v["subset"]
    out["hard_subset.Avg"] = hs["Avg_subset"]
    for b in diag["density"]["bins"]:
        out[f"density.{b['level']}.mean"] = b["mean"]
        out[f"density.{b['level']}.var"] = b["var"]
    return out
