"""Sharded, parallel, resumable annotation of a corpus into Parquet.

* The corpus is cut into shards of ``shard_size`` sentences (``part-00000.parquet``,
  ...); each shard is cut into batches of at most :data:`BATCH` sentences, which are
  the units of parallel work (``jobs`` processes). A Parquet corpus is read one shard at a time
  (:func:`annotate_file`), and at most ``4 * jobs`` batches are in flight: memory does not grow with the corpus.
* Every shard carries, in its Parquet key-value metadata, the backend name, the
  params hash (backend fingerprint + schema version), a hash of its input rows, its
  row count and its skipped / with-frames counts. A shard whose metadata match and
  whose ``id`` column reads back is reused, so an interrupted run resumes where it
  stopped; an unreadable shard, or one with another hash or row count, is rebuilt.
* Every file is written through :func:`sentlab.runtime.io.atomic_path` (temporary file +
  rename): a killed run leaves whole shards or none.
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing as mp
import os
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from itertools import chain
from pathlib import Path
from typing import Callable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import SentlabError
from ..runtime.io import atomic_path
from .base import _BACKENDS, Backend, BackendOptions
from .schema import (ANNOTATION_COLUMNS, META_BACKEND, META_INPUT_HASH, META_PARAMS_HASH, META_ROWS,
                     META_SCHEMA_VERSION, META_SKIPPED, SCHEMA, SCHEMA_VERSION, empty_row)
from .source import Shard, iter_shards, open_corpus, slice_shards

log = logging.getLogger(__name__)


# the backends register themselves (base.register_backend) when imported: here, not in base, which they import
def get_backend(name: str, options: BackendOptions | None = None) -> Backend:
    """Build the backend ``name`` (``nltk`` or ``spacy``, or a registered one)."""
    from . import nltk_backend, spacy_backend  # noqa: F401 - register the built-in backends

    if name not in _BACKENDS:
        raise SentlabError(f"Unknown annotation backend {name!r} (params `annotate.backend` or --backend); "
                           f"allowed: {', '.join(sorted(_BACKENDS))}.")
    return _BACKENDS[name](options or BackendOptions())


def backend_names() -> list[str]:
    from . import nltk_backend, spacy_backend  # noqa: F401

    return sorted(_BACKENDS)


BATCH = 500  # sentences per unit of parallel work
META_WITH_FRAMES = b"sentlab.with_frames"
_ANN_SCHEMA = pa.schema([SCHEMA.field(c) for c in ANNOTATION_COLUMNS])

# The backend of this process (set in the parent before forking, or by the pool initializer).
_BACKEND: Backend | None = None
_BACKEND_KEY: tuple | None = None


@dataclass
class AnnotateStats:
    """One corpus's annotation (``data/annotate_stats.json``): what was annotated and how long it took, the
    backend's extra counts, then the shards (reused when their params hash matches, written otherwise)."""

    sentences: int = 0
    skipped: int = 0
    with_frames: int = 0
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)
    shards: int = 0
    shards_reused: int = 0
    shards_written: int = 0
    backend: str = ""
    params_hash: str = ""

    def as_dict(self) -> dict:
        d = asdict(self)
        d.pop("extra")
        d.update(self.extra)
        return d


# --- hashing -----------------------------------------------------------------------
def code_hash(backend: Backend) -> str:
    """Hash of the annotation code: this package's modules and the backend's own module.

    Part of the params hash, so a change to the heuristics invalidates cached shards
    (DVC reruns the stage on a code change; the shards must not then be reused).
    """
    import inspect

    files = sorted(Path(__file__).parent.glob("*.py"))
    src = inspect.getsourcefile(type(backend))
    if src and Path(src) not in files:
        files.append(Path(src))
    h = hashlib.sha256()
    for f in files:
        if f.name != "cli.py":
            h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:20]


