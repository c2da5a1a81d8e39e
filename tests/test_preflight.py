"""`sentlab preflight`: the stages of a profile on a tiny slice in a scratch copy (sentlab.preflight), the timed
phases it observes (sentlab.runtime.timing), and the kept paper backbones (sentlab.backbones)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]

# Every kind of stage the smoke profile has, once: data, annotations, a trained method, a trained seed, the
# evaluation of each, a pooling baseline and whitening (their upstream stages come along). `ct`, which smoke does
# not train, has no stage there (the pattern matches nothing for it).
SUBSET = (r"^(train@simcse|train@ct|evaluate@simcse|evaluate@ct|train@simcse-s43|evaluate@simcse-s43"
          r"|evaluate_baseline@cls|evaluate_baseline@whitening)$")
TINY = {"size": 300, "steps": 2, "batch_size": 8, "dev_max_pairs": 20, "max_pairs": 20}
SL = {"size": 600, "steps": 3, "batch_size": 8, "dev_max_pairs": 16, "max_pairs": 10}


def _copy_repo(dest: Path) -> None:
    from sentlab.preflight.scratch import make_scratch

    make_scratch(REPO, dest)


def _snapshot(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and ".git" not in p.relative_to(root).parts:
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _child_env() -> dict:
    """This process's environment for a child run elsewhere: the sentlab imported here first on its path."""
    import sentlab

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(sentlab.__file__).resolve().parents[1]),
                                         *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))])
    return env


def _values(profile: str) -> dict:
    from sentlab.config.profile_files import profile_values

    return profile_values(profile, REPO / "profiles")


