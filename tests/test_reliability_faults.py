"""Issue #36: faults a new user meets (non-finite params, unreadable weights, tar escapes, the resume
key, the embedding cache's temp files, evaluate outside the profile)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sentlab.methods.blocks import validate_params
from sentlab.errors import SentlabError

REPO = Path(__file__).resolve().parents[1]


def raw() -> dict:
    return yaml.safe_load((REPO / "params.yaml").read_text())


# --- every float param is finite ----------------------------------------------------------------
@pytest.mark.parametrize("path, value", [
    (("evaluate", "hard_subset", "pos_min_score"), float("nan")),
    (("train", "lr"), float("inf")),
    (("train", "max_grad_norm"), float("nan")),
    (("methods", "simcse", "temperature"), float("inf")),
    (("methods", "paser", "m"), float("-inf")),
])
def test_nan_and_infinity_are_refused_naming_the_key(path, value):
    r = raw()
    node = r
    for k in path[:-1]:
        node = node.setdefault(k, {})
    node[path[-1]] = value
    with pytest.raises(SentlabError, match=r"`" + r"\.".join(path) + r"`.*finite"):
        validate_params(r)


def test_yaml_nan_in_params_file_exits_2(tmp_path, capsys):
    from sentlab.cli import main

    text = (REPO / "params.yaml").read_text().replace("pos_min_score: 4.0", "pos_min_score: .nan")
    assert ".nan" in text
    (tmp_path / "params.yaml").write_text(text)
    assert main(["params", "--params", str(tmp_path / "params.yaml")]) == 2
    assert "evaluate.hard_subset.pos_min_score" in capsys.readouterr().err


# --- tar members are contained in their final destination ------------------------------------------
def _tar(path: Path, members: list) -> Path:
    import io
    import tarfile

    with tarfile.open(path, "w") as tar:
        for name, data, kind in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                info.type = tarfile.SYMTYPE if kind == "sym" else tarfile.LNKTYPE
                info.linkname = data
                tar.addfile(info)
    return path


@pytest.mark.parametrize("members, prefix", [
    ([("downstream/../escaped.txt", b"pwned", "file")], "downstream/"),           # beside the cache root
    ([("downstream/STS/../../escaped.txt", b"pwned", "file")], "downstream/"),
    ([("/tmp_abs/escaped.txt", b"pwned", "file")], ""),                            # absolute
    ([("downstream//escaped.txt", b"pwned", "file")], "downstream/"),             # absolute once stripped
    ([("downstream/STS", "../..", "sym"), ("downstream/STS/escaped.txt", b"pwned", "file")], "downstream/"),
    ([("downstream/x.txt", "downstream/../../etc/passwd", "hard")], "downstream/"),
])
def test_tar_member_outside_its_final_destination_is_refused(tmp_path, members, prefix):
    from sentlab.assets.resolve import extract_tar

    arc = _tar(tmp_path / "evil.tar", [("downstream/STS/ok.txt", b"ok", "file")] + members)
    out = tmp_path / "hf" / "cache"
    out.mkdir(parents=True)
    with pytest.raises(SentlabError, match="unsafe member") as e:
        extract_tar(arc, prefix, out)
    assert e.value.exit_code == 2
    assert not list(tmp_path.rglob("escaped.txt"))
    assert [p.name for p in out.rglob("*")] == []  # nothing written, not even the good member


def test_tar_member_with_dotdot_inside_the_folder_lands_where_it_normalises(tmp_path):
    from sentlab.assets.resolve import extract_tar

    arc = _tar(tmp_path / "a.tar", [("downstream/STS/sub/../x.txt", b"ok", "file")])
    out = tmp_path / "cache"
    out.mkdir()
    assert extract_tar(arc, "downstream/", out) == [out / "STS" / "x.txt"]
    assert (out / "STS" / "x.txt").read_bytes() == b"ok"


# --- unreadable weights: one paragraph, exit 2, never "weights_only=False" -------------------------
class _Evil:
    def __reduce__(self):
        return (Path.touch, (Path("/tmp/sentlab-test-unpickled-ran"),))


def test_a_pickled_pytorch_model_bin_is_one_paragraph_without_the_unpickling_advice(tmp_path, tok):
    import os

    import torch
    from tiny import tiny_bert

    from sentlab.assets.resolve import load_model

    model = tiny_bert(tok)
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    os.remove(tmp_path / "m" / "model.safetensors")
    torch.save({**model.state_dict(), "evil": _Evil()}, tmp_path / "m" / "pytorch_model.bin")
    with pytest.raises(SentlabError) as e:
        load_model(str(tmp_path / "m"))
    msg = str(e.value)
    assert e.value.exit_code == 2 and "\n" not in msg
    assert str(tmp_path / "m") in msg and "never unpickles" in msg and "safetensors" in msg
    assert "weights_only" not in msg
    assert not Path("/tmp/sentlab-test-unpickled-ran").exists()


@pytest.mark.parametrize("damage", ["truncated", "pickled", "json"])
def test_a_corrupt_resume_state_names_the_checkpoint_folder_to_delete(tmp_path, damage):
    import torch

    from sentlab.train.checkpoint import load_resume, save_resume

    lin = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    last = tmp_path / "checkpoints" / "simcse" / "abc" / "last"
    save_resume(last, lin, opt, sched, {"step": 3})
    assert load_resume(last, lin, opt, sched)["step"] == 3
    if damage == "truncated":
        (last / "state.pt").write_bytes((last / "state.pt").read_bytes()[:200])
    elif damage == "pickled":
        torch.save({"method": _Evil()}, last / "state.pt")
    else:
        (last / "state.json").write_text('{"step": 3')
    with pytest.raises(SentlabError) as e:
        load_resume(last, lin, opt, sched)
    msg = str(e.value)
    assert e.value.exit_code == 2 and "weights_only" not in msg
    assert f"rm -r {last.parent}" in msg


# --- the resume key: what determines the trained result, nothing else ------------------------------
def test_runtime_settings_keep_the_resume_key_and_result_settings_change_it():
    from sentlab.config import RUNTIME_TRAIN_KEYS
    from sentlab.train.run import method_params, run_key

    def key(**train):
        r = raw()
        for k, v in train.items():
            r["runtime" if k in RUNTIME_TRAIN_KEYS else "train"][k] = v
        p = validate_params(r)
        return run_key(p, "simcse", method_params(p, "simcse"), "corpus-fp")

    base = key()
    for k, v in (("checkpoint_every", 3), ("loader_workers", 2), ("nproc", 2), ("device", "cpu"), ("heap", "system")):
        assert key(**{k: v}) == base, k
    # num_threads: a CPU training's bits depend on it (tests/test_stage_params.py), so it is in the key
    for k, v in (("lr", 1e-4), ("batch_size", 32), ("dropout_kernel", "torch"), ("max_length", 16), ("num_threads", 1)):
        assert key(**{k: v}) != base, k


def test_the_training_code_fingerprint_ignores_comments_and_docstrings_not_code(tmp_path):
    from sentlab.provenance.code import _semantic_source

    f = tmp_path / "m.py"
    f.write_text('"""Doc."""\nimport os\n\n\ndef f(x):\n    """Doc."""\n    return x + 1  # one\n')
    before = _semantic_source(f)
    f.write_text('"""Other doc."""\nimport os\n# a new comment\n\ndef f(x):\n    return x + 1\n')
    assert _semantic_source(f) == before
    f.write_text('"""Doc."""\nimport os\n\n\ndef f(x):\n    return x + 2\n')
    assert _semantic_source(f) != before


def test_the_training_code_fingerprint_covers_what_trains_and_not_the_report():
    import sentlab.provenance.code as prov

    files = {p.relative_to(prov.PACKAGE_DIR).as_posix()
             for p in prov.executed_modules(REPO / "pipeline" / "train.py", ("simcse",))}
    walked = {prov._module_file(m).relative_to(prov.PACKAGE_DIR).as_posix()
              for m in prov._walk([prov.TRAINING_ENTRY], ("simcse",))}
    assert {"train/loop.py", "train/run.py", "methods/simcse.py", "train/checkpoint.py"} <= walked
    assert "report/build.py" not in walked and "hub/card.py" not in walked
    assert "methods/moco.py" not in walked   # another method's module: its edit keeps simcse's checkpoints
    assert walked <= files


def test_resume_states_of_other_keys_are_kept_and_named(tmp_path, caplog):
    from sentlab.train.run import stale_checkpoints

    (tmp_path / "simcse" / "oldkey" / "last").mkdir(parents=True)
    (tmp_path / "simcse" / "oldkey" / "last" / "state.pt").write_bytes(b"x" * 10)
    with caplog.at_level("WARNING"):
        assert stale_checkpoints(tmp_path / "simcse" / "newkey") == [tmp_path / "simcse" / "oldkey"]
    assert (tmp_path / "simcse" / "oldkey" / "last" / "state.pt").is_file()
    assert f"rm -r {tmp_path / 'simcse' / 'oldkey'}" in caplog.text


# --- timings never sit in a file a stage depends on -------------------------------------------------
def test_the_evaluate_metrics_json_holds_no_timings_and_mlflow_gets_them(tmp_path, monkeypatch):
    """reports/metrics/<m>.json is a dependency of report and export: a wall-clock number in it made
    every evaluate re-run dirty both. Re-evaluating writes the same bytes; the timing goes to MLflow."""
    import json
    import types

    import mlflow
    import pandas as pd

    from sentlab.config import load_params
    from sentlab.evaluate.sts import runner, writers

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    clock = iter([1.5, 7.25])

    def fake_eval(encoders, table, params, figures_dir=None, embeddings=None, lookups=None):
        lookups["m"] = {}
        return {"Avg": 70.0, "encode_seconds": next(clock),
                "extra_rows": {"m-mean": {"Avg": 69.0, "encode_seconds": 3.0}}}

    monkeypatch.setattr(runner, "evaluate_encoders", fake_eval)
    monkeypatch.setattr(runner, "pair_cosine_table", lambda *a: pd.DataFrame({"x": [1.0]}))
    monkeypatch.setattr(runner, "bootstrap_intervals", lambda *a, **k: {})
    monkeypatch.setattr(runner, "confidence_intervals", lambda *a, **k: {})
    monkeypatch.setattr(writers, "write_cosines", lambda *a: None)
    monkeypatch.setattr(writers, "write_bootstrap", lambda *a: None)
    from sentlab.evaluate.sts import mteb_results

    monkeypatch.setattr(mteb_results, "write_stage", lambda *a, **k: [])
    monkeypatch.setattr(runner, "precision_record", lambda enc: {"device": "cpu", "precision": "fp32"})
    enc = types.SimpleNamespace(device="cpu", precision="fp32", pooling="cls", batch_threads=1)
    params = load_params(REPO / "params.yaml")
    out = tmp_path / "metrics" / "m.json"
    texts = []
    for _ in range(2):
        result = runner.evaluate_sts({"m": enc}, None, params, model="some/model", kind="baseline")
        writers.write_all(result, writers.StageOutputs(out, tmp_path / "m.parquet", tmp_path / "mteb"))
        texts.append(out.read_text())
    assert texts[0] == texts[1] and "seconds" not in texts[0]
    assert json.loads(texts[0])["extra_rows"]["m-mean"] == {"Avg": 69.0}
    runs = mlflow.search_runs(experiment_names=["sentlab"], output_format="list")
    assert sorted(r.data.metrics["encode_seconds"] for r in runs) == [1.5, 7.25]
    assert {r.data.metrics["m-mean.encode_seconds"] for r in runs} == {3.0}


# --- the content of every source file is something DVC compares ------------------------------------
def test_every_file_prepare_reads_is_hashed_by_content_not_by_place(mirror, tmp_path, monkeypatch):
    import runpy
    import shutil

    from sentlab.stages.entry import report_errors
    from sentlab.stages.sources import data_sources

    src = tmp_path / "mirror"
    shutil.copytree(mirror, src, ignore=shutil.ignore_patterns("models"))
    from conftest import stage_workspace

    work = stage_workspace(tmp_path / "work", lambda r: r["prepare"].update(size=50, nli="none"))
    monkeypatch.chdir(work)
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(src))
    monkeypatch.setenv("SENTLAB_OFFLINE", "1")
    assert report_errors(runpy.run_path(str(REPO / "pipeline" / "prepare.py"), run_name="prepare")["main"]) == 0
    read = {p.relative_to(work / "data" / "raw").as_posix() for p in (work / "data" / "raw").rglob("*") if p.is_file()}
    before = data_sources("wiki1m_head", "none")
    assert {rel for files in before.values() for rel in files if rel != "source"} == read

    gold = src / "STS" / "STSBenchmark" / "sts-test.csv"
    lines = gold.read_text(encoding="utf-8").splitlines(keepends=True)
    cols = lines[0].split("\t")
    cols[4] = "0.123"
    gold.write_text("\t".join(cols) + "".join(lines[1:]), encoding="utf-8")   # one gold score changed
    after = data_sources("wiki1m_head", "none")
    changed = {(a, rel) for a in before for rel in before[a] if before[a][rel] != after[a][rel]}
    assert changed == {("senteval_sts", "STS/STSBenchmark/sts-test.csv")}

    moved = tmp_path / "elsewhere"
    src.rename(moved)
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(moved))
    assert data_sources("wiki1m_head", "none") == after   # where the mirror lies is not its content


def test_the_stages_reading_a_source_depend_on_its_hashes():
    d = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    assert d["sources"]["always_changed"] is True
    assert {next(iter(o)) if isinstance(o, dict) else o for o in d["sources"]["outs"]} == {"data/sources"}
    assert "data/sources/data.json" in d["prepare"]["deps"]
    assert "data/sources/model.json" in d["evaluate_baseline"]["do"]["deps"]
    assert "${item.init}" in d["train"]["do"]["deps"]   # the backbone's hashes, or the model it starts from
    models = yaml.safe_load((REPO / "models.yaml").read_text())["models"]
    assert {m["init"] for m in models.values()} == {"data/sources/model.json", "models/paser"}


# --- a failed `dvc repro` stage loses nothing `dvc checkout` cannot bring back ------------------------
def test_every_output_dvc_cannot_restore_persists():
    """DVC removes a stage's outputs before running it; `dvc checkout` restores the cached ones after a
    failure, not the `cache: false` ones (exports): those must persist (the stage replaces
    them as a whole, atomically, only when it succeeds)."""
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    uncached = {}
    for stage in stages.values():
        for out in (stage.get("do") or stage).get("outs", []):
            if isinstance(out, dict):
                (path, opts), = out.items()
                if opts and opts.get("cache") is False:
                    uncached[path] = opts.get("persist")
    assert uncached == {"exports": True}


def test_a_bad_source_fails_in_the_sources_stage_before_prepare_loses_its_outputs(mirror, tmp_path, monkeypatch,
                                                                                  capsys):
    import runpy
    import shutil

    from sentlab.stages.entry import report_errors

    src = tmp_path / "mirror"
    shutil.copytree(mirror, src, ignore=shutil.ignore_patterns("models"))
    from conftest import stage_workspace

    work = stage_workspace(tmp_path / "work", lambda r: r["prepare"].update(size=50, nli="none"))
    monkeypatch.chdir(work)
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(src))
    monkeypatch.setenv("SENTLAB_OFFLINE", "1")
    main = runpy.run_path(str(REPO / "pipeline" / "sources.py"), run_name="sources")["main"]
    assert report_errors(main) == 0
    before = (work / "data" / "sources" / "data.json").read_bytes()
    code = work / "data" / "sources" / "code"
    assert (code / "train" / "simcse.json").is_file() and (code / "prepare.json").is_file()
    (code / "train.json").write_text("{}")            # the layout before one code file per method
    (code / "train" / "a_removed_method.json").write_text("{}")
    assert report_errors(main) == 0 and (work / "data" / "sources" / "data.json").read_bytes() == before
    assert not (code / "train.json").exists() and not (code / "train" / "a_removed_method.json").exists()
    bad = src / "STS" / "STSBenchmark" / "sts-dev.csv"
    with bad.open("a", encoding="utf-8") as f:
        f.write("this line has no tabs and no score\n")
    assert report_errors(main) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "\n" not in err.strip()
    assert (work / "data" / "sources" / "data.json").read_bytes() == before   # the previous state, for DVC to compare


def test_the_sources_stage_checks_every_method_line_first(mirror, tmp_path, monkeypatch, capsys):
    """#57: a stage reads params.yaml through the schema (config imports no method); the sources stage, which runs
    first at every `dvc repro`, checks each method line against its method's Params: one paragraph, exit 2."""
    import runpy

    from conftest import stage_workspace
    from sentlab.stages.entry import report_errors

    work = stage_workspace(tmp_path / "work", lambda r: r["methods"]["simcse"].update(temprature=0.05))
    monkeypatch.chdir(work)
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(mirror))
    monkeypatch.setenv("SENTLAB_OFFLINE", "1")
    main = runpy.run_path(str(REPO / "pipeline" / "sources.py"), run_name="sources")["main"]
    assert report_errors(main) == 2
    err = capsys.readouterr().err.strip()
    assert "`methods.simcse.temprature`: unknown key" in err and "\n" not in err
    assert not (work / "data" / "sources" / "data.json").exists()


