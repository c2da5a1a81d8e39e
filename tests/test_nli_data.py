"""paser_sup's NLI corpus (sentlab.data.nli + the prepare stage): the SICK-train stand-in, SimCSE's CSV, the choice."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from sentlab.data.nli import SOURCES, build_nli, choose_source, read_nli, sick_standin
from sentlab.errors import AssetMissingError, SentlabError

REPO = Path(__file__).resolve().parents[1]
HEADER = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
# data row (0-based), premise, hypothesis, label
SICK_ROWS = [
    ("A man plays a guitar", "A person plays an instrument", "ENTAILMENT"),      # 0
    ("A man plays a guitar", "A man is singing", "NEUTRAL"),                    # 1
    ("A man plays a guitar", "Nobody plays a guitar", "CONTRADICTION"),          # 2
    ("A man plays a guitar", "A guitar is being played", "ENTAILMENT"),          # 3
    ("A dog runs", "An animal runs", "ENTAILMENT"),                             # 4  no contradiction: dropped
    ("A cat sleeps", "A cat is awake", "CONTRADICTION"),                        # 5  no entailment: dropped
    ("Two kids swim", "There are no kids swimming", "CONTRADICTION"),           # 6
    ("Two kids swim", "The kids are dry", "CONTRADICTION"),                     # 7
    ("Two kids swim", "Children are in the water", "ENTAILMENT"),               # 8
    ("Two kids swim", "Two children swim", "ENTAILMENT"),                       # 9
    ("Two kids swim", "Kids are swimming", "ENTAILMENT"),                       # 10
    ("Children are in the water", "Two kids swim", "CONTRADICTION"),            # 11 premise with no entailment
]
# SICK test repeats one train pair (reversed): the triple holding it (row 10) is dropped; a shared sentence is not
TEST_ROWS = [("Kids are swimming", "Two kids swim", "ENTAILMENT"), ("A man plays a guitar", "A woman sings", "NEUTRAL")]
# one triple per entailment pair of a premise that has a contradiction; the j-th entailment takes the
# (j mod m)-th contradiction, in file order; id = the entailment pair's data row
EXPECTED = [
    (0, "A man plays a guitar", "A person plays an instrument", "Nobody plays a guitar"),
    (3, "A man plays a guitar", "A guitar is being played", "Nobody plays a guitar"),
    (8, "Two kids swim", "Children are in the water", "There are no kids swimming"),
    (9, "Two kids swim", "Two children swim", "The kids are dry"),
]
CSV = [("A man plays a guitar.", "A person plays music.", "Nobody plays."),
       ("Two kids swim.", "Children are in water.", "The kids are dry.")]


def write_sick(folder: Path, name: str = "SICK_train.txt", test: bool = True) -> Path:
    path = folder / "SICK" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    for file, data in ((path, SICK_ROWS), (path.parent / "SICK_test_annotated.txt", TEST_ROWS if test else None)):
        if data is not None:
            file.write_text(HEADER + "".join(f"{i + 1}\t{a}\t{b}\t3.0\t{lab}\n" for i, (a, b, lab) in enumerate(data)),
                            encoding="utf-8")
    return path


def write_csv(folder: Path) -> Path:
    path = folder / "nli" / "nli_for_simcse.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("sent0,sent1,hard_neg\n" + "".join(f'"{a}","{b}","{c}"\n' for a, b, c in CSV)
                    + '"only an anchor",,\n', encoding="utf-8")
    return path


def rows(table) -> list[tuple]:
    d = table.to_pydict()
    return list(zip(d["id"], d["text"], d["positive"], d["hard_negative"]))


def test_sick_standin_builds_exactly_the_expected_triples(tmp_path):
    table, stats = sick_standin(write_sick(tmp_path))
    assert rows(table) == EXPECTED
    assert stats == {"pairs_by_label": {"CONTRADICTION": 5, "ENTAILMENT": 6, "NEUTRAL": 1}, "premises": 2,
                     "triples": 4, "triples_dropped_sick_test_pair": 1,
                     "premises_dropped": {"no_contradiction": 1, "no_entailment": 2}}


def test_sick_standin_refuses_sick_test_and_trial(tmp_path):
    for name in ("SICK_test_annotated.txt", "SICK_trial.txt"):
        with pytest.raises(SentlabError, match="SICK train only"):
            sick_standin(write_sick(tmp_path / name, name))
    with pytest.raises(SentlabError, match="SICK_test_annotated.txt beside"):  # cannot check for test pairs: refuse
        sick_standin(write_sick(tmp_path / "lone", test=False))


def test_build_nli_labels_the_source_in_the_file(tmp_path):
    stats = build_nli("sick_standin", write_sick(tmp_path), tmp_path / "nli.parquet")
    assert stats["label"] == "NLI stand-in (SICK train)" and stats["triples"] == 4
    meta = pq.read_schema(tmp_path / "nli.parquet").metadata
    assert meta[b"sentlab.nli_source"] == b"sick_standin" and meta[b"sentlab.nli_label"] == b"NLI stand-in (SICK train)"
    stats = build_nli("simcse", write_csv(tmp_path), tmp_path / "sim.parquet")
    assert stats["label"] == SOURCES["simcse"] and (stats["rows_read"], stats["triples"]) == (3, 2)
    assert stats["incomplete_rows_dropped"] == 1
    assert rows(read_nli(tmp_path / "sim.parquet")) == [(i, *t) for i, t in enumerate(CSV)]


def test_choose_source_reads_the_upstream_csv_when_present_and_falls_back_offline(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(mirror))
    monkeypatch.setenv("SENTLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SENTLAB_OFFLINE", "1")
    assert choose_source("auto") == ("sick_standin", None)
    with pytest.raises(AssetMissingError, match="nli_for_simcse.csv"):
        choose_source("simcse")
    assert choose_source("none") == ("none", None)
    csv_path = write_csv(mirror)
    for mode in ("auto", "simcse"):
        source, resolved = choose_source(mode)
        assert source == "simcse" and resolved.path == csv_path and resolved.source == "mirror"
    assert choose_source("sick_standin") == ("sick_standin", None)


def run_prepare(folder: Path, mirror: Path, nli: str, monkeypatch) -> dict:
    from conftest import stage_workspace

    stage_workspace(folder, lambda r: r["prepare"].update(size=50, nli=nli))
    monkeypatch.chdir(folder)
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(mirror))
    monkeypatch.setenv("SENTLAB_OFFLINE", "1")
    runpy.run_path(str(REPO / "pipeline" / "prepare.py"), run_name="prepare")["main"]()
    return json.loads((folder / "data" / "prepare_stats.json").read_text())["nli"]


@pytest.mark.parametrize("nli", ["auto", "sick_standin"])
def test_prepare_writes_the_sick_train_standin_offline(mirror, tmp_path, monkeypatch, nli):
    stats = run_prepare(tmp_path, mirror, nli, monkeypatch)
    keys = ("requested", "source", "label", "triples", "triples_dropped_sick_test_pair", "premises", "premises_dropped")
    assert {k: stats[k] for k in keys} == {
        "requested": nli, "source": "sick_standin", "label": "NLI stand-in (SICK train)", "triples": 123,
        "triples_dropped_sick_test_pair": 25, "premises": 100,
        "premises_dropped": {"no_contradiction": 1035, "no_entailment": 515}}
    table = read_nli(tmp_path / "data" / "corpus" / "nli.parquet")
    assert table.num_rows == 123
    # ConSERT's corpus beside it: every side of every pair, as its data_utils builds it (tests/test_sts_data.py)
    sides = pq.read_table(tmp_path / "data" / "corpus" / "sts_all_sides.parquet").column("text").to_pylist()
    prep = json.loads((tmp_path / "data" / "prepare_stats.json").read_text())
    assert len(sides) == prep["sts_all_sides_sentences"] == 89192
    test_pairs = set()
    for line in (mirror / "SICK" / "SICK_test_annotated.txt").read_text(encoding="utf-8").splitlines()[1:]:
        f = line.split("\t")
        test_pairs |= {(f[1], f[2]), (f[2], f[1])}
    d = table.to_pydict()
    assert not ({*zip(d["text"], d["positive"])} | {*zip(d["text"], d["hard_negative"])}) & test_pairs


def test_prepare_reads_simcse_csv_from_the_mirror_and_none_writes_nothing(mirror, tmp_path, monkeypatch):
    fake = tmp_path / "mirror"
    fake.mkdir()
    for sub in ("STS", "SICK", "wiki"):
        (fake / sub).symlink_to(mirror / sub)
    write_csv(fake)
    stats = run_prepare(tmp_path, fake, "auto", monkeypatch)
    assert (stats["source"], stats["label"], stats["triples"]) == ("simcse", SOURCES["simcse"], 2)
    assert (tmp_path / "data" / "raw" / "nli" / "nli_for_simcse.csv").is_file()  # copied with the other raw data
    assert rows(read_nli(tmp_path / "data" / "corpus" / "nli.parquet")) == [(i, *t) for i, t in enumerate(CSV)]
    none = tmp_path / "none"
    none.mkdir()
    assert run_prepare(none, fake, "none", monkeypatch) == {"requested": "none", "source": "none"}
    assert not (none / "data" / "corpus" / "nli.parquet").exists()
