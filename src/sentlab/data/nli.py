"""SimCSE's NLI triples as a corpus (supervised PaSeR, SPEC §1 / §3.6).

Source: ``nli_for_simcse.csv`` (SNLI + MNLI; columns ``sent0`` = premise,
``sent1`` = its entailment hypothesis, ``hard_neg`` = its contradiction),
found by :func:`sentlab.assets.resolve_data` ("nli"). Written as
``data/corpus/nli.parquet`` with columns ``id`` int64 (0-based data row),
``text`` (= sent0, the anchor; the annotation stage annotates this column),
``positive`` (= sent1), ``hard_negative`` (= hard_neg). Corpus name: ``nli``.

Example::

    table = load_nli("data/corpus/nli.parquet")          # resolves, converts, writes, returns
    table = read_nli("data/corpus/nli.parquet")
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Optional

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import DataFormatError, SentlabError
from ..io import atomic_path

CORPUS_NAME = "nli"
COLUMNS = ("sent0", "sent1", "hard_neg")
SCHEMA = pa.schema([("id", pa.int64()), ("text", pa.string()), ("positive", pa.string()),
                    ("hard_negative", pa.string())])


def read_nli_csv(path: str | Path, max_rows: Optional[int] = None) -> pa.Table:
    """Parse SimCSE's NLI CSV into the corpus schema. Rows with an empty field are dropped."""
    path = Path(path)
    ids, texts, pos, neg = [], [], [], []
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise DataFormatError(path, 1, f"header lacks column(s) {missing} (found {reader.fieldnames})",
                                  "Use SimCSE's nli_for_simcse.csv (header: sent0,sent1,hard_neg).")
        for i, row in enumerate(reader):
            if max_rows is not None and len(ids) >= max_rows:
                break
            a, b, c = (str(row.get(k) or "").strip() for k in COLUMNS)
            if not (a and b and c):
                continue
            ids.append(i)
            texts.append(a)
            pos.append(b)
            neg.append(c)
    if not ids:
        raise DataFormatError(path, None, "no complete (sent0, sent1, hard_neg) row", "Check the file's contents.")
    return pa.table({"id": pa.array(ids, pa.int64()), "text": texts, "positive": pos, "hard_negative": neg},
                    schema=SCHEMA)


def write_nli(table: pa.Table, out: str | Path) -> Path:
    out = Path(out)
    with atomic_path(out) as tmp:
        pq.write_table(table, tmp)
    return out


def read_nli(path: str | Path = "data/corpus/nli.parquet") -> pa.Table:
    path = Path(path)
    if not path.is_file():
        raise SentlabError(f"{path} not found: build it with `sentlab.data.nli.load_nli()` (the prepare stage does "
                           f"when paser_sup is trained).")
    table = pq.read_table(path)
    missing = [c for c in SCHEMA.names if c not in table.column_names]
    if missing:
        raise DataFormatError(path, None, f"missing column(s) {missing}", "Rebuild it with sentlab.data.nli.load_nli().")
    return table


def load_nli(out: str | Path = "data/corpus/nli.parquet", source: str | Path | None = None,
             max_rows: Optional[int] = None) -> pa.Table:
    """Convert the NLI CSV (``source``, default: the resolved "nli" asset) and write ``out``; return the table."""
    if source is None:
        from ..assets import resolve_data

        source = resolve_data(CORPUS_NAME).path
    table = read_nli_csv(source, max_rows=max_rows)
    write_nli(table, out)
    return table
