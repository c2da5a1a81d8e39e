"""``sentlab evaluate --format mteb``: MTEB's result JSON (the results repository's layout) for STS12–16 and
STS-B, SICK-R left out (issue #55). Structure pinned; the metrics checked against scipy on the same embeddings;
the files loaded with the installed mteb's own TaskResult where mteb is installed."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr

from _support.sts_tables import sts_pairs_table

from sentlab.errors import SentlabError
from sentlab.evaluate.sts import mteb_results as R

PAIRS = {"STS12": 3108, "STS13": 1500, "STS14": 3750, "STS15": 3000, "STS16": 1186, "STSBenchmark": 1379,
         "SICKRelatedness": 4927}
REVISIONS = {"STS12": "a0d554a64d88156834ff5ae9920b964011b16384", "STS13": "7e90230a92c190f1bf69ae9002b8cea547a64cca",
             "STS14": "6031580fec1f6af667f0bd2da0a551cf4f0b2375", "STS15": "ae752c7c21bf194d8b67fd573edf7ae58183cbe3",
             "STS16": "4d8694f8f0e0100860b497b999b3dbed754a0513",
             "STSBenchmark": "b0fddb56ed78048fa8b90373c8a3cfc37b684831"}   # mteb 2.26's task metadata
SCORE_KEYS = {"pearson", "spearman", "cosine_pearson", "cosine_spearman", "manhattan_pearson", "manhattan_spearman",
              "euclidean_pearson", "euclidean_spearman", "main_score", "hf_subset", "languages"}


def _table(pairs=PAIRS, seed=0):
    return sts_pairs_table(pairs, seed, noise=0.8)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    table, lookup = _table()
    res = R.results(table, lookup, evaluation_time=12.5)
    out = tmp_path_factory.mktemp("mteb")
    paths = R.write(out / "results", "sentence-transformers/all-MiniLM-L6-v2", res)
    return table, lookup, out / "results", paths


def test_layout_and_fields(written):
    table, lookup, out, paths = written
    d = out / "sentence-transformers__all-MiniLM-L6-v2" / "no_revision_available"
    assert sorted(p.name for p in paths) == sorted([f"{t}.json" for t in REVISIONS] + ["model_meta.json"])
    assert all(p.parent == d for p in paths)
    assert not (d / "SICK-R.json").exists() and not (d / "SICKRelatedness.json").exists()
    meta = json.loads((d / "model_meta.json").read_text())
    assert meta["name"] == "sentence-transformers/all-MiniLM-L6-v2" and meta["revision"] == "no_revision_available"
    for task, rev in REVISIONS.items():
        r = json.loads((d / f"{task}.json").read_text())
        assert set(r) == {"dataset_revision", "task_name", "mteb_version", "scores", "evaluation_time",
                          "kg_co2_emissions", "date"}
        assert r["task_name"] == task and r["dataset_revision"] == rev and r["evaluation_time"] == 12.5
        assert list(r["scores"]) == ["test"] and len(r["scores"]["test"]) == 1
        s = r["scores"]["test"][0]
        assert set(s) == SCORE_KEYS and s["hf_subset"] == "default" and s["languages"] == ["eng-Latn"]
        # MTEB's definitions, on the same pairs, computed here with scipy
        df = table[table.task == task]
        a = np.stack([lookup[x] for x in df.sentence1])
        b = np.stack([lookup[x] for x in df.sentence2])
        cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        assert s["cosine_spearman"] == pytest.approx(spearmanr(cos, df.score)[0], abs=1e-6)
        assert s["cosine_pearson"] == pytest.approx(pearsonr(cos, df.score)[0], abs=1e-6)
        assert s["manhattan_spearman"] == pytest.approx(spearmanr(-np.abs(a - b).sum(1), df.score)[0], abs=1e-6)
        assert s["euclidean_pearson"] == pytest.approx(pearsonr(-np.linalg.norm(a - b, axis=1), df.score)[0],
                                                       abs=1e-6)
        assert s["main_score"] == s["cosine_spearman"] == s["spearman"] and s["pearson"] == s["cosine_pearson"]
        assert 0.2 < s["main_score"] < 0.99


def test_partial_table_is_refused():
    table, lookup = _table({**PAIRS, "STS13": 200})
    with pytest.raises(SentlabError, match="STS13 has 200 test pairs here, MTEB's STS13 has 1500"):
        R.results(table, lookup)


def test_installed_mteb_loads_the_files(written):
    mteb = pytest.importorskip("mteb", reason="mteb not installed: its TaskResult cannot load the files")
    from mteb.results.task_result import TaskResult

    _, _, out, paths = written
    for p in paths:
        if p.name == "model_meta.json":
            continue
        tr = TaskResult.from_disk(p)
        mine = json.loads(p.read_text())
        assert tr.task_name == mine["task_name"] and tr.get_score() == pytest.approx(
            mine["scores"]["test"][0]["main_score"])
        meta = mteb.get_task(tr.task_name).metadata
        assert meta.dataset["revision"] == tr.dataset_revision and meta.main_score == "cosine_spearman"
        assert meta.eval_splits == ["test"]


def test_cli_refuses_mteb_without_sts(capsys):
    from sentlab.cli import main

    assert main(["evaluate", "--model", "x", "--tasks", "transfer", "--format", "mteb", "--no-mlflow"]) == 2
    assert "--format mteb writes MTEB's result JSON of the STS tasks" in capsys.readouterr().err


def test_normalised_models_get_distances_on_unit_vectors(tmp_path):
    """all-MiniLM-L6-v2 ends in a Normalize module: MTEB's encode hands it unit vectors, so its Euclidean and
    Manhattan scores are taken on those (for unit vectors the Euclidean ranking is the cosine one)."""
    table, lookup = _table({"STSBenchmark": 1379})
    df = table
    a = np.stack([lookup[x] for x in df.sentence1])
    b = np.stack([lookup[x] for x in df.sentence2])
    raw = R.sts_scores(a, b, df.score.to_numpy())
    unit = R.sts_scores(a, b, df.score.to_numpy(), normalize=True)
    assert unit["euclidean_spearman"] == pytest.approx(unit["cosine_spearman"], abs=1e-9)
    assert raw["euclidean_spearman"] != pytest.approx(raw["cosine_spearman"], abs=1e-3)
    assert unit["cosine_spearman"] == raw["cosine_spearman"]
    assert R.normalizes("sentence-transformers/all-MiniLM-L6-v2")
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "modules.json").write_text(json.dumps([{"type": "sentence_transformers.models.Transformer"},
                                                       {"type": "sentence_transformers.models.Pooling"}]))
    assert not R.normalizes(str(tmp_path))
