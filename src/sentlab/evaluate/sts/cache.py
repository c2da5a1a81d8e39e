"""A content-addressed cache of pooled sentence embeddings: a model encodes a sentence list once.

Every evaluate stage encodes through it (:func:`embedding_cache` in ``pipeline/evaluate.py``):

* the backbone's baseline stages (``evaluate_baseline@cls/mean/first_last/whitening/flow``) evaluate the
  same backbone on the same ~26.7k sentences with different poolings: the first of them runs ONE
  forward pass per batch, pools it every way in ``share_poolings`` and stores each; the other stages
  load their embeddings instead of encoding again (whitening's and the flow's fit on ``first_last`` included,
  and the SICK train/trial sentences of the cosine table). Stages that miss at once (``sentlab run --jobs N``,
  whose worktrees get the workspace's cache folder) wait on an ``flock`` per model and sentence list
  (:meth:`EmbeddingCache._encoding`) and load what the first stored;
* a trained model's stage stores its embeddings, so a re-run of the stage for anything but the model
  and its encoding (an evaluate param such as ``hard_subset`` or ``diagnostics``, the evaluation or
  statistics code) loads them instead of encoding the ~29.5k sentences again.

Key (:meth:`EmbeddingCache.key`): the sha256 of

* the model's content: every parameter and buffer (name, dtype, shape, bytes), its config and
  its tokenizer without its call-time truncation/padding state (:func:`model_fingerprint`), so a retrained or
  edited model misses, and a process that has encoded computes the same key as a fresh one;
* how it is encoded: pooling, template, dims, precision, device, effective max_length, token
  budget, batch size, torch threads, the trained head's weights, the torch/transformers versions and the sources
  of ``sentlab/nn/encoder.py`` and ``encoder_head.py`` — everything that can change an embedding's bits;
* the sentence list (in order: row ``i`` of the stored array is sentence ``i``).

A hit is therefore bit-identical to a fresh encode (``tests/test_embedding_cache.py`` checks it).
What is stored is the raw pooled embedding; an encoder's ``post`` (whitening) is applied after
loading. Entries are ``<root>/<key>.npy`` (float32, written to a temporary sibling and renamed,
read back with ``np.load(allow_pickle=False)``) plus ``<key>.json`` saying what they hold and the sha256 of the rows,
checked at every load (an entry that differs, even with the right shape, is encoded again). The
root is ``.sentlab_cache/embeddings`` (git- and DVC-ignored; delete it any time), or
``$SENTLAB_EMBEDDING_CACHE``; ``SENTLAB_EMBEDDING_CACHE=off`` turns the cache off. The folder is
kept under ``$SENTLAB_EMBEDDING_CACHE_MAX_GB`` (default 10; a quick-profile model's entry measured 42.8 MB,
a bert-base model's is 29,482 x 768 float32 = 90.6 MB): after each store the least recently used entries (a hit
counts as a use) are deleted until it fits. Neither variable changes a number, so neither is a param.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import hashlib
import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Iterator, Optional, Sequence

import numpy as np
import torch

from ...nn import encoder as encoder_module
from ...nn import encoder_head as encoder_head_module
from ...config import poolings as pooling_module
from ...nn.encoder import SentenceEncoder
from ...runtime.io import write_json

log = logging.getLogger(__name__)

DEFAULT_ROOT = Path(".sentlab_cache/embeddings")
ENV = "SENTLAB_EMBEDDING_CACHE"
MAX_GB_ENV = "SENTLAB_EMBEDDING_CACHE_MAX_GB"
DEFAULT_MAX_GB = 10.0
# sentlab/nn/encoder.py, the poolings it applies (config/poolings.py) and encoder_head.py (the head encode() applies):
# their sources are in every key
_ENCODER_SOURCES = tuple(Path(m.__file__).resolve() for m in (encoder_module, pooling_module, encoder_head_module))
_active: contextvars.ContextVar[Optional["EmbeddingCache"]] = contextvars.ContextVar("sentlab_embedding_cache",
                                                                                       default=None)


def _tensor_bytes(t: torch.Tensor) -> np.ndarray:
    """The raw bytes of a tensor of any dtype (bf16 included), without a copy when it is contiguous on CPU."""
    return t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()


def model_fingerprint(model: torch.nn.Module, tokenizer) -> str:
    """sha256 of a model's weights (parameters and buffers), config and tokenizer."""
    h = _hash_state(hashlib.sha256(), model)
    config = getattr(model, "config", None)
    h.update((config.to_json_string(use_diff=False) if config is not None else type(model).__name__).encode())
    backend = getattr(tokenizer, "backend_tokenizer", None)
    tok_repr = _backend_repr(backend) if backend is not None else json.dumps(tokenizer.get_vocab(), sort_keys=True)
    h.update(f"{type(tokenizer).__name__}\0{tok_repr}\0{tokenizer.padding_side}\0".encode())
    h.update(json.dumps(tokenizer.special_tokens_map, sort_keys=True, default=str).encode())
    return h.hexdigest()


