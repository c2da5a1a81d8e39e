"""Training data: the corpus table, the annotation columns a method asks for, the seeded batch order."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import pyarrow as pa

from ..errors import SentlabError
from ..methods.base import Batch


class ArrowColumn(Sequence):
    """A per-sentence column kept as Arrow (annotation frames, phrases, the NLI positives): a row becomes a Python
    object when it is read (a batch's rows), so a 1M-sentence corpus does not hold its columns as Python lists."""

    def __init__(self, array: pa.Array | pa.ChunkedArray):
        if isinstance(array, pa.ChunkedArray) and array.num_chunks > 1:
            try:   # one array: a batch is one take, not one per shard its rows fall in (23 ms a batch at 800k rows)
                array = array.combine_chunks()
            except pa.ArrowInvalid:   # over 2 GiB of strings in one array: read chunk by chunk (the same rows)
                pass
        self.array = array
        chunks = getattr(array, "chunks", [array])
        self._chunks = chunks
        self._starts = np.cumsum([0] + [len(c) for c in chunks])

    def rows(self, rows: Sequence[int]) -> list[Any]:
        """``[self[i] for i in rows]``, gathered chunk by chunk: a ``take`` on a chunked array concatenates all its
        chunks first (a copy of the column per batch)."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        rows = np.where(rows < 0, rows + len(self), rows)
        which = np.searchsorted(self._starts, rows, side="right") - 1
        out: list[Any] = [None] * len(rows)
        for c in np.unique(which):
            sel = np.nonzero(which == c)[0]
            values = self._chunks[c].take(pa.array(rows[sel] - self._starts[c])).to_pylist()
            for j, v in zip(sel.tolist(), values):
                out[j] = v
        return out

    def __len__(self) -> int:
        return len(self.array)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return self.array[i].to_pylist()
        return self.rows([i])[0]

    def __iter__(self) -> Iterator[Any]:
        for chunk in self._chunks:
            for a in range(0, len(chunk), 1024):
                yield from chunk[a:a + 1024].to_pylist()

    def __eq__(self, other) -> bool:   # compares as the list it stands for
        if isinstance(other, (ArrowColumn, list, tuple)):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None   # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ArrowColumn({len(self)} rows of {self.array.type})"

    def take(self, rows: Sequence[int]) -> "ArrowColumn":
        return ArrowColumn(self.array.take(pa.array(rows, pa.int64())))


def take(column: Sequence[Any], rows: Sequence[int]) -> list[Any]:
    """``[column[i] for i in rows]`` (an :class:`ArrowColumn` gathers them chunk by chunk)."""
    if isinstance(column, ArrowColumn):
        return column.rows(rows)
    return [column[i] for i in rows]


@dataclass
class Corpus:
    """Sentences with their corpus ids and per-sentence extra columns (aligned lists); ``meta``: the corpus
    file's ``sentlab.*`` Parquet metadata (e.g. the NLI source)."""

    ids: np.ndarray
    texts: list[str]
    extras: dict[str, Sequence[Any]] = field(default_factory=dict)   # lists, or ArrowColumn (load_corpus)
    fingerprint: str = ""
    meta: dict[str, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, rows: Sequence[int]) -> "Corpus":
        """The rows ``rows`` (positions, not ids) as a corpus of their own."""
        rows = [int(r) for r in rows]
        return Corpus(ids=self.ids[rows] if rows else self.ids[:0], texts=[self.texts[i] for i in rows],
                      extras={k: v.take(rows) if isinstance(v, ArrowColumn) else [v[i] for i in rows]
                              for k, v in self.extras.items()},
                      fingerprint=f"{self.fingerprint}/{hashlib.sha256(repr(rows).encode()).hexdigest()[:8]}",
                      meta=dict(self.meta))

    def batch(self, rows: Sequence[int]) -> Batch:
        return Batch(sentences=[self.texts[i] for i in rows], index=[int(self.ids[i]) for i in rows],
                     extras={k: take(v, rows) for k, v in self.extras.items()})


def fingerprint_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def load_corpus(path: str | Path, columns: Sequence[str] = (), annotations: str | Path | None = None) -> Corpus:
    """Read ``data/corpus/<name>.parquet`` (id, text) and the extra ``columns``: those the corpus file holds
    itself (the NLI triples' ``positive`` / ``hard_negative``) are read from it, the others are joined from
    the annotation stage's table on ``id``. The extra columns stay Arrow (:class:`ArrowColumn`)."""
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise SentlabError(f"Training corpus {path} not found. Run the prepare stage first (`dvc repro prepare`), "
                           f"or check the method's corpus name.")
    table = pq.read_table(path)
    missing = [c for c in ("id", "text") if c not in table.column_names]
    if missing:
        raise SentlabError(f"Training corpus {path} lacks column(s) {missing}; it must have `id` (int64) and `text` "
                           f"(string). Re-run the prepare stage.")
    ids = np.asarray(table.column("id").to_numpy(zero_copy_only=False), dtype=np.int64)
    texts = [str(t) for t in table.column("text").to_pylist()]
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items() if k.startswith(b"sentlab.")}
    corpus = Corpus(ids=ids, texts=texts, fingerprint=fingerprint_file(path), meta=meta)
    if columns:
        own = {c: ArrowColumn(table.column(c)) for c in columns if c in table.column_names}
        annotated = [c for c in columns if c not in own]
        if annotated:
            if annotations is None:
                raise SentlabError(f"The method needs annotation columns {annotated} "
                                   f"but no annotation folder was given.")
            from ..annotate import SCHEMA, read_annotations

            unknown = [c for c in annotated if c not in SCHEMA.names]
            if unknown:
                raise SentlabError(f"The method needs column(s) {unknown}, which neither the corpus {path} (columns: "
                                   f"{', '.join(table.column_names)}) nor the annotation stage provides. Re-run the "
                                   f"prepare stage (it writes the NLI triples' positive / hard_negative), or check "
                                   f"the method's corpus name.")
            ann = read_annotations(str(annotations), columns=annotated)
            own.update(join_extras(ids, ann, annotated, source=str(annotations)))
        corpus.extras = {c: own[c] for c in columns}
        corpus.fingerprint += "+" + hashlib.sha256(repr(sorted(columns)).encode()).hexdigest()[:8]
    return corpus


