"""Averaged GloVe vectors (SentEval's bag of words; issue #40): a generated 5-word vector file."""

import numpy as np
import pytest

from sentlab.errors import AssetMissingError, SentlabError
from sentlab.evaluate.baselines.glove import GloveEncoder, glove_missing, glove_path, read_vectors, tokens

VECS = {"A": [1.0, 0.0, 2.0], "man": [0.0, 4.0, 0.0], "plays": [3.0, 2.0, 1.0], "guitar": [-1.0, 0.0, 5.0],
        ".": [0.5, 0.5, 0.5]}


def _vector_file(folder) -> str:
    path = folder / "glove.840B.300d.txt"
    lines = [f"{w} {' '.join(str(v) for v in vec)}" for w, vec in VECS.items()]
    lines.insert(2, "unused 9 9 9")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_mean_of_in_vocabulary_vectors_by_hand(tmp_path):
    path = _vector_file(tmp_path)
    sents = ["A man plays guitar", "A man plays zither", "zither banjo", "", "a MAN"]
    enc = GloveEncoder.from_file(path, sents)
    out = enc.encode(sents)
    assert out.shape == (5, 3) and out.dtype == np.float32
    np.testing.assert_array_equal(out[0], [0.75, 1.5, 2.0])          # (A + man + plays + guitar) / 4
    np.testing.assert_allclose(out[1], [4 / 3, 2.0, 1.0], rtol=1e-7)  # zither is out of vocabulary: skipped
    np.testing.assert_array_equal(out[2], [0.5, 0.5, 0.5])           # no known word: the vector of "."
    np.testing.assert_array_equal(out[3], [0.5, 0.5, 0.5])           # no word at all: the same
    np.testing.assert_array_equal(out[4], [0.5, 0.5, 0.5])           # cased: "a", "MAN" are not "A", "man"
    assert enc.coverage(["A man plays zither"]) == 0.75


def test_tokenisation_is_senteval_whitespace_split_and_cased():
    assert tokens("A man  plays\tguitar .") == ["A", "man", "plays", "guitar", "."]
    assert tokens("") == []


def test_only_the_wanted_words_are_read_and_a_bad_file_is_one_paragraph(tmp_path):
    path = _vector_file(tmp_path)
    assert set(read_vectors(path, {"man", "zither", "."})) == {"man", "."}
    bad = tmp_path / "bad.txt"
    bad.write_text("man 1 2 3\nguitar 1 2\n", encoding="utf-8")
    with pytest.raises(SentlabError, match="line 2"):
        read_vectors(bad, {"man", "guitar"})
    with pytest.raises(SentlabError, match="build the encoder"):
        GloveEncoder.from_file(path, ["A man"]).encode(["A woman"])   # woman was never looked up


def test_missing_vectors_name_the_fetch_command(tmp_path, monkeypatch):
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(tmp_path / "mirror"))
    (tmp_path / "mirror").mkdir()
    monkeypatch.setenv("SENTLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SENTLAB_OFFLINE", "1")
    with pytest.raises(AssetMissingError) as e:
        glove_path()
    msg = str(e.value)
    assert "Data asset 'glove'" in msg and "https://nlp.stanford.edu/data/glove.840B.300d.zip" in msg
    assert "unzip" in msg and "glove/" in msg
    why = glove_missing()
    assert why.startswith("needs data:") and "glove.840B.300d.zip" in why and "evaluate_baseline@glove" in why
    from sentlab.preflight import classify_asset

    asset, cmd = classify_asset(msg)
    assert asset == "glove" and "glove.840B.300d.zip" in cmd
    # in the mirror's layout it is found, and the report has no "needs data" reason
    (tmp_path / "mirror" / "glove").mkdir()
    _vector_file(tmp_path / "mirror" / "glove")
    assert glove_path() == tmp_path / "mirror" / "glove" / "glove.840B.300d.txt"
    assert glove_missing() is None


