"""Evaluation settings: device/precision resolution and its record, the genre-stratified dev sample,
the method block in the metrics JSON, and diagnostics pinned on hand-computed examples."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from sentlab.config import HardSubsetParams, Params
from sentlab.errors import SentlabError
from sentlab.evaluate.sts.diagnostics import hard_subset_scores, split_alignment_uniformity
from sentlab.evaluate.sts.diagnostics import evaluate_dev
from sentlab.evaluate.sts.protocol import sample_pairs, select_splits
from sentlab.evaluate.sts.runner import build_encoders, evaluate_sts, resolve_device_precision
from sentlab.evaluate.sts.writers import StageOutputs, write_all
from _support.sts_tables import LookupEncoder
from _support.sts_tables import three_score_table as _table

STS5 = ("STS12", "STS13", "STS14", "STS15", "STS16")


# --- device / precision -----------------------------------------------------------------------

def test_auto_is_exact_fp32_on_every_device_and_bf16_an_opt_in(monkeypatch):
    """Issue #35: evaluation is exact by default on CUDA too; bf16 only when asked for (recorded approximate)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device_precision("auto", "auto") == (torch.device("cpu"), "fp32")
    assert resolve_device_precision("cpu", "bf16") == (torch.device("cpu"), "bf16")
    with pytest.raises(SentlabError, match="evaluate.device is `cuda`"):
        resolve_device_precision("cuda", "auto")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device_precision("auto", "auto") == (torch.device("cuda"), "fp32")
    assert resolve_device_precision("cuda", "bf16") == (torch.device("cuda"), "bf16")
    assert resolve_device_precision("auto", "fp32") == (torch.device("cuda"), "fp32")
    assert resolve_device_precision("cpu", "auto") == (torch.device("cpu"), "fp32")
    with pytest.raises(SentlabError, match="allowed"):
        resolve_device_precision("tpu", "auto")


def test_params_default_to_auto():
    ep = Params().evaluate
    assert (ep.device, ep.precision) == ("auto", "auto")


@pytest.fixture
def saved_model(tiny_bert, tmp_path):
    model, tok = tiny_bert
    d = tmp_path / "models" / "paser"
    model.save_pretrained(d)
    tok.save_pretrained(d)
    method = {"id": "paser", "eda": "rd", "decoder_layers": 2, "m": 10.0}
    (d / "sentlab.json").write_text(json.dumps({"status": "trained", "pooling": "mean", "method": method}))
    return d, method


@pytest.mark.parametrize("precision,numerics", [("bf16", "approximate"), ("auto", "exact")])
def test_metrics_record_device_precision_and_method_block(saved_model, tmp_path, monkeypatch, precision, numerics):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    model_dir, method = saved_model
    encs = build_encoders(str(model_dir), precision=precision, device="auto")
    assert encs["paser"].device == torch.device("cpu") and encs["paser"].pooling == "mean"
    params = Params(evaluate={"diagnostics": False, "batch_size": 4, "precision": precision, "device": "auto"})
    result = evaluate_sts(encs, _table(), params, model=str(model_dir), kind="trained",
                          extra_metrics={"method": method})
    assert result.metrics["method"] == method and not (tmp_path / "metrics").exists()   # the evaluator writes nothing
    write_all(result, StageOutputs.of("paser", tmp_path))
    got = json.loads((tmp_path / "metrics" / "paser.json").read_text())
    assert got["device"] == "cpu"
    assert got["precision"] == ("bf16" if precision == "bf16" else "fp32")
    assert got["numerics"].startswith(numerics)
    assert got["method"] == method and got["status"] == "evaluated"
    # MTEB's result JSON beside (a partial table here: the folder says why it holds none)
    assert "is not MTEB's task" in (tmp_path / "mteb" / "sentlab__paser" / "README.md").read_text()


# --- the model-selection dev sample ------------------------------------------------------------

def _dev(sizes: dict[str, int]) -> pd.DataFrame:
    rows = [dict(task="STSBenchmark", subset=g, split="dev", sentence1=f"{g} {i} a", sentence2=f"{g} {i} b",
                 score=float(i % 6)) for g, n in sizes.items() for i in range(n)]
    return pd.DataFrame(rows)


def test_dev_sample_is_stratified_by_genre_and_seeded():
    dev = _dev({"main-captions": 625, "main-forum": 375, "main-news": 500})   # captions first, as STS-B dev
    s = sample_pairs(dev, 300)
    assert s.subset.value_counts().to_dict() == {"main-captions": 125, "main-news": 100, "main-forum": 75}
    assert s.index.is_monotonic_increasing and s.index.is_unique
    pd.testing.assert_frame_equal(s, sample_pairs(dev, 300))                 # same pairs every call
    assert not s.index.equals(sample_pairs(dev, 300, seed=1).index)          # another seed, other pairs
    odd = sample_pairs(_dev({"a": 5, "b": 3, "c": 2}), 5)                    # quotas 2.5 / 1.5 / 1.0
    assert odd.subset.value_counts().to_dict() == {"a": 3, "b": 1, "c": 1}   # largest remainder, ties in name order
    assert sample_pairs(dev, None) is dev and sample_pairs(dev, 5000) is dev


