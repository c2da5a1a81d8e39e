"""The content-addressed embedding cache (sentlab.evaluate.sts.cache) and the shared forward pass.

A hit must be bit-identical to a fresh encode, a changed model / pooling / setting / sentence
list must miss, and one forward pass must serve every shared pooling.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from tiny import sentences

from sentlab.nn.encoder import SentenceEncoder
from sentlab.evaluate.sts.cache import EmbeddingCache, embedding_cache
from sentlab.evaluate.sts.protocol import embed_unique

SHARED = ("cls", "mean", "first_last")
SENTS = sentences(40, seed=3)


class CountingModel(torch.nn.Module):
    """Wraps a model and counts its forward passes."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.config = inner.config
        self.calls = 0

    def forward(self, **kw):
        self.calls += 1
        return self.inner(**kw)


@pytest.fixture
def model(tiny_bert, one_thread):
    net, tok = tiny_bert
    return CountingModel(net.eval()), tok


def _enc(model, pooling="mean", **kw):
    net, tok = model
    return SentenceEncoder(net, tok, pooling=pooling, **kw)


def test_hit_is_bit_identical_to_a_fresh_encode_and_shares_one_pass(model, tmp_path):
    fresh = {p: _enc(model, p).encode(SENTS, batch_size=8) for p in SHARED}
    net = model[0]
    cache = EmbeddingCache(tmp_path, share_poolings=SHARED)
    net.calls = 0
    first = cache.embed(_enc(model, "mean"), SENTS, batch_size=8)
    passes = net.calls
    assert (cache.misses, cache.hits) == (1, 0)
    assert len(list(tmp_path.glob("*.npy"))) == 3          # mean, cls and first_last stored from that pass
    assert passes == len(_enc(model).token_batches(SENTS, 8)[1])   # one forward pass per batch, not three
    for p in SHARED:
        got = cache.embed(_enc(model, p), SENTS, batch_size=8)
        assert got.dtype == np.float32 and np.array_equal(got, fresh[p]), p   # bit-identical
    assert net.calls == passes and cache.hits == 3          # the hits ran no model
    assert np.array_equal(first, fresh["mean"])


def test_changed_model_pooling_settings_or_sentences_miss(model, tmp_path):
    cache = EmbeddingCache(tmp_path, share_poolings=("mean",))
    enc = _enc(model, "mean")
    key = cache.key(enc, SENTS, 8)
    assert cache.key(_enc(model, "mean"), SENTS, 8) == key            # same content, same key
    assert cache.key(_enc(model, "cls"), SENTS, 8) != key
    assert cache.key(_enc(model, "mean", max_length=16), SENTS, 8) != key
    assert cache.key(_enc(model, "mean", precision="bf16"), SENTS, 8) != key
    assert cache.key(_enc(model, "mean", dims=(0, 16)), SENTS, 8) != key
    hidden = model[0].config.hidden_size
    head = torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.Tanh())   # a supervised model's MLP
    with_head = cache.key(_enc(model, "mean", head=head), SENTS, 8)
    assert with_head != key                                              # the same backbone, its head applied
    with torch.no_grad():
        head[0].bias[0] += 1e-3
    assert cache.key(_enc(model, "mean", head=head), SENTS, 8) != with_head   # another head
    assert cache.key(enc, SENTS, 16) != key
    assert cache.key(enc, SENTS[:-1], 8) != key
    assert cache.key(enc, SENTS[::-1], 8) != key
    cache.embed(enc, SENTS, 8)
    with torch.no_grad():
        model[0].inner.encoder.layer[0].output.dense.weight[0, 0] += 1e-3   # a retrained model
    changed = cache.key(enc, SENTS, 8)
    assert changed != key
    again = cache.embed(enc, SENTS, 8)
    assert cache.misses == 2 and np.array_equal(again, enc.encode(SENTS, batch_size=8))


def test_post_is_applied_after_loading_and_not_stored(model, tmp_path):
    scale = lambda x: x * 2  # noqa: E731  (a stand-in for a whitening transform)
    cache = EmbeddingCache(tmp_path)
    raw = cache.embed(_enc(model, "mean"), SENTS, 8)
    post = cache.embed(dataclasses.replace(_enc(model, "mean"), post=scale), SENTS, 8)
    assert cache.hits == 1 and np.array_equal(post, raw * 2)


