"""Campaigns of any size (issue #54 §3): profiles are the files of profiles/, each states what it changes in the
profile it `extends`; a user-written profiles/mine.yaml works without touching code; paper-lite is the paper
profile at one seed without ablations; paser_sup trains the paper's five seeds."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from sentlab import cli
from sentlab.config import load_params, validate
from sentlab.errors import SentlabError
from sentlab.stages.profiles import params_text
from sentlab.config.profile_files import profile_names, profile_values
from sentlab.stages.stage_list import models_for

REPO = Path(__file__).resolve().parents[1]
PROFILES_DIR = REPO / "profiles"


def workspace(tmp_path) -> Path:
    shutil.copytree(PROFILES_DIR, tmp_path / "profiles")
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    return tmp_path / "params.yaml"


def test_a_user_written_profile_works_without_touching_code(tmp_path, capsys):
    params = workspace(tmp_path)
    (tmp_path / "profiles" / "mine.yaml").write_text(
        "# my CPU check: smoke with two methods and a bigger corpus\n"
        "extends: smoke\n"
        "prepare: {size: 900}\n"
        "train: {methods: [simcse, ct]}\n")
    assert "mine" in profile_names(tmp_path / "profiles")
    assert cli.main(["profile", "mine", "--params", str(params), "--force"]) == 0
    values = yaml.safe_load(params.read_text())
    assert values["profile"] == "mine" and values["prepare"]["size"] == 900
    assert values["train"]["methods"] == ["simcse", "ct"]
    assert values["train"]["max_steps"] == 4 and values["train"]["precision"] == "fp32"    # smoke's, inherited
    assert "profiles/quick.yaml + profiles/smoke.yaml + profiles/mine.yaml" in params.read_text().splitlines()[0]
    assert set(yaml.safe_load((tmp_path / "models.yaml").read_text())["models"]) == {"simcse", "simcse-s43", "ct"}
    assert cli.main(["params", "--params", str(params), "--profile", "mine"]) == 0
    assert "profile: mine" in capsys.readouterr().out


def test_extends_chains_loops_and_unknown_parents(tmp_path):
    workspace(tmp_path)
    folder = tmp_path / "profiles"
    (folder / "a.yaml").write_text("extends: b\n")
    (folder / "b.yaml").write_text("extends: a\n")
    with pytest.raises(SentlabError, match="loop"):
        profile_values("a", folder)
    (folder / "c.yaml").write_text("extends: nowhere\n")
    with pytest.raises(SentlabError, match="extends `nowhere`, which is not a profile"):
        profile_values("c", folder)


def test_paper_lite_is_the_paper_profile_at_one_seed_without_ablations():
    paper = validate(profile_values("paper", PROFILES_DIR))
    lite = validate(profile_values("paper-lite", PROFILES_DIR))
    assert yaml.safe_load((PROFILES_DIR / "paper-lite.yaml").read_text())["extends"] == "paper"
    assert lite.train.methods == paper.train.methods and lite.methods == paper.methods
    assert lite.model == paper.model and lite.prepare == paper.prepare and lite.transfer == paper.transfer
    models = models_for(lite)
    assert sorted(models) == sorted(paper.train.methods)                   # every main method line, one seed
    assert all(e.seed == lite.seed for e in models.values())
    assert lite.glue.seeds == [lite.seed] and len(paper.glue.seeds) == 5
    assert lite.ablations.enabled is False
    # params.yaml of paper-lite: paper's values with paper-lite's on top, from the three files
    text = params_text("paper-lite", PROFILES_DIR)
    assert "profiles/quick.yaml + profiles/paper.yaml + profiles/paper-lite.yaml" in text.splitlines()[0]
    assert yaml.safe_load(text) == profile_values("paper-lite", PROFILES_DIR)


def test_every_main_method_of_the_paper_profile_trains_five_seeds_paser_sup_too():
    paper = load_params(REPO / "params.yaml", profile="paper")
    models = models_for(paper)
    for m in paper.train.methods:
        assert sum(e.method == m and e.own == e.line for e in models.values()) == 5, m
    assert models["paser_sup-s44"].init == "models/paser-s44" and models["paser_sup"].init == "models/paser"
    assert len(models) == 24 * 5 + 63


def test_a_methods_from_line_cannot_have_more_seeds_than_its_source():
    raw = profile_values("paper", PROFILES_DIR)
    raw["seeds"]["per_method"]["paser"] = 2
    with pytest.raises(SentlabError, match="paser_sup trains 5 seeds, paser 2"):
        validate(raw)


def test_a_seed_of_paser_sup_starts_from_the_same_seed_of_paser(tmp_path, monkeypatch):
    import json

    import sentlab.assets.resolve
    from sentlab.methods import get_method
    from sentlab.train.run import load_encoder

    for name in ("paser", "paser-s43"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "sentlab.json").write_text(json.dumps({"status": "trained"}))
    loaded = []

    class M:
        pass

    monkeypatch.setattr(sentlab.assets.resolve, "load_model",
                        lambda path: (loaded.append(Path(path).name) or M(), None))
    params = load_params(REPO / "params.yaml", profile="paper")
    load_encoder(params, get_method("paser_sup"), tmp_path, None, init_name="paser-s43")
    load_encoder(params, get_method("paser_sup"), tmp_path, None)
    assert loaded == ["paser-s43", "paser"]


@pytest.mark.parametrize("name", ["quick", "paper", "paper-lite", "smoke"])
def test_params_yaml_compile_reads_off_in_yaml_1_1_and_1_2(name):
    """``train.compile: off`` is written quoted: bare, PyYAML (YAML 1.1) reads false while DVC (ruamel, 1.2) reads
    "off", so a PyYAML rewrite of params.yaml changed the param DVC sees; quoted, both read the string."""
    from ruamel.yaml import YAML

    text = params_text(name, REPO / "profiles")
    assert yaml.safe_load(text)["train"]["compile"] == "off"
    assert YAML(typ="safe").load(text)["train"]["compile"] == "off"
