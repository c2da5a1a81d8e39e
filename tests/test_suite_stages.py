"""The evaluation suites as pipeline stages (#39): dvc.yaml's `transfer`, `glue` and `retrieval` groups run SentEval
transfer, GLUE fine-tuning and retrieval per model (models.yaml <suite>_stages), each switched on by its params
section; a GLUE stage end to end on a tiny model fills L2P-CSR Table 4; a stage reads exactly the params dvc.yaml
names for it; missing data fails naming the fetch."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import REPO, stage_workspace, mirror_with
from tiny import glue_mirror

from sentlab.errors import AssetMissingError
from sentlab.config.stage_params import UndeclaredParam, stage_params

BACKBONE = "data/sources/model.json"


def _lists(profile: str) -> dict:
    from sentlab.config import validate
    from sentlab.config.profile_files import profile_values
    from sentlab.stages.stage_list import stage_list_for

    return stage_list_for(validate(profile_values(profile, REPO / "profiles")))


def test_quick_runs_transfer_and_the_glue_slice_paper_every_suite():
    quick, paper = _lists("quick"), _lists("paper")
    assert quick["glue_stages"] == {"base-cls": {"dep": BACKBONE}, "l2p": {"dep": "models/l2p"}}
    assert len(quick["transfer_stages"]) == 12 and quick["retrieval_stages"] == {}   # 11 + CT (quick since #40)
    assert quick["transfer_stages"]["base-mean"] == {"dep": BACKBONE} and \
        quick["transfer_stages"]["ct"] == {"dep": "models/ct"}
    assert list(paper["glue_stages"]) == ["base-cls", "l2p"]
    assert paper["retrieval_stages"] == {"base-cls": {"dep": BACKBONE}, "simcse": {"dep": "models/simcse"},
                                         "paser": {"dep": "models/paser"}, "simcse_sup": {"dep": "models/simcse_sup"},
                                         "paser_sup": {"dep": "models/paser_sup"}}

    from sentlab.config import validate
    from sentlab.config.profile_files import profile_values

    q, p = validate(profile_values("quick", REPO / "profiles")), validate(profile_values("paper", REPO / "profiles"))
    assert q.glue.tasks == ["SST-2", "STS-B"] and q.glue.finetune.max_steps <= 300 and q.glue.finetune.max_dev
    assert p.glue.tasks == ["WNLI", "QNLI", "QQP", "SST-2", "STS-B"] and p.glue.seeds == [42, 43, 44, 45, 46]
    assert (p.glue.finetune.max_steps, p.glue.finetune.max_train, p.glue.finetune.max_dev) == (None, None, None)
    assert q.retrieval.models == [] and p.retrieval.tasks == ["QQP", "AskUbuntu"]


def test_a_suite_lists_only_what_it_can_evaluate():
    from sentlab.config import validate
    from sentlab.errors import SentlabError
    from sentlab.config.profile_files import profile_values
    from sentlab.stages.stage_list import stage_list_for

    values = profile_values("quick", REPO / "profiles")
    values["glue"]["models"] = ["base-mean"]   # GLUE fine-tunes the backbone with a [CLS] head: base-cls only
    with pytest.raises(SentlabError, match="glue.models lists `base-mean`"):
        stage_list_for(validate(values))
    values["glue"]["models"] = ["consert", "l2p"]   # a line quick does not train: no stage (its row: not run)
    assert list(stage_list_for(validate(values))["glue_stages"]) == ["l2p"]


def test_dvc_yaml_runs_each_suite_in_its_own_foreach_group():
    doc = yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))
    groups = [name for name, st in doc["stages"].items() if "foreach" in st]
    assert groups == ["train", "evaluate", "evaluate_baseline", "transfer", "glue", "retrieval"]
    for suite in ("transfer", "glue", "retrieval"):
        st = doc["stages"][suite]
        assert st["foreach"] == f"${{{suite}_stages}}"
        assert not any("${" in p for p in st["do"]["params"]), suite   # every param named, none through an item
    from sentlab.preflight import dvc_stages

    by = {s.name: s for s in dvc_stages(REPO)}
    glue = by["glue@l2p"]
    assert glue.cmd == "python pipeline/evaluate_glue.py l2p"
    assert glue.deps == ["pipeline/evaluate_glue.py", "data/sources/code/evaluate_glue.json",
                         "data/sources/glue.json", "models/l2p"]
    assert glue.outs == ["reports/metrics/glue/l2p.json"] and "train@l2p" in glue.upstream
    assert by["transfer@simcse"].cmd == "python pipeline/evaluate_transfer.py simcse"
    assert by["transfer@base-cls"].deps[-1] == BACKBONE
    assert "glue@base-cls" in by["report"].upstream


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.delenv("DVC_STAGE", raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.chdir(stage_workspace(tmp_path / "work"))
    return tmp_path / "work"


def _declared(suite: str) -> set[str]:
    """The params dvc.yaml names for the suite's stages."""
    return set(yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))["stages"][suite]["do"]["params"])


