"""The training corpus: filtered, deduplicated, seeded sample, written as Parquet.

Schema of ``data/corpus/<name>.parquet``: ``id`` int64 (0-based line number in
the source file, or the row number for derived corpora), ``text`` string.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import DataFormatError, SentlabError
from ..io import atomic_path

SCHEMA = pa.schema([("id", pa.int64()), ("text", pa.string())])


DROPPED = ("empty", "too_short", "too_long", "duplicates")   # the filters of sample_corpus, in order


@dataclass
class CorpusStats:
    """What :func:`sample_corpus` read (``lines``), dropped by each filter (``dropped``), kept and sampled."""

    source: str
    lines: int = 0
    dropped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DROPPED, 0))
    kept_after_filter: int = 0
    sampled: int = 0


def sample_corpus(path: Path, size: int, seed: int, min_words: int = 1, max_words: int = 128,
                  dedupe: bool = True, accept_size: int | None = None) -> tuple[list[int], list[str], CorpusStats]:
    """Filter the one-sentence-per-line file at ``path`` and draw ``size`` sentences with ``seed``.

    Empty lines, lines outside [min_words, max_words] whitespace words and
    (with ``dedupe``) repeated lines are dropped and counted. The sample keeps
    file order; ids are 0-based line numbers. Fewer usable sentences than ``size`` fail unless their
    number is exactly ``accept_size`` (prepare.accept_size): then all of them are used.
    """
    from .sts import read_lines

    stats = CorpusStats(source=str(path))
    lines = read_lines(path)
    stats.lines = len(lines)
    ids, texts, seen = [], [], set()
    for i, line in enumerate(lines):
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
            if t in seen:
                stats.dropped["duplicates"] += 1
                continue
            seen.add(t)
        ids.append(i)
        texts.append(t)
    stats.kept_after_filter = len(ids)
    if not ids:
        raise DataFormatError(path, None, "no sentence is left after filtering (empty corpus)",
                              "Check the file, or widen prepare.min_words / prepare.max_words in params.yaml.")
    if len(ids) < size:
        if accept_size != len(ids):
            stated = (f"prepare.accept_size is {accept_size}, not {len(ids)}" if accept_size is not None else
                      "the profile states no smaller size it accepts (prepare.accept_size)")
            raise SentlabError(
                f"The corpus {path} has {len(ids)} usable sentences after filtering ({stats.lines} lines), fewer than "
                f"prepare.size = {size}, and {stated}. Provide the full corpus (a mirror may hold only a sample, "
                f"which is an asset of its own: prepare.corpus), or, if this file is the one you mean, lower "
                f"prepare.size or set prepare.accept_size: {len(ids)} in your profile."
            )
        chosen = list(range(len(ids)))
    else:
        chosen = sorted(random.Random(seed).sample(range(len(ids)), size))
    stats.sampled = len(chosen)
    return [ids[j] for j in chosen], [texts[j] for j in chosen], stats


def write_corpus(path: Path, ids: list[int], texts: list[str]) -> None:
    table = pa.Table.from_arrays([pa.array(ids, pa.int64()), pa.array(texts, pa.string())], schema=SCHEMA)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def read_corpus(path: str | Path) -> pa.Table:
    path = Path(path)
    if not path.exists():
        raise SentlabError(f"Corpus {path} not found. Run the prepare stage first (`dvc repro prepare`).")
    return pq.read_table(path)


def stats_dict(stats: CorpusStats) -> dict:
    return asdict(stats)
