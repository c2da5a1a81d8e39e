"""The five backbone baselines share one forward pass over the sentences (issue #69 §3).

The baseline stages (``evaluate_baseline@cls/mean/first_last/whitening/bert_flow``) run one after another, each in
its own process: each loads the backbone afresh (as here: :func:`~sentlab.evaluate.baselines.stage.evaluate_baseline`
loads it at every call). The first to encode computes every pooling the others need from the same hidden states and
stores each in the embedding cache under the key the other stage computes; the others load them. Before the fix the
key held the tokenizer's call-time truncation/padding state, which the first encode changes: a stage that had encoded
its evaluation pool stored the SICK train/trial sentences (the cosine table's) under a key no fresh process computes,
so the next stage encoded them again.
"""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from _support.sts_tables import random_word_table

from sentlab.nn.encoder import SentenceEncoder

KINDS = ("cls", "mean", "first_last", "whitening", "bert_flow")


def _table() -> pd.DataFrame:
    """The seven test sets and STS-B dev, plus SICK train/trial pairs (their sentences only in the cosine table)."""
    rng = np.random.default_rng(1)
    words = "red green blue tree house river stone bird sings walks".split()
    extra = [dict(task="SICKRelatedness", subset="s", split=split, score=float(rng.uniform(1, 5)),
                  sentence1=f"{split} {i} " + " ".join(rng.choice(words, size=4)),
                  sentence2=f"{split} {i} other " + " ".join(rng.choice(words, 3)))
             for split in ("train", "trial") for i in range(10)]
    return pd.concat([random_word_table(), pd.DataFrame(extra)], ignore_index=True)


@pytest.fixture
def backbone(tmp_path, one_thread):
    """A tiny random BERT saved with the MiniLM tokenizer as it ships (its tokenizer.json's truncation and padding)."""
    from transformers import AutoTokenizer

    from sentlab.assets.resolve import resolve_model
    from tiny import tiny_bert

    tok = AutoTokenizer.from_pretrained(resolve_model("sentence-transformers/all-MiniLM-L6-v2"))   # fresh, unused
    folder = tmp_path / "backbone"
    tiny_bert(tok, max_position_embeddings=128).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _params(backbone):
    from sentlab.config import Params

    p = Params()
    ev = p.evaluate
    ev = ev.model_copy(update={"baselines": list(KINDS), "diagnostics": False, "batch_size": 16, "device": "cpu",
                               "workers": 1, "bert_flow": ev.bert_flow.model_copy(update={"steps": 2}),
                               "whitening": ev.whitening.model_copy(update={"dim": 8})})   # the tiny BERT: 32 wide
    return p.model_copy(update={"model": p.model.model_copy(update={"backbone": str(backbone)}), "evaluate": ev})


def _count_encodings(monkeypatch) -> list[list[str]]:
    """Every sentence list the encoder runs through the model from now on (the list fills as it encodes)."""
    encoded: list[list[str]] = []
    real = SentenceEncoder._encode_sorted

    def counting(self, texts, poolings, batch_size, show):
        encoded.append(list(texts))
        return real(self, texts, poolings, batch_size, show)

    monkeypatch.setattr(SentenceEncoder, "_encode_sorted", counting)
    return encoded


def _run_five(params, table, monkeypatch) -> list[list[str]]:
    """The five baseline stages as the pipeline runs them (each with the stage's embedding cache, the backbone
    loaded afresh); returns every sentence list the backbone encoded."""
    from sentlab.evaluate.baselines.stage import baseline_poolings, evaluate_baseline
    from sentlab.evaluate.sts.cache import embedding_cache

    real = SentenceEncoder._encode_sorted
    encoded = _count_encodings(monkeypatch)
    for kind in KINDS:
        with embedding_cache(share_poolings=baseline_poolings(params)):
            evaluate_baseline(kind, params, table, None)
    monkeypatch.setattr(SentenceEncoder, "_encode_sorted", real)
    return encoded


def _distinct(table, params) -> list[str]:
    from sentlab.evaluate.sts.cosines import sick_all
    from sentlab.evaluate.sts.protocol import TASKS, pool_sentences, select_splits

    pool = pool_sentences(select_splits(table, [*TASKS, "STSBenchmark-dev"], params.evaluate.max_pairs))
    sick = sick_all(table)
    return list(dict.fromkeys([*pool, *sick.sentence1, *sick.sentence2]))


