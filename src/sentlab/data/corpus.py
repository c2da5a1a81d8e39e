"""The training corpus: filtered, deduplicated, seeded sample, written as Parquet.

Schema of ``data/corpus/<name>.parquet``: ``id`` int64 (0-based line number in
the source file, or the row number for derived corpora), ``text`` string.
"""

from __future__ import annotations

import hashlib
import random
from array import array
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import DataFormatError, SentlabError
from ..runtime.io import atomic_path

SCHEMA = pa.schema([("id", pa.int64()), ("text", pa.string())])
ROW_GROUP = 1024 * 1024   # rows per Parquet row group: pq.write_table's default, so a corpus up to it keeps its bytes


DROPPED = ("empty", "too_short", "too_long", "duplicates")   # the filters of sample_corpus, in order


@dataclass
class CorpusStats:
    """What :func:`sample_corpus` read (``lines``), dropped by each filter (``dropped``), kept and sampled."""

    source: str
    lines: int = 0
    dropped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DROPPED, 0))
    kept_after_filter: int = 0
    sampled: int = 0


def iter_lines(path: Path) -> Iterator[str]:
    """The lines of ``path`` read one at a time, as :func:`sentlab.data.sts.read_lines` splits them (on ``\\n``, one
    trailing ``\\r`` dropped); bytes that are not UTF-8 name their line, a file of only whitespace is an error."""
    from .sts import FIX

    seen_text = False
    with open(path, "rb") as fh:
        for ln, raw in enumerate(fh, 1):
            raw = raw[:-1] if raw.endswith(b"\n") else raw
            raw = raw[:-1] if raw.endswith(b"\r") else raw
            seen_text = seen_text or bool(raw.strip())
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataFormatError(path, ln, f"bytes that are not UTF-8 ({raw[e.start:e.start + 4]!r})",
                                      FIX) from None
    if not seen_text:
        raise DataFormatError(path, None, "the file is empty", FIX)


@dataclass
class CorpusSample:
    """The sampled sentences of ``path``: their 0-based line numbers ``ids`` (ascending); :meth:`texts` reads them."""

    path: Path
    ids: np.ndarray

    def texts(self, chunk: int = 65536) -> Iterator[list[str]]:
        """The sampled sentences (stripped), in file order, ``chunk`` at a time: a second pass over the file."""
        from tqdm import tqdm

        want, j, out = self.ids, 0, []
        for i, line in enumerate(tqdm(iter_lines(self.path), desc=f"prepare: sample {self.path.name}", unit="line",
                                      mininterval=5.0, leave=False)):
            if j < len(want) and want[j] == i:
                out.append(line.strip())
                j += 1
                if len(out) == chunk:
                    yield out
                    out = []
        if out:
            yield out


def select_corpus(path: Path, size: int, seed: int, min_words: int = 1, max_words: int = 128,
                  dedupe: bool = True, accept_size: int | None = None) -> tuple[CorpusSample, CorpusStats]:
    """Filter the one-sentence-per-line file at ``path`` and draw ``size`` sentences with ``seed``.

    Empty lines, lines outside [min_words, max_words] whitespace words and
    (with ``dedupe``) repeated lines are dropped and counted. The sample keeps
    file order; ids are 0-based line numbers. Fewer usable sentences than ``size`` fail unless their
    number is exactly ``accept_size`` (prepare.accept_size): then all of them are used.

    One pass over the file, line by line: what it keeps is the line number of each usable line (8 bytes) and, with
    ``dedupe``, a 16-byte BLAKE2 digest of each distinct line, not the lines themselves.
    """
    from tqdm import tqdm

    stats = CorpusStats(source=str(path))
    kept, seen = array("q"), set()
    for i, line in enumerate(tqdm(iter_lines(path), desc=f"prepare: filter {Path(path).name}", unit="line",
                                  mininterval=5.0, leave=False)):
        stats.lines += 1
        t = line.strip()
        if not t:
            stats.dropped["empty"] += 1
            continue
        n = len(t.split())
        if n < min_words:
            stats.dropped["too_short"] += 1
            continue
        if n > max_words:
            stats.dropped["too_long"] += 1
            continue
        if dedupe:
            key = hashlib.blake2b(t.encode("utf-8", "surrogatepass"), digest_size=16).digest()
            if key in seen:
                stats.dropped["duplicates"] += 1
                continue
            seen.add(key)
        kept.append(i)
    del seen
    k = len(kept)
    stats.kept_after_filter = k
    if not k:
        raise DataFormatError(path, None, "no sentence is left after filtering (empty corpus)",
                              "Check the file, or widen prepare.min_words / prepare.max_words in params.yaml.")
    if k < size:
        if accept_size != k:
            stated = (f"prepare.accept_size is {accept_size}, not {k}" if accept_size is not None else
                      "the profile states no smaller size it accepts (prepare.accept_size)")
            raise SentlabError(
                f"The corpus {path} has {k} usable sentences after filtering ({stats.lines} lines), fewer than "
                f"prepare.size = {size}, and {stated}. Provide the full corpus (a mirror may hold only a sample, "
                f"which is an asset of its own: prepare.corpus), or, if this file is the one you mean, lower "
                f"prepare.size or set prepare.accept_size: {k} in your profile."
            )
        ids = np.frombuffer(kept, dtype=np.int64).copy()
    else:
        ids = np.frombuffer(kept, dtype=np.int64)[np.array(sorted(random.Random(seed).sample(range(k), size)),
                                                             dtype=np.int64)]
    stats.sampled = len(ids)
    return CorpusSample(Path(path), ids), stats