def test_a_corrupt_entry_is_encoded_again_and_replaced(model, tmp_path, caplog):
    cache = EmbeddingCache(tmp_path)
    enc = _enc(model, "cls")
    want = cache.embed(enc, SENTS, 8)
    path = tmp_path / f"{cache.key(enc, SENTS, 8)}.npy"
    path.write_bytes(path.read_bytes()[:100])                              # a truncated file
    got = cache.embed(enc, SENTS, 8)
    assert "unreadable" in caplog.text and cache.misses == 2 and np.array_equal(got, want)
    assert np.array_equal(np.load(path, allow_pickle=False), want)         # replaced by a whole one
    assert not list(tmp_path.glob(".*.tmp"))                               # no temporary left behind


def test_embed_unique_uses_the_active_cache_only_inside_the_block(model, tmp_path, monkeypatch):
    monkeypatch.delenv("SENTLAB_EMBEDDING_CACHE", raising=False)
    enc = _enc(model, "first_last")
    with embedding_cache(share_poolings=SHARED, root=tmp_path) as cache:
        a = embed_unique(enc, SENTS + SENTS[:5], batch_size=8)
        b = embed_unique(_enc(model, "cls"), SENTS, batch_size=8)
    assert (cache.misses, cache.hits) == (1, 1) and len(a) == len(SENTS) == len(b)
    fresh = enc.encode(SENTS, batch_size=8)
    assert all(np.array_equal(a[s], fresh[i]) for i, s in enumerate(SENTS))
    embed_unique(enc, SENTS, batch_size=8)                                 # outside: no cache
    assert cache.misses + cache.hits == 2
    monkeypatch.setenv("SENTLAB_EMBEDDING_CACHE", "off")
    with embedding_cache(share_poolings=SHARED) as off:
        assert off is None


def test_mask_pooling_runs_alone(model, tmp_path):
    cache = EmbeddingCache(tmp_path, share_poolings=SHARED)
    enc = _enc(model, "mask")
    got = cache.embed(enc, SENTS[:6], 4)
    assert len(list(tmp_path.glob("*.npy"))) == 1 and np.array_equal(got, enc.encode(SENTS[:6], batch_size=4))
    with pytest.raises(ValueError, match="template"):
        enc.encode_poolings(SENTS[:2], ["mask", "cls"])


def test_least_recently_used_entries_go_when_the_folder_is_over_its_bound(model, tmp_path):
    """Over ``max_bytes`` the entries least recently stored or hit are deleted (with their .json); a hit keeps an
    old entry; the entry just stored stays."""
    import os

    enc = _enc(model)
    lists = [SENTS[i * 10:(i + 1) * 10] for i in range(4)]
    cache = EmbeddingCache(root=tmp_path)
    for i, sents in enumerate(lists[:3]):
        cache.embed(enc, sents, batch_size=8)
    entries = sorted(tmp_path.glob("*.npy"), key=lambda f: f.stat().st_mtime_ns)
    one = entries[0].stat().st_size
    for age, f in enumerate(entries):  # stored 300, 200, 100 s ago (mtime granularity plays no part)
        t = f.stat().st_mtime - 300 + 100 * age
        os.utime(f, (t, t))
    first = entries[0]
    cache.embed(enc, lists[0], batch_size=8)  # a hit: the oldest entry is now the most recently used
    assert cache.hits == 1
    cache.max_bytes = 3 * one
    cache.embed(enc, lists[3], batch_size=8)  # a fourth entry: one must go, the least recently used
    left = set(tmp_path.glob("*.npy"))
    assert len(left) == 3 and first in left and entries[1] not in left and entries[2] in left
    assert not entries[1].with_suffix(".json").exists()
    cache.max_bytes = one // 2  # smaller than one entry: the one just stored stays, the others go
    cache.embed(enc, SENTS[:5], batch_size=8)
    assert len(list(tmp_path.glob("*.npy"))) == 1