def _backend_repr(backend) -> str:
    """A fast tokenizer's definition without its call-time settings (``truncation``, ``padding``): every call of the
    encoder sets them itself (``truncation=True, max_length=...``, ``padding=False``; the effective max_length is in
    the key), and the first call changes them from what tokenizer.json saved. With them, the same model's key changed
    once the process had encoded anything, so a baseline stage that had encoded missed the entries the first stage
    stored from a fresh process, and encoded the SICK train/trial sentences again (issue #69 §3)."""
    state = json.loads(backend.to_str())
    for transient in ("truncation", "padding"):
        state.pop(transient, None)
    return json.dumps(state, sort_keys=True)


def sentences_fingerprint(sentences: Sequence[str]) -> str:
    """sha256 of an ordered sentence list (each length-prefixed, so no two lists collide by joining)."""
    h = hashlib.sha256()
    for s in sentences:
        b = s.encode("utf-8", "surrogatepass")
        h.update(f"{len(b)}:".encode())
        h.update(b)
    return h.hexdigest()


def encoding_settings(encoder: SentenceEncoder, batch_size: int) -> dict:
    """Everything besides the weights and the sentences that can change an embedding's bits."""
    import transformers

    return {"pooling": encoder.pooling, "template": encoder.template, "end_period": encoder.end_period,
            "dims": list(encoder.dims) if encoder.dims is not None else None, "precision": encoder.precision,
            "device": encoder.device.type, "max_length": encoder.effective_max_length,
            "token_budget": encoder.token_budget, "batch_size": int(batch_size),
            "threads": encoder.batch_threads,
            "attention": getattr(getattr(encoder.model, "config", None), "_attn_implementation", None),
            "torch": torch.__version__, "transformers": transformers.__version__,
            "head": _head_fingerprint(encoder.head),
            "encoder_code": hashlib.sha256(b"".join(p.read_bytes() for p in _ENCODER_SOURCES)).hexdigest()[:16]}


def _head_fingerprint(head: Optional[torch.nn.Module]) -> Optional[str]:
    """sha256 of the trained head :meth:`SentenceEncoder.encode` applies after the pooling (None: none), so the same
    backbone with and without its head, or with another head, never shares an entry."""
    if head is None:
        return None
    return _hash_state(hashlib.sha256(repr(head).encode()), head).hexdigest()