@pytest.fixture
def workspace(tmp_path, mirror, monkeypatch):
    """A copy of the repository with pipeline outputs, a DVC lock and an MLflow store in it (which the
    preflight must leave alone)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    _copy_repo(ws)
    for rel, text in {"dvc.lock": "schema: '2.0'\n", "models/simcse/sentlab.json": '{"status": "trained"}\n',
                      "reports/metrics/simcse.json": "{}\n", "mlflow.db": "not a real db\n"}.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(mirror))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'outside.db'}")
    return ws


def _edit_profile(ws: Path, name: str, edit: dict) -> None:
    from sentlab.config.yaml_files import deep_merge

    path = ws / "profiles" / f"{name}.yaml"
    path.write_text(yaml.safe_dump(deep_merge(yaml.safe_load(path.read_text()), edit), sort_keys=False))


@pytest.mark.slow
def test_smoke_preflight_all_ok_and_workspace_untouched(workspace, tmp_path):
    """The smoke profile's stages come out ok, with their measures, and the workspace is byte-identical.

    A representative subset (SUBSET: one stage of every kind, with everything upstream of it) keeps this
    under a minute or two on the 2-core CI machine: every stage of the smoke profile already runs end to end in
    tests/test_pipeline_smoke.py, and `make preflight PROFILE=smoke` runs them all through this same code."""
    from sentlab.preflight import preflight

    before = _snapshot(workspace)
    rc, rows, meta = preflight(workspace, "smoke", scratch=tmp_path / "scratch", sl=TINY, stages_filter=SUBSET,
                               quiet=True)
    assert _snapshot(workspace) == before
    by = {r.stage: r for r in rows}
    assert [r.stage for r in rows][:4] == ["sources", "prepare", "annotate", "train@simcse"]
    assert set(by) >= {"train@simcse", "evaluate@simcse", "evaluate_baseline@cls", "train@simcse-s43"}
    assert not {"train@ct", "evaluate@ct"} & set(by)   # the profile's own stages only (models.yaml)
    assert rc == 0, [(r.stage, r.status, r.error) for r in rows if r.status != "ok"]
    simcse = by["train@simcse"]
    assert simcse.steps == TINY["steps"] and simcse.batch == TINY["batch_size"] and simcse.sec_per_step > 0
    assert simcse.full_steps == 4  # the smoke profile's train.max_steps, not the slice's
    seed = by["train@simcse-s43"]  # projected as simcse (models.yaml: its method)
    assert seed.steps == TINY["steps"] and seed.full_steps == 4 and seed.projected_s > 0, seed
    assert by["evaluate@simcse-s43"].sentences > 0
    # whitening alone runs with enough pairs for its fit (MiniLM: 384 dims -> 36 pairs per task), the others with
    # the slice's, and the scratch params are the slice's again afterwards
    assert by["evaluate_baseline@whitening"].eval_pairs == 36 and by["evaluate@simcse"].eval_pairs is None
    assert by["evaluate_baseline@whitening"].sentences > by["evaluate@simcse"].sentences
    assert by["evaluate_baseline@cls"].sentences > 0  # encoded through the embedding cache: still timed
    ev = by["evaluate@simcse"]
    assert ev.sentences > 0 and ev.sec_per_sentence > 0 and ev.peak_rss_mb > 100
    assert ev.projected_s >= ev.seconds * 0.5
    report = json.loads((tmp_path / "scratch/reports/preflight/preflight.json").read_text())
    assert [r["stage"] for r in report["rows"]] == [r.stage for r in rows]
    # the init column: where each module's weights came from (models/simcse/sentlab.json's init)
    assert simcse.init == "encoder=checkpoint, mlp=random" and by["evaluate@simcse"].init == ""
    assert "| train@simcse | ok | encoder=checkpoint, mlp=random |" in (
        tmp_path / "scratch/reports/preflight/preflight.md").read_text()
    sliced = yaml.safe_load((tmp_path / "scratch/params.yaml").read_text())  # the values in force, sliced
    assert sliced["profile"] == "smoke" and sliced["train"]["max_steps"] == TINY["steps"]
    assert sliced["evaluate"]["max_pairs"] == TINY["max_pairs"] and sliced["prepare"]["size"] == TINY["size"]
    assert (tmp_path / "scratch/mlflow.db").is_file()  # MLflow went to the scratch folder


@pytest.mark.slow
def test_a_missing_asset_is_reported_and_its_standin_lets_the_stages_go_on(workspace, tmp_path):
    """SimCSE's NLI triples are not in the mirror: the profile that asks for them gets `needs asset` with the
    fetch command on the stage that looks for them, the stand-in (prepare.nli: sick_standin) is written into
    the scratch params.yaml, and the stages after it run."""
    from sentlab.preflight import preflight

    _edit_profile(workspace, "smoke", {"prepare": {"nli": "simcse"}})
    rc, rows, _ = preflight(workspace, "smoke", scratch=tmp_path / "scratch", sl=TINY, stages_filter=r"^prepare$",
                            quiet=True)
    by = {r.stage: r for r in rows}
    assert rc == 1 and by["sources"].status == "needs asset" and by["sources"].asset == "nli"
    assert "nli_for_simcse.csv" in by["sources"].fetch and "that run ok" in by["sources"].note
    assert by["prepare"].status == "ok"
    assert yaml.safe_load((tmp_path / "scratch/params.yaml").read_text())["prepare"]["nli"] == "sick_standin"


def test_planted_broken_profile_fails_with_its_error(workspace, tmp_path):
    """An unknown method in a profile: the row that applies it comes out failed with the one-paragraph error,
    the CLI exits non-zero, and the workspace is unchanged."""
    _edit_profile(workspace, "smoke", {"train": {"methods": ["simcse", "no_such_method"]}})
    before = _snapshot(workspace)
    run = subprocess.run([sys.executable, "-m", "sentlab.cli", "preflight", "--profile", "smoke", "--workspace",
                          str(workspace), "--scratch", str(tmp_path / "scratch")], capture_output=True, text=True,
                         env=_child_env(), cwd=tmp_path)
    assert run.returncode == 1, run.stderr[-2000:]
    report = json.loads((tmp_path / "scratch/reports/preflight/preflight.json").read_text())
    row = report["rows"][0]
    assert row["status"] == "failed" and "no_such_method" in row["error"] and "train.methods" in row["error"]
    assert "| failed |" in run.stdout
    assert _snapshot(workspace) == before


def test_a_method_standin_marks_every_model_that_trains_with_it(tmp_path):
    """WordNet missing on the paper profile: train@paser needs it, the method's own stand-in (EDA without `sr`)
    goes into the scratch params.yaml and the stage runs again; every later training whose method block the
    stand-in changed (PaSeR's seeds, the `sr` variants) is `needs asset` too, the others plain ok."""
    from sentlab.preflight import slice_edits
    from sentlab.preflight.run import Preflight
    from sentlab.preflight.slice import write_params
    from sentlab.preflight.stages import Stage

    shutil.copytree(REPO / "profiles", tmp_path / "profiles")
    values = _values("paper")
    write_params(tmp_path, values, slice_edits(values, SL))
    runs = []

    class FakeRunner:  # what a stage process would answer: PaSeR's `sr` fails until the stand-in is in
        scratch = tmp_path

        def run(self, stage):
            eda = yaml.safe_load((tmp_path / "params.yaml").read_text())["methods"]["paser"]["eda"]
            runs.append((stage.name, eda))
            if stage.name == "train@paser" and "sr" in eda.split("+"):
                return {"rc": 2, "kind": "asset", "error": "NLTK resource 'wordnet' (corpora/wordnet) is not "
                        "installed."}, ""
            return {"rc": 0, "steps": 3, "sec_per_step": 0.1}, ""

    pf = Preflight(tmp_path, "paper", SL, values, FakeRunner(), "stand-in")
    rows = {n: pf.check(Stage(n, f"run {n}", [], [], [])) for n in
            ("train@paser", "train@paser-s43", "train@paser_aug_sr_rs", "train@paser_aug_none", "train@simcse")}
    assert runs[:2] == [("train@paser", "sr"), ("train@paser", "rd")]
    assert rows["train@paser"].status == "needs asset" and "that run ok" in rows["train@paser"].note
    assert rows["train@paser"].fetch == "python -m nltk.downloader wordnet" and rows["train@paser"].steps == 3
    for name in ("train@paser-s43", "train@paser_aug_sr_rs"):
        assert rows[name].status == "needs asset" and rows[name].asset == "NLTK wordnet", name
    assert rows["train@paser_aug_none"].status == rows["train@simcse"].status == "ok"
    sliced = yaml.safe_load((tmp_path / "params.yaml").read_text())
    assert sliced["ablations"]["variants"]["paser_aug_sr_rs"]["set"]["eda"] == "rs"
    assert sliced["train"]["max_steps"] == SL["steps"]  # the slice stays under the stand-in


# --- the stages: dvc.yaml + models.yaml, no DVC internals ----------------------------------------------------
def test_stages_are_the_ones_dvc_lists_each_after_its_upstream():
    """The preflight reads the stages from dvc.yaml and its vars (models.yaml); DVC's own CLI lists the same."""
    from sentlab.preflight import dvc_stages

    stages = dvc_stages(REPO)
    dvc = Path(sys.executable).parent / "dvc"
    listed = subprocess.run([str(dvc), "stage", "list", "--name-only"], cwd=REPO, check=True, capture_output=True,
                            text=True).stdout.split()
    assert sorted(s.name for s in stages) == sorted(listed)
    seen: set[str] = set()
    for s in stages:
        assert set(s.upstream) <= seen, s.name
        seen.add(s.name)
    by = {s.name: s for s in stages}
    assert [s.name for s in stages][:3] == ["sources", "prepare", "annotate"]
    assert "train@paser" in by["train@paser_sup"].upstream and "train@simcse" in by["evaluate@simcse"].upstream
    assert by["train@simcse-s43"].cmd == "python pipeline/train.py simcse-s43 --method simcse --seed 43"
    assert "methods.simcse" in by["train@simcse-s43"].params


def test_a_model_is_evaluated_right_after_its_training_so_its_weights_can_go():
    """In DVC's order every training precedes every evaluation: the paper preflight held all its bert-base models at
    once and filled the disk (ENOSPC at the 58th stage). consumers_first keeps DVC's order but runs a model's
    readers as soon as it exists — a valid order still (every stage after its upstream)."""
    from sentlab.preflight import Stage, consumers_first

    def stage(name, upstream=(), outs=(), deps=()):
        return Stage(name, f"run {name}", list(upstream), list(outs), list(deps))

    dvc_order = [stage("prepare", outs=["data/sts"]),
                 stage("train@a", ["prepare"], ["models/a", "reports/curves/a.csv"], ["data/sts"]),
                 stage("train@b", ["prepare"], ["models/b"], ["data/sts"]),
                 stage("train@c", ["prepare", "train@a"], ["models/c"], ["models/a"]),
                 stage("evaluate@a", ["prepare", "train@a"], [], ["data/sts", "models/a"]),
                 stage("evaluate@b", ["prepare", "train@b"], [], ["data/sts", "models/b"]),
                 stage("evaluate@c", ["prepare", "train@c"], [], ["models/c"]),
                 stage("report", ["evaluate@a", "evaluate@b", "evaluate@c"], [], ["models"])]
    order = [s.name for s in consumers_first(dvc_order)]
    assert order == ["prepare", "train@a", "train@c", "evaluate@c", "evaluate@a", "train@b", "evaluate@b", "report"]


# --- the slice: plain params.yaml edits, each method's caps declared by the method ------------------------------
def test_slice_caps_are_declared_by_each_method_and_reach_its_training():
    """The slice's step budget wins over a method's own (the paper's PaSeR: 5 epochs, max_steps null); the caps
    that are a method's own come from its Params (CT: a batch of 1 + negatives; L2P-CSR: max_sentences within
    the slice's corpus; PaSeR: its reconstruction check at 40 / 200); the profile's other values stay."""
    from sentlab.config import validate
    from sentlab.config.yaml_files import deep_merge
    from sentlab.methods.ct import CTParams
    from sentlab.methods.l2p import L2PParams
    from sentlab.methods._paser_params import PaSeRParams
    from sentlab.preflight import slice_edits
    from sentlab.train.run import method_params, resolve_train

    caps = {"steps": 3, "batch_size": 4, "sentences": 600}
    assert PaSeRParams().slice_caps(**caps) == {"max_steps": 3, "eval_every": 3, "recon_heldout": 40,
                                                "recon_fit": 200}
    assert PaSeRParams(recon_heldout=0, epochs=5).slice_caps(**caps) == {"max_steps": 3, "eval_every": 3,
                                                                         "epochs": 1, "recon_fit": 200}
    assert CTParams().slice_caps(**caps)["batch_size"] == 8
    assert L2PParams(max_sentences=100_000).slice_caps(**caps)["max_sentences"] == 300
    assert L2PParams(max_sentences=100_000).train_sentences(10**6) == 100_000

    values = _values("paper")
    p = validate(deep_merge(values, slice_edits(values, SL)))
    assert p.model.backbone == "bert-base-uncased" and p.prepare.size == 600 and p.train.nproc == 1
    assert p.evaluate.max_pairs == 10   # the slice's own: only the whitening stage runs with more
    for mid in p.trained_ids:
        cfg = resolve_train(p, method_params(p, mid))
        assert (cfg.max_steps, cfg.eval_every, cfg.batch_size) == (3, 3, 8), mid
    p4 = validate(deep_merge(values, slice_edits(values, {**SL, "batch_size": 4})))
    assert resolve_train(p4, method_params(p4, "ct")).batch_size == 8  # 1 + CT's 7 negatives
    assert resolve_train(p4, method_params(p4, "simcse")).batch_size == 4
    assert method_params(p, "l2p").max_sentences == 300
    assert method_params(p, "esimcse").queue_size == 16   # the keys of all but the slice's last step: it turns over
    assert method_params(p, "paser").eda == "sr" and method_params(p, "paser").decoder_layers == 6
    for mid in ("paser", "paser_sup"):
        mp = method_params(p, mid)
        assert (mp.recon_heldout, mp.recon_fit) == (40, 200), mid
    assert method_params(validate(values), "paser").recon_heldout == 500


def test_slice_batch_zero_keeps_the_profiles_batch_sizes():
    """``--batch-size 0``: steps and corpus are the slice's, every batch the profile's own (a GPU preflight
    measures step time and memory at the paper's batch: L2P-CSR 512, SimCSE 64, CT 1 + its negatives)."""
    from sentlab.config import validate
    from sentlab.config.yaml_files import deep_merge
    from sentlab.methods.ct import CTParams
    from sentlab.preflight import slice_edits
    from sentlab.train.run import method_params, resolve_train

    assert "batch_size" not in CTParams().slice_caps(steps=3, batch_size=0, sentences=600)
    values = _values("paper")
    real = validate(values)
    p = validate(deep_merge(values, slice_edits(values, {**SL, "batch_size": 0})))
    for mid in p.trained_ids:
        cfg, full = resolve_train(p, method_params(p, mid)), resolve_train(real, method_params(real, mid))
        assert (cfg.batch_size, cfg.max_steps) == (full.batch_size, 3), mid
    assert resolve_train(p, method_params(p, "l2p")).batch_size == 512
    assert resolve_train(p, method_params(p, "simcse")).batch_size == 64


def test_whitening_alone_gets_the_pairs_its_fit_needs():
    """The paper preflight's whitening baseline failed on the slice (628 fit sentences for bert-base's 768
    dimensions: a singular covariance), a failure of the slice, not of the profile. Its stage runs with enough
    pairs for the fit; the slice keeps its own for every other evaluation; without a whitening baseline fitted
    on the STS pool: 0."""
    from sentlab.preflight import slice_edits, whitening_min_pairs

    paper = _values("paper")
    assert whitening_min_pairs(paper) == 0       # the paper profile fits it on the NLI sentences
    paper["evaluate"]["whitening"]["fit_on"] = "sts_pool"   # as the NLI stand-in sets it
    assert whitening_min_pairs(paper) == 72      # bert-base-uncased: 768
    assert whitening_min_pairs(_values("smoke")) == 36      # all-MiniLM-L6-v2: 384
    assert slice_edits(paper, SL)["evaluate"]["max_pairs"] == 10
    paper["evaluate"]["whitening"]["fit_on"] = "corpus"
    assert whitening_min_pairs(paper) == 0
    paper["evaluate"]["whitening"]["fit_on"] = "sts_pool"
    paper["evaluate"]["baselines"] = ["cls", "mean"]
    assert whitening_min_pairs(paper) == 0


def test_the_nli_standin_gives_the_whitening_stage_its_pairs_back():
    """Offline the NLI stand-in moves the paper profile's NLI-fitted whitening to the STS pool: from then on its
    stage needs the pairs of an STS-pool fit again (issue #53 §3.5)."""
    from sentlab.preflight import standin_for, whitening_min_pairs
    from sentlab.preflight.run import Preflight

    pf = Preflight.__new__(Preflight)
    pf.values = _values("paper")
    pf.whitening_pairs, pf.standin_edits = whitening_min_pairs(pf.values), []
    assert pf.whitening_pairs_now() == 0
    pf.standin_edits.append(standin_for("nli", pf.values)[0])
    assert pf.whitening_pairs_now() == 72


def test_asset_messages_name_the_fetch_command_and_the_standins_are_params_edits():
    from sentlab.preflight import classify_asset, standin_for
    from sentlab.config import validate
    from sentlab.config.yaml_files import deep_merge
    from sentlab.preflight.standins import changed_models
    from sentlab.stages.stage_list import models_for

    assert classify_asset("NLTK resource 'wordnet' (corpora/wordnet) is not installed.") == (
        "NLTK wordnet", "python -m nltk.downloader wordnet")
    asset, cmd = classify_asset("Data asset 'nli' (SimCSE's NLI triples) was not found")
    assert asset == "nli" and cmd.startswith("curl -L") and "nli_for_simcse.csv" in cmd
    assert classify_asset("Model 'roberta-base' was not found") == (
        "hub model roberta-base", "hf download roberta-base --include '*.json' --include '*.txt' --include '*.model' "
                                  "--include '*.safetensors'")
    # the paper profile whitens on the NLI sentences: the SICK stand-in's 318 cannot whiten 768 dimensions
    assert standin_for("nli", _values("paper"))[0] == {"prepare": {"nli": "sick_standin"},
                                                       "evaluate": {"whitening": {"fit_on": "sts_pool"}}}
    assert standin_for("nli", _values("quick"))[0] == {"prepare": {"nli": "sick_standin"}}
    # WordNet: the method lines that declare a stand-in (PaSeR's EDA without `sr`), variants in their own `set`
    edit, desc = standin_for("NLTK wordnet", _values("paper"))
    assert edit["methods"]["paser"]["eda"] == "rd" and "simcse" not in edit["methods"]
    assert edit["ablations"]["variants"]["paser_aug_sr_rs"]["set"]["eda"] == "rs"
    assert "paser_aug_none" not in edit["ablations"]["variants"]
    # the models that train with it: PaSeR's lines and seeds and the variants that asked for `sr`
    paper = _values("paper")
    changed = changed_models(paper, deep_merge(paper, edit), models_for(validate(paper)))
    assert {"paser", "paser-s43", "paser_aug_sr_rs", "paser_aug_sr_rd", "paser_np"} <= changed
    assert not {"paser_aug_none", "paser_aug_rs", "paser_sup", "simcse"} & changed
    assert "methods" not in standin_for("NLTK wordnet", _values("quick"))[0]  # quick's PaSeR uses rd already
    assert standin_for("hub model x", _values("paper")) == (None, "")


# --- the timed phases: declared by the code, observed by tools -------------------------------------------------
def _tiny_training(tmp_path, tok):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sentlab.config import Params
    from sentlab.train.run import train_method
    from tiny import sentences, tiny_bert

    corpus = tmp_path / "data" / "corpus"
    corpus.mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array(range(32), pa.int64()), "text": sentences(32)}), corpus / "train.parquet")
    s1, s2 = sentences(12, seed=11), sentences(12, seed=12)
    gold = np.array([random.Random(i).uniform(0, 5) for i in range(12)])

    def dev_eval(encoder):
        e1, e2 = encoder.encode(s1, batch_size=8), encoder.encode(s2, batch_size=8)
        cos = (e1 * e2).sum(1) / (np.linalg.norm(e1, axis=1) * np.linalg.norm(e2, axis=1))
        return {"stsb_dev": float(np.corrcoef(cos, gold)[0, 1])}

    params = Params(seed=3, train={"batch_size": 8, "max_length": 16, "lr": 1e-3, "eval_every": 2, "max_steps": 2},
                    runtime={"device": "cpu"})
    return train_method(params, "simcse", root=tmp_path, dev_eval=dev_eval, tracking=False, progress=False,
                        encoder_factory=lambda: (tiny_bert(tok, 0), tok))


