"""Annotation stage: golden frames per backend, RAKE, schema, resume, corrupt shards, bad input."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sentlab.annotate import SCHEMA, BackendOptions, annotate_corpus, get_backend, read_annotations
from sentlab.errors import SentlabError

REPO = Path(__file__).resolve().parents[1]
WIKI = Path(os.environ.get("SENTLAB_DATA_MIRROR", REPO.parent / "shared" / "data")) / "wiki" / "wiki1m_head.txt"


def _nltk_ready() -> str | None:
    from sentlab.assets.nltk_resources import require_nltk

    try:
        require_nltk("averaged_perceptron_tagger_eng")
        require_nltk("stopwords")
    except SentlabError as e:
        return str(e)
    return None


needs_nltk = pytest.mark.skipif(_nltk_ready() is not None,
                                reason="needs NLTK resources averaged_perceptron_tagger_eng and stopwords "
                                       "(set NLTK_DATA)")


@pytest.fixture(scope="module")
def nltk_be():
    if _nltk_ready():
        pytest.skip("needs NLTK resources averaged_perceptron_tagger_eng and stopwords (set NLTK_DATA)")
    return get_backend("nltk", BackendOptions())


def _texts(frame: dict) -> dict:
    return {k: (v["text"] if v else None) for k, v in frame.items()}


def _check_spans(text: str, row: dict) -> None:
    for r in row["rake"] + row["chunks"]:
        assert text[r["start"]:r["end"]] == r["text"]
    for f in row["frames"]:
        for v in f.values():
            if v is not None:
                assert text[v["start"]:v["end"]] == v["text"]


# --- nltk backend: golden examples -------------------------------------------------
def test_nltk_golden_negated_frame(nltk_be):
    text = "Mary did not sign the contract."
    (row,) = nltk_be.annotate([text])
    assert row["tokens"] == ["Mary", "did", "not", "sign", "the", "contract", "."]
    assert row["pos"] == ["NNP", "VBD", "RB", "VB", "DT", "NN", "."]
    assert [_texts(f) for f in row["frames"]] == [
        {"predicate": "sign", "arg0": "Mary", "arg1": "the contract", "argm_neg": "not"}]
    assert ("VP", "did not sign") in [(c["label"], c["text"]) for c in row["chunks"]]
    assert row["frames"][0]["argm_neg"] == {"text": "not", "start": 9, "end": 12}
    _check_spans(text, row)


def test_nltk_golden_two_predicates_passive_and_clitic(nltk_be):
    rows = nltk_be.annotate(["John bought a car and Mary sold the house.",
                             "The contract was signed by Mary.",
                             "He didn't read the report."])
    assert [_texts(f) for f in rows[0]["frames"]] == [
        {"predicate": "bought", "arg0": "John", "arg1": "a car", "argm_neg": None},
        {"predicate": "sold", "arg0": "Mary", "arg1": "the house", "argm_neg": None}]
    assert [_texts(f) for f in rows[1]["frames"]] == [
        {"predicate": "signed", "arg0": "Mary", "arg1": "The contract", "argm_neg": None}]
    assert [_texts(f) for f in rows[2]["frames"]] == [
        {"predicate": "read", "arg0": "He", "arg1": "the report", "argm_neg": "n't"}]


def test_nltk_relative_clause_subject_skips_the_clause(nltk_be):
    (row,) = nltk_be.annotate(["The man who signed the contract left the city."])
    frames = {f["predicate"]["text"]: _texts(f) for f in row["frames"]}
    assert frames["signed"]["arg0"] == "The man" and frames["signed"]["arg1"] == "the contract"
    assert frames["left"]["arg0"] == "The man" and frames["left"]["arg1"] == "the city"
    labels = {c["label"] for c in row["chunks"]}
    assert {"NP", "VP", "SBAR"} <= labels


def test_chunk_labels_include_pp(nltk_be):
    (row,) = nltk_be.annotate(["She lives in the old house because it rained."])
    got = [(c["label"], c["text"]) for c in row["chunks"]]
    assert ("PP", "in the old house") in got and ("NP", "the old house") in got
    assert any(lab == "SBAR" and t.startswith("because") for lab, t in got)
    assert {c["label"] for c in row["chunks"]} <= {"NP", "VP", "PP", "SBAR"}


def test_rake_ranks_the_key_phrase_first(nltk_be):
    text = "We evaluated the compact convolutional neural network on a dataset."
    (row,) = nltk_be.annotate([text])
    top = row["rake"][0]
    assert top["text"] == "compact convolutional neural network"
    assert top["score"] == pytest.approx(16.0)
    assert text[top["start"]:top["end"]] == top["text"]
    scores = [r["score"] for r in row["rake"]]
    assert scores == sorted(scores, reverse=True)
    assert "we" not in {r["text"].lower() for r in row["rake"]}  # a stopword is never a phrase


def test_rake_unbounded_by_default_keeps_the_long_phrase_it_ranks_first():
    """#34 item 7: a 4-word cap dropped the 5-word candidate RAKE ranks first; unbounded (the default, the
    paper profile) keeps it; the quick profile's cap is 4, the paper profile's null."""
    if _nltk_ready():
        pytest.skip("needs NLTK resources averaged_perceptron_tagger_eng and stopwords (set NLTK_DATA)")
    from sentlab.config import AnnotateParams, load_params

    text = "We evaluated the small compact convolutional neural network on a dataset."
    (row,) = get_backend("nltk", BackendOptions()).annotate([text])
    assert row["rake"][0]["text"] == "small compact convolutional neural network"
    (capped,) = get_backend("nltk", BackendOptions(rake_max_words=4)).annotate([text])
    assert "small compact convolutional neural network" not in [r["text"] for r in capped["rake"]]
    assert capped["rake"][0]["score"] == 1.0  # the long phrase (25.0) is gone: a one-word phrase leads
    assert AnnotateParams().rake_max_words is None and BackendOptions().rake_max_words is None
    assert load_params(REPO / "params.yaml", profile="quick").annotate.rake_max_words == 4
    assert load_params(REPO / "params.yaml", profile="paper").annotate.rake_max_words is None


def test_rake_respects_max_words():
    if _nltk_ready():
        pytest.skip("needs NLTK resources averaged_perceptron_tagger_eng and stopwords (set NLTK_DATA)")
    be = get_backend("nltk", BackendOptions(rake_max_words=2))
    (row,) = be.annotate(["We evaluated the compact convolutional neural network on a dataset."])
    assert all(len(r["text"].split()) <= 2 for r in row["rake"])
    assert "compact convolutional neural network" not in [r["text"] for r in row["rake"]]


@needs_nltk
def test_batch_tagger_equals_nltk_perceptron():
    from nltk.tag.perceptron import PerceptronTagger
    from nltk.tokenize import TreebankWordTokenizer

    from sentlab.annotate.tagger import BatchPerceptronTagger

    lines = ["Mary did not sign the contract.", "The 1990s saw well-known bands play 3,000 shows in 1994."]
    if WIKI.is_file():
        lines += WIKI.read_text(encoding="utf-8").splitlines()[:300]
    toks = [TreebankWordTokenizer().tokenize(s) for s in lines]
    ref = PerceptronTagger()
    assert BatchPerceptronTagger(ref).tag_sents(toks) == [[t for _, t in ref.tag(x)] for x in toks]


def test_batched_chunking_equals_one_parse_per_sentence(nltk_be):
    import nltk

    from sentlab.annotate.nltk_backend import GRAMMAR, _flatten

    sents = ["The man who signed the contract left.", "She lives in the old house because it rained.",
             "Mary did not sign the contract."] * 40
    tags = [nltk_be.tagger.tag_sents([[s[a:b] for a, b in nltk_be.tokenize(s)]])[0] for s in sents]
    parser = nltk.RegexpParser(GRAMMAR)
    assert nltk_be.chunk_sents(tags) == [_flatten(parser.parse(list(enumerate(t)))) for t in tags]


# --- bad input ---------------------------------------------------------------------
def test_bad_inputs_never_crash(nltk_be, tmp_path):
    long_line = " ".join(f"word{i}" if i % 7 else "the" for i in range(500))
    texts = ["", "   ", "?!... --", long_line, "Zoë visited Zürich and São Paulo in 2019.",
             "Ctrl\x00chars\x07 here\u200b and\ttabs.", "日本語の文です。", None]
    stats = annotate_corpus(list(range(len(texts))), texts, tmp_path / "out", progress=False)
    assert stats.sentences == 8 and stats.skipped == 4  # "", "   ", punctuation-only, None
    t = read_annotations(tmp_path / "out").to_pylist()
    assert [r["id"] for r in t] == list(range(8))
    assert t[0]["tokens"] == [] and t[2]["frames"] == [] and t[7]["text"] == ""
    assert len(t[3]["tokens"]) == 500
    for r in t:
        _check_spans(r["text"], r)
    ctrl = t[5]
    assert all("\x00" not in tok and "\x07" not in tok for tok in ctrl["tokens"])
    assert "Zürich" in t[4]["tokens"] and t[6]["tokens"]


# --- schema, metadata, round trip --------------------------------------------------
def test_schema_round_trip_and_metadata(nltk_be, tmp_path):
    texts = ["Mary did not sign the contract.", "John bought a car and Mary sold the house.", "It rained."]
    ids = [10, 11, 12]
    stats = annotate_corpus(ids, texts, tmp_path / "ann", shard_size=2, progress=False)
    assert stats.shards == 2 and stats.shards_written == 2 and stats.with_frames == 3
    files = sorted((tmp_path / "ann").glob("part-*.parquet"))
    assert [f.name for f in files] == ["part-00000.parquet", "part-00001.parquet"]
    meta = pq.read_schema(files[0]).metadata
    assert meta[b"sentlab.backend"] == b"nltk" and meta[b"sentlab.params_hash"].decode() == stats.params_hash
    table = read_annotations(tmp_path / "ann")
    assert table.schema.remove_metadata() == SCHEMA
    assert table.column("id").to_pylist() == ids and table.column("text").to_pylist() == texts
    direct = [dict(id=i, text=t, **r) for i, t, r in zip(ids, texts, nltk_be.annotate(texts))]
    assert table.to_pylist() == direct
    only = read_annotations(tmp_path / "ann", columns=["frames"])
    assert only.column_names == ["id", "text", "frames"]
    with pytest.raises(SentlabError, match="Unknown annotation column"):
        read_annotations(tmp_path / "ann", columns=["srl"])
    with pytest.raises(SentlabError, match="not found"):
        read_annotations(tmp_path / "missing")


def test_single_file_output_and_parallel_equals_serial(nltk_be, tmp_path):
    texts = [f"Sentence {i} says that the committee did not approve plan {i}." for i in range(90)] + ["", "Ok."]
    ids = list(range(len(texts)))
    annotate_corpus(ids, texts, tmp_path / "one.parquet", progress=False)
    assert (tmp_path / "one.parquet").is_file()
    s2 = annotate_corpus(ids, texts, tmp_path / "par", jobs=2, shard_size=25, progress=False)
    assert s2.shards == 4 and s2.skipped == 1
    assert read_annotations(tmp_path / "par").to_pylist() == read_annotations(tmp_path / "one.parquet").to_pylist()


# --- resume and corruption ---------------------------------------------------------
_KILL_AFTER_FIRST_SHARD = textwrap.dedent("""
    import os, signal, sys
    import sentlab.annotate.corpus as runner
    from sentlab.annotate import annotate_corpus
    real = runner._write
    def write_then_die(table, path):
        real(table, path)
        os.kill(os.getpid(), signal.SIGKILL)   # killed right after the first shard is on disk
    runner._write = write_then_die
    texts = open(sys.argv[1], encoding="utf-8").read().split("\\n")
    annotate_corpus(list(range(len(texts))), texts, sys.argv[2], shard_size=20, progress=False)
