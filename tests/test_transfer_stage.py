"""The transfer stage (#39): the quick slice of each split, the stage list, the metrics the report reads and
L2P-CSR Table 2 filled from them."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import mirror_with

from sentlab.errors import SentlabError
from sentlab.evaluate.suites.transfer_data import Split, TransferTask, subsample


def _task(n: int) -> TransferTask:
    a = [f"s{i:03d}" for i in range(n)]
    return TransferTask("TREC", 6, {"train": Split(a, np.arange(n) % 6), "test": Split(a[:40], np.arange(40) % 6)})


def test_subsample_is_seeded_capped_and_keeps_senteval_order():
    t = _task(300)
    s1, s2, s3 = subsample(t, 100, 7), subsample(t, 100, 7), subsample(t, 100, 8)
    tr = s1.splits["train"]
    assert len(tr.a) == 100 and tr.a == sorted(tr.a)                 # SentEval's sorted order kept
    assert [int(a[1:]) % 6 for a in tr.a] == tr.y.tolist()          # labels stay with their sentences
    assert tr.a == s2.splits["train"].a and tr.a != s3.splits["train"].a
    assert s1.splits["test"] is t.splits["test"]                     # a split under the cap is kept whole
    assert subsample(t, None, 7) is t
    pair = TransferTask("MRPC", 2, {"train": Split(["a", "b", "c"], np.array([0, 1, 0]), ["x", "y", "z"])})
    sp = subsample(pair, 2, 0).splits["train"]
    assert [(a, b) for a, b in zip(sp.a, sp.b)] in ([("a", "x"), ("b", "y")], [("a", "x"), ("c", "z")],
                                                    [("b", "y"), ("c", "z")])


def _params(**transfer):
    from sentlab.config import validate
    from sentlab.config.profile_files import profile_values

    values = profile_values("quick")
    values["transfer"] = {**values["transfer"], **transfer}
    return validate(values)


def _transfer(sl):
    return sl["transfer_stages"]


def test_stage_list_has_one_transfer_stage_per_listed_model():
    from sentlab.stages.stage_list import stage_list_for

    sl = stage_list_for(_params(models=["base-cls", "simcse", "paser_sup"]))
    assert _transfer(sl) == {"base-cls": {"dep": "data/sources/model.json"}, "simcse": {"dep": "models/simcse"},
                             "paser_sup": {"dep": "models/paser_sup"}}
    assert _transfer(stage_list_for(_params(models=[]))) == {}
    # a line the quick profile does not train (ConSERT): no stage, its row says "not run in this profile"
    assert _transfer(stage_list_for(_params(models=["consert", "simcse"]))) == {"simcse": {"dep": "models/simcse"}}
    for bad in ("simcse_typo", "base-whitening"):
        with pytest.raises(SentlabError, match=f"transfer.models lists `{bad}`"):
            stage_list_for(_params(models=[bad]))


def test_quick_profile_evaluates_every_line_model_and_table2_baselines():
    from sentlab.stages.stage_list import stage_list_for

    p = _params()
    lines = [m for m, e in stage_list_for(p)["models"].items() if e["seed"] == p.seed]
    assert set(p.transfer.models) == {"base-cls", "base-mean", *lines}
    assert p.transfer.max_examples == 250


def _metrics(tmp_path, name, acc, transfer=True):
    d = tmp_path / "metrics"
    (d / "transfer").mkdir(parents=True, exist_ok=True)
    (d / f"{name}.json").write_text(json.dumps({"model": name, "status": "evaluated", "Avg": 70.0}))
    if transfer:
        res = {t: acc for t in ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC")}
        (d / "transfer" / f"{name}.json").write_text(json.dumps(
            {**res, "MRPC_F1": 80.0, "TransferAvg": acc, "status": "evaluated", "max_examples": 250}))
    return d


def test_table2_rows_read_the_transfer_metrics(tmp_path):
    from sentlab.report import paper_numbers as P
    from sentlab.report.paper_tables import l2p, load_metrics, render_rows

    for name, acc in (("base-cls", 70.0), ("base-mean", 75.5), ("simcse", 77.25)):
        d = _metrics(tmp_path, name, acc)
    _metrics(tmp_path, "l2p", 0.0, transfer=False)
    metrics = load_metrics(d)
    assert set(metrics) == {"base-cls", "base-mean", "simcse", "l2p"}      # transfer files add no model
    spec = next(t for t in l2p.tables() if t.id == "l2p_table2")
    rows = {(r.spec.section, r.spec.label): r for r in render_rows(spec, metrics, tmp_path / "models")}
    cls, simcse, ours = rows[("", "CLS")], rows[("", "+SimCSE")], rows[("", "+Ours (L2P-CSR)")]
    assert cls.evaluated and cls.values["MR"] == 70.0 and cls.spec.paper == P.L2P_TABLE2["CLS"]
    assert simcse.values["TransferAvg"] == 77.25 and simcse.values["MRPC_F1"] == 80.0
    assert not ours.evaluated and "transfer.models" in ours.status
    # a sampled evaluation (quick: transfer.max_examples) is no reproduction of the paper's number: no Δ
    from sentlab.report.paper_tables import cell_values, to_markdown

    assert cell_values(simcse, "MR") == (77.25, 80.41, None) and "250 examples" in simcse.caveat
    md = to_markdown(spec, list(rows.values()), "sentence-transformers/all-MiniLM-L6-v2", "quick", {})
    assert "accuracy %" in md and "Spearman" not in md
    assert P.L2P_TABLE2["+Ours"]["TransferAvg"] == 86.09 and P.L2P_TABLE2["Mean"]["TREC"] == 92.80


def test_sources_hash_the_transfer_files_and_check_a_changed_copy(tmp_path, monkeypatch):
    """The `sources` stage hashes the tasks' files (data/sources/transfer.json: an edited file re-runs the transfer
    stages) and parses a task whose bytes changed, so a truncated copy fails there, naming the file."""
    import shutil

    from sentlab.stages.sources import transfer_sources

    shutil.copytree(mirror_with(monkeypatch, "CR") / "CR", tmp_path / "CR")
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(tmp_path))
    monkeypatch.setenv("SENTLAB_CACHE", str(tmp_path / "cache"))
    assert transfer_sources(["CR"], []) == {}
    good = transfer_sources(["CR"], ["simcse"])
    assert set(good["senteval_cr"]) == {"CR/custrev.pos", "CR/custrev.neg"}
    neg = tmp_path / "CR" / "custrev.neg"
    neg.write_bytes(b"".join(neg.read_bytes().splitlines(keepends=True)[:-1]))   # one review less
    with pytest.raises(SentlabError, match="custrev.neg"):
        transfer_sources(["CR"], ["simcse"], previous=good)
