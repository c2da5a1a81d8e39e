"""params.yaml validation (unknown keys, bad values), the profile files and the stage list."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from sentlab.methods.blocks import method_params
from sentlab.config import PROFILES, load_params, validate
from sentlab.methods.blocks import validate_params
from sentlab.errors import SentlabError
from sentlab.config.profile_files import profile_values

REPO = Path(__file__).resolve().parents[1]
PROFILES_DIR = REPO / "profiles"


def raw():
    return yaml.safe_load((REPO / "params.yaml").read_text())


def copy_params(tmp_path) -> Path:
    shutil.copytree(PROFILES_DIR, tmp_path / "profiles")
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    return tmp_path / "params.yaml"


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_is_valid(profile):
    p = load_params(REPO / "params.yaml", profile=profile)
    assert p.profile == profile
    for mid in p.trained_ids:
        method_params(p, mid)


def test_the_committed_params_are_the_quick_profile_byte_for_byte():
    from sentlab.stages.profiles import params_text

    assert (REPO / "params.yaml").read_text() == params_text("quick", PROFILES_DIR)
    assert raw()["profile"] == "quick"


def test_profiles_override_the_base():
    smoke, quick = profile_values("smoke", PROFILES_DIR), profile_values("quick", PROFILES_DIR)
    over = yaml.safe_load((PROFILES_DIR / "smoke.yaml").read_text())
    assert smoke["prepare"]["size"] == over["prepare"]["size"] != quick["prepare"]["size"]
    assert smoke["prepare"]["max_words"] == quick["prepare"]["max_words"]   # what the override leaves alone
    assert validate_params(profile_values("paper", PROFILES_DIR)).model.backbone == "bert-base-uncased"


def test_the_base_profile_sets_every_key_one_layer_of_defaults():
    """params.yaml (made from profiles/quick.yaml) names every section key: the values a run uses are read in one
    place, never a code default that params.yaml does not show (prepare.size was 11,913 in code, 11,000 there)."""
    from sentlab.config import Params

    base = yaml.safe_load((PROFILES_DIR / "quick.yaml").read_text())
    for section, field in Params.model_fields.items():
        model = field.annotation
        if isinstance(model, type) and hasattr(model, "model_fields"):
            keys = set(model.model_fields) - ({"device", "checkpoint_every", "checkpoint_minutes", "loader_workers",
                                               "heap", "nproc"} if section == "train" else set())
            assert keys <= set(base[section]), (section, sorted(keys - set(base[section])))
    assert {"seed", "model", "methods", "methods_from", "ablations", "seeds", "runtime"} <= set(base)


def test_runtime_keys_live_in_runtime_and_reach_the_loop():
    r = raw()
    r["runtime"]["checkpoint_every"] = 3
    assert validate_params(r).train.checkpoint_every == 3
    r["train"]["checkpoint_every"] = 3
    with pytest.raises(SentlabError, match=r"`train.checkpoint_every` belongs to the `runtime` section"):
        validate_params(r)


def test_num_threads_is_a_train_key_and_the_old_runtime_line_says_where_it_went():
    """A CPU training's bits depend on its thread count (tests/test_stage_params.py), so the train stages declare
    ``train.num_threads``; a params.yaml from before the move names the new place."""
    r = raw()
    r["train"]["num_threads"] = 3
    assert validate_params(r).train.num_threads == 3
    r = raw()
    r["runtime"]["num_threads"] = 3
    with pytest.raises(SentlabError, match=r"`runtime.num_threads` moved to `train.num_threads`"):
        validate_params(r)


def test_unknown_key_names_key_and_allowed_keys():
    r = raw()
    r["train"]["learning_rate"] = 1e-3
    with pytest.raises(SentlabError) as e:
        validate_params(r)
    msg = str(e.value)
    assert "`train.learning_rate`: unknown key" in msg and "lr" in msg and "batch_size" in msg


def test_bad_value_names_key_and_allowed_values():
    r = raw()
    r["annotate"]["backend"] = "stanza"
    with pytest.raises(SentlabError) as e:
        validate_params(r)
    assert "`annotate.backend`" in str(e.value) and "'nltk'" in str(e.value) and "'spacy'" in str(e.value)
    r = raw()
    r["train"]["lr"] = -1
    with pytest.raises(SentlabError, match=r"`train.lr`: Input should be greater than 0 \(got -1\)"):
        validate_params(r)


def test_unknown_method_is_rejected():
    r = raw()
    r["train"]["methods"] = ["simcse_typo"]
    with pytest.raises(SentlabError, match="simcse_typo"):
        validate_params(r)


def test_unknown_profile_and_a_profile_file_naming_its_profile(tmp_path):
    with pytest.raises(SentlabError, match=r"no .*profiles/huge.yaml.*quick, paper, paper-lite, smoke"):
        profile_values("huge", PROFILES_DIR)
    copy_params(tmp_path)
    (tmp_path / "profiles/smoke.yaml").write_text("profile: paper\n")
    with pytest.raises(SentlabError, match="`profile` is set by `sentlab profile NAME`"):
        profile_values("smoke", tmp_path / "profiles")


def test_a_profile_cannot_add_a_stage(tmp_path):
    """A method line is defined once, in the base profile: a profile sets values (and picks lines with
    train.methods)."""
    copy_params(tmp_path)
    (tmp_path / "profiles/smoke.yaml").write_text("methods: {simcse: {}, ct_new: {}}\n")
    with pytest.raises(SentlabError, match=r"`methods` adds \['ct_new'\]"):
        profile_values("smoke", tmp_path / "profiles")


def test_a_method_with_init_from_belongs_in_methods_from():
    r = raw()
    r["methods"]["paser_sup"] = r["methods_from"].pop("paser_sup")
    r["methods"]["paser_sup"].pop("from")
    with pytest.raises(SentlabError, match="move its line to `methods_from` as `paser_sup: {from: paser"):
        validate_params(r)


def test_method_lines_list_only_what_differs_from_the_defaults():
    """params.yaml's method lines are differences (nanoGPT-style) from the method's Params defaults."""
    from sentlab.methods import get_method

    r = raw()
    for section in ("methods", "methods_from"):
        for mid, block in r[section].items():
            defaults = get_method(mid).Params().model_dump()
            same = {k: v for k, v in block.items() if k != "from" and defaults.get(k) == v}
            assert not same, (mid, same)


def test_set_profile_writes_params_and_the_stage_list(tmp_path):
    from sentlab.stages.profiles import set_profile
    from sentlab.config.models import ModelSpec, load_models

    p = copy_params(tmp_path)
    before = p.read_text()
    assert set_profile(p, "smoke") is True
    assert load_params(p).profile == "smoke" and load_params(p).prepare.size == 400
    models = load_models(tmp_path / "models.yaml")
    assert list(models) == ["simcse", "moco_srl", "ptbert", "simcse-s43"]   # in the order of `methods`, then seeds
    assert models["simcse-s43"] == ModelSpec(name="simcse-s43", method="simcse", seed=43, line="methods.simcse",
                                             own="methods.simcse", variant=None, init="data/sources/model.json",
                                             teachers=())
    # the same profile again keeps params.yaml, hand edits included
    p.write_text(p.read_text().replace("  lr: 3.0e-5\n", "  lr: 1.0e-5\n", 1))
    edited = p.read_text()
    assert "lr: 1.0e-5" in edited and set_profile(p, "smoke") is False and p.read_text() == edited
    # another profile would drop the edit: refused, naming it, unless forced
    with pytest.raises(SentlabError, match=r"train\.lr.*--force"):
        set_profile(p, "quick")
    assert set_profile(p, "quick", force=True) is True and p.read_text() == before   # back: byte for byte


def test_a_profile_drops_the_comments_of_the_values_it_changes():
    from sentlab.stages.profiles import params_text

    paper = params_text("paper", PROFILES_DIR)
    assert "quick: a CPU-sized slice of the epoch" not in paper and "max_steps: null" in paper
    assert "# DataLoader workers running each method's prepare()" in paper   # a value it keeps keeps its comment
    assert yaml.safe_load(paper) == {**profile_values("paper", PROFILES_DIR)}


def test_the_stage_list_follows_the_profile():
    from sentlab.stages.stage_list import active_models, stage_list_for

    quick = stage_list_for(load_params(REPO / "params.yaml"))
    assert list(quick["models"]) == ["simcse", "ct", "moco", "moco_srl", "ptbert", "paser", "l2p", "prompt_l2p",
                                     "posbow_adv", "paser_sup", "simcse-s43", "simcse-s44", "ptbert-s43", "ptbert-s44"]
    assert quick["models"]["paser_sup"]["init"] == "models/paser" and quick["baselines"][0] == "cls"
    paper = load_params(REPO / "params.yaml", profile="paper")
    models = stage_list_for(paper)["models"]
    # 23 methods (simcse_crop, simcse_deletion, simcse_mlm, consert, sg_opt: issue #40; esimcse, simcse_pp, diffcse,
    # rankcse: issue #41) + paser_sup, 4 more seeds each of the 24 (paser_sup's start from paser's: #54); 61
    # variants: paser_aug_sr dropped (it is the paper paser again), the 4 *_roberta lines added (issue #34); 63:
    # diffcse_paper_text and rankcse_listnet (issue #53 §3.2, §3.3)
    variants = {k: v for k, v in models.items() if v["own"].startswith("ablations.")}
    assert len(models) == 24 + 24 * 4 + 63 and len(variants) == 63
    assert {"esimcse-s46", "simcse_pp-s46"} <= set(models)
    assert {"simcse_crop", "simcse_deletion", "simcse_mlm", "consert", "consert-s46"} <= set(models)
    assert variants["ptbert_m64"]["line"] == "methods.ptbert"
    assert "paser_sup-s43" in active_models(paper) and "ct-s46" in active_models(paper)


def test_the_committed_stage_list_is_the_committed_params(tmp_path):
    from sentlab.stages.stage_list import check_stage_list, stage_list_text

    assert (REPO / "models.yaml").read_text() == stage_list_text(load_params(REPO / "params.yaml"))
    r = raw()
    r["seeds"]["per_method"]["simcse"] = 2   # edited by hand: the list has two simcse seeds too many
    with pytest.raises(SentlabError, match=r"lists other models than params.yaml makes \(simcse-s44\).*sentlab stages"):
        check_stage_list(validate_params(r), REPO / "models.yaml")
    with pytest.raises(SentlabError, match="is missing"):
        check_stage_list(validate_params(r), tmp_path / "models.yaml")


def test_cli_reports_invalid_params_with_exit_2(tmp_path, capsys):
    from sentlab.cli import main

    p = tmp_path / "params.yaml"
    r = raw()
    r["evaluate"]["precision"] = "fp8"
    p.write_text(yaml.safe_dump(r))
    assert main(["params", "--params", str(p)]) == 2
    err = capsys.readouterr().err
    assert "evaluate.precision" in err and "Traceback" not in err


def test_a_key_given_twice_is_refused_naming_it_and_both_lines(tmp_path, capsys):
    from sentlab.cli import main

    p = tmp_path / "params.yaml"
    text = yaml.safe_dump(raw(), sort_keys=False)
    p.write_text(text.replace("train:\n", "train:\n  lr: 0.5\n", 1))   # train.lr twice; the last would win
    assert main(["params", "--params", str(p)]) == 2
    err = capsys.readouterr().err
    line = text.splitlines().index("train:") + 2
    assert "sets `lr` twice" in err and f"lines {line} and " in err and "Traceback" not in err


def test_ablation_variant_names_must_be_dvc_safe():
    r = raw()
    r["ablations"]["variants"]["l2p_phi_0.5"] = {"method": "l2p", "set": {"phi": 0.5}}
    with pytest.raises(SentlabError, match=r"l2p_phi_0.5.*0p01"):
        validate_params(r)


def test_every_ablation_variant_has_a_valid_method_and_overrides():
    from sentlab.train.run import method_params

    p = load_params(REPO / "params.yaml", profile="paper")
    for name, variant in p.ablations.variants.items():
        method_params(p, variant.method, p.ablations.overrides(name))


def test_a_variants_shape_is_checked_once_by_the_schema():
    """config.Ablations types the variants: a bad shape is refused by sentlab.config.validate, before any method
    is looked at, naming the key and the allowed keys."""
    r = raw()
    r["ablations"]["variants"]["bad"] = {"method": "simcse", "sett": {}}
    with pytest.raises(SentlabError, match=r"`ablations.variants.bad.sett`: unknown key; allowed keys here: method, "
                                           r"set"):
        validate(r)
    r["ablations"]["variants"]["bad"] = {"set": {}}
    with pytest.raises(SentlabError, match=r"`ablations.variants.bad.method`: Field required"):
        validate(r)
    p = validate(raw())
    with pytest.raises(SentlabError, match="Ablation `nosuch` is not in params.yaml `ablations.variants`; known: "):
        p.ablations.variant("nosuch")


def test_a_method_line_sets_its_own_backbone(monkeypatch, tmp_path):
    """Issue #34: the POS/BOW paper is RoBERTa-base: the paper profile trains posbow_adv, its SimCSE reference and
    L2P-CSR Table 1's RoBERTa rows on roberta-base (L2P-CSR there at lr 1e-5, layer 0 masked: layers 1), the rest on
    model.backbone; the train stage loads the method's own backbone."""
    from sentlab.train.run import backbone_of, method_params, train_method

    paper, quick = load_params(REPO / "params.yaml", profile="paper"), load_params(REPO / "params.yaml")
    assert backbone_of(paper, method_params(paper, "posbow_adv")) == "roberta-base"
    assert backbone_of(paper, method_params(paper, "simcse")) == "bert-base-uncased"
    assert backbone_of(quick, method_params(quick, "posbow_adv")) == quick.model.backbone
    want = {"simcse_roberta": {}, "prompt_roberta": {}, "l2p_roberta": {"lr": 1e-5, "layers": 1},
            "prompt_l2p_roberta": {"lr": 1e-5, "layers": 1}, "posbow_adv_noadv": {}}
    for variant, settings in want.items():
        mp = method_params(paper, paper.ablations.variants[variant].method, paper.ablations.overrides(variant))
        assert backbone_of(paper, mp) == "roberta-base", variant
        assert {k: getattr(mp, k) for k in settings} == settings, variant

    class Loaded(Exception):
        pass

    def load_model(name, device=None):
        raise Loaded(name)

    monkeypatch.setattr("sentlab.assets.resolve.load_model", load_model)
    # the paper profile says runtime.device: cuda; here it runs on the CPU, stated (else it stops:
    # sentlab.runtime.device)
    on_cpu = paper.model_copy(update={"train": paper.train.model_copy(update={"device": "cpu"})})
    with pytest.raises(Loaded, match="^roberta-base$"):
        train_method(on_cpu, "posbow_adv", root=tmp_path, dev_eval=lambda enc: {}, tracking=False, progress=False)
    with pytest.raises(Loaded, match="^bert-base-uncased$"):
        train_method(on_cpu, "simcse", root=tmp_path, dev_eval=lambda enc: {}, tracking=False, progress=False)


