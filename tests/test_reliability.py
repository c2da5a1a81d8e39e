"""Reliability of outputs and inputs: file modes, archive extraction, corrupt weights, params
validation of every profile and of ablation variants, MLflow as a side channel."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest
import yaml

from sentlab.methods.blocks import validate_params
from sentlab.stages.profiles import load_all_profiles
from sentlab.config.profile_files import profile_values
from sentlab.errors import SentlabError

REPO = Path(__file__).resolve().parents[1]


def raw() -> dict:
    return yaml.safe_load((REPO / "params.yaml").read_text())


# --- atomic outputs get the normal mode -------------------------------------------------------
def test_atomic_outputs_get_the_mode_of_a_plain_open(tmp_path):
    from sentlab.runtime.io import atomic_path, write_text

    old = os.umask(0o022)
    try:
        write_text(tmp_path / "a.txt", "x")
        with atomic_path(tmp_path / "folder", is_dir=True) as tmp:
            (tmp / "f").write_text("y")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o644  # mkstemp alone gives 0600
    assert stat.S_IMODE((tmp_path / "folder").stat().st_mode) == 0o755  # mkdtemp alone gives 0700


# --- tar extraction ---------------------------------------------------------------------------
def _tar(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_tar_extraction_strips_the_prefix(tmp_path):
    from sentlab.assets.resolve import extract_tar

    arc = _tar(tmp_path / "a.tar", {"downstream/STS/x.txt": b"ok", "other/y.txt": b"no"})
    out = tmp_path / "cache"
    out.mkdir()
    extract_tar(arc, "downstream/", out)
    assert (out / "STS" / "x.txt").read_bytes() == b"ok"
    assert not (out / "other").exists() and not (out / "y.txt").exists()


def test_tar_member_escaping_the_folder_is_refused(tmp_path):
    from sentlab.assets.resolve import extract_tar

    arc = _tar(tmp_path / "evil.tar", {"downstream/../../escaped.txt": b"pwned"})
    out = tmp_path / "a" / "cache"
    out.mkdir(parents=True)
    with pytest.raises(SentlabError, match="unsafe member"):
        extract_tar(arc, "downstream/", out)
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "a" / "escaped.txt").exists()


# --- a corrupt model.safetensors --------------------------------------------------------------
def test_corrupt_safetensors_is_one_paragraph_not_a_traceback(tmp_path, tok):
    from tiny import tiny_bert

    from sentlab.assets.resolve import load_model

    model = tiny_bert(tok)
    model.save_pretrained(tmp_path / "m", safe_serialization=True)
    tok.save_pretrained(tmp_path / "m")
    w = tmp_path / "m" / "model.safetensors"
    w.write_bytes(w.read_bytes()[:100])  # truncated, as by an interrupted copy
    with pytest.raises(SentlabError) as e:
        load_model(str(tmp_path / "m"))
    assert str(tmp_path / "m") in str(e.value) and "dvc repro -f train@" in str(e.value)
    assert e.value.exit_code == 2


# --- params: every profile, ablation variants -------------------------------------------------
def test_all_committed_profiles_validate():
    assert set(load_all_profiles(REPO / "profiles")) == {"quick", "smoke", "paper", "paper-lite"}


def test_a_bad_key_in_an_inactive_profile_is_found(tmp_path, capsys):
    from sentlab.cli import main

    import shutil

    shutil.copytree(REPO / "profiles", tmp_path / "profiles")
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    paper = tmp_path / "profiles" / "paper.yaml"
    paper.write_text(paper.read_text().replace("  max_steps: null\n", "  max_steps: null\n  batch_sizee: 64\n", 1))
    p = tmp_path / "params.yaml"
    with pytest.raises(SentlabError, match=r"profile paper.*batch_sizee"):
        load_all_profiles(tmp_path / "profiles")
    assert main(["params", "--params", str(p), "--profile", "quick"]) == 2
    assert "batch_sizee" in capsys.readouterr().err


@pytest.mark.parametrize("spec, match", [
    ({"method": "nosuch", "set": {}}, r"ablations\.variants\.bad\.method.*nosuch"),
    ({"method": "ptbert", "set": {"pseudo_lenn": 64}}, r"ablations\.variants\.bad\.set\.pseudo_lenn.*unknown key"),
    ({"method": "ptbert", "set": {"attend_to": "everything"}}, r"ablations\.variants\.bad\.set\.attend_to"),
    ({"method": "ptbert", "sett": {}}, r"ablations\.variants\.bad.*allowed keys here: method, set"),
])
def test_ablation_variants_are_validated(spec, match):
    r = raw()
    r["ablations"]["variants"]["bad"] = spec
    with pytest.raises(SentlabError, match=match):
        validate_params(r)


def test_ablations_enabled_must_be_a_real_bool():
    r = raw()
    r["ablations"]["enabled"] = "false"
    with pytest.raises(SentlabError, match=r"ablations\.enabled.*true or false"):
        validate_params(r)


# --- MLflow -----------------------------------------------------------------------------------
def test_store_of_a_dvc_temp_experiment_is_the_users_repo(tmp_path, monkeypatch):
    from sentlab import tracking

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    copy = tmp_path / "repo" / ".dvc" / "tmp" / "exps" / "run" / "abc123"
    copy.mkdir(parents=True)
    monkeypatch.setenv("DVC_ROOT", str(copy))
    assert tracking.tracking_uri() == f"sqlite:///{tmp_path / 'repo' / 'mlflow.db'}"
    monkeypatch.delenv("DVC_ROOT")
    monkeypatch.chdir(tmp_path)
    assert tracking.tracking_uri() == f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"


def test_a_failing_metric_log_warns_once_and_stops_calling_the_store(monkeypatch, caplog):
    import mlflow

    from sentlab import tracking

    calls = []

    def broken(metrics, step=None):
        calls.append(step)
        raise ConnectionError("tracking server went away")

    monkeypatch.setattr(mlflow, "log_metrics", broken)
    monkeypatch.setattr(mlflow, "active_run", lambda: object())
    with caplog.at_level("WARNING"):
        for step in (1, 2, 3):
            tracking.log_metrics({"stsb_dev": 80.0}, step)
    assert calls == [1]            # one bounded wait, then no more calls: a dead server cannot stall a training
    assert sum("could not log metrics" in r.getMessage() for r in caplog.records) == 1


def test_runs_carry_the_commit_and_the_dvc_experiment(monkeypatch, tmp_path):
    import subprocess

    from sentlab import tracking

    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["init", "-q"], cwd=repo, check=True, timeout=60)
    (repo / "params.yaml").write_text("seed: 1\n")
    subprocess.run(git + ["add", "params.yaml"], cwd=repo, check=True, timeout=60)
    subprocess.run(git + ["commit", "-qm", "x"], cwd=repo, check=True, timeout=60)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True,
                            timeout=60).stdout.strip()
    monkeypatch.chdir(repo)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    monkeypatch.setenv("DVC_EXP_NAME", "ptbert-m64")
    tags = tracking.provenance_tags()
    assert tags["sentlab.git_commit"] == tags["mlflow.source.git.commit"] == commit
    assert tags["sentlab.git_dirty"] == "false" and tags["sentlab.dvc_exp_name"] == "ptbert-m64"
    assert tags["sentlab.repo_root"] == str(repo.resolve())
    (repo / "params.yaml").write_text("seed: 2\n")                     # a tracked file edited: the run says so
    assert tracking.provenance_tags()["sentlab.git_dirty"] == "true"


# --- DVC: what a stage declares is what it reads -------------------------------------------------
def test_no_stage_declares_runtime_and_runtime_changes_no_stage_list():
    """`runtime` (threads, device, checkpoint interval) is how a training runs: no stage declares it, so an edit of
    it re-runs nothing; it changes no entry of the stage list either."""
    from sentlab.stages.stage_list import stage_list_for

    dvc_yaml = yaml.safe_load((REPO / "dvc.yaml").read_text())
    for name, stage in dvc_yaml["stages"].items():
        declared = (stage.get("do") or stage).get("params") or []
        assert not any(str(k).split(".")[0] == "runtime" for k in declared), name
    base = stage_list_for(validate_params(raw()))
    for key, value in (("checkpoint_every", 7), ("heap", "system"), ("device", "cpu")):
        r = raw()
        r["runtime"][key] = value
        assert stage_list_for(validate_params(r)) == base, key


def test_editing_train_methods_changes_only_the_entries_added_or_removed():
    from sentlab.stages.stage_list import stage_list_for

    r = raw()
    base = stage_list_for(validate_params(r))["models"]
    r["train"]["methods"] = [m for m in r["train"]["methods"] if m != "simcse"] + ["sg_opt"]
    changed = stage_list_for(validate_params(r))["models"]
    assert sorted(set(base) ^ set(changed)) == ["sg_opt", "simcse", "simcse-s43", "simcse-s44"]
    assert all(changed[k] == base[k] for k in set(base) & set(changed))


def test_an_ablation_entry_names_its_method_line_and_does_not_depend_on_the_methods_selection():
    from sentlab.stages.stage_list import stage_list_for

    paper = profile_values("paper", REPO / "profiles")
    v = stage_list_for(validate_params(paper))["models"]["ptbert_m64"]
    assert v == {"method": "ptbert", "seed": 42, "line": "methods.ptbert", "own": "ablations.variants.ptbert_m64",
                 "variant": "ptbert_m64", "init": "data/sources/model.json", "teachers": [],
                 "reads": ["data/sources/model.json"] * 2}
    paper["train"]["methods"].remove("ptbert")
    assert stage_list_for(validate_params(paper))["models"]["ptbert_m64"] == v


# --- `sentlab train` outside the profile ---------------------------------------------------------


def test_sentlab_train_refuses_a_method_the_profile_does_not_train(tmp_path, monkeypatch, capsys):
    from sentlab.cli import main

    monkeypatch.chdir(tmp_path)
    r = raw()
    assert "sg_opt" not in r["train"]["methods"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(r))
    assert main(["train", "sg_opt", "--params", "params.yaml"]) == 2
    err = capsys.readouterr().err
    assert "`sg_opt` is not in train.methods of profile `quick`" in err and "sentlab stages" in err
    assert main(["train", "--ablation", "ptbert_m64", "--params", "params.yaml"]) == 2
    assert "ablations.enabled is false" in capsys.readouterr().err
    assert not (tmp_path / "models").exists()


# --- dvc.yaml declares the values in force ------------------------------------------------------


def test_stages_declare_params_yaml_keys():
    """Every stage's params are params.yaml keys (the values in force), so `dvc exp show` shows what trained and
    `dvc exp run -S key=value` reaches the stages that read it; a model that starts from another depends on it."""
    from dvc.repo import Repo

    with Repo(str(REPO)) as repo:
        for stage in repo.index.stages:
            files = {Path(p.def_path).as_posix() for p in stage.params}
            assert files == {"params.yaml"}, (stage.addressing, files)
            if stage.addressing == "train@paser_sup":
                assert "models/paser" in {Path(d.def_path).as_posix() for d in stage.deps}


def test_paper_profile_prepare_keeps_every_line_simcse_trains_on(tmp_path):
    """wiki1m's 1M lines are not all distinct and some exceed 128 words; SimCSE trains on all of
    them. The paper profile's prepare settings must take them all (only empty lines go)."""
    from sentlab.data.corpus import sample_corpus

    p = profile_values("paper", REPO / "profiles")["prepare"]
    lines = ["a repeated line ."] * 3 + ["word " * 300, "", "another one ."]
    f = tmp_path / "wiki.txt"
    f.write_text("\n".join(lines) + "\n")
    kw = {k: p[k] for k in ("min_words", "max_words", "dedupe") if k in p}
    ids, texts, stats = sample_corpus(f, size=p["size"], seed=1, accept_size=5, **kw)
    assert ids == [0, 1, 2, 3, 5]


