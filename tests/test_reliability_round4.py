"""Reliability round 4 (issue #64): a result always carries the settings that made it, and a dead neighbour never
stalls or corrupts a run."""

from __future__ import annotations

import pytest
import yaml
from conftest import stage_workspace


# --- a params edit while a stage runs -------------------------------------------------------------------------


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.delenv("DVC_STAGE", raising=False)
    monkeypatch.chdir(stage_workspace(tmp_path))
    return tmp_path


def _set_lr(work, lr):
    raw = yaml.safe_load((work / "params.yaml").read_text())
    raw["train"]["lr"] = lr
    (work / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))


def _stage_that_edits(work, edit):
    """A train@simcse stage's script: it reads its params, writes its output, and params.yaml is edited meanwhile."""
    from sentlab.config.stage_params import stage_params

    def main():
        p = stage_params("train@simcse")
        out = work / "models" / "simcse"
        out.mkdir(parents=True)
        (out / "sentlab.json").write_text(f'{{"lr": {p.train.lr}}}')
        edit()
        return 0
    return main


def test_a_declared_params_edit_while_a_stage_runs_fails_it_naming_the_key_and_removes_its_outputs(work, capsys):
    from sentlab.pipeline.entry import run_stage

    rc = run_stage(_stage_that_edits(work, lambda: _set_lr(work, 5e-5)))
    err = capsys.readouterr().err
    assert rc == 2
    assert "params.yaml changed while stage `train@simcse` ran: `train.lr` 3e-05 -> 5e-05" in err
    assert "dvc repro train@simcse" in err and "Traceback" not in err
    assert not (work / "models" / "simcse").exists()              # nothing made with 3e-05 left to label 5e-05


def test_an_edit_of_a_key_the_stage_does_not_declare_lets_it_finish(work, capsys):
    from sentlab.pipeline.entry import run_stage

    def other():
        raw = yaml.safe_load((work / "params.yaml").read_text())
        raw["methods"]["moco"]["queue_size"] = 512                  # another method's line
        raw["runtime"] = {**(raw.get("runtime") or {}), "checkpoint_every": 7}   # how it runs, never declared
        (work / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))

    assert run_stage(_stage_that_edits(work, other)) == 0
    assert (work / "models" / "simcse" / "sentlab.json").read_text() == '{"lr": 3e-05}'


# --- evaluate refuses a model labelled with params it was not trained with -------------------------------------


def _trained_model(work, edit_inputs=None, key=None):
    """models/simcse as training writes it, its run_key_inputs from params.yaml as committed (``edit_inputs``: what
    training saw instead)."""
    import json

    from sentlab.config import validate
    from sentlab.config.yaml_files import read_yaml
    from sentlab.methods.blocks import method_params
    from sentlab.train.run import key_of, run_key_inputs

    p = validate(read_yaml(work / "params.yaml"))
    inputs = run_key_inputs(p, "simcse", method_params(p, "simcse"), "corpus-fp")
    if edit_inputs:
        edit_inputs(inputs)
    out = work / "models" / "simcse"
    out.mkdir(parents=True, exist_ok=True)
    (out / "sentlab.json").write_text(json.dumps({"method": "simcse", "status": "trained", "name": "simcse",
                                                  "run_key": key or key_of(inputs), "run_key_inputs": inputs}))


def _evaluate_stage(monkeypatch):
    import runpy

    monkeypatch.setattr("sys.argv", ["pipeline/evaluate.py", "simcse"])
    return runpy.run_path("pipeline/evaluate.py", run_name="not_main")["main"]


def test_evaluate_refuses_a_model_trained_with_other_method_settings(work, monkeypatch, capsys):
    from sentlab.pipeline.entry import run_stage

    stage_workspace(work, lambda r: r["methods"]["simcse"].update(temperature=0.07))   # labelled 0.07 ...
    _trained_model(work, lambda i: i["method_params"].update(temperature=0.05))        # ... trained with 0.05
    assert run_stage(_evaluate_stage(monkeypatch)) == 2
    err = capsys.readouterr().err
    assert "`method_params.temperature` trained with 0.05, labelled 0.07" in err
    assert "dvc repro train@simcse" in err and "Traceback" not in err
    assert not (work / "reports").exists()                           # refused before anything is written


@pytest.mark.parametrize("case, said", [
    ("key", "hash to"),                    # run_key_inputs that do not hash to the run_key
    ("none", "records no run_key"),        # a model folder from before the record
])
def test_evaluate_refuses_a_model_whose_run_key_does_not_match_its_record(work, monkeypatch, capsys, case, said):
    import json

    from sentlab.pipeline.entry import run_stage

    _trained_model(work, key="0123456789abcdef" if case == "key" else None)
    if case == "none":
        f = work / "models" / "simcse" / "sentlab.json"
        f.write_text(json.dumps({k: v for k, v in json.loads(f.read_text()).items() if k != "run_key_inputs"}))
    assert run_stage(_evaluate_stage(monkeypatch)) == 2
    assert said in capsys.readouterr().err


def test_evaluate_accepts_a_model_trained_with_the_params_it_is_labelled_with(work):
    import json

    from sentlab.evaluate.sts.trained import check_trained_with
    from sentlab.config.stage_params import stage_params

    _trained_model(work)
    info = json.loads((work / "models" / "simcse" / "sentlab.json").read_text())
    assert check_trained_with(info, stage_params("evaluate@simcse"), "simcse", "simcse") is None


def test_a_training_records_what_its_run_key_hashes(tmp_path, tok):
    import json

    from _support.training import factory, fake_dev_eval, make_root, params

    from sentlab.evaluate.sts.trained import check_trained_with
    from sentlab.train.run import key_of, train_method

    root = make_root(tmp_path)
    train_method(params(lr=2e-3), "simcse", root=root, dev_eval=fake_dev_eval(), encoder_factory=factory(tok),
                 tracking=False, progress=False)
    meta = json.loads((root / "models" / "simcse" / "sentlab.json").read_text())
    assert key_of(meta["run_key_inputs"]) == meta["run_key"]
    assert meta["run_key_inputs"]["train"]["lr"] == 2e-3 and meta["run_key_inputs"]["seed"] == 3
    check_trained_with(meta, params(lr=2e-3), "simcse", "simcse")      # the params it was trained with: accepted
    with pytest.raises(Exception, match="temperature"):
        check_trained_with(meta, params().model_copy(update={"methods": {"simcse": {"temperature": 0.5}}}), "simcse",
                           "simcse")