def _record_reads(monkeypatch) -> set[str]:
    """The params keys a stage reads through its :func:`stage_params` view (``section.key``, or a scalar read whole);
    runtime keys and the records (``profile``: read by every stage, declared by none) left out. A section's
    ``model_dump()`` (the settings a suite logs to MLflow: whatever it declares) is not a read: a key declared only
    to be logged would re-run the stage for nothing."""
    from sentlab.config import RUNTIME_TRAIN_KEYS
    from sentlab.config.stage_params import RECORDS, Declared, SectionView

    reads: set[str] = set()
    section_get, declared_get = SectionView.__getattr__, Declared.__getattr__

    def runtime(section, key):   # the train section's runtime keys: read beside it, never declared
        return section == "train" and key in RUNTIME_TRAIN_KEYS

    def get(self, key):
        if key in type(self._model).model_fields and not runtime(self._section, key):
            reads.add(f"{self._section}.{key}")
        return section_get(self, key)

    def whole(self, name):   # runtime (how, not what: the device and precision checks) and the records (labels)
        if name in ("runtime", *RECORDS):
            return declared_get(self, name)
        if name in type(self._params).model_fields and not any(len(p) == 2 and p[0] == name for p in self._paths):
            reads.add(name)
        return declared_get(self, name)

    monkeypatch.setattr(SectionView, "__getattr__", get)
    monkeypatch.setattr(Declared, "__getattr__", whole)
    return reads


def test_each_suite_stage_reads_exactly_the_params_dvc_yaml_names(work, tmp_path, monkeypatch, tok):
    """Each suite's stage on the backbone (a tiny BERT), its scoring replaced by a fixed result (what is measured
    is which params it reads, all of them before or while it scores): the keys it reads are dvc.yaml's list."""
    import torch
    from tiny import tiny_bert

    from sentlab.cli import main
    from sentlab.evaluate.suites import glue, glue_stage, retrieval, retrieval_stage, transfer_stage

    backbone = tmp_path / "tiny"
    tiny_bert(tok, 0).save_pretrained(backbone)
    tok.save_pretrained(backbone)

    def edit(r):
        r["model"]["backbone"] = str(backbone)
        r["retrieval"]["models"] = ["base-cls"]

    stage_workspace(work, edit)
    assert main(["stages"]) == 0
    monkeypatch.setattr(transfer_stage, "transfer_metrics", lambda enc, tasks, bs, mx: {"TransferAvg": 0.0})
    monkeypatch.setattr(glue, "load_glue", lambda task: None)
    monkeypatch.setattr(glue_stage, "glue_results", lambda model, tasks, splits, cfg, seeds, device, **kw: {})
    monkeypatch.setattr(retrieval, "load_qqp", lambda: None)
    monkeypatch.setattr(retrieval, "load_askubuntu", lambda: None)
    monkeypatch.setattr(retrieval_stage, "retrieval_metrics", lambda *a: {})
    reads = _record_reads(monkeypatch)
    threads = torch.get_num_threads()
    try:
        for suite, run in (("transfer", transfer_stage.run_transfer_stage), ("glue", glue_stage.run_glue_stage),
                           ("retrieval", retrieval_stage.run_retrieval_stage)):
            reads.clear()
            run("base-cls")
            declared = _declared(suite)   # a section declared whole (`model`) is read key by key
            assert {r.split(".")[0] if r.split(".")[0] in declared else r for r in reads} == declared, suite
            assert json.loads((work / f"reports/metrics/{suite}/base-cls.json").read_text())["model"] == "base-cls"
    finally:
        torch.set_num_threads(threads)


def test_a_glue_stage_reads_exactly_what_it_declares(work):
    p = stage_params("glue@l2p")
    assert p.glue.tasks == ["SST-2", "STS-B"] and p.glue.finetune.lr == 5e-5 and p.evaluate.device == "auto"
    for read, key in ((lambda p: p.glue.models, "glue.models"), (lambda p: p.transfer, "transfer"),
                      (lambda p: p.evaluate.batch_size, "evaluate.batch_size"), (lambda p: p.seed, "seed")):
        with pytest.raises(UndeclaredParam, match=f"stage `glue@l2p` reads `{key}`"):
            read(p)
    r = stage_params("transfer@simcse")
    assert r.transfer.max_examples == 250
    with pytest.raises(UndeclaredParam, match="reads `glue`"):
        r.glue


