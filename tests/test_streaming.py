"""Issue #56 (scale): prepare, annotate and the training loader read the corpus in bounded pieces, with the outputs of
the whole-corpus code. The expected digests were computed once with main's code at e98bc8d (before streaming)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import MIRROR, nltk_with
from sentlab.errors import DataFormatError, SentlabError

WIKI = MIRROR / "wiki" / "wiki1m_head.txt"
needs_wiki = pytest.mark.skipif(not WIKI.is_file(), reason=f"needs the mirror's {WIKI}")


def small_corpus(tmp_path: Path) -> Path:
    """64 lines: 60 of the wiki sample plus an empty line, a repeat, a 40-word line and a non-ASCII one."""
    lines = WIKI.read_text(encoding="utf-8").split("\n")[:60]
    lines = lines[:20] + ["", lines[3], " ".join(["word"] * 40), "Crème brûlée — naïve café."] + lines[20:60]
    src = tmp_path / "c.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return src


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# Parquet files record their writer's version: the bytes below are pyarrow 25.0.1's (main's prepare, before the
# streaming); the rows' hash holds for any pyarrow.
PYARROW_OF_BYTES = "25.0.1"


def same_file(path: Path, file_sha: str, rows_sha: str) -> None:
    rows = pq.read_table(path).to_pylist()
    assert hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest() == rows_sha
    if pa.__version__ == PYARROW_OF_BYTES:
        assert sha(path) == file_sha


@needs_wiki
def test_streamed_prepare_writes_the_bytes_of_the_whole_corpus_code(tmp_path):
    from sentlab.data.corpus import select_corpus, write_sample

    sample, stats = select_corpus(small_corpus(tmp_path), 50, seed=7, min_words=2, max_words=30)
    assert (stats.lines, stats.dropped, stats.kept_after_filter, stats.sampled) == (
        64, {"empty": 1, "too_short": 2, "too_long": 9, "duplicates": 1}, 51, 50)
    write_sample(tmp_path / "train.parquet", sample)
    same_file(tmp_path / "train.parquet", "93720b0e02f14935a189584bf629e70536f43a304f918cb17fa9ac40f56ed9a3",
              "e426f020cd15797746f056ada5eb547e1cc3e56780a4fc3dbf3a3476f4e16a44")
    # the quick profile's corpus (prepare: wiki1m_head, size 11000, seed 42, 1..128 words, dedupe)
    sample, stats = select_corpus(WIKI, 11000, seed=42, min_words=1, max_words=128)
    assert (stats.lines, stats.dropped["duplicates"], stats.kept_after_filter) == (11913, 366, 11547)
    write_sample(tmp_path / "quick.parquet", sample)
    same_file(tmp_path / "quick.parquet", "6835f8ffdfa2336b57313fd016a54fb9b08edcb62f2f054ac67a0980679471eb",
              "fb60e1216a8d875d5ef06e459dccf1ddc7a58b7e9008d5d1796ff7c1f838354b")


def test_streamed_prepare_reads_in_chunks_and_row_groups(tmp_path, monkeypatch):
    """Row groups of ROW_GROUP rows however the sentences come in; the second pass yields ``chunk`` at a time."""
    from sentlab.data import corpus as C

    src = tmp_path / "c.txt"
    src.write_text("".join(f"sentence number {i}\n" for i in range(25)), encoding="utf-8")
    sample, _ = C.select_corpus(src, 25, seed=0)
    assert [len(c) for c in sample.texts(chunk=7)] == [7, 7, 7, 4]
    monkeypatch.setattr(C, "ROW_GROUP", 10)
    C.write_sample(tmp_path / "t.parquet", sample)
    pf = pq.ParquetFile(tmp_path / "t.parquet")
    assert [pf.metadata.row_group(i).num_rows for i in range(pf.num_row_groups)] == [10, 10, 5]
    assert pf.read().column("text").to_pylist() == [f"sentence number {i}" for i in range(25)]


def test_streamed_prepare_bad_bytes_name_their_line(tmp_path):
    from sentlab.data.corpus import select_corpus

    src = tmp_path / "c.txt"
    src.write_bytes(b"one line\ntwo \xff line\n")
    with pytest.raises(DataFormatError, match=r"c\.txt.*2") as e:
        select_corpus(src, 1, seed=0)
    assert "not UTF-8" in str(e.value)
    (tmp_path / "e.txt").write_bytes(b" \n\n\t\n")
    with pytest.raises(DataFormatError, match="empty"):
        select_corpus(tmp_path / "e.txt", 1, seed=0)


# per shard of 16 rows: rows, sha256 of json.dumps(rows, sort_keys=True), input hash, with_frames (main's code)
EXPECTED_SHARDS = [
    (16, "6e8bdfe2e58e7580960db19e150b5718fcc200a1981378ceecb9e0296880f0c0", "ea38ced45a2f786a0c5b", "13"),
    (16, "d6fb6fad358a54428d58a40c97ddb026a8e40038d9df78c57467ee4d8198ff43", "15c771ed9535d6ec8829", "11"),
    (16, "b87ab070effca084360e83281628482ce0acd1fa92f9197eaeab232e4480757f", "4bc9ce62228b32483f51", "14"),
    (2, "3fef4336df93e509c70d21022b7eda098f39dc59959a7d720ffe0e7635a5a0b8", "b7976a9d74559d6c800d", "2"),
]


@needs_wiki
def test_annotate_file_reads_one_shard_at_a_time_and_writes_the_same_rows(tmp_path, monkeypatch):
    nltk_with("averaged_perceptron_tagger_eng", "stopwords")
    from sentlab.annotate import corpus as runner
    from sentlab.annotate.source import iter_shards
    from sentlab.data.corpus import select_corpus, write_sample

    sample, _ = select_corpus(small_corpus(tmp_path), 50, seed=7, min_words=2, max_words=30)
    write_sample(tmp_path / "train.parquet", sample)
    read, at_write = [], []

    def counting(path, size):   # the shards read so far, seen by each shard's write
        for shard in iter_shards(path, size, batch_rows=5):
            read.append(len(shard[0]))
            yield shard

    real_write = runner._write
    monkeypatch.setattr(runner, "iter_shards", counting)
    monkeypatch.setattr(runner, "_write", lambda table, path: (at_write.append(len(read)), real_write(table, path)))
    s = runner.annotate_file(tmp_path / "train.parquet", tmp_path / "ann", jobs=1, shard_size=16, progress=False)
    assert read == [16, 16, 16, 2] and at_write == [1, 2, 3, 4]   # shard k is written before shard k+1 is read
    assert (s.sentences, s.shards, s.shards_written, s.with_frames) == (50, 4, 4, 40)
    got = []
    for f in sorted((tmp_path / "ann").glob("part-*.parquet")):
        t = pq.read_table(f)
        meta = t.schema.metadata
        got.append((t.num_rows, hashlib.sha256(json.dumps(t.to_pylist(), sort_keys=True).encode()).hexdigest(),
                    meta[b"sentlab.input_hash"].decode(), meta[b"sentlab.with_frames"].decode()))
    assert got == EXPECTED_SHARDS
    again = runner.annotate_file(tmp_path / "train.parquet", tmp_path / "ann", jobs=2, shard_size=16, progress=False)
    assert (again.shards_reused, again.shards_written) == (4, 0)


def test_annotate_file_refuses_a_corpus_without_text(tmp_path):
    from sentlab.annotate import annotate_file

    pq.write_table(pa.table({"id": pa.array([0, 1], pa.int64())}), tmp_path / "bad.parquet")
    with pytest.raises(DataFormatError, match=r"bad\.parquet.*missing column\(s\) text"):
        annotate_file(tmp_path / "bad.parquet", tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def _annotations(tmp_path: Path, ids: list[int]) -> Path:
    from sentlab.annotate import SCHEMA

    rows = [{"id": i, "text": f"s{i}", "tokens": [f"s{i}"], "pos": ["NN"], "rake": [
        {"text": f"s{i}", "score": float(i), "start": 0, "end": len(f"s{i}")}], "chunks": [], "frames": []}
        for i in ids]
    out = tmp_path / "ann"
    out.mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), out / "part-00000.parquet")
    return out


def test_loader_keeps_annotation_columns_in_arrow_and_batches_read_rows(tmp_path):
    from sentlab.train.data import ArrowColumn, load_corpus

    pq.write_table(pa.table({"id": pa.array([30, 10, 20], pa.int64()), "text": ["s30", "s10", "s20"]}),
                   tmp_path / "c.parquet")
    ann = _annotations(tmp_path, [10, 20, 30, 40])   # another order, an extra row
    corpus = load_corpus(tmp_path / "c.parquet", ["rake", "pos"], ann)
    assert isinstance(corpus.extras["rake"], ArrowColumn) and len(corpus.extras["rake"]) == 3
    assert corpus.extras["pos"][1] == ["NN"] and list(corpus.extras["rake"])[0][0]["score"] == 30.0
    b = corpus.batch(np.array([2, 0]))
    assert b.sentences == ["s20", "s30"] and b.index == [20, 30]
    assert b.extras["rake"] == [[{"text": "s20", "score": 20.0, "start": 0, "end": 3}],
                                [{"text": "s30", "score": 30.0, "start": 0, "end": 3}]]
    sub = corpus.subset([1])
    assert sub.extras["rake"][0] == [{"text": "s10", "score": 10.0, "start": 0, "end": 3}]


def test_loader_names_corpus_ids_the_annotations_lack(tmp_path):
    from sentlab.train.data import load_corpus

    pq.write_table(pa.table({"id": pa.array([1, 2, 7], pa.int64()), "text": ["a", "b", "c"]}), tmp_path / "c.parquet")
    with pytest.raises(SentlabError, match=r"no rows for 1 corpus id\(s\) \(first: \[7\]\).*Re-run the annotate"):
        load_corpus(tmp_path / "c.parquet", ["pos"], _annotations(tmp_path, [1, 2, 3]))


def test_arrow_column_reads_rows_across_chunks_in_the_order_asked():
    from sentlab.train.data import ArrowColumn, take

    col = ArrowColumn(pa.chunked_array([pa.array([[0], [1]]), pa.array([], pa.list_(pa.int64())),
                                        pa.array([[2], [3], [4]])]))
    assert take(col, [4, 0, 2, 1, 4]) == [[4], [0], [2], [1], [4]]
    assert (col[-1], col[1:3], list(col), len(col)) == ([4], [[1], [2]], [[0], [1], [2], [3], [4]], 5)
    with pytest.raises(IndexError):
        col[5]