# --- code deps follow what each stage executes -------------------------------------------------------
def test_an_edit_of_the_training_code_is_not_a_dependency_of_the_baselines():
    from sentlab.provenance.code import stage_code

    baseline = set(stage_code("evaluate_baseline", REPO)["files"])
    trained = set(stage_code("evaluate", REPO)["files"])
    for f in ("src/sentlab/train/loop.py", "src/sentlab/train/run.py", "src/sentlab/train/checkpoint.py"):
        assert f not in baseline and f in trained, f
    assert "src/sentlab/evaluate/baselines/stage.py" in baseline and "src/sentlab/evaluate/sts/protocol.py" in baseline
    d = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["evaluate_baseline"]["do"]
    assert d["cmd"].startswith("python pipeline/evaluate_baseline.py")
    assert ("data/sources/code/evaluate_baseline.json" in d["deps"]
            and "data/sources/code/evaluate.json" not in d["deps"])
    assert "__pycache__/" in (REPO / ".dvcignore").read_text().splitlines()


# --- MLflow: a resumed training continues its run; nothing stays RUNNING ----------------------------
def test_a_resumed_training_continues_the_run_the_killed_one_left_running(tmp_path, monkeypatch):
    import mlflow

    from sentlab import tracking as T
    from sentlab.tracking import runs as R

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    tags = {"stage": "train", "sentlab.model": "simcse", "sentlab.run_key": "K1"}
    c = T.client()
    killed = c.create_run(T.experiment_id(), run_name="simcse", tags=tags).info.run_id   # SIGKILLed: RUNNING
    c.log_param(killed, "train.loader_workers", "2")
    c.log_metric(killed, "stsb_dev", 70.0, step=2)
    other = c.create_run(T.experiment_id(), run_name="simcse", tags={**tags, "sentlab.run_key": "K0"}).info.run_id

    resume = R.interrupted_training_run("simcse", "K1", resumable=True)
    assert resume == killed and c.get_run(other).info.status == "KILLED"
    with T.run("simcse", params={"train": {"loader_workers": 1, "lr": 3e-5}}, tags=tags, resume_run_id=resume):
        T.log_metrics({"stsb_dev": 75.0}, step=4)
    run = c.get_run(killed)
    assert run.info.status == "FINISHED" and run.data.params["train.lr"] == "3e-05"
    assert run.data.params["train.loader_workers"] == "2"
    assert run.data.tags["sentlab.resumed_with.train.loader_workers"] == "1"
    assert [(m.step, m.value) for m in c.get_metric_history(killed, "stsb_dev")] == [(2, 70.0), (4, 75.0)]
    assert {r.info.status for r in mlflow.search_runs(experiment_names=[T.EXPERIMENT], output_format="list")} == \
        {"FINISHED", "KILLED"}

    stale = c.create_run(T.experiment_id(), run_name="simcse", tags=tags).info.run_id
    assert R.interrupted_training_run("simcse", "K1", resumable=False) is None   # no checkpoint: starts afresh
    assert c.get_run(stale).info.status == "KILLED"