def test_test_results_land_on_the_training_run(tmp_path, monkeypatch):
    import mlflow

    from sentlab import tracking

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    with tracking.run("simcse", params={"lr": 3e-5}) as ml:
        train_id = ml.active_run().info.run_id
        tracking.log_metrics({"stsb_dev": 80.0}, step=10)
    with tracking.run("eval/simcse"):
        assert tracking.log_to_run(train_id, {"sts_avg": 71.5, "model": "simcse", "per_task": {"STS12": 60.0}})
    got = mlflow.tracking.MlflowClient().get_run(train_id).data.metrics
    assert got["test.sts_avg"] == 71.5 and got["test.per_task.STS12"] == 60.0 and got["stsb_dev"] == 80.0
    assert not tracking.log_to_run("0" * 32, {"sts_avg": 1.0})


# --- prepare never half-writes -------------------------------------------------------------------


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("breakage, named", [
    ("sts_line", "STS/STSBenchmark/sts-dev.csv"),
    ("empty_corpus", "wiki/wiki1m_head.txt"),
    ("non_utf8_corpus", "wiki/wiki1m_head.txt"),
])
def test_prepare_on_a_bad_source_names_it_and_leaves_the_outputs_as_they_were(mirror, tmp_path, monkeypatch,
                                                                             capsys, breakage, named):
    import runpy
    import shutil

    from sentlab.stages.entry import report_errors

    src = tmp_path / "mirror"
    shutil.copytree(mirror, src)
    from conftest import stage_workspace

    work = stage_workspace(tmp_path / "work", lambda r: r["prepare"].update(size=50, nli="none"))
    monkeypatch.chdir(work)
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(src))
    monkeypatch.setenv("SENTLAB_OFFLINE", "1")
    main = runpy.run_path(str(REPO / "pipeline" / "prepare.py"), run_name="prepare")["main"]
    assert report_errors(main) == 0
    before = _tree(work / "data")
    assert {"raw/wiki/wiki1m_head.txt", "sts/sts.parquet", "corpus/train.parquet", "prepare_stats.json"} <= set(before)

    target = src / named
    if breakage == "sts_line":
        with target.open("a", encoding="utf-8") as f:
            f.write("this line has no tabs and no score\n")
    elif breakage == "empty_corpus":
        target.write_text("", encoding="utf-8")
    else:
        target.write_bytes(target.read_bytes()[:500] + b"\xff\xfe broken \xc3\n")
    assert report_errors(main) == 2
    err = capsys.readouterr().err
    assert str(target) in err  # the mirror file the user must fix, not a copy under data/raw
    assert _tree(work / "data") == before
    assert sorted(p.name for p in (work / "data").iterdir()) == ["corpus", "prepare_stats.json", "raw", "sts"]


