"""``sentlab evaluate --format senteval``: SentEval's results dict of the STS tasks (issue #55), the layout SimCSE's
evaluation.py reads (``results["STS12"]["all"]["spearman"]["all"]``, ``results["STSBenchmark"]["test"]
["spearman"]``); the correlations checked against scipy on the same cosines."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from sentlab.evaluate.sts.protocol import evaluate_table
from sentlab.report.senteval_results import results

TASKS = {("STS12", "test"): {"MSRpar": 40, "OnWN": 25}, ("STS13", "test"): {"FNWN": 30},
         ("STS14", "test"): {"images": 30}, ("STS15", "test"): {"forum": 30}, ("STS16", "test"): {"news": 30},
         ("STSBenchmark", "test"): {"main-news": 35}, ("STSBenchmark", "dev"): {"main-forum": 28},
         ("SICKRelatedness", "test"): {"sick": 33}}


def _table(seed=0):
    rng = np.random.default_rng(seed)
    rows, lookup = [], {}
    for (task, split), subsets in TASKS.items():
        for subset, n in subsets.items():
            gold = rng.uniform(0, 5, n)
            for i in range(n):
                a, b = f"{task}-{split}-{subset}-{i}-a", f"{task}-{split}-{subset}-{i}-b"
                va = rng.normal(size=8)
                lookup[a], lookup[b] = va, va * gold[i] / 5 + rng.normal(size=8)
                rows.append({"task": task, "split": split, "subset": subset, "sentence1": a, "sentence2": b,
                             "score": gold[i]})
    return pd.DataFrame(rows), lookup


def _rho(table, lookup, task, split, subset=None):
    df = table[(table.task == task) & (table.split == split)]
    if subset is not None:
        df = df[df.subset == subset]
    a = np.stack([lookup[x] for x in df.sentence1])
    b = np.stack([lookup[x] for x in df.sentence2])
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    return spearmanr(cos, df.score).statistic, len(df)


def test_the_layout_and_the_correlations_are_senteval_s():
    table, lookup = _table()
    out = results(evaluate_table(None, table, embeddings=lookup))
    assert list(out) == ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"]
    assert set(out["STS12"]) == {"MSRpar", "OnWN", "all"} and set(out["STS12"]["all"]) == {"spearman"}
    per = {s: _rho(table, lookup, "STS12", "test", s) for s in ("MSRpar", "OnWN")}
    for s, (rho, n) in per.items():
        assert out["STS12"][s] == {"spearman": pytest.approx(rho, abs=1e-6), "nsamples": n}
    assert out["STS12"]["all"]["spearman"] == {
        "all": pytest.approx(_rho(table, lookup, "STS12", "test")[0], abs=1e-6),
        "mean": pytest.approx((per["MSRpar"][0] + per["OnWN"][0]) / 2, abs=1e-6),
        "wmean": pytest.approx((40 * per["MSRpar"][0] + 25 * per["OnWN"][0]) / 65, abs=1e-6)}
    for task, splits in {"STSBenchmark": ("test", "dev"), "SICKRelatedness": ("test",)}.items():
        assert list(out[task]) == list(splits)
        for split in splits:
            rho, n = _rho(table, lookup, task, split)
            assert out[task][split] == {"spearman": pytest.approx(rho, abs=1e-6), "nsamples": n}


def test_the_cli_writes_it_to_json_and_refuses_it_without_sts(tmp_path, monkeypatch, tiny_bert, capsys):
    from sentlab.cli import main

    net, tok = tiny_bert
    net.save_pretrained(tmp_path / "tiny")
    tok.save_pretrained(tmp_path / "tiny")
    table, _ = _table()
    table.to_parquet(tmp_path / "sts.parquet")
    out = tmp_path / "se.json"
    assert main(["evaluate", "--model", str(tmp_path / "tiny"), "--sts", str(tmp_path / "sts.parquet"),
                 "--format", "senteval", "--json", str(out), "--no-mlflow", "--device", "cpu"]) == 0
    got = json.loads(out.read_text())
    printed = capsys.readouterr().out    # the usual one line: Spearman × 100, what SimCSE's evaluation.py prints
    line = {k: float(v) for k, v in zip(printed.split()[1::2], printed.split()[2::2])}
    assert got["STS12"]["all"]["spearman"]["all"] * 100 == pytest.approx(line["STS12"], abs=0.006)
    assert got["STSBenchmark"]["test"]["spearman"] * 100 == pytest.approx(line["STSBenchmark"], abs=0.006)
    assert got["STSBenchmark"]["test"]["nsamples"] == 35 and got["SICKRelatedness"]["test"]["nsamples"] == 33
    assert main(["evaluate", "--model", "x", "--tasks", "transfer", "--format", "senteval", "--no-mlflow"]) == 2
    assert "--format senteval writes SentEval's results dict of the STS tasks" in capsys.readouterr().err
