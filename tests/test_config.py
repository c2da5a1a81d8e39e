"""params.yaml validation: unknown keys, bad values, profiles."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from sentlab.config import PROFILES, load_params, resolve_profile, set_profile, validate
from sentlab.errors import SentlabError

REPO = Path(__file__).resolve().parents[1]


def raw():
    return yaml.safe_load((REPO / "params.yaml").read_text())


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_of_the_committed_params_is_valid(profile):
    p = load_params(REPO / "params.yaml", profile=profile)
    assert p.profile == profile
    for mid in p.trained_ids:
        p.method_params(mid)


def test_profiles_override_the_sections():
    r = raw()
    smoke = validate(resolve_profile(r, "smoke"))
    quick = validate(resolve_profile(r, "quick"))
    assert smoke.prepare.size == r["profiles"]["smoke"]["prepare"]["size"]
    assert quick.prepare.size == r["prepare"]["size"]
    paper = validate(resolve_profile(r, "paper"))
    assert paper.model.backbone == "bert-base-uncased"


def test_unknown_key_names_key_and_allowed_keys():
    r = raw()
    r["train"]["learning_rate"] = 1e-3
    with pytest.raises(SentlabError) as e:
        validate(resolve_profile(r))
    msg = str(e.value)
    assert "`train.learning_rate`: unknown key" in msg and "lr" in msg and "batch_size" in msg


def test_bad_value_names_key_and_allowed_values():
    r = raw()
    r["annotate"]["backend"] = "stanza"
    with pytest.raises(SentlabError) as e:
        validate(resolve_profile(r))
    assert "`annotate.backend`" in str(e.value) and "'nltk'" in str(e.value) and "'spacy'" in str(e.value)
    r = raw()
    r["train"]["lr"] = -1
    with pytest.raises(SentlabError, match=r"`train.lr`: Input should be greater than 0 \(got -1\)"):
        validate(resolve_profile(r))


def test_unknown_method_is_rejected():
    r = raw()
    r["train"]["methods"] = ["simcse_typo"]
    with pytest.raises(SentlabError, match="simcse_typo"):
        validate(resolve_profile(r))


def test_unknown_profile_and_forbidden_override():
    r = raw()
    with pytest.raises(SentlabError, match="allowed: quick, smoke, paper"):
        resolve_profile(r, "huge")
    r["profiles"]["smoke"]["profile"] = "paper"
    with pytest.raises(SentlabError, match="cannot be overridden"):
        resolve_profile(r, "smoke")


def test_a_profile_cannot_add_a_stage():
    """A method line is defined once, in `methods`: a profile sets values (and picks lines with train.methods)."""
    r = raw()
    r["profiles"]["smoke"]["methods"] = {"simcse": {}, "ct_new": {}}
    with pytest.raises(SentlabError, match=r"profiles\.smoke\.methods` adds \['ct_new'\]"):
        resolve_profile(r, "smoke")


def test_a_method_with_init_from_belongs_in_methods_from():
    r = raw()
    r["methods"]["paser_sup"] = r["methods_from"].pop("paser_sup")
    r["methods"]["paser_sup"].pop("from")
    r["profiles"]["paper"]["methods"]["paser_sup"] = r["profiles"]["paper"]["methods_from"].pop("paser_sup")
    with pytest.raises(SentlabError, match="move its line to `methods_from` as `paser_sup: {from: paser"):
        validate(resolve_profile(r, "quick"))


def test_method_lines_list_only_what_differs_from_the_defaults():
    """params.yaml's method lines are differences (nanoGPT-style); data/params/methods/<id>.json has every value."""
    from sentlab.config import resolved_files
    from sentlab.methods import get_method

    r = raw()
    for section in ("methods", "methods_from"):
        for mid, block in r[section].items():
            defaults = get_method(mid).Params().model_dump()
            same = {k: v for k, v in block.items() if k != "from" and defaults.get(k) == v}
            assert not same, (mid, same)
    files = resolved_files(validate(resolve_profile(r, "quick")))
    moco = files["methods/moco.json"]["value"]
    assert moco == get_method("moco").Params().model_dump(mode="json") and moco["queue_size"] == 256