def params_hash(backend: Backend) -> str:
    """Hash of everything but the input that the output depends on (options, versions, code)."""
    blob = json.dumps({"schema_version": SCHEMA_VERSION, "code": code_hash(backend), **backend.fingerprint()},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def input_hash(ids: Sequence[int], texts: Sequence[str]) -> str:
    h = hashlib.sha256()
    for i, t in zip(ids, texts):
        b = t.encode("utf-8", "surrogatepass")
        h.update(f"{int(i)}\t{len(b)}\t".encode())
        h.update(b)
    return h.hexdigest()[:20]


# --- workers -----------------------------------------------------------------------
def _ensure_backend(name: str, options: BackendOptions) -> Backend:
    global _BACKEND, _BACKEND_KEY
    key = (name, options)
    if _BACKEND is None or _BACKEND_KEY != key:
        _BACKEND, _BACKEND_KEY = get_backend(name, options), key
    return _BACKEND


def _init_worker(name: str, options: BackendOptions) -> None:
    _ensure_backend(name, options)  # a no-op under fork: the parent's backend is inherited


def _annotate_batch(name: str, options: BackendOptions, texts: list[str]) -> tuple[pa.Table, int]:
    """Annotation columns of ``texts`` (a table with the schema minus id/text) and the skipped count."""
    backend = _ensure_backend(name, options)
    rows = backend.annotate(texts)
    skipped = sum(r is None for r in rows)
    table = pa.Table.from_pylist([r if r is not None else empty_row() for r in rows], schema=_ANN_SCHEMA)
    return table, skipped


def _task(args):
    shard, part, name, options, texts = args
    table, skipped = _annotate_batch(name, options, texts)
    return shard, part, table, skipped


# --- shards ------------------------------------------------------------------------
def shard_path(folder: Path, k: int) -> Path:
    return folder / f"part-{k:05d}.parquet"


def _shard_ok(path: Path, phash: str, ihash: str, ids: Sequence[int]) -> dict | None:
    """The shard's metadata if it can be reused, else None (missing, unreadable, stale or wrong size)."""
    if not path.is_file():
        return None
    try:
        pf = pq.ParquetFile(path)
        meta = pf.schema_arrow.metadata or {}
        if (meta.get(META_PARAMS_HASH, b"").decode() != phash or meta.get(META_INPUT_HASH, b"").decode() != ihash
                or pf.metadata.num_rows != len(ids) or int(meta.get(META_ROWS, b"-1")) != len(ids)):
            log.info("shard %s is stale (other params hash, input or row count): rebuilding", path)
            return None
        if pf.schema_arrow.remove_metadata() != SCHEMA:
            log.info("shard %s has another schema: rebuilding", path)
            return None
        got = pf.read(columns=["id"]).column("id").to_pylist()
        if got != list(ids):
            log.info("shard %s holds other ids: rebuilding", path)
            return None
        return {k.decode(): v.decode() for k, v in meta.items() if k.startswith(b"sentlab.")}
    except Exception as e:  # noqa: BLE001 - any unreadable file is rebuilt
        log.warning("shard %s is unreadable (%s): rebuilding", path, e)
        return None


def _finish_table(ids, texts, parts: list[pa.Table], meta: dict[bytes, bytes]) -> pa.Table:
    ann = pa.concat_tables(parts) if parts else _ANN_SCHEMA.empty_table()
    cols = ([pa.array(list(ids), pa.int64()), pa.array(list(texts), pa.string())]
            + [ann.column(c) for c in ANNOTATION_COLUMNS])
    return pa.Table.from_arrays(cols, schema=SCHEMA).replace_schema_metadata(meta)


def _write(table: pa.Table, path: Path) -> None:
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def _count_frames(table: pa.Table) -> int:
    return int(pc.sum(pc.greater(pc.list_value_length(table.column("frames")), 0)).as_py() or 0)


# --- the engine --------------------------------------------------------------------
def annotate_corpus(ids: Sequence[int], texts: Sequence[str], out: str | os.PathLike, *, backend: str = "nltk",
                    options: BackendOptions | None = None, jobs: int = 1, shard_size: int = 5000,
                    progress: bool = True, desc: str = "annotate") -> AnnotateStats:
    """Annotate ``texts`` (with their ``ids``) into ``out``.

    ``out`` is a folder of shards (``part-00000.parquet`` ...; resumable), or, when it
    ends in ``.parquet`` and is not an existing folder, one Parquet file (written at the
    end; not resumable). Returns the counts (sentences, skipped, with_frames, seconds,
    shards reused / written).
    """
    if len(ids) != len(texts):
        raise SentlabError(f"annotate: {len(ids)} ids but {len(texts)} texts.")
    texts = ["" if t is None else str(t) for t in texts]
    ids = [int(i) for i in ids]
    return _annotate(len(ids), lambda size: slice_shards(ids, texts, size), out, backend=backend, options=options,
                     jobs=jobs, shard_size=shard_size, progress=progress, desc=desc)


def annotate_file(path: str | os.PathLike, out: str | os.PathLike, **kw) -> AnnotateStats:
    """:func:`annotate_corpus` of the Parquet corpus at ``path`` (columns id, text), read one shard at a time
    (:func:`~.source.iter_shards`): the same shards, in memory that does not grow with the corpus."""
    n = open_corpus(path).metadata.num_rows
    return _annotate(n, lambda size: iter_shards(path, size), out, **kw)


def _annotate(n: int, shards: Callable[[int], Iterator[Shard]], out: str | os.PathLike, *, backend: str = "nltk",
              options: BackendOptions | None = None, jobs: int = 1, shard_size: int = 5000,
              progress: bool = True, desc: str = "annotate") -> AnnotateStats:
    """The engine: ``shards(size)`` yields the corpus's ``n`` rows as consecutive (ids, texts) slices of ``size``
    rows; a shard's rows are held while its batches are in flight (at most ``4 * jobs`` batches), then written."""
    from tqdm import tqdm

    options = options or BackendOptions()
    if jobs < 1 or shard_size < 1:
        raise SentlabError(f"annotate: jobs ({jobs}) and shard_size ({shard_size}) must be >= 1 "
                           f"(params `annotate.jobs`, `annotate.shard_size`).")
    out = Path(out)
    single = out.suffix == ".parquet" and not out.is_dir()
    t0 = time.perf_counter()
    be = _ensure_backend(backend, options)  # loaded once here; forked workers inherit it
    phash = params_hash(be)
    if single:
        shard_size = max(n, 1)
    n_shards = max(1, -(-n // shard_size))
    stats = AnnotateStats(sentences=n, shards=n_shards, backend=backend, params_hash=phash)
    base_meta = {META_BACKEND: backend.encode(), META_PARAMS_HASH: phash.encode(),
                 META_SCHEMA_VERSION: str(SCHEMA_VERSION).encode()}
    if not single:
        out.mkdir(parents=True, exist_ok=True)
        for stale in out.glob(".part-*.tmp"):  # temp files of a killed run
            stale.unlink(missing_ok=True)

    bar = tqdm(total=n, desc=desc, unit="sent", disable=not progress, smoothing=0.1)
    pending: dict[int, dict] = {}

    def tasks():
        """The batches of the shards to (re)build, read lazily: a shard is read when its first batch is due."""
        for k, (sid, stext) in enumerate(chain(shards(shard_size), [([], [])] if n == 0 else [])):
            ihash = input_hash(sid, stext)
            if not single:
                meta = _shard_ok(shard_path(out, k), phash, ihash, sid)
                if meta is not None:
                    stats.shards_reused += 1
                    stats.skipped += int(meta.get("sentlab.skipped", 0))
                    stats.with_frames += int(meta.get("sentlab.with_frames", 0))
                    bar.update(len(sid))
                    continue
            starts = list(range(0, len(sid), BATCH)) or [0]
            pending[k] = {"ids": sid, "texts": stext, "ihash": ihash, "parts": [None] * len(starts),
                          "left": len(starts), "skipped": 0}
            for p, s in enumerate(starts):
                yield (k, p, backend, options, stext[s:s + BATCH])

    single_tables: list[pa.Table] = []

    def done(k: int, p: int, table: pa.Table, skipped: int) -> None:
        st = pending[k]
        st["parts"][p] = table
        st["left"] -= 1
        st["skipped"] += skipped
        bar.update(table.num_rows)
        if st["left"]:
            return
        meta = dict(base_meta)
        meta.update({META_INPUT_HASH: st["ihash"].encode(), META_ROWS: str(len(st["ids"])).encode(),
                     META_SKIPPED: str(st["skipped"]).encode()})
        table = _finish_table(st["ids"], st["texts"], st["parts"], meta)
        nf = _count_frames(table)
        table = table.replace_schema_metadata({**meta, META_WITH_FRAMES: str(nf).encode()})
        stats.skipped += st["skipped"]
        stats.with_frames += nf
        if single:
            single_tables.append(table)
        else:
            _write(table, shard_path(out, k))
            stats.shards_written += 1
        del pending[k]

    try:
        if jobs == 1 or n <= BATCH:
            for t in tasks():
                done(*_task(t))
        else:
            ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
            with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_init_worker,
                                     initargs=(backend, options)) as ex:
                # Keep a bounded number of batches in flight: memory stays flat on a large corpus.
                it = tasks()
                inflight = set()
                for t in it:
                    inflight.add(ex.submit(_task, t))
                    if len(inflight) >= 4 * jobs:
                        break
                while inflight:
                    finished, inflight = wait(inflight, return_when=FIRST_COMPLETED)
                    for f in finished:
                        done(*f.result())
                        nxt = next(it, None)
                        if nxt is not None:
                            inflight.add(ex.submit(_task, nxt))
    finally:
        bar.close()

    if single:
        table = single_tables[0]
        _write(table, out)
        stats.shards_written = 1
    else:
        for extra in out.glob("part-*.parquet"):  # shards beyond the corpus's end (a smaller corpus than last time)
            try:
                idx = int(extra.stem.split("-")[1])
            except (IndexError, ValueError):
                continue
            if idx >= n_shards:
                extra.unlink()
    stats.seconds = round(time.perf_counter() - t0, 3)
    return stats


# --- reading -----------------------------------------------------------------------
def annotation_files(path: str | os.PathLike) -> list[Path]:
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("part-*.parquet"))
        if not files:
            raise SentlabError(f"No annotation shards (part-*.parquet) in {path}. Run the annotate stage "
                               f"(`dvc repro annotate`) or `sentlab annotate INPUT --out {path}`.")
        return files
    if path.is_file():
        return [path]
    raise SentlabError(f"Annotations {path} not found. Run the annotate stage (`dvc repro annotate`) or "
                       f"`sentlab annotate INPUT --out {path}`.")


def read_annotations(path: str | os.PathLike, columns: Sequence[str] | None = None) -> pa.Table:
    """The annotation table of a shard folder or a single file; ``id`` and ``text`` always included.

    ``columns``: the annotation columns to read (default: all), e.g. ``["frames"]`` for MoCo+SRL,
    ``["rake", "chunks"]`` for PaSeR, ``["pos"]`` for the POS/BOW method.
    """
    files = annotation_files(path)
    if columns is not None:
        unknown = [c for c in columns if c not in SCHEMA.names]
        if unknown:
            raise SentlabError(f"Unknown annotation column(s) {', '.join(unknown)}; "
                               f"the table has {', '.join(SCHEMA.names)}.")
        cols = ["id", "text"] + [c for c in columns if c not in ("id", "text")]
    else:
        cols = list(SCHEMA.names)
    tables = []
    for f in files:
        try:
            tables.append(pq.read_table(f, columns=cols))
        except Exception as e:  # noqa: BLE001
            raise SentlabError(f"Annotation file {f} cannot be read ({type(e).__name__}: {e}). "
                               f"Delete it and re-run the "
                               f"annotate stage; it rebuilds the missing shard.") from None
    meta = tables[0].schema.metadata
    return pa.concat_tables(tables).replace_schema_metadata(meta)