def test_every_declared_phase_reaches_an_observer(tmp_path, tok):
    """The preflight's probe sees the code only through sentlab.runtime.timing: each phase it relies on (the stage and
    its exception, the training's corpus, plan and optimiser steps, the encoder's passes) must be reported.
    This fails when a phase is no longer declared (the preflight's columns would go blank without a word)."""
    from sentlab.errors import SentlabError
    from sentlab.stages.entry import run_stage
    from sentlab.runtime.timing import PHASES, observing

    def failing_stage():
        _tiny_training(tmp_path, tok)
        raise SentlabError("planted")

    with observing() as rec:
        assert run_stage(failing_stage) == 2
    assert {p.name for p in rec.phases} >= set(PHASES), sorted({p.name for p in rec.phases})
    (stage,) = rec.named("stage")
    assert isinstance(stage.error, SentlabError) and stage.seconds > 0
    assert [p.info["step"] for p in rec.named("step")] == [1, 2]
    assert all(p.seconds > 0 and p.error is None for p in rec.named("step"))
    (plan,) = rec.named("plan")
    assert plan.info == {"sentences": 32, "batch_size": 8, "grad_accum": 1, "steps_per_epoch": 4, "total_steps": 2}
    assert rec.named("corpus")[0].info == {"name": "train", "sentences": 32}
    assert sum(p.info["sentences"] for p in rec.named("encode")) >= 24  # the dev evaluation's two encode() calls


