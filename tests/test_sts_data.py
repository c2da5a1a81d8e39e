"""Parsers of the STS / SICK files: real files, and each malformed case."""

from __future__ import annotations

from pathlib import Path

import pytest

from sentlab.data.corpus import sample_corpus
from sentlab.data.sts import language_warnings, parse_all, parse_senteval_sts, parse_sick, parse_stsb
from sentlab.errors import DataFormatError, SentlabError

# docs/evaluation.md#data-sets-and-the-offline-mirror: pair counts after dropping unscored pairs.
EXPECTED_PAIRS = {("STS12", "test"): 3108, ("STS13", "test"): 1500, ("STS14", "test"): 3750, ("STS15", "test"): 3000,
                  ("STS16", "test"): 1186, ("STSBenchmark", "test"): 1379, ("STSBenchmark", "dev"): 1500,
                  ("SICKRelatedness", "test"): 4927}


def test_real_files_give_the_spec_pair_counts(mirror):
    df = parse_all(mirror, mirror)
    counts = df.groupby(["task", "split"]).size().to_dict()
    for key, n in EXPECTED_PAIRS.items():
        assert counts[key] == n, key


def test_stsb_keeps_sentences_verbatim(mirror):
    rows = parse_stsb(mirror / "STS/STSBenchmark/sts-dev.csv", "dev")
    first = (mirror / "STS/STSBenchmark/sts-dev.csv").read_text(encoding="utf-8").split("\n")[0].split("\t")
    assert rows[0]["sentence1"] == first[5] and rows[0]["sentence2"] == first[6]
    assert rows[0]["score"] == float(first[4])