def test_metrics_record_the_models_own_backbone():
    from sentlab.evaluate.sts.runner import metrics_backbone

    paper = load_params(REPO / "params.yaml", profile="paper")
    assert metrics_backbone(paper, "trained", {"method": {"id": "posbow_adv", "backbone": "roberta-base"}}) == \
        "roberta-base"
    assert metrics_backbone(paper, "trained", {"method": {"id": "simcse", "backbone": None}}) == "bert-base-uncased"
    assert metrics_backbone(paper, "baseline", {"method": {"backbone": "roberta-base"}}) == "bert-base-uncased"


def test_config_is_the_schema_and_the_methods_check_their_own_blocks():
    """#57: ``sentlab.config`` imports no method. It checks the sections; a method's line is checked against the
    method's own Params by ``sentlab.methods.blocks`` (the profiles, ``sentlab profile`` and the command line go
    through it, a training through ``method_params``)."""
    import subprocess
    import sys

    code = ("import sys, sentlab.config, sentlab.config.stage_params, sentlab.config.profile_files; "
            "print(sorted(m for m in sys.modules if m.startswith('sentlab.methods')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    r = raw()
    r["methods"]["simcse"] = {"temprature": 0.05}
    assert validate(r).methods["simcse"] == {"temprature": 0.05}         # the schema: methods.<id> is the method's
    with pytest.raises(SentlabError, match=r"`methods\.simcse\.temprature`: unknown key; allowed keys here: .*tempera"):
        validate_params(r)