def test_no_observer_no_cost_and_observers_come_and_go():
    """Without an observer a phase is one shared do-nothing context; an observer is told only while registered."""
    from sentlab.runtime.timing import Observer, Recorder, add_observer, observing, remove_observer, timed

    assert timed("encode", sentences=3) is timed("step")
    with timed("plan") as phase:
        phase.record(total_steps=1)  # recording is a no-op too
    seen = []

    class Starts(Observer):
        def started(self, phase):
            seen.append(phase.name)

    obs = Starts()
    add_observer(obs)
    with observing(Recorder()) as rec, timed("encode", sentences=3) as phase:
        phase.record(extra=1)
    remove_observer(obs)
    with timed("step"):
        pass
    assert seen == ["encode"] and rec.phases[0].info == {"sentences": 3, "extra": 1}
    with pytest.raises(ValueError), observing() as rec2, timed("stage"):
        raise ValueError("x")
    assert isinstance(rec2.phases[0].error, ValueError)


def test_annotate_memory_projection_follows_the_shard_not_the_corpus(tmp_path):
    """The paper preflight projected 199 GB for annotate (the slice's growth x 833 for 10^6 sentences); the stage
    annotates shard by shard, so its memory grows with annotate.shard_size (50,000 in the paper profile);
    its time with the corpus."""
    from sentlab.config import validate
    from sentlab.preflight import Row
    from sentlab.preflight.projection import project

    real = validate(_values("paper"))
    row = Row(stage="annotate", cmd="python pipeline/annotate.py", status="ok", seconds=10.0,
              probe={"peak_rss_mb": 500.0, "start_rss_mb": 300.0})
    project([row], real, {"size": 1000}, tmp_path)
    assert row.projected_s == pytest.approx(10.0 * 1000)                    # 10^6 / 1000 sentences
    assert row.projected_peak_mb == pytest.approx(300.0 + 200.0 * 50)      # 50,000 / 1000 per shard