def join_extras(ids: np.ndarray, table, columns: Sequence[str], source: str = "annotations") -> dict[str, ArrowColumn]:
    """Columns of a pyarrow annotation ``table`` aligned with ``ids`` (every id must be annotated), kept as Arrow:
    the rows are matched with one ``index_in`` and gathered with one ``take`` (none when the order is the same)."""
    import pyarrow.compute as pc

    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise SentlabError(f"Annotation table {source} lacks column(s) {missing}; re-run the annotate stage "
                           f"(its backend must produce them).")
    ann_ids = table.column("id").combine_chunks().cast(pa.int64())
    ids = np.asarray(ids, dtype=np.int64)
    if len(ann_ids) == len(ids) and np.array_equal(ann_ids.to_numpy(zero_copy_only=False), ids):
        return {c: ArrowColumn(table.column(c)) for c in columns}
    # the last row of an id, as a dict built over the rows would give
    last = pc.subtract(pa.scalar(len(ann_ids) - 1, pa.int64()),
                       pc.index_in(pa.array(ids), value_set=ann_ids[::-1]).cast(pa.int64()))
    absent = ids[np.asarray(last.is_null().to_numpy(zero_copy_only=False))]
    if len(absent):
        raise SentlabError(f"Annotation table {source} has no rows for {len(absent)} corpus id(s) "
                           f"(first: {[int(i) for i in absent[:5]]}); "
                           f"it was built from another corpus. Re-run the annotate stage.")
    return {c: ArrowColumn(table.column(c).take(last)) for c in columns}


def epoch_order(n: int, seed: int, epoch: int) -> np.ndarray:
    """The seeded shuffled order of the corpus rows in ``epoch`` (a function of seed and epoch only)."""
    return np.random.default_rng([seed, epoch]).permutation(n)