def _hash_state(h, module: torch.nn.Module):
    """``h`` updated with every parameter and buffer of ``module`` (name, dtype, shape, bytes, in name order)."""
    for name, t in sorted(module.state_dict().items()):
        h.update(f"{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        h.update(_tensor_bytes(t))
    return h


@dataclasses.dataclass
class EmbeddingCache:
    """The cache in folder ``root``; ``share_poolings``: the poolings computed from the same forward
    pass whenever the model is encoded (the baseline stages' cls/mean/first_last)."""

    root: Path = DEFAULT_ROOT
    share_poolings: tuple[str, ...] = ()
    max_bytes: Optional[int] = None   # None: no bound (embedding_cache() sets it from $SENTLAB_EMBEDDING_CACHE_MAX_GB)
    hits: int = 0
    misses: int = 0
    write_failed: bool = False   # a store failed (full disk, permissions): no more stores here

    def key(self, encoder: SentenceEncoder, sentences: Sequence[str], batch_size: int,
            model_hash: Optional[str] = None, sentences_hash: Optional[str] = None) -> str:
        blob = json.dumps({"model": model_hash or model_fingerprint(encoder.model, encoder.tokenizer),
                           "sentences": sentences_hash or sentences_fingerprint(sentences),
                           "n": len(sentences), **encoding_settings(encoder, batch_size)}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    def embed(self, encoder: SentenceEncoder, sentences: Sequence[str], batch_size: int = 128) -> np.ndarray:
        """``encoder.encode(sentences, batch_size)`` through the cache (``post`` applied after loading).

        On a miss the model runs once for the encoder's pooling and every compatible one of
        ``share_poolings``; each is stored under its own key."""
        sentences = list(sentences)
        model_hash = model_fingerprint(encoder.model, encoder.tokenizer)
        sent_hash = sentences_fingerprint(sentences)
        key = self.key(encoder, sentences, batch_size, model_hash, sent_hash)
        seen = _mtime(self._path(key))
        raw = self._load(key, len(sentences))
        if raw is None:
            with self._encoding(encoder, sentences, batch_size, model_hash, sent_hash):
                if _mtime(self._path(key)) != seen:   # stored by a stage that encoded while this one waited
                    raw = self._load(key, len(sentences))
                if raw is None:
                    return self._encode_and_store(encoder, sentences, batch_size, model_hash, sent_hash)
            self.hits += 1
            log.info("embedding cache hit after waiting: %s (%s pooling, %d sentences)", encoder.name,
                     encoder.pooling, len(sentences))
        else:
            self.hits += 1
            log.info("embedding cache hit: %s (%s pooling, %d sentences)", encoder.name, encoder.pooling,
                     len(sentences))
        return encoder.post(raw).astype(np.float32) if encoder.post is not None else raw

    def _encode_and_store(self, encoder: SentenceEncoder, sentences: list[str], batch_size: int, model_hash: str,
                          sent_hash: str) -> np.ndarray:
        """A miss: the model runs once for the encoder's pooling and every compatible one of ``share_poolings``;
        each is stored under its own key; returns the encoder's (``post`` applied)."""
        self.misses += 1
        poolings = [encoder.pooling]
        if encoder.template is None:  # a template changes the input text: that pooling runs alone
            poolings += [p for p in self.share_poolings if p != "mask"]
        computed = encoder.encode_poolings(sentences, poolings, batch_size=batch_size, show_progress_bar=True)
        for p, emb in computed.items():
            other = dataclasses.replace(encoder, pooling=p, post=None)
            if not self._store_or_warn(self.key(other, sentences, batch_size, model_hash, sent_hash), emb, other,
                                       batch_size):
                break
        raw = computed[encoder.pooling]
        return encoder.post(raw).astype(np.float32) if encoder.post is not None else raw

    @contextlib.contextmanager
    def _encoding(self, encoder: SentenceEncoder, sentences: Sequence[str], batch_size: int, model_hash: str,
                  sent_hash: str) -> Iterator[None]:
        """Hold ``<root>/.<group>.lock`` (an ``flock``) while encoding: the group is the key without the pooling, so
        baseline stages running at once (``sentlab run --jobs N``: each in its own process) wait for the one forward
        pass the first of them makes and load what it stored. A folder that cannot hold the lock: no wait (the
        cache is optional; the numbers are the same)."""
        import fcntl

        blob = {"model": model_hash, "sentences": sent_hash, "n": len(sentences),
                **encoding_settings(encoder, batch_size)}
        blob.pop("pooling")
        group = hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()
        try:
            Path(self.root).mkdir(parents=True, exist_ok=True)
            fh = open(Path(self.root) / f".{group}.lock", "a+")
        except OSError:
            yield
            return
        try:
            fcntl.flock(fh, fcntl.LOCK_EX)
            yield
        finally:
            fh.close()

    def _path(self, key: str) -> Path:
        return Path(self.root) / f"{key}.npy"

    def _load(self, key: str, n: int) -> Optional[np.ndarray]:
        path = self._path(key)
        if not path.is_file():
            return None
        try:
            arr = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            log.warning("embedding cache entry %s is unreadable (%s): encoding again and replacing it", path, e)
            return None
        if arr.dtype != np.float32 or arr.ndim != 2 or arr.shape[0] != n:
            log.warning("embedding cache entry %s holds %s %s, not %d float32 rows: encoding again and replacing it",
                        path, arr.dtype, arr.shape, n)
            return None
        try:
            want = json.loads(path.with_suffix(".json").read_text(encoding="utf-8")).get("sha256")
        except (OSError, ValueError):
            want = None
        if want != _digest(arr):   # a changed byte of the right shape, or an entry whose record was never written
            log.warning("embedding cache entry %s does not match the checksum stored with it: encoding again and "
                        "replacing it", path)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # a use: the least recently used entries go first when the folder is over its bound
        return arr

    def _store_or_warn(self, key: str, emb: np.ndarray, encoder: SentenceEncoder, batch_size: int) -> bool:
        """:meth:`_store`; a write that fails (a full disk, a folder it may not write) is one warning and the
        evaluation goes on with the embeddings it computed: the cache is optional. Returns whether it stored."""
        if self.write_failed:
            return False
        try:
            self._store(key, emb, encoder, batch_size)
            return True
        except OSError as e:
            self.write_failed = True
            for f in (self._path(key), self._path(key).with_suffix(".json")):   # never an entry without its record
                with contextlib.suppress(OSError):
                    f.unlink(missing_ok=True)
            log.warning("embedding cache: could not store an entry in %s (%s: %s); the evaluation goes on without "
                        "storing (its numbers are the same). Free disk or fix the folder's permissions, or set "
                        "%s=off.", self.root, type(e).__name__, e, ENV)
            return False

    def _store(self, key: str, emb: np.ndarray, encoder: SentenceEncoder, batch_size: int) -> None:
        root = Path(self.root)
        root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=root, prefix=f".{key}.", suffix=".npy.tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                np.save(f, np.ascontiguousarray(emb, dtype=np.float32), allow_pickle=False)
            os.replace(tmp, self._path(key))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        write_json(root / f"{key}.json", {"shape": list(emb.shape), "name": encoder.name, "sha256": _digest(emb),
                                          **encoding_settings(encoder, batch_size)})
        self._evict(keep=key)

    def _evict(self, keep: str) -> None:
        """Delete the temporary files of writes that were killed (``.*.tmp`` older than :data:`STALE_TMP_S`:
        a write in progress elsewhere is younger), then the least recently used entries (and their .json)
        until the folder is under ``max_bytes``; ``keep`` (the entry just stored) stays even when it alone is
        over the bound."""
        now = time.time()
        for f in Path(self.root).glob(".*.tmp"):
            with contextlib.suppress(OSError):
                if now - f.stat().st_mtime > STALE_TMP_S:
                    f.unlink()
                    log.info("embedding cache: removed %s, left by an interrupted write", f)
        if self.max_bytes is None:
            return
        entries = []
        for f in Path(self.root).glob("*.npy"):
            with contextlib.suppress(OSError):
                st = f.stat()
                entries.append((st.st_mtime, st.st_size, f))
        total = sum(size for _, size, _ in entries)
        for _, size, f in sorted(entries, key=lambda e: e[0]):
            if total <= self.max_bytes:
                break
            if f.stem == keep:
                continue
            f.unlink(missing_ok=True)
            f.with_suffix(".json").unlink(missing_ok=True)
            total -= size
            log.info("embedding cache over %.1f GB: removed the least recently used entry %s", self.max_bytes / 1e9, f)


def _mtime(path: Path) -> Optional[int]:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


STALE_TMP_S = 3600  # a temporary file this old is from a killed write (one entry takes seconds to write)


def _digest(arr: np.ndarray) -> str:
    """sha256 of an entry's float32 rows: checked at every load, so a corrupted entry is never served."""
    return hashlib.sha256(np.ascontiguousarray(arr, dtype=np.float32).tobytes()).hexdigest()


def max_cache_bytes() -> int:
    """The cache folder's bound in bytes: ``$SENTLAB_EMBEDDING_CACHE_MAX_GB`` (default 10)."""
    from ...errors import SentlabError

    raw = os.environ.get(MAX_GB_ENV, "").strip()
    try:
        gb = float(raw) if raw else DEFAULT_MAX_GB
    except ValueError:
        gb = -1.0
    if not (gb >= 0 and gb * 1e9 < 2**63):   # nan, inf and a byte count beyond any disk are refused
        raise SentlabError(f"{MAX_GB_ENV}={raw!r} is not a size in GB; set it to a finite number >= 0 (e.g. 10; a "
                           f"large one such as 100000 for no practical bound), or unset it "
                           f"for the default {DEFAULT_MAX_GB:g} GB ({ENV}=off turns the embedding cache off).")
    return int(gb * 1e9)


def active_cache() -> Optional[EmbeddingCache]:
    """The cache :func:`embedding_cache` made active in this context, or None."""
    return _active.get()


@contextlib.contextmanager
def embedding_cache(share_poolings: Sequence[str] = (),
                    root: Optional[Path] = None) -> Iterator[Optional[EmbeddingCache]]:
    """Make :func:`sentlab.evaluate.sts.protocol.embed_unique` (the evaluator's encoding) go through an
    :class:`EmbeddingCache` inside the ``with`` block. ``root`` defaults to ``$SENTLAB_EMBEDDING_CACHE`` or
    ``.sentlab_cache/embeddings``; ``SENTLAB_EMBEDDING_CACHE=off`` yields None (no cache)."""
    env = os.environ.get(ENV, "")
    if root is None and env.lower() == "off":
        yield None
        return
    cache = EmbeddingCache(root=Path(root or env or DEFAULT_ROOT), share_poolings=tuple(share_poolings),
                           max_bytes=max_cache_bytes())
    token = _active.set(cache)
    try:
        yield cache
    finally:
        _active.reset(token)