# --- the kept backbones ---------------------------------------------------------------------------------
SENTENCES = ["Hello world!", "The quick brown fox jumps over the lazy dog.", "Café déjà vu — naïve résumé",
             "Tokyo 東京 is big; don't split can't.", "A man is playing a guitar.", "Unaffable  preprocessing\t",
             "1,234.56 dollars (USD) & 7% tax", "ÉCOLE Normale Supérieure", "#hashtag @user https://x.org/a?b=1"]


def test_bert_base_uncased_tokenizer_reproduced_id_for_id(mirror):
    """What is compared: the offline rebuild (sentlab.backbones: MiniLM's uncased vocab, bert-base-uncased's
    tokenizer_config settings), saved and reloaded through AutoTokenizer, against (1) the `tokenizers`
    library's own BertWordPieceTokenizer over the same vocab.txt (lowercase, accents stripped as BERT uncased
    does, CJK split), (2) MiniLM's own shipped tokenizer, id for id over every distinct sentence of STS-B dev
    plus edge cases (accents, CJK, URLs), and (3) ids published for bert-base-uncased ([CLS] 101, hello 7592,
    world 2088, ! 999, [SEP] 102, [MASK] 103)."""
    from tokenizers import BertWordPieceTokenizer
    from transformers import AutoTokenizer

    from sentlab.assets.resolve import resolve_model
    from sentlab.backbones import build_tokenizer
    from sentlab.data.sts import parse_all

    tok = build_tokenizer("bert-base-uncased")
    saved = Path(os.environ.get("TMPDIR", "/tmp")) / f"bbu-tok-{os.getpid()}"
    tok.save_pretrained(saved)
    tok = AutoTokenizer.from_pretrained(saved)
    shutil.rmtree(saved)
    minilm = Path(resolve_model("sentence-transformers/all-MiniLM-L6-v2"))
    wordpiece = BertWordPieceTokenizer(str(minilm / "vocab.txt"), lowercase=True, strip_accents=None,
                                       clean_text=True, handle_chinese_chars=True)
    shipped = AutoTokenizer.from_pretrained(minilm)
    table = parse_all(mirror, mirror)
    dev = table[(table.task == "STSBenchmark") & (table.split == "dev")]
    sents = list(dict.fromkeys([*SENTENCES, *dev.sentence1, *dev.sentence2]))
    assert len(sents) > 2500
    ids = tok(sents)["input_ids"]
    assert ids == [e.ids for e in wordpiece.encode_batch(sents)] == shipped(sents)["input_ids"]
    assert tok("Hello world!")["input_ids"] == [101, 7592, 2088, 999, 102]
    assert (tok.vocab_size, tok.mask_token_id, tok.pad_token_id, tok.model_max_length) == (30522, 103, 0, 512)