# --- small ones: exports are their own files; evaluate outside the profile names what to do --------------
def test_an_exported_model_shares_no_file_with_the_trained_one(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("export_stage", REPO / "pipeline" / "export.py")
    export = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(export)
    src = tmp_path / "models" / "simcse"
    (src / "1_Pooling").mkdir(parents=True)
    (src / "model.safetensors").write_bytes(b"weights" * 100)
    (src / "1_Pooling" / "config.json").write_text("{}")
    dest = tmp_path / "exports" / "simcse"
    export._copy_tree(src, dest)
    for f in ("model.safetensors", "1_Pooling/config.json"):
        assert (dest / f).read_bytes() == (src / f).read_bytes()
        assert (dest / f).stat().st_ino != (src / f).stat().st_ino and (src / f).stat().st_nlink == 1
    with open(dest / "model.safetensors", "r+b") as f:   # corrupting the export in place ...
        f.write(b"XXXX")
    assert (src / "model.safetensors").read_bytes() == b"weights" * 100   # ... leaves the trained model


@pytest.mark.parametrize("name", ["simcse", "simcse-s43", "paser_sup"])
def test_a_missing_trained_model_names_its_train_stage(name):
    from sentlab.evaluate.sts.trained import missing_model_error

    e = missing_model_error(name, f"models/{name}")
    assert f"`dvc repro train@{name}`" in str(e) and e.exit_code == 2


def test_a_copied_workspace_keeps_its_mlflow_artifacts_with_its_own_store(tmp_path, monkeypatch):
    import shutil

    import mlflow

    from sentlab import tracking as T

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    (a / "fig.txt").write_text("figure")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{a / 'mlflow.db'}")
    with T.run("first") as ml:
        ml.log_artifact(str(a / "fig.txt"))
        first = ml.active_run().info.run_id
    shutil.copytree(a, b)
    before = sorted(p.relative_to(a) for p in a.rglob("*"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{b / 'mlflow.db'}")
    with T.run("second") as ml:
        ml.log_artifact(str(b / "fig.txt"))
        second = ml.active_run().info.artifact_uri
    assert sorted(p.relative_to(a) for p in a.rglob("*")) == before   # nothing written into the original
    assert second.startswith(str(b / "mlruns")) and (b / "mlruns").is_dir()
    c = mlflow.MlflowClient()
    assert c.get_run(first).info.artifact_uri.startswith(str(b / "mlruns"))
    assert c.get_experiment_by_name(T.EXPERIMENT).artifact_location.startswith(str(b / "mlruns"))


def test_a_new_store_elsewhere_keeps_its_artifacts_beside_it_without_a_warning(tmp_path, monkeypatch, caplog):
    """A fresh store named by MLFLOW_TRACKING_URI outside the working directory (stage_times.py's scratch run)
    creates its experiment with the artifacts beside it: no "copied from another workspace" warning."""
    import mlflow

    from sentlab import tracking as T

    monkeypatch.chdir(tmp_path)
    store = tmp_path / "elsewhere"
    store.mkdir()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{store / 'mlflow.db'}")
    with caplog.at_level("WARNING", logger="sentlab.tracking"), T.run("first") as ml:
        uri = ml.active_run().info.artifact_uri
    assert "copied from another workspace" not in caplog.text
    assert (mlflow.MlflowClient().get_experiment_by_name(T.EXPERIMENT).artifact_location
            == str(store / "mlruns" / T.EXPERIMENT))
    assert uri.startswith(str(store / "mlruns")) and not (tmp_path / "mlruns").exists()


def test_a_comment_in_the_training_code_changes_no_code_file(tmp_path, monkeypatch):
    """data/sources/code/train/<method>.json is what the train stages depend on: a comment or docstring edit
    of train/loop.py leaves it as it was (no training re-runs), a code edit changes it."""
    import shutil

    from sentlab.provenance import code as provenance
    from sentlab.provenance.code import stage_code

    root = tmp_path / "repo"
    shutil.copytree(REPO / "src", root / "src")
    shutil.copytree(REPO / "pipeline", root / "pipeline")
    monkeypatch.setattr(provenance, "PACKAGE_DIR", root / "src" / "sentlab")
    loop = root / "src" / "sentlab" / "train" / "loop.py"
    base = stage_code("train", root, "simcse")["files"]["src/sentlab/train/loop.py"]
    text = loop.read_text()
    loop.write_text(text.replace("\ndef train_loop(", "\n# a comment\ndef train_loop(", 1))
    assert stage_code("train", root, "simcse")["files"]["src/sentlab/train/loop.py"] == base
    loop.write_text(text.replace("\ndef train_loop(", "\nX = 1\n\n\ndef train_loop(", 1))
    assert stage_code("train", root, "simcse")["files"]["src/sentlab/train/loop.py"] != base


def test_editing_one_method_module_changes_the_code_files_of_its_trainings_only(tmp_path, monkeypatch):
    """A code edit of methods/moco.py changes data/sources/code/train/<m>.json of the methods that run it (the
    five MoCo lines of that module, PT-BERT and ESimCSE, whose modules import it) and the kinds that read every
    method class (report, export, sources); SimCSE's trainings, the corpus, the annotation and the evaluations
    stay up to date."""
    import shutil

    from sentlab.provenance import code as provenance
    from sentlab.provenance.code import stage_code_files

    root = tmp_path / "repo"
    shutil.copytree(REPO / "src", root / "src")
    shutil.copytree(REPO / "pipeline", root / "pipeline")
    monkeypatch.setattr(provenance, "PACKAGE_DIR", root / "src" / "sentlab")
    before = stage_code_files(root)
    moco = root / "src" / "sentlab" / "methods" / "moco.py"
    moco.write_text(moco.read_text() + "\nX = 1\n")
    after = stage_code_files(root)
    assert set(after) == set(before)
    changed = {rel for rel in before if before[rel] != after[rel]}
    assert changed == {"code/report.json", "code/export.json", "code/sources.json",
                       *(f"code/train/{m}.json" for m in ("moco", "moco_reorder", "moco_duplication", "moco_deletion",
                                                          "moco_srl", "ptbert", "esimcse"))}


def test_code_files_name_modules_as_the_repository_does_whichever_checkout_runs(tmp_path):
    """A scratch copy of the repository run with another checkout's sentlab (benchmarks, the preflight) writes
    the same code files as a fresh clone with its own: modules keyed src/sentlab/..., not by where this process
    imports them from (the run that wrote a dvc.lock from such a copy left it stale for every clone)."""
    import shutil

    from sentlab.provenance.code import stage_code

    shutil.copytree(REPO / "pipeline", tmp_path / "pipeline")
    here, there = stage_code("prepare", REPO), stage_code("prepare", tmp_path)
    assert there == here
    assert "src/sentlab/config/stage_params.py" in there["files"] and "pipeline/prepare.py" in there["files"]
