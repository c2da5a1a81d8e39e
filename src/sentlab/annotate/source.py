"""The input of the annotation engine: a corpus read whole (:func:`read_texts`) or one shard at a time
(:func:`iter_shards`: Arrow record batches of a Parquet corpus, re-cut to exactly ``shard_size`` rows, so the
engine holds one shard's ids and texts in Python, not the corpus's: its memory does not grow with the corpus)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import DataFormatError, SentlabError

Shard = tuple[list[int], list[str]]


def _missing(path: Path) -> SentlabError:
    return SentlabError(f"Input file {path} not found. Give a .txt file (one sentence per line) or a .parquet file "
                        f"with columns id, text (e.g. data/corpus/train.parquet, written by the prepare stage).")


def open_corpus(path: str | os.PathLike) -> pq.ParquetFile:
    """The Parquet corpus at ``path``, checked: readable, with columns ``id`` and ``text``."""
    path = Path(path)
    if not path.is_file():
        raise _missing(path)
    try:
        # read a column chunk 1 MiB at a time: unbuffered, the reader holds a row group's whole chunk (1Mi rows)
        pf = pq.ParquetFile(path, buffer_size=1 << 20, pre_buffer=False)
    except Exception as e:  # noqa: BLE001
        raise DataFormatError(path, None, f"not a readable Parquet file ({e})", "Re-run the prepare stage.") from None
    names = pf.schema_arrow.names
    missing = [c for c in ("id", "text") if c not in names]
    if missing:
        raise DataFormatError(path, None, f"missing column(s) {', '.join(missing)} (has {', '.join(names)})",
                              "An annotation input needs columns id (int64) and text (string).")
    return pf


def _rows(batch: pa.RecordBatch | pa.Table) -> Shard:
    return ([int(x) for x in batch.column("id").to_pylist()],
            ["" if x is None else x for x in batch.column("text").to_pylist()])


def iter_shards(path: str | os.PathLike, shard_size: int, batch_rows: int = 8192) -> Iterator[Shard]:
    """(ids, texts) of consecutive ``shard_size``-row slices of the Parquet corpus at ``path`` (the last one
    shorter), read ``batch_rows`` rows at a time."""
    pf = open_corpus(path)
    ids: list[int] = []
    texts: list[str] = []
    try:
        for batch in pf.iter_batches(batch_size=batch_rows, columns=["id", "text"]):
            i, t = _rows(batch)
            ids += i
            texts += t
            while len(ids) >= shard_size:
                yield ids[:shard_size], texts[:shard_size]
                ids, texts = ids[shard_size:], texts[shard_size:]
    except OSError as e:
        raise DataFormatError(Path(path), None, f"not a readable Parquet file ({e})",
                              "Re-run the prepare stage.") from None
    if ids:
        yield ids, texts


def slice_shards(ids: Sequence[int], texts: Sequence[str], shard_size: int) -> Iterator[Shard]:
    """The same slices of a corpus held in memory."""
    for a in range(0, len(ids), shard_size):
        yield list(ids[a:a + shard_size]), list(texts[a:a + shard_size])


def read_texts(path: str | os.PathLike) -> Shard:
    """(ids, texts) of a corpus: a Parquet file with ``id`` and ``text`` columns, or a text file
    with one sentence per line (ids = line numbers from 0)."""
    path = Path(path)
    if not path.is_file():
        raise _missing(path)
    if path.suffix == ".parquet":
        pf = open_corpus(path)
        try:
            return _rows(pf.read(columns=["id", "text"]))
        except OSError as e:
            raise DataFormatError(path, None, f"not a readable Parquet file ({e})",
                                  "Re-run the prepare stage.") from None
    texts = []
    with open(path, "rb") as fh:
        for ln, raw in enumerate(fh, 1):
            try:
                texts.append(raw.decode("utf-8").rstrip("\r\n"))
            except UnicodeDecodeError as e:
                raise DataFormatError(path, ln, f"not valid UTF-8 ({e.reason} at byte {e.start})",
                                      "Convert the file to UTF-8 (e.g. `iconv -f latin1 -t utf-8`).") from None
    return list(range(len(texts))), texts