def _write(tmp_path: Path, name: str, content: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(content)
    return p


def test_unscored_pairs_are_dropped(tmp_path):
    inp = _write(tmp_path, "in.txt", b"a b\tc d\ne f\tg h\ni\tj\n")
    gs = _write(tmp_path, "gs.txt", b"4.0\n\n1.5\n")
    rows = parse_senteval_sts(inp, gs, "STS12", "x")
    assert [r["line"] for r in rows] == [1, 3]
    assert [r["score"] for r in rows] == [4.0, 1.5]


@pytest.mark.parametrize("content,needle", [
    (b"only one field\n", "found 1 fields"),
    (b"a\tb\tc\n", "found 3 fields"),
])
def test_wrong_column_count_names_file_and_line(tmp_path, content, needle):
    inp = _write(tmp_path, "STS.input.x.txt", b"ok\tok\n" + content)
    gs = _write(tmp_path, "STS.gs.x.txt", b"1\n2\n")
    with pytest.raises(DataFormatError) as e:
        parse_senteval_sts(inp, gs, "STS12", "x")
    assert "STS.input.x.txt, line 2" in str(e.value) and needle in str(e.value)


def test_non_numeric_score(tmp_path):
    p = _write(tmp_path, "sts-dev.csv", b"g\tf\ty\t1\t4.0\ta\tb\ng\tf\ty\t2\tfour\ta\tb\n")
    with pytest.raises(DataFormatError, match=r"sts-dev.csv, line 2: score 'four' is not a number"):
        parse_stsb(p, "dev")


def test_empty_file(tmp_path):
    p = _write(tmp_path, "SICK_test_annotated.txt", b"")
    with pytest.raises(DataFormatError, match="is empty"):
        parse_sick(p, "test")


def test_non_utf8_bytes_name_the_line(tmp_path):
    p = _write(tmp_path, "sts-test.csv", b"g\tf\ty\t1\t4.0\ta\tb\ng\tf\ty\t2\t3.0\tcaf\xe9\tb\n")
    with pytest.raises(DataFormatError, match=r"sts-test.csv, line 2: bytes that are not UTF-8"):
        parse_stsb(p, "test")


def test_gold_and_input_lengths_must_match(tmp_path):
    inp = _write(tmp_path, "in.txt", b"a\tb\nc\td\n")
    gs = _write(tmp_path, "gs.txt", b"1\n")
    with pytest.raises(DataFormatError, match="1 gold lines for 2 sentence pairs"):
        parse_senteval_sts(inp, gs, "STS12", "x")


def test_sick_header_checked(tmp_path):
    p = _write(tmp_path, "SICK_train.txt", b"id\ta\tb\tscore\tlabel\n1\ta\tb\t3.0\tneutral\n")
    with pytest.raises(DataFormatError, match="header"):
        parse_sick(p, "train")


def test_language_check_flags_a_translated_file():
    import pandas as pd

    df = pd.DataFrame({"task": ["SICKRelatedness", "STS12"], "sentence1": ["子供たちが遊んでいる", "a man is here"],
                       "sentence2": ["男性が立っている", "a dog runs"], "score": [1.0, 2.0]})
    w = language_warnings(df)
    assert set(w) == {"SICKRelatedness"}


def test_corpus_sampling_filters_dedupes_and_is_seeded(tmp_path):
    lines = ["one two three", "", "dup line here", "dup line here", "x " * 200, "short", "another good one"]
    p = _write(tmp_path, "wiki.txt", "\n".join(lines).encode())
    ids, texts, stats = sample_corpus(p, size=3, seed=1, min_words=2, max_words=50)
    assert stats.dropped == {"empty": 1, "too_short": 1, "too_long": 1, "duplicates": 1}
    assert stats.kept_after_filter == 3 and len(texts) == 3 and "short" not in texts
    assert sample_corpus(p, size=2, seed=1, min_words=2)[0] == sample_corpus(p, size=2, seed=1, min_words=2)[0]
    with pytest.raises(SentlabError, match="fewer than prepare.size"):
        sample_corpus(p, size=10, seed=1, min_words=2)
    assert len(sample_corpus(p, size=10, seed=1, min_words=2, accept_size=3)[0]) == 3


def test_empty_corpus_is_an_error(tmp_path):
    p = _write(tmp_path, "wiki.txt", b"\n\n   \n")
    with pytest.raises(DataFormatError, match="empty"):
        sample_corpus(p, size=1, seed=0)


def test_consert_corpus_on_the_mirror_is_what_its_data_utils_builds(mirror):
    """ConSERT's ``--train_data stssick --no_pair`` (yym6472/ConSERT@03c9e8f ``data_utils.load_datasets``), counted
    by a separate script that follows its loaders line by line on the same files: 89,192 sentences, 47,341
    distinct (sentlab's sts_unlabeled: the distinct sentences of the scored pairs only)."""
    from sentlab.data.sts import all_sides, parse_all

    sides = all_sides(mirror, mirror)
    assert (len(sides), len(set(sides))) == (89192, 47341)
    table = parse_all(mirror, mirror)
    scored = set(table.sentence1) | set(table.sentence2)
    assert len(set(sides) - scored) > 0 and scored <= set(sides)   # unscored STS15/16 pairs add sentences


def test_consert_corpus_keeps_unscored_pairs_repeats_and_order(tmp_path):
    from sentlab.assets.resolve import STS_TASKS
    from sentlab.data.sts import all_sides

    folders = [tmp_path / "STS" / f for f, _ in STS_TASKS.values()]
    for d in folders + [tmp_path / "STS" / "STSBenchmark", tmp_path / "SICK"]:
        d.mkdir(parents=True)
    for folder, subsets in STS_TASKS.values():
        for s in subsets:
            _write(tmp_path / "STS" / folder, f"STS.input.{s}.txt", f"{s} a\t{s} b\n{s} a\t{s} c\n".encode())
            _write(tmp_path / "STS" / folder, f"STS.gs.{s}.txt", b"3.0\n\n")   # the second pair unscored
    for split in ("train", "dev", "test"):
        _write(tmp_path / "STS" / "STSBenchmark", f"sts-{split}.csv", f"g\tf\ty\t1\t2.0\tB {split}\tB2\n\n".encode())
    for name in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"):
        _write(tmp_path / "SICK", name, b"pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
                                        b"1\tS a\tS b\t3.0\tNEUTRAL\n")
    sides = all_sides(tmp_path, tmp_path)
    assert sides[:4] == ["MSRpar a", "MSRpar b", "MSRpar a", "MSRpar c"]
    assert len(sides) == 24 * 4 + 3 * 2 + 3 * 2
    assert sides[96:102] == ["B train", "B2", "B dev", "B2", "B test", "B2"] and sides[102:] == ["S a", "S b"] * 3
    assert all_sides(tmp_path, tmp_path, skip=("STS12", "SICKRelatedness"))[:2] == ["FNWN a", "FNWN b"]