def test_set_profile_edits_the_profile_line_and_writes_its_stage_lines(tmp_path):
    from sentlab.config import STAGE_LINES_HEADER, check_stage_lines, read_yaml, stage_lines_for

    p = tmp_path / "params.yaml"
    shutil.copy(REPO / "params.yaml", p)
    before = p.read_text()
    check_stage_lines(read_yaml(p), load_params(p))   # the committed file: the quick profile's stages
    assert set_profile(p, "smoke") is True
    after = p.read_text()
    assert "profile: smoke" in after and load_params(p).profile == "smoke"
    head = before.index(STAGE_LINES_HEADER)
    assert [l for l in before[:head].splitlines() if not l.startswith("profile:")] == \
           [l for l in after[:after.index(STAGE_LINES_HEADER)].splitlines() if not l.startswith("profile:")]
    lines = read_yaml(p)["stage_lines"]
    assert lines == stage_lines_for(load_params(p))
    assert lines["train"] == ["simcse", "moco_srl", "ptbert"]   # in the order of `methods`
    assert lines["seeds"] == {"simcse-43": {"method": "simcse", "seed": 43}} and lines["ablations"] == []
    assert set_profile(p, "smoke") is False
    assert set_profile(p, "quick") is True and p.read_text() == before   # back: byte for byte


def test_stage_lines_follow_the_profile():
    from sentlab.config import active_models, stage_lines_for

    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    quick = stage_lines_for(validate(resolve_profile(raw, "quick")))
    assert quick["train"] == ["simcse", "moco", "moco_srl", "ptbert", "paser", "l2p", "prompt_l2p", "posbow_adv"]
    assert quick["train_from"] == {"paser_sup": "paser"} and quick["ablations"] == []
    assert list(quick["seeds"]) == ["simcse-43", "simcse-44", "ptbert-43", "ptbert-44"]
    paper = validate(resolve_profile(raw, "paper"))
    lines = stage_lines_for(paper)
    # 14 methods (simcse_sup for PaSeR Table 2); 61 variants: paser_aug_sr dropped (it is the paper paser again),
    # the 4 *_roberta lines added (issue #34)
    assert len(lines["train"]) == 14 and len(lines["seeds"]) == 14 * 4 and len(lines["ablations"]) == 61
    assert "paser_sup-s43" not in active_models(paper) and "ct-s46" in active_models(paper)


def test_stale_stage_lines_are_refused_with_the_command_that_rewrites_them():
    from sentlab.config import check_stage_lines

    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["profile"] = "paper"          # switched by hand: the quick profile's stage lines are still there
    with pytest.raises(SentlabError, match=r"stage_lines.train. differs.*sentlab profile paper"):
        check_stage_lines(raw, validate(resolve_profile(raw)))
    del raw["stage_lines"]
    with pytest.raises(SentlabError, match="has no `stage_lines` section"):
        check_stage_lines(raw, validate(resolve_profile(raw)))
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["profiles"]["quick"] = {"stage_lines": {}}
    with pytest.raises(SentlabError, match=r"profiles.quick.stage_lines. cannot be overridden"):
        resolve_profile(raw)


def test_cli_reports_invalid_params_with_exit_2(tmp_path, capsys):
    from sentlab.cli import main

    p = tmp_path / "params.yaml"
    r = raw()
    r["evaluate"]["precision"] = "fp8"
    p.write_text(yaml.safe_dump(r))
    assert main(["params", "--params", str(p)]) == 2
    err = capsys.readouterr().err
    assert "evaluate.precision" in err and "Traceback" not in err


def test_ablation_variant_names_must_be_dvc_safe():
    r = raw()
    r["ablations"]["variants"]["l2p_phi_0.5"] = {"method": "l2p", "set": {"phi": 0.5}}
    with pytest.raises(SentlabError, match=r"l2p_phi_0.5.*0p01"):
        validate(resolve_profile(r))


def test_every_ablation_variant_has_a_valid_method_and_overrides():
    from sentlab.train.run import ablation_spec, method_params

    p = load_params(REPO / "params.yaml", profile="paper")
    for name in p.ablations["variants"]:
        method_id, overrides = ablation_spec(p, name)
        method_params(p, method_id, overrides)