def test_the_five_baselines_encode_each_sentence_once_and_match_separate_passes(backbone, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    params, table = _params(backbone), _table()
    distinct = _distinct(table, params)

    monkeypatch.setenv("SENTLAB_EMBEDDING_CACHE", "off")              # the user turned the cache off: each stage
    separate = _run_five(params, table, monkeypatch)                   # encodes for itself, and still works
    off = {k: (tmp_path / f"reports/metrics/base-{k}.json").read_bytes() for k in KINDS}
    assert [len(t) for t in separate] == [len(_pool(table, params)), len(distinct) - len(_pool(table, params))] * 5
    monkeypatch.setenv("SENTLAB_EMBEDDING_CACHE", str(tmp_path / "cache"))
    shared = _run_five(params, table, monkeypatch)
    forwarded = Counter(s for texts in shared for s in texts)
    assert sorted(forwarded) == sorted(distinct)                       # every sentence of the five evaluations ...
    assert set(forwarded.values()) == {1}, {s: n for s, n in forwarded.items() if n > 1}   # ... encoded once
    assert sum(map(len, shared)) == len(distinct)
    for k in KINDS:                                                    # the same numbers, byte for byte
        assert (tmp_path / f"reports/metrics/base-{k}.json").read_bytes() == off[k], k
        assert json.loads(off[k])["status"] == "evaluated"

    from sentlab.assets.resolve import load_model
    from sentlab.evaluate.sts.cache import EmbeddingCache

    net, tok = load_model(str(backbone), device="cpu")
    cache = EmbeddingCache(tmp_path / "cache")
    for pooling in ("cls", "mean", "first_last"):                      # the shared pass's arrays, bit for bit
        enc = SentenceEncoder(net.eval(), tok, pooling=pooling, workers=1)   # those of its own pass
        for sents in (_pool(table, params), distinct[len(_pool(table, params)):]):   # the pool, the SICK extra
            got = cache._load(cache.key(enc, sents, 16), len(sents))
            assert got is not None and np.array_equal(got, enc.encode(sents, batch_size=16)), pooling


def _pool(table, params) -> list[str]:
    from sentlab.evaluate.sts.protocol import TASKS, pool_sentences, select_splits

    return pool_sentences(select_splits(table, [*TASKS, "STSBenchmark-dev"], params.evaluate.max_pairs))


def test_stages_encoding_at_once_wait_for_one_pass(tmp_path, tiny_bert, one_thread, monkeypatch):
    """Baseline stages running at once (``sentlab run --jobs N``, the workspace's cache shared by the worktrees): the
    second waits for the first one's pass (an ``flock`` per model and sentence list) and loads what it stored."""
    import threading

    from sentlab.evaluate.sts.cache import EmbeddingCache
    from tiny import sentences

    net, tok = tiny_bert
    sents = sentences(30, seed=5)
    inside, release, passes = threading.Event(), threading.Event(), []
    real = SentenceEncoder._encode_sorted

    def slow(self, texts, poolings, batch_size, show):
        passes.append(list(poolings))
        inside.set()
        assert release.wait(60)
        return real(self, texts, poolings, batch_size, show)

    monkeypatch.setattr(SentenceEncoder, "_encode_sorted", slow)
    first, second = (EmbeddingCache(tmp_path, share_poolings=("cls", "mean", "first_last")) for _ in range(2))
    got = {}
    a = threading.Thread(target=lambda: got.update(cls=first.embed(SentenceEncoder(net, tok, pooling="cls"), sents, 8)))
    b = threading.Thread(target=lambda: got.update(mean=second.embed(SentenceEncoder(net, tok, pooling="mean"), sents,
                                                                     8)))
    a.start()
    assert inside.wait(60)
    b.start()                                    # its own lock file handle: it blocks as another process would
    b.join(timeout=2)
    assert b.is_alive() and len(passes) == 1     # waiting, not encoding
    release.set()
    a.join(60)
    b.join(60)
    assert len(passes) == 1 and (first.misses, second.misses, second.hits) == (1, 0, 1)
    monkeypatch.setattr(SentenceEncoder, "_encode_sorted", real)
    assert np.array_equal(got["mean"], SentenceEncoder(net, tok, pooling="mean").encode(sents, batch_size=8))


def test_the_chains_of_a_local_ray_run_share_the_workspace_embedding_cache(tmp_path, monkeypatch):
    """Each chain of `sentlab run --jobs N` runs in its own worktree: a relative cache folder would be the worktree's,
    so every baseline chain encoded for itself. Where the workers see the workspace, they get its folder."""
    from sentlab.parallel.ray_run import chain_env

    monkeypatch.delenv("SENTLAB_EMBEDDING_CACHE", raising=False)
    assert chain_env(tmp_path, True, False)["SENTLAB_EMBEDDING_CACHE"] == str(tmp_path / ".sentlab_cache/embeddings")
    assert "SENTLAB_EMBEDDING_CACHE" not in chain_env(tmp_path, False, True)   # a node without the workspace
    monkeypatch.setenv("SENTLAB_EMBEDDING_CACHE", "off")                         # the user's setting wins
    assert chain_env(tmp_path, True, False)["SENTLAB_EMBEDDING_CACHE"] == "off"


def test_whitening_and_the_flow_fitted_on_nli_share_one_pass_over_its_sentences(backbone, tmp_path, monkeypatch):
    """The paper profile fits both on the NLI sentences (``fit_on: nli``, the same pooling): encoded once, through the
    cache; the fitted transforms are those of separate passes, bit for bit (the cache off)."""
    from _support.sts_tables import nli_corpus

    from sentlab.evaluate.baselines.fitted import flow_encoder, whitening_encoder
    from sentlab.evaluate.sts.cache import embedding_cache

    monkeypatch.chdir(tmp_path)
    nli = nli_corpus(tmp_path)
    p = _params(backbone)
    ev = p.evaluate.model_copy(update={"whitening": p.evaluate.whitening.model_copy(update={"fit_on": "nli"}),
                                       "bert_flow": p.evaluate.bert_flow.model_copy(update={"fit_on": "nli"})})
    params, table = p.model_copy(update={"evaluate": ev}), _table()
    encoded = _count_encodings(monkeypatch)

    def both():
        wh = whitening_encoder(params, table)[0].post
        flow = flow_encoder(params, table, progress=False)[0].post
        return wh, flow

    monkeypatch.setenv("SENTLAB_EMBEDDING_CACHE", str(tmp_path / "cache"))
    with embedding_cache(share_poolings=("first_last",)):
        wh, flow = both()
    assert sorted(len(t) for t in encoded if set(t) <= set(nli)) == [len(nli)]   # the NLI sentences: one pass
    monkeypatch.setenv("SENTLAB_EMBEDDING_CACHE", "off")
    with embedding_cache() as off:
        assert off is None
        wh0, flow0 = both()
    assert np.array_equal(wh.W, wh0.W) and np.array_equal(wh.mu, wh0.mu)
    x = np.random.default_rng(0).normal(size=(3, wh.W.shape[0])).astype(np.float32)
    assert np.array_equal(flow(x), flow0(x))
