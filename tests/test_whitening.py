"""BERT-whitening baseline (Su et al. 2021; docs/methods.md#baselines)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from sentlab.errors import SentlabError
from sentlab.evaluate.baselines.whitening import Whitening, corpus_sample, whiten_lookup

from _support.sts_tables import random_word_table as _table


def _correlated(n: int = 400, d: int = 6, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    mix = rng.normal(size=(d, d))
    return rng.normal(size=(n, d)) @ mix + rng.normal(size=d) * 5  # anisotropic, off-centre


def test_whitened_fit_sample_has_zero_mean_and_identity_covariance():
    x = _correlated()
    assert np.abs(np.cov(x, rowvar=False) - np.eye(6)).max() > 0.5  # far from white before
    wh = Whitening.fit(x)
    y = wh(x)
    assert y.shape == (400, 6) and y.dtype == np.float32
    np.testing.assert_allclose(y.mean(0), 0.0, atol=1e-4)
    np.testing.assert_allclose(np.cov(y, rowvar=False), np.eye(6), atol=1e-4)
    # W = U Λ^(-1/2): W Wᵀ is the inverse covariance
    np.testing.assert_allclose(wh.W @ wh.W.T, np.linalg.inv(np.cov(x, rowvar=False)), rtol=1e-6, atol=1e-8)


def test_dimension_cut_keeps_the_largest_variance_directions():
    x = _correlated()
    full = Whitening.fit(x)
    cut = Whitening.fit(x, dim=3)
    y = cut(x)
    assert y.shape == (400, 3) and cut.out_dim == 3 and cut.info() == {"fit_size": 400, "in_dim": 6, "out_dim": 3}
    np.testing.assert_allclose(np.cov(y, rowvar=False), np.eye(3), atol=1e-4)
    np.testing.assert_allclose(y, full(x)[:, :3], atol=1e-4)  # the first k columns of the full transform
    # the kept directions are those of the largest eigenvalues of the covariance
    ev = np.linalg.eigvalsh(np.cov(x, rowvar=False))[::-1]
    kept = 1.0 / np.sum(cut.W ** 2, axis=0)  # ||u_i / sqrt(λ_i)||² = 1/λ_i
    np.testing.assert_allclose(kept, ev[:3], rtol=1e-6)


def test_bad_fits_are_user_errors():
    x = _correlated(n=5, d=6)
    with pytest.raises(SentlabError, match="sample_size"):
        Whitening.fit(x)  # fewer sentences than dimensions
    with pytest.raises(SentlabError, match="evaluate.whitening.dim"):
        Whitening.fit(_correlated(), dim=7)
    flat = _correlated()
    flat[:, 5] = flat[:, 4]  # rank-deficient
    with pytest.raises(SentlabError, match="singular"):
        Whitening.fit(flat)


def test_corpus_sample_is_seeded(tmp_path):
    f = tmp_path / "train.parquet"
    pd.DataFrame({"id": range(50), "text": [f"sentence {i}" for i in range(50)]}).to_parquet(f)
    a, b = corpus_sample(f, 10, seed=1), corpus_sample(f, 10, seed=1)
    assert a == b and len(set(a)) == 10
    assert len(corpus_sample(f, 500, seed=1)) == 50
    with pytest.raises(SentlabError, match="dvc repro prepare"):
        corpus_sample(tmp_path / "missing.parquet", 10, seed=1)


def test_whitening_encoder_is_a_post_transform_and_pool_is_encoded_once(tiny_bert, monkeypatch, tmp_path):
    from sentlab.config import Params
    from tiny import counting_encoder
    from sentlab.evaluate.baselines import fitted
    from sentlab.evaluate.sts.protocol import evaluate_table

    model, tok = tiny_bert
    calls: list[list[str]] = []

    raw = counting_encoder(model, tok, "base-whitening", calls)
    monkeypatch.setattr(fitted, "build_encoders", lambda *a, **kw: {"base-whitening": raw})
    table = _table()
    params = Params()
    params.evaluate.whitening.dim = 16
    enc, embeddings, info = fitted.whitening_encoder(params, table)
    assert info["fit_on"] == "sts_pool" and info["out_dim"] == 16 and info["in_dim"] == 32
    assert info["fit_size"] == len(calls[0]) == len(set(calls[0]))  # the pool, each sentence once
    assert isinstance(enc.post, Whitening) and dataclasses.replace(enc, post=None).pooling == "mean"
    # the whitened lookup is what the encoder with `post` produces
    some = calls[0][:5]
    np.testing.assert_allclose(np.stack([embeddings[s] for s in some]), enc.encode(some), atol=1e-4)
    # evaluation reuses it: no further encoding, and the same scores as encoding through `post`
    n_calls = len(calls)
    res = evaluate_table(enc, table, embeddings=embeddings)
    assert len(calls) == n_calls
    direct = evaluate_table(enc, table)
    for t in ("STS12", "STSBenchmark", "STSBenchmark-dev", "Avg"):
        assert res[t] == pytest.approx(direct[t], abs=1e-2)
    lookup = whiten_lookup({"x": np.ones(32)}, enc.post)
    assert lookup["x"].shape == (16,)


def test_whitening_fit_on_corpus(tiny_bert, monkeypatch, tmp_path):
    from sentlab.config import Params
    from sentlab.nn.encoder import SentenceEncoder
    from sentlab.evaluate.baselines import fitted

    model, tok = tiny_bert
    raw = SentenceEncoder(model, tok, pooling="first_last", name="base-whitening")
    monkeypatch.setattr(fitted, "build_encoders", lambda *a, **kw: {"base-whitening": raw})
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data/corpus").mkdir(parents=True)
    pd.DataFrame({"id": range(60),
                  "text": [f"sentence number {i} about {'cats' if i % 2 else 'dogs'}" for i in range(60)]}
                 ).to_parquet(tmp_path / "data/corpus/train.parquet")
    params = Params()
    params.evaluate.whitening.fit_on = "corpus"
    params.evaluate.whitening.sample_size = 40
    params.evaluate.whitening.dim = 8
    enc, embeddings, info = fitted.whitening_encoder(params, _table())
    assert embeddings is None and info["fit_size"] == 40 and info["fit_on"] == "corpus"
    assert "data/corpus/train.parquet" in info["fit_source"]
    sample = corpus_sample(tmp_path / "data/corpus/train.parquet", 40, params.seed)
    y = enc.encode(sample)
    np.testing.assert_allclose(np.cov(y, rowvar=False), np.eye(8), atol=1e-3)


def test_whitening_fit_on_nli(tiny_bert, monkeypatch, tmp_path):
    """fit_on: nli (SimCSE App. C's "NLI" fit, its Table 5 row): μ and W from the distinct NLI sentences."""
    from sentlab.config import Params
    from sentlab.nn.encoder import SentenceEncoder
    from sentlab.evaluate.baselines import fitted
    from _support.sts_tables import nli_corpus as _nli

    model, tok = tiny_bert
    raw = SentenceEncoder(model, tok, pooling="first_last", name="base-whitening")
    monkeypatch.setattr(fitted, "build_encoders", lambda *a, **kw: {"base-whitening": raw})
    monkeypatch.chdir(tmp_path)
    sents = _nli(tmp_path)
    params = Params()
    params.evaluate.whitening.fit_on = "nli"
    params.evaluate.whitening.sample_size = None
    params.evaluate.whitening.dim = 8
    enc, embeddings, info = fitted.whitening_encoder(params, _table())
    assert embeddings is None and info["fit_on"] == "nli" and info["fit_size"] == len(sents) == 114
    assert "data/corpus/nli.parquet" in info["fit_source"] and "NLI stand-in" in info["fit_source"]
    np.testing.assert_allclose(np.cov(enc.encode(sents), rowvar=False), np.eye(8), atol=1e-3)