def test_an_entry_corrupted_in_place_with_the_right_shape_is_not_served(model, tmp_path, caplog):
    cache = EmbeddingCache(tmp_path)
    enc = _enc(model, "cls")
    want = cache.embed(enc, SENTS, 8)
    path = tmp_path / f"{cache.key(enc, SENTS, 8)}.npy"
    bad = want.copy()
    bad[3, 5] += 0.25                                                      # one value, same shape and dtype
    np.save(path, bad, allow_pickle=False)
    got = cache.embed(enc, SENTS, 8)
    assert "checksum" in caplog.text and cache.misses == 2 and np.array_equal(got, want)
    assert np.array_equal(np.load(path, allow_pickle=False), want)         # replaced by the right one


def test_cache_bound_from_the_environment(monkeypatch, tmp_path):
    from sentlab.errors import SentlabError
    from sentlab.evaluate.sts.cache import max_cache_bytes

    monkeypatch.delenv("SENTLAB_EMBEDDING_CACHE_MAX_GB", raising=False)
    assert max_cache_bytes() == 10 * 10**9
    monkeypatch.setenv("SENTLAB_EMBEDDING_CACHE_MAX_GB", "0.5")
    with embedding_cache(root=tmp_path) as cache:
        assert cache.max_bytes == 5 * 10**8
    monkeypatch.setenv("SENTLAB_EMBEDDING_CACHE_MAX_GB", "lots")
    with pytest.raises(SentlabError, match="SENTLAB_EMBEDDING_CACHE_MAX_GB='lots'"):
        max_cache_bytes()
    for raw in ("inf", "nan", "-1", "1e300"):                               # a paragraph, never a traceback
        monkeypatch.setenv("SENTLAB_EMBEDDING_CACHE_MAX_GB", raw)
        with pytest.raises(SentlabError, match=f"SENTLAB_EMBEDDING_CACHE_MAX_GB='{raw}' is not a size"):
            max_cache_bytes()


def test_a_temporary_file_left_by_a_killed_write_is_removed_by_the_next_store(model, tmp_path):
    """A write killed between mkstemp and the rename leaves ``.<key>.*.npy.tmp``; the next store removes it once
    it is older than STALE_TMP_S (a younger one may be a write in progress), bound or no bound."""
    import os
    import time

    from sentlab.evaluate.sts.cache import STALE_TMP_S

    cache = EmbeddingCache(root=tmp_path)
    cache.max_bytes = None
    old, young = tmp_path / ".abc.123.npy.tmp", tmp_path / ".def.456.npy.tmp"
    old_json = tmp_path / ".abc.json.789.tmp"
    for f in (old, young, old_json):
        f.write_bytes(b"\x93NUMPY half")
    t = time.time() - STALE_TMP_S - 60
    os.utime(old, (t, t))
    os.utime(old_json, (t, t))
    cache.embed(_enc(model), SENTS[:4], batch_size=8)
    assert not old.exists() and not old_json.exists() and young.exists()


@pytest.mark.parametrize("fault", ["full disk", "not a folder"])
def test_a_cache_write_that_fails_warns_and_the_evaluation_goes_on(model, tmp_path, monkeypatch, caplog, fault):
    import errno

    root = tmp_path / "cache"
    if fault == "full disk":
        def full(*a, **kw):
            raise OSError(errno.ENOSPC, "No space left on device")
        monkeypatch.setattr(np, "save", full)
    else:
        root.write_text("a file where the cache folder should be")   # mkdir fails (as a read-only folder would)
    fresh = _enc(model, "mean").encode(SENTS, batch_size=8)
    cache = EmbeddingCache(root, share_poolings=SHARED)
    with caplog.at_level("WARNING"):
        got = cache.embed(_enc(model, "mean"), SENTS, batch_size=8)
    np.testing.assert_array_equal(got, fresh)                              # the numbers, as without a cache
    warned = [r.getMessage() for r in caplog.records if "could not store an entry" in r.getMessage()]
    assert len(warned) == 1 and "goes on without storing" in warned[0]     # once, not once per pooling
    if root.is_dir():
        assert [f.name for f in root.iterdir() if not f.name.endswith(".lock")] == []   # no entry, no temporary
        #                                                                   file (only the encoding's lock file)
