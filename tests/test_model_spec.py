"""What a model is, in one place: :class:`sentlab.config.models.ModelSpec` (issue #67 §1).

The description is built once from the profile (``models_for``), written as models.yaml (every field of the class, no
other), read back whole by ``load_models``; dvc.yaml's one ``train`` group reads the entry's fields only, its teacher
slots as many as ``TEACHER_SLOTS``; a plain model's stage keeps the dvc.lock entry it had before the slots.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import create_model

from sentlab.config import validate
from sentlab.config.models import (TEACHER_SLOTS, ModelSpec, load_models, seed_name, split_seed, train_stage)
from sentlab.config.profile_files import profile_values
from sentlab.config.yaml_files import deep_merge
from sentlab.errors import SentlabError
from sentlab.stages.stage_list import models_for, stage_list_for, write_stage_list

REPO = Path(__file__).resolve().parents[1]


def paper(**extra):
    return validate(deep_merge(profile_values("paper", REPO / "profiles"), extra))


def dvc_stages() -> dict:
    return yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))["stages"]


def test_the_seed_name_is_built_and_read_by_one_pair():
    assert seed_name("simcse", 43) == "simcse-s43" and split_seed("simcse-s43") == ("simcse", 43)
    assert [split_seed(n) for n in ("simcse", "moco-srl", "x-s", "a-s1-s22")] == \
        [("simcse", None), ("moco-srl", None), ("x-s", None), ("a-s1", 22)]


def test_models_yaml_is_every_field_of_the_description_and_reads_back_whole(tmp_path):
    """The paper profile with its ablations: each entry holds the ModelSpec's fields (and dvc.yaml's teacher slots),
    and load_models gives back the descriptions models_for built, field for field."""
    params = paper(ablations={"enabled": True})
    write_stage_list(params, tmp_path / "models.yaml")
    built, read = models_for(params), load_models(tmp_path / "models.yaml")
    assert read == built and list(read) == list(built)
    entries = yaml.safe_load((tmp_path / "models.yaml").read_text())["models"]
    assert all(set(e) == set(ModelSpec.model_fields) - {"name"} | {"reads"} for e in entries.values())
    v = read["l2p_no_feature_mask"]
    assert (v.variant, v.own, v.line, v.group) == ("l2p_no_feature_mask", "ablations.variants.l2p_no_feature_mask",
                                                   "methods.l2p", "l2p_no_feature_mask")
    assert v.overrides(params) == dict(params.ablations.variants["l2p_no_feature_mask"].set) != {}
    s = read["paser_sup-s43"]
    assert (s.method, s.seed, s.group, s.init_model, s.train_stage) == \
        ("paser_sup", 43, "paser_sup", "paser-s43", "train@paser_sup-s43")
    assert "train_stages" not in stage_list_for(params) and "distill_stages" not in stage_list_for(params)


def test_a_field_added_to_the_description_reaches_the_file_and_the_reader():
    """entry() and from_entry() name no field: a new attribute of the one class is written and read back."""
    Grown = create_model("Grown", __base__=ModelSpec, note=(str, "none"))
    spec = Grown(name="m", method="simcse", seed=1, line="methods.simcse", own="methods.simcse", note="x")
    assert spec.entry()["note"] == "x" and Grown.from_entry("m", spec.entry()) == spec


def test_a_models_yaml_entry_that_is_no_description_is_one_paragraph(tmp_path):
    (tmp_path / "models.yaml").write_text("models:\n  m: {method: simcse, seed: 1, line: methods.simcse, "
                                          "own: methods.simcse, colour: red}\n")
    with pytest.raises(SentlabError, match=r"models.yaml: the entry of model `m` is not a model description.*"
                                           r"sentlab stages"):
        load_models(tmp_path / "models.yaml")


def test_dvc_yaml_has_one_train_group_reading_only_the_entry_and_its_teacher_slots():
    stages = dvc_stages()
    assert "train_distill" not in stages and stages["train"]["foreach"] == "${models}"
    train = stages["train"]["do"]
    slots = [d for d in train["deps"] if "reads" in d]
    assert slots == [f"${{item.reads[{i}]}}" for i in range(TEACHER_SLOTS)]
    used = set(re.findall(r"\$\{item\.(\w+)", yaml.safe_dump(train)))
    assert used <= set(ModelSpec.model_fields) | {"reads"}
    assert not any(d.startswith("models/") for d in train["deps"])   # no model written in dvc.yaml


def _dvc(cwd: Path, *args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "dvc", *args], cwd=cwd, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_paper_stage_list_resolves_through_the_real_dvc_yaml(tmp_path, monkeypatch):
    """DVC reads the real dvc.yaml over the paper profile's models.yaml: train@rankcse depends on its teachers,
    train@simcse on no other model, and every model has one train stage."""
    from dvc.repo import Repo

    params = paper(ablations={"enabled": True})
    write_stage_list(params, tmp_path / "models.yaml")
    (tmp_path / "dvc.yaml").write_text((REPO / "dvc.yaml").read_text())
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())
    _dvc(tmp_path, "init", "--no-scm", "-q")
    names = set(_dvc(tmp_path, "stage", "list", "--name-only").split())
    assert {train_stage(n) for n in models_for(params)} == {s for s in names if s.startswith("train@")}
    monkeypatch.chdir(tmp_path)
    with Repo(".") as repo:
        deps = {n: {str(d.def_path) for d in repo.stage.collect(train_stage(n))[0].deps}
                for n in ("rankcse", "rankcse_listnet", "simcse", "paser_sup")}
    assert {"models/diffcse", "models/simcse"} <= deps["rankcse"] and deps["rankcse"] == deps["rankcse_listnet"]
    assert not any(d.startswith("models/") for d in deps["simcse"])
    assert {d for d in deps["paser_sup"] if d.startswith("models/")} == {"models/paser"}
    # the preflight's own reading of dvc.yaml (sentlab.preflight.stages) resolves the slots as DVC does
    from sentlab.preflight.stages import read_stages

    mine = {st.name: set(st.deps) for st in read_stages(tmp_path)}
    # (DVC counts params.yaml among a stage's deps)
    assert {n: mine[train_stage(n)] for n in deps} == {n: d - {"params.yaml"} for n, d in deps.items()}


def test_the_teacher_slots_leave_a_plain_models_dvc_lock_entry_up_to_date(tmp_path):
    """A model trained before the train group had teacher slots (its dvc.lock entry lists its deps once) is up to
    date under the real group's deps (its slots repeat its init); a model whose slot names a new path is not."""
    train = dvc_stages()["train"]["do"]
    for f in ("pipeline/train.py", "data/sources/code/train/simcse.json", "data/sources/model.json", "data/corpus",
              "data/sts", "data/annotations", "teacher.txt"):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text(f)
    entry = {"method": "simcse", "init": "data/sources/model.json"}
    cmd = "mkdir -p models/${key} && cp ${item.init} models/${key}/w"

    def write(deps: list, models: dict) -> None:
        stage = {"foreach": "${models}", "do": {"cmd": cmd, "deps": deps, "outs": ["models/${key}"]}}
        (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"vars": ["models.yaml"], "stages": {"train": stage}}))
        (tmp_path / "models.yaml").write_text(yaml.safe_dump({"models": models}))

    _dvc(tmp_path, "init", "--no-scm", "-q")
    write([d for d in train["deps"] if "reads" not in d], {"simcse": entry, "rankcse": entry})   # before the slots
    _dvc(tmp_path, "repro", "-q")
    lock = (tmp_path / "dvc.lock").read_text()
    write(train["deps"], {"simcse": {**entry, "reads": [entry["init"]] * TEACHER_SLOTS},
                          "rankcse": {**entry, "reads": ["teacher.txt", entry["init"]]}})
    status = yaml.safe_load(_dvc(tmp_path, "status", "--json")) or {}
    assert set(status) == {"train@rankcse"} and (tmp_path / "dvc.lock").read_text() == lock


