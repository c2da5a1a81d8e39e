"""PaSeR Table 6: the retrieval examples pinned on a QQP-layout fixture built here with a deterministic letter-count
embedding (query choice, top hits, cosines, duplicate marks), written by ``sentlab evaluate --tasks retrieval --json``,
and the report page with results, with "needs data", and built by the report stage."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from sentlab.errors import SentlabError
from sentlab.evaluate.suites import retrieval as R
from sentlab.evaluate.suites.retrieval_examples import PASER_TABLE6, ExampleSettings, select_queries, top_hits

VOCAB = "abcdefghijklmnopqrstuvwxyz"
PAIN, CRY = (e["query"] for e in PASER_TABLE6)
ROWS = [  # (q1, q2, is_duplicate): the paper's two queries (the second with other spacing and case), four others
    (PAIN, "What has worked for you to help relieve chronic pain?", 1),
    (PAIN, "What is the best way to avoid pain?", 0),
    ("is there a biological reason that people  cry when they are emotional?",
     "Why do some people cry when they get angry?", 1),
    ("Why do people cry when they feel happy?", "Why do people cry when happy?", 1),
    ("How do I learn Python?", "What is the best way to learn Python?", 1),
    ("How do I learn Python?", "How can I lose weight fast?", 0),
    ("What is the capital of France?", "Which city is the capital of France?", 1),
    ("How can I lose weight fast?", "What is the fastest way to lose weight?", 1),
]


def embed(texts):
    """Letter counts: similar letters, similar texts (deterministic, no model; as tests/test_retrieval.py)."""
    return np.array([[t.lower().count(c) + 0.01 * i for i, c in enumerate(VOCAB)] for t in texts], np.float32)


def _qqp(tmp_path):
    f = tmp_path / "quora_duplicate_questions.tsv"
    f.write_text("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n" + "".join(
        f"{i}\t{2 * i}\t{2 * i + 1}\t{a}\t{b}\t{d}\n" for i, (a, b, d) in enumerate(ROWS)), encoding="utf-8")
    return f


def _brute(query, corpus, k):
    """The top ``k`` by float64 cosine, the query's own text excluded (the pinned values' independent check)."""
    E = embed([query, *corpus]).astype(np.float64)
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    s = E[1:] @ E[0]
    order = sorted((i for i, t in enumerate(corpus) if t != query), key=lambda i: (-s[i], i))[:k]
    return [(corpus[i], s[i]) for i in order]


def _hits(q):
    return [(h["text"], h["score"], h["duplicate"]) for h in q["hits"]]


def test_examples_pinned(tmp_path):
    queries, corpus = R.load_qqp(_qqp(tmp_path))
    res = R.retrieval(queries, corpus, embed, examples=ExampleSettings(k=3, n_seeded=2, seed=0))
    assert res["MAP"] == 77.78 and res["queries"] == 6                    # Table 3's numbers unchanged
    ex = res["examples"]
    assert (ex["k"], ex["n_seeded"], ex["seed"], ex["paper_missing"]) == (3, 2, 0, [])
    shown = [(q["query"], q["source"], q["relevant"]) for q in ex["queries"]]
    assert shown == [(PAIN, "paper", 1), (ROWS[2][0], "paper", 1),       # the paper's, matched despite case/spaces
                     ("What is the capital of France?", "seeded", 1),
                     ("Why do people cry when they feel happy?", "seeded", 1)]
    pinned = {
        PAIN: [("What has worked for you to help relieve chronic pain?", 0.9188, True),
               ("Why do some people cry when they get angry?", 0.7999, False),
               ("How can I lose weight fast?", 0.7841, False)],
        ROWS[2][0]: [("What has worked for you to help relieve chronic pain?", 0.9313, False),
                     ("What is the best way to learn Python?", 0.8712, False),
                     ("Why do some people cry when they get angry?", 0.8517, True)],
        "What is the capital of France?": [("Which city is the capital of France?", 0.9345, True),
                                           ("How can I lose weight fast?", 0.8787, False),
                                           ("What is the best way to avoid pain?", 0.8617, False)],
        "Why do people cry when they feel happy?": [("Why do people cry when happy?", 0.9559, True),
                                                    ("Why do some people cry when they get angry?", 0.9226, False),
                                                    ("What has worked for you to help relieve chronic pain?", 0.7993,
                                                     False)],
    }
    for q in ex["queries"]:
        got = _hits(q)
        assert [(t, d) for t, _, d in got] == [(t, d) for t, _, d in pinned[q["query"]]]
        assert [s for _, s, _ in got] == pytest.approx([s for _, s, _ in pinned[q["query"]]], abs=2e-4)
        brute = _brute(q["query"], list(dict.fromkeys(corpus)), 3)
        assert [t for t, _ in brute] == [t for t, _, _ in got]
        assert [s for _, s in brute] == pytest.approx([s for _, s, _ in got], abs=1e-4)
        assert [h["rank"] for h in q["hits"]] == [1, 2, 3]
    assert json.loads(json.dumps(res)) == res                             # plain JSON


def test_query_choice_seeded_given_and_missing_paper_queries(tmp_path):
    queries, corpus = R.load_qqp(_qqp(tmp_path))
    qs = [q for q in queries if q not in (PAIN, ROWS[2][0])]              # a copy without the paper's queries
    a, missing = select_queries(qs, ExampleSettings(n_seeded=2, seed=0))
    assert missing == [PAIN, CRY] and [s for _, s in a] == ["seeded", "seeded"]
    assert select_queries(list(reversed(qs)), ExampleSettings(n_seeded=2, seed=0))[0] == a   # row order immaterial
    other = [select_queries(qs, ExampleSettings(n_seeded=2, seed=s))[0] for s in range(6)]
    assert any(o != a for o in other)                                     # the seed chooses
    assert len(select_queries(qs, ExampleSettings(n_seeded=99))[0]) == len(qs)
    given = R.retrieval(queries, corpus, embed, examples=ExampleSettings(k=1, queries=("How do I learn Python?",)))
    (g,) = given["examples"]["queries"]
    # letter counts are no semantics: the duplicate is not its nearest text
    assert g["source"] == "given" and _hits(g) == [("What has worked for you to help relieve chronic pain?",
                                                    pytest.approx(0.8883, abs=2e-4), False)]
    assert _brute("How do I learn Python?", list(dict.fromkeys(corpus)), 1)[0][0] == g["hits"][0]["text"]
    with pytest.raises(SentlabError, match="no QQP query"):
        R.retrieval(queries, corpus, embed, examples=ExampleSettings(queries=("Not in QQP?",)))
    assert "examples" not in R.retrieval(queries, corpus, embed, examples=None)


def test_top_hits_order_ties_and_exclusion():
    s = np.array([0.5, 0.9, 0.5, -np.inf, 0.9], np.float32)
    assert top_hits(s, 3).tolist() == [1, 4, 0]                            # ties by corpus order
    assert top_hits(s, 10).tolist() == [1, 4, 0, 2]                        # an excluded text never
    assert top_hits(s, 0).tolist() == []


def test_evaluate_cli_writes_the_examples(tmp_path, monkeypatch):
    """``sentlab evaluate --tasks retrieval --json F``: the examples under retrieval.QQP.examples, Table 3's keys
    kept."""
    from types import SimpleNamespace

    from sentlab import cli
    from sentlab.evaluate.sts import runner
    from sentlab.evaluate.suites import transfer_stage

    f, real = _qqp(tmp_path), R.load_qqp
    monkeypatch.setattr(R, "load_qqp", lambda path=None: real(f))
    monkeypatch.setattr(R, "load_askubuntu", lambda: [R.RerankQuery("cat", ("dog", "act"), frozenset({1}))])
    monkeypatch.setattr(transfer_stage, "embedder", lambda enc, batch: embed)
    enc = SimpleNamespace(precision="fp32", device=SimpleNamespace(type="cpu"), pooling="cls")
    monkeypatch.setattr(runner, "build_encoders", lambda model, name=None, **kw: {name or "m": enc})
    monkeypatch.setenv("SENTLAB_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "paser.json"
    assert cli.main(["evaluate", "--model", "models/paser", "--name", "paser", "--tasks", "retrieval", "--json",
                     str(out), "--no-mlflow"]) == 0
    data = json.loads(out.read_text())
    assert {"QQP_MAP", "QQP_MRR@10", "AskUbuntu_MAP", "AskUbuntu_MRR@10"} <= set(data)
    ex = data["retrieval"]["QQP"]["examples"]
    assert [q["source"] for q in ex["queries"]] == ["paper", "paper", "seeded", "seeded", "seeded"]
    assert _hits(ex["queries"][0])[0] == ("What has worked for you to help relieve chronic pain?",
                                          pytest.approx(0.9188, abs=2e-4), True)


# --- the report page ------------------------------------------------------------------------------------------


def _metrics_tree(tmp_path, with_results: bool):
    d = tmp_path / "reports/metrics"
    (d / "retrieval").mkdir(parents=True)
    for name in ("simcse", "paser"):
        (d / f"{name}.json").write_text(json.dumps({"model": name, "status": "evaluated"}))
    if with_results:
        queries, corpus = R.load_qqp(_qqp(tmp_path))
        qqp = R.retrieval(queries, corpus, embed, examples=ExampleSettings(k=3, n_seeded=1, seed=0))
        (d / "retrieval/paser.json").write_text(json.dumps(
            {"QQP_MAP": qqp["MAP"], "QQP_MRR@10": qqp["MRR@10"], "AskUbuntu_MAP": 1.0, "AskUbuntu_MRR@10": 2.0,
             "retrieval": {"QQP": qqp}}))
    return d


def test_table6_with_results(tmp_path):
    from sentlab.report.paper_tables import load_metrics
    from sentlab.report.retrieval_examples import render

    md, csv_text, n = render(load_metrics(_metrics_tree(tmp_path, True)), "bert-base-uncased", "paper",
                             tmp_path / "models")
    assert n == 1 and md.startswith("# PaSeR Table 6: retrieval examples\n")
    assert "- PaSeR-BERTbase: `paser` — top 3 of 3 queries (1 seeded, seed 0)" in md
    assert "- SimCSE-BERTbase: `simcse` — **no examples**: simcse: needs data" in md
    sec = md.split(f"## 1. {PAIN}\n")[1].split("## 2.")[0]
    assert "The paper's Table 6 query; 1 labelled duplicate in the corpus." in sec
    assert "| Rank | PaSeR-BERTbase (`paser`) | SimCSE-BERTbase, paper | PaSeR-BERTbase, paper |" in sec
    assert ("| 1 | What has worked for you to help relieve chronic pain? (0.9188) ✓ | Is it possible to come to "
            "terms with a life of chronic pain? | What has worked for you to help relieve chronic pain? |") in sec
    assert "| 3 | How can I lose weight fast? (0.7841) |" in sec
    assert f"## 2. {ROWS[2][0]}" in md and "## 3. Why do people cry when they feel happy?" in md
    assert f"## 2. {CRY}" not in md                     # the paper's text as QQP spells it: one section
    third = md.split("## 3. Why do people cry when they feel happy?")[1]
    assert "Seeded query; 1 labelled duplicate" in third and ", paper |" not in third   # no paper column
    recs = list(csv.DictReader(io.StringIO(csv_text)))
    mine = [r for r in recs if r["source"] == "reproduced" and r["model"] == "paser"]
    assert len(mine) == 9 and mine[0]["duplicate"] == "True" and mine[0]["score"] == "0.9188"
    assert sum(r["source"] == "paper" for r in recs) == 12
    (sim,) = [r for r in recs if r["model"] == "simcse"]
    assert sim["status"].startswith("simcse: needs data") and "quora_duplicate_questions.tsv" in sim["status"]


def test_table6_needs_data_and_old_results(tmp_path):
    from sentlab.report.paper_tables import load_metrics
    from sentlab.report.retrieval_examples import render

    d = _metrics_tree(tmp_path, False)
    md, csv_text, n = render(load_metrics(d), "bert-base-uncased", "quick", tmp_path / "models")
    assert n == 0 and "**Reproduced: none**" in md
    for m in ("simcse", "paser"):
        line = next(x for x in md.splitlines() if x.startswith("- ") and f"`{m}`" in x)
        assert "needs data" in line and "quora_duplicate_questions.tsv" in line and "--tasks retrieval" in line
    assert f"## 1. {PAIN}" in md and f"## 2. {CRY}" in md and "## 3." not in md   # the paper's examples only
    assert "| Rank | SimCSE-BERTbase, paper | PaSeR-BERTbase, paper |" in md
    assert "| 1 | Why do people cry when they feel happy? | Why do some people cry when they get angry? |" in md
    # Table 3-only results written before the examples: said so, not "needs data"
    (d / "retrieval/simcse.json").write_text(json.dumps({"QQP_MAP": 1.0, "QQP_MRR@10": 2.0, "AskUbuntu_MAP": 3.0,
                                                          "AskUbuntu_MRR@10": 4.0}))
    md, _, n = render(load_metrics(d), "b", "p", tmp_path / "models")
    assert n == 0 and "retrieval/simcse.json holds no QQP examples" in md
    assert "re-run its stage, `dvc repro -f -s retrieval@simcse`" in md


def test_report_stage_writes_table6_and_links_it(tmp_path):
    from sentlab.report.build import build_report

    _metrics_tree(tmp_path, True)
    rep = build_report(tmp_path, "bert-base-uncased", "paper")
    t6 = tmp_path / "reports/tables/paser_table6.md"
    assert t6.is_file() and "(0.9188) ✓" in t6.read_text()
    assert (tmp_path / "reports/tables/paser_table6.csv").is_file()
    index = (tmp_path / "reports/index.md").read_text()
    assert "[tables/paser_table6.md](tables/paser_table6.md) — PaSeR Table 6: retrieval examples" in index
    assert "(1/2 models' examples)" in index and rep.files["reports/tables/paser_table6.md"]


def test_params_set_the_examples(tmp_path):
    """params.yaml ``retrieval.examples`` reaches the ranking (the stage declares it): k, the draw, the paper's
    queries, named queries, none; Table 3's numbers do not move."""
    queries, corpus = R.load_qqp(_qqp(tmp_path))
    base = R.retrieval(queries, corpus, embed)                        # the params' defaults
    one = R.retrieval(queries, corpus, embed, examples=ExampleSettings(k=1, paper=False, n_seeded=2, seed=1))
    assert [len(q["hits"]) for q in one["examples"]["queries"]] == [1, 1]
    assert [q["source"] for q in one["examples"]["queries"]] == ["seeded", "seeded"]
    named = R.retrieval(queries, corpus, embed, examples=ExampleSettings(queries=["How do I learn Python?"]))
    assert [q["query"] for q in named["examples"]["queries"]] == ["How do I learn Python?"]
    off = R.retrieval(queries, corpus, embed, examples=ExampleSettings(show=False))
    assert "examples" not in off and "examples" in base
    assert {k: off[k] for k in ("MAP", "MRR@10")} == {k: one[k] for k in ("MAP", "MRR@10")} == \
        {k: base[k] for k in ("MAP", "MRR@10")}
