"""The Parquet schema of the annotation tables (see the package docstring)."""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 1

SPAN = pa.struct([("text", pa.string()), ("start", pa.int32()), ("end", pa.int32())])
RAKE = pa.struct([("text", pa.string()), ("score", pa.float64()), ("start", pa.int32()), ("end", pa.int32())])
CHUNK = pa.struct([("label", pa.string()), ("text", pa.string()), ("start", pa.int32()), ("end", pa.int32())])
FRAME = pa.struct([("predicate", SPAN), ("arg0", SPAN), ("arg1", SPAN), ("argm_neg", SPAN)])

SCHEMA = pa.schema([
    ("id", pa.int64()),
    ("text", pa.string()),
    ("tokens", pa.list_(pa.string())),
    ("pos", pa.list_(pa.string())),
    ("rake", pa.list_(RAKE)),
    ("chunks", pa.list_(CHUNK)),
    ("frames", pa.list_(FRAME)),
])

ANNOTATION_COLUMNS = [f.name for f in SCHEMA if f.name not in ("id", "text")]
CHUNK_LABELS = ("NP", "VP", "PP", "SBAR")

# Parquet key-value metadata written into every shard / file.
META_BACKEND = b"sentlab.backend"
META_PARAMS_HASH = b"sentlab.params_hash"
META_INPUT_HASH = b"sentlab.input_hash"
META_ROWS = b"sentlab.rows"
META_SKIPPED = b"sentlab.skipped"
META_SCHEMA_VERSION = b"sentlab.schema_version"


def empty_row() -> dict:
    """Annotation columns of a skipped sentence (kept in the table with empty lists)."""
    return {"tokens": [], "pos": [], "rake": [], "chunks": [], "frames": []}