def test_glove_stage_encoder_and_the_report_row(tmp_path, monkeypatch):
    from sentlab.config import Params
    from sentlab.evaluate.baselines.glove import glove_encoder
    from sentlab.evaluate.sts.protocol import evaluate_table
    from sentlab.report.paper_tables.resolve import resolve
    from sentlab.report.paper_tables import paser
    from _support.sts_tables import random_word_table as _table

    table = _table()
    words = sorted({w for s in (*table.sentence1, *table.sentence2) for w in s.split()})
    rng = np.random.default_rng(0)
    (tmp_path / "glove").mkdir()
    vectors = {}
    with open(tmp_path / "glove" / "glove.840B.300d.txt", "w", encoding="utf-8") as f:
        for w in [*words[:-3], "."]:   # three words left out of vocabulary
            text = [f"{v:.4f}" for v in rng.normal(size=4)]
            vectors[w] = np.array([float(v) for v in text])
            f.write(w + " " + " ".join(text) + "\n")
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(tmp_path))
    enc, embeddings, info = glove_encoder(Params(), table)
    assert embeddings is None and info["dim"] == 4 and info["found"] == len(words) - 3 + 1
    res = evaluate_table(enc, table)
    # SentEval's bag of GloVe vectors, computed here: a sentence is the mean of its in-vocabulary tokens' vectors
    # (whitespace split, case kept); per test task 100 x Spearman of the pairs' cosines with the gold scores
    from scipy.stats import spearmanr

    def mean_vector(s):
        return np.mean([vectors[w] for w in s.split() if w in vectors], axis=0)

    expected = {}
    for task, g in table[table.split == "test"].groupby("task"):
        a, b = (np.stack([mean_vector(s) for s in col]) for col in (g.sentence1, g.sentence2))
        cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        expected[task] = 100 * spearmanr(cos, g.score).statistic
    assert {t: res[t] for t in expected} == pytest.approx(expected, abs=1e-4)   # the table rounds to 4 places
    assert res["Avg"] == pytest.approx(np.mean(list(expected.values())), abs=1e-4)
    row = next(r for r in paser.table1_rows() if r.label == "GloVe embeddings")
    assert row.models == ("base-glove",)
    metrics = {"base-glove": {"model": "base-glove", "status": "evaluated", "backbone": "glove.840B.300d",
                              **{k: v for k, v in res.items() if not isinstance(v, dict)}}}
    assert resolve(row, metrics).evaluated
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(tmp_path / "nothing"))
    (tmp_path / "nothing").mkdir()
    monkeypatch.setenv("SENTLAB_CACHE", str(tmp_path / "cache"))
    assert resolve(row, {}).status.startswith("needs data:")


def test_the_preflight_goes_on_without_the_vectors(tmp_path):
    """Offline, the paper preflight's GloVe stage fails naming the fetch command; its stand-in drops the glove
    baseline (nothing else needs the vectors), the row says so and the stages after it are not blocked."""
    from pathlib import Path
    from types import SimpleNamespace

    import yaml

    from sentlab.preflight import standin_for
    from sentlab.preflight.run import Preflight
    from sentlab.preflight.table import Row
    from sentlab.config.profile_files import profile_values

    paper = profile_values("paper", Path(__file__).resolve().parents[1] / "profiles")
    edit, desc = standin_for("glove", paper)
    assert edit == {"evaluate": {"baselines": ["cls", "mean", "first_last", "whitening", "bert_flow"]}}
    sl = {"size": 600, "steps": 3, "batch_size": 8, "dev_max_pairs": 16, "max_pairs": 10}
    (tmp_path / "models.yaml").write_text("models: {}\n")
    pf = Preflight(tmp_path, "paper", sl, paper, runner=None, how="stand-in")
    row = Row("evaluate_baseline@glove", "python pipeline/evaluate_baseline.py glove", model="stand-in")
    row.status, row.asset, row.fetch = "needs asset", "glove", "curl ..."
    pf._stand_in(SimpleNamespace(name=row.stage, cmd=row.cmd), row)   # no re-run: the stage is gone
    assert row.note.startswith("continued without this stage") and row.status == "needs asset"
    written = yaml.safe_load((tmp_path / "params.yaml").read_text())
    assert "glove" not in written["evaluate"]["baselines"] and written["evaluate"]["bert_flow"]["steps"] == 3
    assert "glove" not in yaml.safe_load((tmp_path / "models.yaml").read_text())["baselines"]


def test_the_glove_baseline_stage_writes_its_metrics(tmp_path, monkeypatch):
    """evaluate_baseline('glove') end to end (the dress rehearsal's find, issue #54 §8: it failed on the encoder's
    missing ``batch_threads``, which the evaluation's fingerprint reads)."""
    import json

    from sentlab.config import Params
    from sentlab.evaluate.baselines.stage import evaluate_baseline
    from _support.sts_tables import random_word_table as _table

    table = _table()
    words = sorted({w for s in (*table.sentence1, *table.sentence2) for w in s.split()})
    rng = np.random.default_rng(0)
    (tmp_path / "glove").mkdir()
    with open(tmp_path / "glove" / "glove.840B.300d.txt", "w", encoding="utf-8") as f:
        for w in [*words, "."]:
            f.write(w + " " + " ".join(f"{v:.4f}" for v in rng.normal(size=4)) + "\n")
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(tmp_path))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.chdir(tmp_path)
    evaluate_baseline("glove", Params(), table, tmp_path / "figures")
    metrics = json.loads((tmp_path / "reports" / "metrics" / "base-glove.json").read_text())
    assert metrics["status"] == "evaluated" and metrics["fingerprint"]["threads"] == 1
