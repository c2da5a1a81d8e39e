"""The evaluation protocol on a constructed set with hand-computed Spearman."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sentlab.evaluate.sts.protocol import cosine_rows, evaluate_table, score_task, spearman100

from _support.sts_tables import LookupEncoder
from _support.sts_tables import three_score_table as _table


def test_all_setting_differs_from_per_subset_mean():
    # Two subsets, each perfectly ranked inside (Spearman 100 each), but their
    # cosine ranges are swapped relative to the gold ranges, so the concatenation is not.
    pairs = pd.DataFrame({
        "subset": ["a", "a", "a", "b", "b", "b"],
        "score": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
    })
    cos = np.array([0.7, 0.8, 0.9, 0.1, 0.2, 0.3])
    out = score_task(pairs, cos)
    assert out["subsets"]["a"]["spearman"] == pytest.approx(100.0)
    assert out["subsets"]["b"]["spearman"] == pytest.approx(100.0)
    assert out["mean"] == pytest.approx(100.0) and out["wmean"] == pytest.approx(100.0)
    # Hand computation for "all": ranks of gold 1..6; ranks of cos: [4,5,6,1,2,3];
    # d = [-3,-3,-3,3,3,3], sum d^2 = 54, rho = 1 - 6*54/(6*35) = -0.542857...
    assert out["all"] == pytest.approx(100 * (1 - 6 * 54 / (6 * 35)))


def test_spearman_matches_formula_with_ties():
    # scipy's average-rank Spearman; with ties the textbook formula does not apply, so compare to Pearson of ranks.
    pred = [0.1, 0.1, 0.5, 0.9]
    gold = [1, 2, 3, 3]
    r_pred = np.array([1.5, 1.5, 3, 4])
    r_gold = np.array([1, 2, 3.5, 3.5])
    expected = np.corrcoef(r_pred, r_gold)[0, 1] * 100
    assert spearman100(pred, gold) == pytest.approx(expected)


def test_cosine_rows():
    a = np.array([[1.0, 0.0], [1.0, 1.0]])
    b = np.array([[0.0, 2.0], [2.0, 2.0]])
    assert cosine_rows(a, b) == pytest.approx([0.0, 1.0])


def test_evaluate_table_encodes_each_distinct_sentence_once():
    table = _table()
    emb = {"shared": [1.0, 0.0]}
    for t in ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness", "dev"]:
        for i in range(3):
            # angle grows as i decreases -> cosine increases with the gold score: perfect ranking
            emb[f"{t}-{i}"] = [np.cos(1.2 - 0.5 * i), np.sin(1.2 - 0.5 * i)]
    enc = LookupEncoder(emb)
    res = evaluate_table(enc, table, batch_size=4)
    assert len(enc.encoded) == len(set(enc.encoded))  # no sentence encoded twice
    assert enc.encoded.count("shared") == 1
    for t in ["STS12", "STSBenchmark", "SICKRelatedness"]:
        assert res[t] == pytest.approx(100.0)
    assert res["Avg"] == pytest.approx(100.0)
    assert res["STSBenchmark-dev"] == pytest.approx(100.0)
    assert res["per_task"]["STS12"]["pairs"] == 3