def test_sentlab_evaluate_logs_to_mlflow_and_records_its_numerics(mirror, tmp_path, monkeypatch, tok):
    """`sentlab evaluate` logs an eval/<name> run, as the README says, and its JSON says how the
    embeddings were computed (device, precision)."""
    import json

    import mlflow

    from sentlab.cli import main
    from sentlab.data.sts import parse_all, write_table
    from sentlab.tracking import EXPERIMENT
    from tiny import tiny_bert

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    model = tmp_path / "tinybert"
    tiny_bert(tok, 0, max_position_embeddings=512).save_pretrained(model)
    tok.save_pretrained(model)
    sts = tmp_path / "sts.parquet"
    write_table(parse_all(mirror, mirror), sts)
    out = tmp_path / "m.json"
    assert main(["evaluate", "--model", str(model), "--sts", str(sts), "--json", str(out), "--pooling", "mean"]) == 0
    m = json.loads(out.read_text())
    assert (m["device"], m["precision"]) == ("cpu", "fp32")
    client = mlflow.MlflowClient()
    runs = client.search_runs([client.get_experiment_by_name(EXPERIMENT).experiment_id],
                              "attributes.run_name = 'eval/tinybert'")
    assert len(runs) == 1 and runs[0].data.metrics["Avg"] == pytest.approx(m["Avg"], abs=1e-9)
    # the experiment is marked as model training: MLflow 3's UI opens on this runs table
    tags = client.get_experiment_by_name(EXPERIMENT).tags
    assert tags["mlflow.experimentKind"] == "custom_model_development"
    # and carries the runs view the README links (sentlab.tracking.runs_view_path): training runs, ranked by test.Avg,
    # test columns
    view = json.loads(tags["mlflow.sharedViewState.sentlab"])
    assert view["orderByKey"] == "metrics.`test.Avg`" and view["searchFilter"] == "tags.stage = 'train'"
    assert [c for c in view["selectedColumns"] if c.startswith("metrics.`test.")] == [
        f"metrics.`test.{k}`" for k in ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark",
                                        "SICKRelatedness", "Avg")]