def sample_corpus(path: Path, size: int, seed: int, min_words: int = 1, max_words: int = 128,
                  dedupe: bool = True, accept_size: int | None = None) -> tuple[list[int], list[str], CorpusStats]:
    """:func:`select_corpus` with the sample read into lists (ids, texts)."""
    sample, stats = select_corpus(path, size, seed, min_words, max_words, dedupe, accept_size)
    return sample.ids.tolist(), [t for chunk in sample.texts() for t in chunk], stats


def write_corpus(path: Path, ids: Sequence[int], texts: Sequence[str]) -> None:
    write_corpus_chunks(path, [(ids, texts)])


def write_sample(path: Path, sample: CorpusSample) -> None:
    """Write ``sample`` to ``path`` reading its sentences in chunks (:meth:`CorpusSample.texts`)."""
    def chunks():
        a = 0
        for texts in sample.texts():
            yield sample.ids[a:a + len(texts)], texts
            a += len(texts)

    write_corpus_chunks(path, chunks())


def write_corpus_chunks(path: Path, chunks: Iterable[tuple[Sequence[int], Sequence[str]]]) -> None:
    """Write (ids, texts) chunks as one Parquet file (atomically), in row groups of :data:`ROW_GROUP` rows: the
    rows of one row group are held as Arrow arrays, never the whole corpus; a corpus of up to ``ROW_GROUP`` rows
    gives the bytes ``pq.write_table`` gave."""
    with atomic_path(path) as tmp:
        with pq.ParquetWriter(tmp, SCHEMA) as writer:
            buf_ids: list[pa.Array] = []
            buf_texts: list[pa.Array] = []
            rows, written = 0, False

            def flush(upto: int) -> tuple[list, list, int]:
                nonlocal written
                written = True
                ids, texts = pa.concat_arrays(buf_ids), pa.concat_arrays(buf_texts)
                writer.write_table(pa.Table.from_arrays([ids[:upto], texts[:upto]], schema=SCHEMA))
                rest = len(ids) - upto
                return ([ids[upto:]], [texts[upto:]], rest) if rest else ([], [], 0)

            for ids, texts in chunks:
                buf_ids.append(pa.array(np.asarray(ids, dtype=np.int64), pa.int64()))
                buf_texts.append(pa.array(list(texts), pa.string()))
                rows += len(ids)
                while rows >= ROW_GROUP:
                    buf_ids, buf_texts, rows = flush(ROW_GROUP)
            if rows or not written:   # the rest; an empty corpus: one empty row group, as write_table wrote
                if not buf_ids:
                    buf_ids, buf_texts = [pa.array([], pa.int64())], [pa.array([], pa.string())]
                flush(rows)


def read_corpus(path: str | Path) -> pa.Table:
    path = Path(path)
    if not path.exists():
        raise SentlabError(f"Corpus {path} not found. Run the prepare stage first (`dvc repro prepare`).")
    return pq.read_table(path)


def stats_dict(stats: CorpusStats) -> dict:
    return asdict(stats)