def test_a_glue_stage_end_to_end_fills_table4(work, tmp_path, monkeypatch, tok):
    from tiny import tiny_bert

    from sentlab.evaluate.suites.glue_stage import run_glue_stage
    from sentlab.report.paper_tables import l2p, load_metrics, render_rows

    backbone = tmp_path / "tiny"
    tiny_bert(tok, 0, initializer_range=0.2).save_pretrained(backbone)
    tok.save_pretrained(backbone)
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(glue_mirror(tmp_path / "mirror")))
    monkeypatch.setenv("SENTLAB_CACHE", str(tmp_path / "cache"))

    def edit(r):
        r["model"]["backbone"] = str(backbone)
        r["glue"]["seeds"] = [1, 2]
        r["glue"]["finetune"].update(lr=3e-3, batch_size=8, max_length=16, max_steps=6, max_train=40, max_dev=12)

    stage_workspace(work, edit)
    m = run_glue_stage("base-cls")
    out = json.loads((work / "reports/metrics/glue/base-cls.json").read_text())
    assert out == json.loads(json.dumps(m)) and out["status"] == "evaluated" and out["seeds"] == [1, 2]
    sst = out["glue"]["SST-2"]
    assert (sst["n"], sst["steps"], sst["train_examples"], sst["dev_examples"]) == (2, 6, 40, 12)
    assert [r["seed"] for r in sst["runs"]] == [1, 2] and sst["std"] is not None
    assert out["SST-2"] == sst["score"] == pytest.approx(sum(r["score"] for r in sst["runs"]) / 2, abs=0.01)
    assert "spearman" in out["glue"]["STS-B"] and out["slice"] == "max_steps 6, max_train 40, max_dev 12"
    assert run_glue_stage("base-cls")["glue"]["SST-2"]["runs"] == sst["runs"]     # seeded

    # the report: the backbone's row of Table 4 (its STS metrics: the evaluate_baseline stage's file)
    (work / "reports/metrics/base-cls.json").write_text(json.dumps({"model": "base-cls", "status": "evaluated",
                                                                     "backbone": str(backbone)}))
    spec = next(t for t in l2p.tables() if t.id == "l2p_table4")
    rows = {r.spec.label: r for r in render_rows(spec, load_metrics(work / "reports/metrics"), work / "models")}
    base = rows["BERT-base"]
    assert base.evaluated and base.values["SST-2"] == out["SST-2"] and base.values["STS-B"] == out["STS-B"]
    assert base.values["WNLI"] is None and "max_steps 6" in base.caveat
    from sentlab.report.significance import Context, annotate, marked_text

    annotate(list(rows.values()), Context(load_metrics(work / "reports/metrics"), work / "reports/cosines"),
             spec.columns)
    sd = base.marks.seeds["SST-2"]                       # the fine-tuning seeds: mean ± std (n) in the cell
    assert (sd.n, round(sd.mean, 2)) == (2, out["SST-2"]) and marked_text(base.marks, "SST-2", sd.mean, 2).endswith(
        f"± {sd.std:.2f} (2)")
    assert not rows["+Ours (L2P-CSR)"].evaluated


def test_missing_data_fails_the_stage_naming_every_fetch(work, tmp_path, monkeypatch):
    from sentlab.evaluate.suites.glue_stage import run_glue_stage
    from sentlab.evaluate.suites.retrieval_stage import run_retrieval_stage

    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(tmp_path / "empty"))
    monkeypatch.setenv("SENTLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SENTLAB_OFFLINE", "1")

    def edit(r):
        r["glue"]["tasks"] = ["WNLI", "QNLI", "SST-2"]
        r["retrieval"]["models"] = ["base-cls"]

    stage_workspace(work, edit)
    from sentlab.cli import main

    assert main(["stages"]) == 0
    with pytest.raises(AssetMissingError) as e:
        run_glue_stage("base-cls")
    msg = str(e.value)
    for task, asset in (("WNLI", "glue_wnli"), ("QNLI", "glue_qnli"), ("SST-2", "glue_sst2")):
        assert f"{task}: " in msg and f"Data asset '{asset}'" in msg
    assert "unzip" in msg and not (work / "reports/metrics/glue/base-cls.json").exists()
    with pytest.raises(AssetMissingError, match=r"QQP: .*Data asset 'qqp'.*quora_duplicate_questions.*AskUbuntu: "):
        run_retrieval_stage("base-cls")
    # the sources stage records them as missing (it runs; the stage that reads them fails) and their fetch
    from sentlab.stages.sources import glue_sources, retrieval_sources

    assert "unzip" in glue_sources(["WNLI"], ["base-cls"])["glue_wnli"]["missing"]
    assert set(retrieval_sources(["QQP", "AskUbuntu"], ["x"])) == {"qqp", "askubuntu_text", "askubuntu_test"}
    assert glue_sources(["WNLI"], []) == {} and retrieval_sources(["QQP"], []) == {}


