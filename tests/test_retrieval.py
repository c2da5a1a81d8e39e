"""PaSeR Table 3's retrieval (QQP) and reranking (AskUbuntu) evaluators on fixture files built here: metrics
against sklearn / hand-computed values, the loaders, the choices where the paper is silent."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from sentlab.errors import SentlabError
from sentlab.evaluate.suites import retrieval as R

VOCAB = "abcdefghijklmnopqrstuvwxyz"


def embed(texts):
    """Letter counts: similar letters, similar texts (deterministic, no model)."""
    return np.array([[t.lower().count(c) + 0.01 * i for i, c in enumerate(VOCAB)] for t in texts], np.float32)


def test_average_precision_and_reciprocal_rank_match_sklearn():
    from sklearn.metrics import average_precision_score

    rng = np.random.RandomState(0)
    for _ in range(20):
        y = rng.randint(0, 2, 12)
        y[rng.randint(12)] = 1
        s = rng.rand(12)
        hits = y[np.argsort(-s, kind="stable")]
        assert R.average_precision(hits, int(y.sum())) == pytest.approx(average_precision_score(y, s))
    assert R.reciprocal_rank(np.array([0, 0, 1, 1]), 10) == pytest.approx(1 / 3)
    assert R.reciprocal_rank(np.array([0, 0, 1]), 2) == 0.0


def test_reranking_pinned():
    qs = [R.RerankQuery("apple pie", ("banana", "apple tart", "pie apple", "zzz"), frozenset({2})),
          R.RerankQuery("cat", ("dog", "act", "tac"), frozenset({0})),
          R.RerankQuery("none", ("x",), frozenset())]            # no positive: left out, as TSDAE does
    res = R.reranking(qs, embed, mrr_at=2)
    # query 1: "pie apple" has apple pie's letters -> rank 1; query 2: "dog" ranks last of 3 (AP 1/3, RR@2 0)
    assert res == {"MAP": round(100 * (1 + 1 / 3) / 2, 2), "MRR@2": 50.0, "queries": 2}
    with pytest.raises(SentlabError):
        R.reranking(qs[2:], embed)


def test_retrieval_excludes_the_query_itself_and_counts_relevant_in_the_top_k():
    corpus = ["how to bake bread", "how do I bake bread", "best bread recipe", "fix a flat tire", "how to bake bread"]
    queries = {"how to bake bread": {"how do I bake bread"}, "repair flat tire": {"fix a flat tire"},
               "orphan": set()}
    res = R.retrieval(queries, corpus, embed, map_at=2, mrr_at=10)
    assert res["corpus"] == 4 and res["queries"] == 2                 # duplicates collapsed, the orphan left out
    assert res["MAP"] == 100.0 and res["MRR@10"] == 100.0
    kept = R.retrieval({"how to bake bread": {"how to bake bread"}}, corpus, embed, exclude_identical=False)
    assert kept["MAP"] == 100.0                                       # without the exclusion it finds itself
    none = R.retrieval({"how to bake bread": {"how to bake bread", "how do I bake bread"}}, corpus, embed)
    assert none["queries"] == 1 and none["MRR@10"] == 100.0          # the identical text is no relevant document


def test_loaders_on_fixture_files(tmp_path):
    qqp = tmp_path / "quora_duplicate_questions.tsv"
    qqp.write_text("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
                   "0\t1\t2\tWhat is A?\tWhat's A?\t1\n1\t3\t4\tWhat is B?\tHow is C?\t0\n"
                   "2\t1\t5\tWhat is A?\tDefine A\t1\n3\t6\t7\t\tEmpty q1\t1\n", encoding="utf-8")
    queries, corpus = R.load_qqp(qqp)
    assert queries == {"What is A?": {"What's A?", "Define A"}} and corpus == ["What's A?", "How is C?", "Define A"]
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tb\n1\t2\n", encoding="utf-8")
    with pytest.raises(SentlabError, match="quora_duplicate_questions"):
        R.load_qqp(bad)

    text = tmp_path / "text_tokenized.txt.gz"
    with gzip.open(text, "wt", encoding="utf-8") as f:
        f.write("1\tubuntu wifi drops\tbody\n2\twifi keeps dropping\tb\n3\thow to install java\tb\n"
                "4\tsound not working\tb\n")
    test = tmp_path / "test.txt"
    test.write_text("1\t2\t3 2 4\t1 2 3\n", encoding="utf-8")
    (q,) = R.load_askubuntu(text, test)
    assert q.query == "ubuntu wifi drops" and q.candidates[1] == "wifi keeps dropping" and q.positive == {1}
    test.write_text("1\t2\t3 9\t1 2\n", encoding="utf-8")
    with pytest.raises(SentlabError, match="question 9"):
        R.load_askubuntu(text, test)


def test_missing_data_fails_with_the_download(tmp_path, monkeypatch):
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(tmp_path))
    monkeypatch.setenv("SENTLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SentlabError, match="quora_duplicate_questions.tsv"):
        R.load_qqp()


def test_paser_table3_rows_say_what_data_they_need_and_fill_from_results(tmp_path):
    import json

    from sentlab.report import paper_numbers as P
    from sentlab.report.paper_tables import load_metrics, paser, render_rows

    d = tmp_path / "metrics"
    (d / "retrieval").mkdir(parents=True)
    for name in ("simcse", "paser"):
        (d / f"{name}.json").write_text(json.dumps({"model": name, "status": "evaluated"}))
    (d / "retrieval" / "paser.json").write_text(json.dumps(
        {"QQP_MAP": 70.5, "QQP_MRR@10": 60.25, "AskUbuntu_MAP": 45.0, "AskUbuntu_MRR@10": 55.5}))
    rows = {r.spec.label: r for r in render_rows(paser.table3(), load_metrics(d), tmp_path / "models")}
    assert rows["PaSeR-BERTbase"].values["QQP_MRR@10"] == 60.25
    assert rows["PaSeR-BERTbase"].spec.paper == P.PASER_TABLE3["PaSeR-BERTbase"]
    why = rows["SimCSE-BERTbase"].status
    assert why.startswith("simcse: needs data") and "quora_duplicate_questions.tsv" in why
    assert "--tasks retrieval" in why