def test_backbone_configs_and_random_init(tmp_path):
    """The kept configs build bert-base / roberta-base shapes; roberta-base's tokenizer recipe is a stand-in
    (tests/test_standin.py pins it); a hub id without a recipe says how to get its tokenizer."""
    from sentlab import backbones
    from sentlab.errors import AssetMissingError

    assert backbones.known() == ["bert-base-uncased", "distilbert-base-uncased", "roberta-base"]
    c = backbones.architecture_config("roberta-base")
    assert (c.model_type, c.hidden_size, c.num_hidden_layers, c.vocab_size, c.max_position_embeddings) == (
        "roberta", 768, 12, 50265, 514)
    assert backbones.spec("roberta-base")["tokenizer"]["standin"] is True
    with pytest.raises(AssetMissingError, match="`hf download roberta-large --include"):
        backbones.build_tokenizer("roberta-large")
    b = backbones.architecture_config("bert-base-uncased")
    assert (b.hidden_size, b.num_hidden_layers, b.num_attention_heads, b.intermediate_size, b.vocab_size) == (
        768, 12, 12, 3072, 30522)


def test_backbone_standin_goes_through_a_mirror(tmp_path, monkeypatch, mirror):
    """The preflight's backbone: the hub-shaped stand-in at models/<hub id> of a scratch mirror that links the
    real mirror's data; the stage processes resolve the hub id there (SENTLAB_DATA_MIRROR), as a mirrored
    download; the preflight's own process is untouched."""
    from sentlab.assets import resolve as assets
    from sentlab import backbones
    from sentlab.preflight import backbone_standin

    small = dict(backbones.spec("bert-base-uncased"))
    small["config"] = {**small["config"], "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                       "intermediate_size": 37}
    monkeypatch.setattr(backbones, "spec", lambda hub_id: small)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    dest, how, missing = backbone_standin("bert-base-uncased", tmp_path)
    assert missing is None and how.startswith("stand-in of bert-base-uncased")
    assert (dest / "STS").resolve() == (mirror / "STS").resolve()
    with pytest.raises(assets.AssetMissingError):
        assets.resolve_model("bert-base-uncased")
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(dest))
    assert assets.resolve_model("bert-base-uncased") == dest / "models" / "bert-base-uncased"
    assert json.loads((dest / "models" / "bert-base-uncased" / "sentlab_standin.json").read_text())[
        "layer_norm_names"] == "gamma_beta"
    model, tok = assets.load_model("bert-base-uncased")
    assert model.config.hidden_size == 32 and model.sentlab_init == "checkpoint"
    assert tok("hello")["input_ids"] == [101, 7592, 102]
    assert assets.resolve_data("sick").source == "mirror"


def test_random_substitute_embeddings_span_every_dimension():
    """A fresh LayerNorm makes every hidden state sum to zero: the random substitute's first_last embeddings
    (the mean of two LayerNorm outputs) had rank width - 1 and whitening failed on them in the paper preflight.
    With LayerNorms spread as in a trained model the two layers' constraints differ: full rank."""
    import torch
    from transformers import BertConfig, BertModel

    from sentlab.backbones import spread_layer_norms

    def rank(model):
        torch.manual_seed(1)
        ids = torch.randint(5, 100, (300, 12))
        with torch.no_grad():
            hs = model(input_ids=ids, output_hidden_states=True).hidden_states
        h = ((hs[0] + hs[-1]) / 2).mean(1)      # first_last, the whitening baseline's pooling
        cov = torch.cov(h.double().T)
        return int(torch.linalg.matrix_rank(cov, rtol=1e-10))

    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=64)).eval()
    assert rank(model) == 31
    spread_layer_norms(model)
    assert rank(model) == 32