def test_the_paper_preflight_goes_on_without_the_suites_data(tmp_path, monkeypatch):
    """Offline, the paper preflight's GLUE stage needs WNLI's data: its stand-in keeps the tasks that are here (the
    mirror's SST-2 and STS-B); the first retrieval stage needs QQP's: its stand-in drops every retrieval stage, and
    the preflight reports each as such instead of running it."""
    from types import SimpleNamespace

    from sentlab.preflight import standin_for
    from sentlab.preflight.run import Preflight
    from sentlab.preflight.slice import slice_edits
    from sentlab.preflight.table import Row
    from sentlab.config.profile_files import profile_values

    mirror_with(monkeypatch, "SST/binary", "STS/STSBenchmark")
    monkeypatch.setenv("SENTLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SENTLAB_OFFLINE", "1")
    paper = profile_values("paper", REPO / "profiles")
    sl = {"size": 600, "steps": 3, "batch_size": 8, "dev_max_pairs": 16, "max_pairs": 10}
    assert slice_edits(paper, sl)["glue"] == {"seeds": [42], "finetune": {"max_steps": 3, "max_train": 24,
                                                                          "max_dev": 10, "batch_size": 8}}
    edit, desc = standin_for("glue_wnli", paper)
    assert edit == {"glue": {"tasks": ["SST-2", "STS-B"]}} and "WNLI, QNLI, QQP" in desc
    assert standin_for("qqp", paper)[0] == {"retrieval": {"models": []}}

    (tmp_path / "models.yaml").write_text("models: {}\n")
    pf = Preflight(tmp_path, "paper", sl, paper, runner=None, how="stand-in")
    pf.write_params()
    assert "retrieval@paser" in pf.suite_stages()
    row = Row("retrieval@base-cls", "python pipeline/evaluate_retrieval.py base-cls", model="stand-in")
    row.status, row.asset, row.fetch = "needs asset", "qqp", "curl ..."
    pf._stand_in(SimpleNamespace(name=row.stage, cmd=row.cmd), row)   # no re-run: the stage is gone
    assert row.note.startswith("continued without this stage") and not any(
        s.startswith("retrieval@") for s in pf.suite_stages())
    later = pf.check(SimpleNamespace(name="retrieval@paser", cmd="python pipeline/evaluate_retrieval.py paser",
                                     upstream=[]))
    assert (later.status, later.asset, later.fetch) == ("needs asset", "qqp", "curl ...")
    assert "glue@l2p" in pf.suite_stages()


def test_the_preflight_projects_no_full_run_from_a_glue_slice(tmp_path):
    """A GLUE stage's slice (a few steps, one seed) says nothing of the full fine-tuning's time: its row says so
    instead of passing the slice's seconds off as the projection (which the other suites' rows keep)."""
    from sentlab.config import validate
    from sentlab.preflight.projection import project
    from sentlab.preflight.table import Row
    from sentlab.config.profile_files import profile_values

    real = validate(profile_values("paper", REPO / "profiles"))
    sl = {"size": 600, "steps": 3, "batch_size": 8, "dev_max_pairs": 16, "max_pairs": 10}
    glue = Row("glue@l2p", "python pipeline/evaluate_glue.py l2p", status="ok", seconds=12.0,
               probe={"peak_rss_mb": 900.0})
    transfer = Row("transfer@l2p", "python pipeline/evaluate_transfer.py l2p", status="ok", seconds=5.0,
                   probe={"peak_rss_mb": 800.0})
    for _ in range(2):
        project([glue, transfer], real, sl, tmp_path, models={})
    assert glue.projected_s is None and glue.note.count("projection: none for GLUE") == 1
    assert transfer.projected_s == 5.0


def test_a_training_suite_runs_on_the_profiles_training_threads(monkeypatch):
    """Transfer's classifiers and GLUE's fine-tuning train on ``train.num_threads`` (a serial run and a parallel
    run's 1-thread task then give the same bits); unset, the process's threads stay."""
    from types import SimpleNamespace

    import torch

    from sentlab.evaluate.suites.suite_stage import use_training_threads

    calls = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    use_training_threads(SimpleNamespace(train=SimpleNamespace(num_threads=1)))
    use_training_threads(SimpleNamespace(train=SimpleNamespace(num_threads=None)))
    assert calls == [1]