def test_a_variant_is_one_entry_of_ablations_and_every_reader_sees_it(tmp_path):
    """A new ablation variant is one entry under `ablations.variants`: it becomes a model description (models.yaml),
    DVC has its train and evaluate stages, the report counts it as the profile's, and its settings are its method's
    line with its `set` on top wherever they are read."""
    from sentlab.methods.blocks import check_blocks, method_params
    from sentlab.stages.stage_list import profile_models
    from _support.ablations import trained_settings

    new = {"simcse_t0p1": {"method": "simcse", "set": {"temperature": 0.1}}}
    params = check_blocks(validate(deep_merge(profile_values("quick", REPO / "profiles"),
                                              {"ablations": {"enabled": True, "variants": new}})))
    write_stage_list(params, tmp_path / "models.yaml")
    spec = load_models(tmp_path / "models.yaml")["simcse_t0p1"]
    assert (spec.method, spec.variant, spec.own, spec.seed) == ("simcse", "simcse_t0p1",
                                                                "ablations.variants.simcse_t0p1", params.seed)
    (tmp_path / "dvc.yaml").write_text((REPO / "dvc.yaml").read_text())
    _dvc(tmp_path, "init", "--no-scm", "-q")
    assert {"train@simcse_t0p1", "evaluate@simcse_t0p1"} <= set(_dvc(tmp_path, "stage", "list", "--name-only").split())
    assert profile_models(params)["simcse_t0p1"] is True
    assert method_params(params, spec.method, spec.overrides(params)).temperature == 0.1
    assert trained_settings(params, "simcse_t0p1")["temperature"] == 0.1 != trained_settings(params, "simcse")[
        "temperature"]