def test_resolved_files_change_only_with_the_values_in_force(tmp_path):
    from sentlab.config import resolved_files, write_resolved

    r = raw()
    base = resolved_files(validate(resolve_profile(r, "quick")))
    assert {"seed.json", "train.json", "evaluate.json", "methods/simcse.json", "methods/paser.json",
            "ablations/variants/ptbert_m64.json"} <= set(base)

    # Editing another profile's block changes none of the active profile's files.
    r2 = raw()
    r2["profiles"]["paper"].setdefault("train", {})["lr"] = 0.123
    assert resolved_files(validate(resolve_profile(r2, "quick"))) == base

    # Editing one method's block changes that method's file ...
    r3 = raw()
    r3["methods"]["paser"]["top_k"] = 3
    changed = resolved_files(validate(resolve_profile(r3, "quick")))
    # ... and the ablation variants of that method, whose merged block holds it
    assert {k for k in base if base[k] != changed[k]} == {"methods/paser.json"} | {
        f"ablations/variants/{n}.json" for n, v in r3["ablations"]["variants"].items()
        if v["method"] == "paser" and "top_k" not in v["set"]}  # (a variant setting top_k itself stays)

    # Switching profiles changes every file (each names the profile that outputs record).
    paper = resolved_files(validate(resolve_profile(r, "paper")))
    assert all(paper[k] != base[k] for k in base if k in paper)
    assert paper["model.json"]["value"]["backbone"] == "bert-base-uncased"

    out = tmp_path / "params"
    assert write_resolved(validate(resolve_profile(r, "quick")), out) == len(base)
    assert json.loads((out / "methods/paser.json").read_text()) == base["methods/paser.json"]


def test_a_method_line_sets_its_own_backbone(monkeypatch, tmp_path):
    """Issue #34: the POS/BOW paper is RoBERTa-base: the paper profile trains posbow_adv, its SimCSE reference and
    L2P-CSR Table 1's RoBERTa rows on roberta-base (L2P-CSR there at lr 1e-5, layer 0 masked: layers 1), the rest on
    model.backbone; the train stage loads the method's own backbone."""
    from sentlab.train.run import ablation_spec, backbone_of, method_params, train_method

    paper, quick = load_params(REPO / "params.yaml", profile="paper"), load_params(REPO / "params.yaml")
    assert backbone_of(paper, method_params(paper, "posbow_adv")) == "roberta-base"
    assert backbone_of(paper, method_params(paper, "simcse")) == "bert-base-uncased"
    assert backbone_of(quick, method_params(quick, "posbow_adv")) == quick.model.backbone
    want = {"simcse_roberta": {}, "prompt_roberta": {}, "l2p_roberta": {"lr": 1e-5, "layers": 1},
            "prompt_l2p_roberta": {"lr": 1e-5, "layers": 1}, "posbow_adv_noadv": {}}
    for variant, settings in want.items():
        mp = method_params(paper, *ablation_spec(paper, variant))
        assert backbone_of(paper, mp) == "roberta-base", variant
        assert {k: getattr(mp, k) for k in settings} == settings, variant

    class Loaded(Exception):
        pass

    def load_model(name, device=None):
        raise Loaded(name)

    monkeypatch.setattr("sentlab.assets.load_model", load_model)
    with pytest.raises(Loaded, match="^roberta-base$"):
        train_method(paper, "posbow_adv", root=tmp_path, tracking=False, progress=False)
    with pytest.raises(Loaded, match="^bert-base-uncased$"):
        train_method(paper, "simcse", root=tmp_path, tracking=False, progress=False)


def test_metrics_record_the_models_own_backbone():
    from sentlab.evaluate.runner import metrics_backbone

    paper = load_params(REPO / "params.yaml", profile="paper")
    assert metrics_backbone(paper, "trained", {"method": {"id": "posbow_adv", "backbone": "roberta-base"}}) == \
        "roberta-base"
    assert metrics_backbone(paper, "trained", {"method": {"id": "simcse", "backbone": None}}) == "bert-base-uncased"
    assert metrics_backbone(paper, "baseline", {"method": {"backbone": "roberta-base"}}) == "bert-base-uncased"