def test_training_dev_eval_and_max_pairs_draw_the_same_sample():
    dev = _dev({"main-captions": 60, "main-forum": 30, "main-news": 30})
    enc = LookupEncoder({s: [1.0, float(i)] for i, s in enumerate(sorted({*dev.sentence1, *dev.sentence2}))})
    evaluate_dev(enc, dev, max_pairs=24)
    want = sample_pairs(dev, 24)
    assert set(enc.encoded) == {*want.sentence1, *want.sentence2}
    assert {s.split()[0] for s in enc.encoded} == {"main-captions", "main-forum", "main-news"}
    pd.testing.assert_frame_equal(select_splits(dev, ["STSBenchmark-dev"], 24)["STSBenchmark-dev"], want)


# --- diagnostics pinned on hand-computed examples -----------------------------------------------

def _words(n: int, tag: str) -> str:
    return " ".join([tag] + ["w"] * (n - 1))


def test_hard_subset_and_full_differ_as_hand_computed():
    """Subset (2 long-gap positives, 2 short-gap negatives) vs all 5 pairs; Spearman by hand:
    subset gold ranks (4,3,1,2), cosine ranks (4,2,3,1): Σd² = 6, ρ = 1 − 36/60 = 0.4;
    full adds a (gold 3, cos .3) pair: Σd² = 14, ρ = 1 − 84/120 = 0.3."""
    spec = [(2, 8, 5.0, 0.9), (1, 8, 4.0, 0.2), (4, 4, 0.0, 0.5), (3, 4, 1.0, 0.1), (4, 4, 3.0, 0.3)]
    rows, emb = [], {}
    for t in STS5:
        for i, (l1, l2, g, c) in enumerate(spec):
            s1, s2 = _words(l1, f"{t}{i}x"), _words(l2, f"{t}{i}y")
            emb[s1], emb[s2] = np.array([1.0, 0.0]), np.array([c, math.sqrt(1 - c * c)])
            rows.append(dict(task=t, subset="s", split="test", sentence1=s1, sentence2=s2, score=g))
    out = hard_subset_scores(select_splits(pd.DataFrame(rows), STS5), emb, HardSubsetParams())
    for v in out["tasks"].values():
        assert (v["positives"], v["negatives"], v["subset_pairs"], v["full_pairs"]) == (2, 2, 4, 5)
        assert v["subset"] == pytest.approx(40.0) and v["full"] == pytest.approx(30.0)
    assert out["Avg_subset"] == pytest.approx(40.0) and out["Avg_full"] == pytest.approx(30.0)


def test_alignment_and_uniformity_on_a_hand_computed_example():
    """a=(1,0), b=(0,1), c=3·(0,1). Positives (gold ≥ 4): (a,c) at ||·||² = 2, (b,c) at 0 → alignment 1;
    the negative (a,b) would make it 4/3. Uniformity over the 3 distinct sentences: squared distances
    2, 2, 0 → log((2e⁻⁴ + e⁰)/3)."""
    lookup = {"a": np.array([1.0, 0.0]), "b": np.array([0.0, 1.0]), "c": np.array([0.0, 3.0])}
    pairs = pd.DataFrame({"sentence1": ["a", "b", "a"], "sentence2": ["c", "c", "b"], "score": [5.0, 4.0, 1.0]})
    out = split_alignment_uniformity(pairs, lookup, pos_min_score=4.0)
    assert out["alignment"] == pytest.approx(1.0)
    assert out["uniformity"] == pytest.approx(math.log((2 * math.exp(-4) + 1) / 3))
    assert (out["positive_pairs"], out["sentences"]) == (2, 3)


def test_a_trained_models_method_block_is_the_params_its_train_stage_used():
    """The evaluate stage records the settings a model was trained with (the method's Params in
    force, with an ablation variant's `set`), so report rows are filled by what the model was."""
    from pathlib import Path

    from sentlab.config import load_params
    from sentlab.evaluate.sts.trained import trained_method_block

    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml", profile="quick")
    main = trained_method_block(params, "paser", "paser")
    assert (main["eda"], main["decoder_layers"], main["phrases"]) == ("rd", 2, "rake")
    variant = trained_method_block(params, "paser_aug_rs", "paser")
    assert (variant["eda"], variant["decoder_layers"]) == ("rs", 2)
    assert trained_method_block(params, "ptbert_tokens_m64", "ptbert")["attend_to"] == "tokens"
