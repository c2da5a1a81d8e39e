"""Diagnostics (docs/evaluation.md): closed-form alignment/uniformity, the hard length subset, density bins,
reuse of the evaluation embeddings, and the encoder called the way MTEB / sentence-transformers call it."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pandas as pd
import pytest

from sentlab.config import HardSubsetParams, Params
from sentlab.evaluate.sts.diagnostics import (alignment, alignment_uniformity, bin_index, density_bins,
                                          hard_subset_mask, hard_subset_scores, run_diagnostics, uniformity)
from sentlab.evaluate.sts.protocol import evaluate_table, select_splits


# --- alignment / uniformity: closed forms -------------------------------------------------------

def test_alignment_of_identical_pairs_is_zero_and_of_opposite_pairs_is_four():
    x = np.random.default_rng(0).normal(size=(10, 5))
    assert alignment(x, 3.0 * x) == pytest.approx(0.0, abs=1e-12)  # same direction after normalising
    assert alignment(x, -x) == pytest.approx(4.0)  # ||f - (-f)||² = 4 on the unit sphere


def _circle(n: int) -> np.ndarray:
    a = 2 * np.pi * np.arange(n) / n
    return np.stack([np.cos(a), np.sin(a)], 1)


def _circle_uniformity(n: int, t: float = 2.0) -> float:
    # pairs at separation k (1..n-1): n-k of them with i<j; ||a-b||² = 2 - 2 cos(2πk/n)
    total = sum((n - k) * math.exp(-t * (2 - 2 * math.cos(2 * math.pi * k / n))) for k in range(1, n))
    return math.log(total / (n * (n - 1) / 2))


def test_uniformity_closed_forms_and_ordering():
    equal = np.tile([[0.3, 0.4]], (7, 1))
    assert uniformity(equal) == pytest.approx(0.0, abs=1e-12)  # every pair at distance 0: log mean exp(0)
    # 4 points on a circle: 4 neighbour pairs at ||.||² = 2, 2 opposite pairs at 4
    assert uniformity(_circle(4)) == pytest.approx(math.log((4 * math.exp(-4) + 2 * math.exp(-8)) / 6))
    for n in (3, 6, 12):
        assert uniformity(_circle(n)) == pytest.approx(_circle_uniformity(n))
    assert uniformity(_circle(12)) < uniformity(equal)  # spread out = more uniform = lower


def test_uniformity_blocks_match_the_full_matrix():
    x = np.random.default_rng(1).normal(size=(23, 6))
    f = x / np.linalg.norm(x, axis=1, keepdims=True)
    iu = np.triu_indices(len(f), 1)
    d2 = ((f[:, None] - f[None]) ** 2).sum(-1)[iu]
    expected = math.log(np.mean(np.exp(-2 * d2)))
    assert uniformity(x, block=4) == pytest.approx(expected)
    assert uniformity(x) == pytest.approx(expected)


def test_alignment_uniformity_positives_and_distinct_sentences():
    emb = {"a": [1.0, 0.0], "b": [0.0, 1.0], "c": [-1.0, 0.0]}
    s1, s2, gold = ["a", "a", "b"], ["a", "c", "a"], np.array([5.0, 4.0, 1.0])
    e1 = np.array([emb[s] for s in s1])
    e2 = np.array([emb[s] for s in s2])
    out = alignment_uniformity(e1, e2, gold, s1, s2, pos_min_score=4.0)
    assert out["alignment"] == pytest.approx((0.0 + 4.0) / 2)  # pairs (a,a) and (a,c) are positives
    # distinct sentences a, b, c: pairs a-b (2), a-c (4), b-c (2)
    assert out["uniformity"] == pytest.approx(math.log((2 * math.exp(-4) + math.exp(-8)) / 3))


# --- hard length subset -------------------------------------------------------------------------

def _w(n: int, tag: str) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def test_hard_subset_membership():
    pairs = pd.DataFrame([
        # (sentence1, sentence2, gold, in positives, in negatives)
        (_w(3, "a"), _w(9, "b"), 4.0, True, False),     # positive, diff 6 > 5
        (_w(3, "a"), _w(8, "b"), 5.0, False, False),    # positive, diff 5: not > 5
        (_w(10, "a"), _w(2, "b"), 4.5, True, False),    # positive, diff 8 (order does not matter)
        (_w(3, "a"), _w(10, "b"), 3.9, False, False),   # not positive (gold < 4), not negative
        (_w(5, "a"), _w(6, "b"), 2.0, False, True),     # negative, diff 1 < 2
        (_w(5, "a"), _w(5, "b"), 0.0, False, True),     # negative, diff 0
        (_w(5, "a"), _w(7, "b"), 1.0, False, False),    # negative by gold, diff 2: not < 2
        (_w(5, "a"), _w(5, "b"), 2.1, False, False),    # gold > 2: not negative
        ("a  b\tc", "x y z w", 1.0, False, True),       # whitespace words: 3 vs 4
    ], columns=["sentence1", "sentence2", "score", "pos", "neg"])
    pos, neg = hard_subset_mask(pairs)
    assert pos.tolist() == pairs.pos.tolist()
    assert neg.tolist() == pairs.neg.tolist()
    # thresholds are parameters
    pos2, neg2 = hard_subset_mask(pairs, pos_min_score=3.5, pos_len_diff_gt=4, neg_len_diff_lt=3)
    assert pos2.tolist() == [True, True, True, True, False, False, False, False, False]
    assert neg2.tolist() == [False, False, False, False, True, True, True, False, True]


def test_hard_subset_scores_record_their_thresholds_and_counts():
    """Non-default thresholds reach the counts and the recorded thresholds (the scores themselves are
    pinned in test_evaluate_settings.py::test_hard_subset_and_full_differ_as_hand_computed)."""
    rows, emb = [], {}
    for t in ("STS12", "STS13", "STS14", "STS15", "STS16"):
        spec = [(3, 9, 5.0), (2, 10, 4.0), (4, 4, 0.0), (6, 7, 1.0), (4, 5, 3.0)]
        for i, (l1, l2, g) in enumerate(spec):
            s1, s2 = _w(l1, f"{t}{i}x"), _w(l2, f"{t}{i}y")
            ang = (5.0 - g) * 0.3
            emb[s1], emb[s2] = [1.0, 0.0], [math.cos(ang), math.sin(ang)]
            rows.append(dict(task=t, subset="s", split="test", sentence1=s1, sentence2=s2, score=g))
    splits = select_splits(pd.DataFrame(rows), ["STS12", "STS13", "STS14", "STS15", "STS16"])
    hp = HardSubsetParams(pos_min_score=3.5, neg_max_score=1.5, pos_len_diff_gt=7, neg_len_diff_lt=1)
    out = hard_subset_scores(splits, emb, hp)
    for v in out["tasks"].values():  # positive: only (2, 10) (gap 8 > 7); negative: only (4, 4) (gap 0 < 1)
        assert (v["subset_pairs"], v["positives"], v["negatives"], v["full_pairs"]) == (2, 1, 1, 5)
    assert out["thresholds"] == {"pos_min_score": 3.5, "neg_max_score": 1.5, "pos_len_diff_gt": 7, "neg_len_diff_lt": 1}


# --- density bins -------------------------------------------------------------------------------

def test_density_bins_edges_and_stats():
    gold = np.array([0.0, 0.999, 1.0, 2.5, 3.99, 4.0, 4.8, 5.0])
    cos = np.array([0.1, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    assert bin_index(gold).tolist() == [0, 0, 1, 2, 3, 4, 4, 4]  # 5.0 lies in the closed [4,5]
    assert bin_index(np.array([-0.1, 5.01])).tolist() == [-1, -1]
    bins = density_bins(gold, cos)
    assert [b["level"] for b in bins] == ["0-1", "1-2", "2-3", "3-4", "4-5"]
    assert [b["pairs"] for b in bins] == [2, 1, 1, 1, 3]
    assert bins[0]["mean"] == pytest.approx(0.2) and bins[0]["var"] == pytest.approx(0.01)
    assert bins[4]["mean"] == pytest.approx(0.9) and bins[4]["var"] == pytest.approx(np.var([0.8, 0.9, 1.0]))
    assert bins[4]["closed_right"] and not bins[3]["closed_right"]
    empty = density_bins(np.array([4.5]), np.array([0.5]))
    assert empty[0]["pairs"] == 0 and math.isnan(empty[0]["mean"])


# --- diagnostics reuse the evaluation embeddings ------------------------------------------------

class CountingEncoder:
    """Embeddings fixed per sentence (a seeded random vector); records every sentence encoded."""

    def __init__(self, dim: int = 8):
        self.dim = dim
        self.encoded: list[str] = []

    def encode(self, sentences, batch_size=128, **kw):
        self.encoded += list(sentences)
        return np.stack([np.random.default_rng(zlib.crc32(s.encode())).normal(size=self.dim) for s in sentences])


def _table(n: int = 12) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for t in ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"):
        for i in range(n):
            rows.append(dict(task=t, subset="s", split="test", sentence1=_w(int(rng.integers(2, 12)), f"{t}{i}a"),
                             sentence2=_w(int(rng.integers(2, 12)), f"{t}{i}b"), score=float(rng.uniform(0, 5))))
    for i in range(n):
        rows.append(dict(task="STSBenchmark", subset="s", split="dev", sentence1=f"dev {i} a", sentence2=f"dev {i} b",
                         score=float(rng.uniform(0, 5))))
    rows.append(dict(task="STSBenchmark", subset="s", split="test", sentence1="edge", sentence2="case", score=5.0))
    return pd.DataFrame(rows)


def test_diagnostics_use_the_evaluation_lookup_only(tmp_path):
    from sentlab.evaluate.sts.runner import evaluate_encoders

    table = _table()
    enc = CountingEncoder()
    params = Params()
    metrics = evaluate_encoders({"m": enc}, table, params, figures_dir=tmp_path)
    assert len(enc.encoded) == len(set(enc.encoded)) == metrics["distinct_sentences"]  # one pass, no re-encoding
    d = metrics["diagnostics"]
    assert set(d["alignment_uniformity"]) >= {"STSBenchmark-test", "STSBenchmark-dev"}
    test = d["alignment_uniformity"]["STSBenchmark-test"]
    assert test["positive_pairs"] == int(
        (table[(table.task == "STSBenchmark") & (table.split == "test")].score >= 4).sum())
    assert sum(b["pairs"] for b in d["density"]["bins"]) == 13  # includes the gold-5.0 pair
    assert sorted(d["hard_subset"]["tasks"]) == ["STS12", "STS13", "STS14", "STS15", "STS16"]
    png = tmp_path / "m_density.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and d["density"]["figure"] == png.as_posix()
    # the same numbers when recomputed from an independent lookup
    res, lookup = evaluate_table(CountingEncoder(), table, return_embeddings=True)
    again, _ = run_diagnostics(table, lookup, params.evaluate)
    assert again["alignment_uniformity"]["STSBenchmark-dev"] == d["alignment_uniformity"]["STSBenchmark-dev"]


def test_diagnostics_follow_the_same_pair_sample():
    table = _table(30)
    res, lookup = evaluate_table(CountingEncoder(), table, return_embeddings=True, max_pairs=10)
    d, dens = run_diagnostics(table, lookup, Params().evaluate, max_pairs=10)  # no KeyError: same sample
    assert len(dens["cos"]) == 10 and d["subsampled_pairs_per_task"] == 10


# --- the encoder, called the way MTEB and sentence-transformers call it ------------------------

def test_encoder_accepts_mteb_and_sentence_transformers_calls(tiny_bert):
    import torch
    from scipy.stats import spearmanr
    from sklearn.metrics.pairwise import paired_cosine_distances

    from sentlab.nn.encoder import SentenceEncoder

    model, tok = tiny_bert
    enc = SentenceEncoder(model, tok, pooling="mean", name="tiny")
    s1 = ["A man plays a guitar.", "Two dogs run on the beach.", "The cat sleeps.", "It is raining hard today."]
    s2 = ["Someone plays music.", "Dogs are running.", "A kitten naps on a sofa.", "The sun is out."]
    gold = [3.5, 4.2, 3.0, 0.5]
    ref = enc.encode(s1, batch_size=2)
    # MTEB 1.x (model_encode): prompt_name=task_name plus batch_size
    e1 = enc.encode(s1, prompt_name="STSBenchmark", batch_size=2)
    # MTEB 1.1x: task_name / prompt_type keywords
    e1b = enc.encode(s1, task_name="STSBenchmark", prompt_type=None, batch_size=2)
    # MTEB 2: a DataLoader of {"text": [...]} batches plus task metadata keywords
    loader = torch.utils.data.DataLoader([{"text": s} for s in s2], batch_size=3,
                                         collate_fn=lambda b: {"text": [x["text"] for x in b]})
    e2 = enc.encode(loader, task_metadata=None, hf_split="test", hf_subset="default", prompt_type=None, batch_size=2)
    np.testing.assert_allclose(e1, ref, atol=1e-6)
    np.testing.assert_allclose(e1b, ref, atol=1e-6)
    assert isinstance(e2, np.ndarray) and e2.shape == (4, 32) and e2.dtype == np.float32
    # MTEB's STS evaluator: cosine from sklearn, and the model's own similarity_pairwise when present
    cosine = 1 - paired_cosine_distances(e1, e2)
    own = enc.similarity_pairwise(e1, e2)
    np.testing.assert_allclose(np.asarray(own), cosine, atol=1e-5)
    assert float(enc.similarity(e1[0], e2[0])) == pytest.approx(cosine[0], abs=1e-5)  # MTEB 1.x per-pair use
    assert enc.similarity(e1, e2).shape == (4, 4)
    assert spearmanr(gold, np.asarray(own)).statistic == pytest.approx(spearmanr(gold, cosine).statistic)
    # sentence-transformers keywords
    t = enc.encode(s1, convert_to_tensor=True, show_progress_bar=False)
    assert isinstance(t, torch.Tensor) and t.shape == (4, 32)
    n = enc.encode(s1, normalize_embeddings=True, convert_to_numpy=True)
    np.testing.assert_allclose(np.linalg.norm(n, axis=1), 1.0, atol=1e-5)
    one = enc.encode("A man plays a guitar.")
    assert one.shape == (32,)
    np.testing.assert_allclose(one, ref[0], atol=1e-5)
    with pytest.raises(TypeError, match="text"):
        enc.encode([{"image": 1}])


# --- report tables ------------------------------------------------------------------------------

def test_report_tables_show_reproduced_and_paper_rows(tmp_path):
    from sentlab.evaluate.sts.runner import evaluate_encoders
    from sentlab.report.diagnostics_tables import render

    table = _table()
    m = evaluate_encoders({"base-x": CountingEncoder()}, table, Params(), figures_dir=tmp_path / "reports/figures")
    m["diagnostics"]["density"]["figure"] = "reports/figures/base-x_density.png"
    metrics = {"base-x": {"status": "evaluated", **m}, "simcse": {"status": "not run in this profile"}}
    files = render(metrics, "tiny", "smoke")
    md = files["diagnostics.md"]
    assert "74.44" in md and "71.08" in md and "66.54" in md  # PT-BERT Table 5c paper rows
    assert "0.86 / 0.006" in md and "0.92 / 0.003" in md  # PaSeR Table 10
    assert "`simcse` (not run in this profile)" in md
    assert "](figures/base-x_density.png)" in md
    sub = m["diagnostics"]["hard_subset"]["tasks"]["STS12"]["subset"]
    assert f"{sub:.2f}" in md
    hs = files["hard_subset.csv"].splitlines()
    assert hs[0].startswith("model,source,set,STS12") and any(r.startswith("base-x,reproduced,subset") for r in hs)
    dens = files["cosine_density.csv"].splitlines()
    assert sum(r.startswith("base-x,reproduced,") for r in dens) == 5
    au = files["alignment_uniformity.csv"]
    assert "base-x,reproduced,STSBenchmark-test" in au and "base-x,reproduced,STSBenchmark-dev" in au