""")


def _corpus(n=60):
    return [f"Engineer {i} did not sign contract number {i} because the board rejected it." for i in range(n)]


@needs_nltk
def test_resume_after_killed_run(tmp_path):
    texts = _corpus()
    src = tmp_path / "in.txt"
    src.write_text("\n".join(texts), encoding="utf-8")
    out = tmp_path / "ann"
    proc = subprocess.run([sys.executable, "-c", _KILL_AFTER_FIRST_SHARD, str(src), str(out)],
                          env={**os.environ}, capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stderr.decode()
    assert [f.name for f in out.glob("part-*.parquet")] == ["part-00000.parquet"]
    first = out / "part-00000.parquet"
    mtime = first.stat().st_mtime_ns
    stats = annotate_corpus(list(range(len(texts))), texts, out, shard_size=20, progress=False)
    assert (stats.shards, stats.shards_reused, stats.shards_written) == (3, 1, 2)
    assert first.stat().st_mtime_ns == mtime  # reused, not rewritten
    fresh = annotate_corpus(list(range(len(texts))), texts, tmp_path / "fresh", shard_size=20, progress=False)
    assert fresh.shards_written == 3
    assert read_annotations(out).to_pylist() == read_annotations(tmp_path / "fresh").to_pylist()
    assert not list(out.glob(".*.tmp"))


@needs_nltk
def test_corrupt_and_stale_shards_are_rebuilt(tmp_path):
    texts = _corpus(50)
    ids = list(range(50))
    out = tmp_path / "ann"
    annotate_corpus(ids, texts, out, shard_size=20, progress=False)
    good = read_annotations(out).to_pylist()
    (out / "part-00001.parquet").write_bytes(b"PAR1 this is not parquet")
    s = annotate_corpus(ids, texts, out, shard_size=20, progress=False)
    assert (s.shards_reused, s.shards_written) == (2, 1)
    assert read_annotations(out).to_pylist() == good
    # a shard written with another params hash is stale
    t = pq.read_table(out / "part-00002.parquet")
    pq.write_table(t.replace_schema_metadata({**t.schema.metadata, b"sentlab.params_hash": b"other"}),
                   out / "part-00002.parquet")
    s = annotate_corpus(ids, texts, out, shard_size=20, progress=False)
    assert (s.shards_reused, s.shards_written) == (2, 1)
    # other params: every shard is rebuilt; a changed input text rebuilds its shard only
    s = annotate_corpus(ids, texts, out, shard_size=20, progress=False, options=BackendOptions(rake_max_words=3))
    assert s.shards_written == 3
    texts2 = list(texts)
    texts2[45] = "A different sentence."
    s = annotate_corpus(ids, texts2, out, shard_size=20, progress=False, options=BackendOptions(rake_max_words=3))
    assert (s.shards_reused, s.shards_written) == (2, 1)
    # a smaller corpus removes the shards past its end
    s = annotate_corpus(ids[:15], texts2[:15], out, shard_size=20, progress=False,
                        options=BackendOptions(rake_max_words=3))
    assert [f.name for f in out.glob("part-*.parquet")] == ["part-00000.parquet"]


# --- errors ------------------------------------------------------------------------
def test_missing_nltk_resource_is_a_clear_error(monkeypatch, tmp_path):
    import nltk

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    with pytest.raises(SentlabError, match=r"python -m nltk.downloader averaged_perceptron_tagger_eng"):
        get_backend("nltk", BackendOptions())


def test_unknown_backend():
    with pytest.raises(SentlabError, match="allowed: nltk, spacy"):
        get_backend("stanza")


def test_sentlab_annotate_is_a_subcommand_of_the_sentlab_command():
    """``sentlab annotate`` is registered by the ``sentlab`` command itself (no stand-alone entry of its own)."""
    from sentlab.cli.annotate import run_cli
    from sentlab.cli import build_parser

    args = build_parser().parse_args(["annotate", "in.txt", "--out", "o.parquet", "--backend", "spacy"])
    assert args.func is run_cli and args.backend == "spacy" and args.out == "o.parquet"


def test_cli_text_file_to_one_parquet(tmp_path, capsys):
    import argparse
    import json

    from sentlab.cli.annotate import register_cli

    if _nltk_ready():
        pytest.skip("needs NLTK resources averaged_perceptron_tagger_eng and stopwords (set NLTK_DATA)")
    src = tmp_path / "in.txt"
    src.write_text("Mary did not sign the contract.\n\nIt rained.\n", encoding="utf-8")
    parser = argparse.ArgumentParser(prog="sentlab")
    register_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["annotate", str(src), "--out", str(tmp_path / "o.parquet"), "--backend", "nltk",
                              "--jobs", "1", "--no-progress"])
    assert args.func(args) == 0
    assert json.loads(capsys.readouterr().out)["skipped"] == 1
    t = read_annotations(tmp_path / "o.parquet")
    assert t.num_rows == 3 and t.column("id").to_pylist() == [0, 1, 2]
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine\n\xff\xfe broken\n")
    args = parser.parse_args(["annotate", str(bad), "--out", str(tmp_path / "b.parquet")])
    with pytest.raises(SentlabError, match=r"bad.txt, line 2: not valid UTF-8"):
        args.func(args)


def test_pipeline_entry_point(tmp_path, monkeypatch):
    if _nltk_ready():
        pytest.skip("needs NLTK resources averaged_perceptron_tagger_eng and stopwords (set NLTK_DATA)")
    import json
    import runpy

    corpus = tmp_path / "data" / "corpus"
    corpus.mkdir(parents=True)
    for name, rows in {"train": ["Mary did not sign the contract.", ""],
                       "sts_unlabeled": ["A man plays a guitar."]}.items():
        pq.write_table(pa.table({"id": pa.array(range(len(rows)), pa.int64()), "text": rows}),
                       corpus / f"{name}.parquet")
    from conftest import stage_workspace

    stage_workspace(tmp_path, lambda r: r["annotate"].update(backend="nltk", jobs=1, shard_size=10))
    monkeypatch.chdir(tmp_path)
    mod = runpy.run_path(str(REPO / "pipeline" / "annotate.py"))
    mod["main"]()
    stats = json.loads((tmp_path / "data" / "annotate_stats.json").read_text())
    assert stats["train"]["sentences"] == 2 and stats["train"]["skipped"] == 1 and stats["train"]["with_frames"] == 1
    assert stats["sts_unlabeled"]["sentences"] == 1
    assert read_annotations(tmp_path / "data" / "annotations" / "train").num_rows == 2
    # what every train stage depends on holds no timing or counter: another annotate.jobs (or a re-run
    # reusing every shard) leaves data/annotations byte for byte as it was, so no training re-runs
    tree = {p.relative_to(tmp_path).as_posix(): p.read_bytes()
            for p in sorted((tmp_path / "data" / "annotations").rglob("*")) if p.is_file()}
    stage_workspace(tmp_path, lambda r: r["annotate"].update(backend="nltk", jobs=2, shard_size=10))
    mod["main"]()
    assert {p.relative_to(tmp_path).as_posix(): p.read_bytes()
            for p in sorted((tmp_path / "data" / "annotations").rglob("*")) if p.is_file()} == tree
    assert json.loads((tmp_path / "data" / "annotate_stats.json").read_text())["train"]["shards_reused"] == 1
