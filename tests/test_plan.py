"""`sentlab plan --profile P` (issue #54 §4): trainings, steps, GPU-hours and disk per paper table and in total,
each GPU-hour figure measured (the H100 run it comes from named) or estimated (and from what)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sentlab import cli
from sentlab.config import load_params
from sentlab.campaign.plan import plan, render

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def paper():
    return plan(load_params(REPO / "params.yaml", profile="paper"))


def _values(profile: str, **train) -> dict:
    from sentlab.config.profile_files import profile_values

    values = profile_values(profile, REPO / "profiles")
    values["train"].update(train)
    return values


@pytest.fixture(scope="module")
def as_measured():
    """The paper profile at the precision its H100 step times were measured with (bf16 autocast): a profile that
    trains otherwise counts every step as estimated (test_editing_a_measured_methods_settings_makes_its_step_...)."""
    from sentlab.config import validate

    return plan(validate(_values("paper", precision="bf16")))


def test_steps_follow_the_paper_corpora_and_batches(paper):
    tr = paper["trainings"]
    assert tr["simcse"].steps == 1_000_000 // 64 == 15_625          # wiki1m, batch 64, one epoch
    assert tr["l2p"].steps == 100_000 // 512 == 195                 # L2P-CSR's 100k sentences, batch 512
    assert tr["paser_sup"].steps == 275_601 // 64 == 4_306          # SimCSE's NLI triples
    assert tr["paser"].steps == 29_482 // 64 * 5 == 2_300           # the distinct STS sentences, 5 epochs
    assert tr["consert"].steps == 89_192 // 96 * 10                 # ConSERT: batch 96, 10 epochs, its code's corpus


def test_measured_and_estimated_seconds(paper, as_measured):
    simcse = as_measured["trainings"]["simcse"]
    evals = 15_625 // 250 + 1                                       # dev every 250 steps, and once at the start
    dev = evals * 4.7 * 1_500 / 31_099                              # STS-B dev at the H100's measured STS rate
    assert simcse.measured_s == pytest.approx(15_625 * 0.04 + dev + 4.7)
    assert simcse.estimated_s == pytest.approx(20.0 + 20.0)         # two stage starts (train, evaluate)
    diffcse = paper["trainings"]["diffcse"]                         # no GPU measurement: SimCSE's step x 2
    assert diffcse.estimated_s > 2 * 15_625 * 0.04 and any("diffcse" in e for e in diffcse.estimated)
    assert paper["total"].trainings == 183 and paper["models"] == 183     # 24 lines x 5 seeds + 63 variants


def test_the_printed_plan_names_its_gpu_run_and_marks_every_figure(capsys):
    assert cli.main(["plan", "--profile", "paper-lite", "--params", str(REPO / "params.yaml")]) == 0
    out = capsys.readouterr().out
    assert "H100 80GB HBM3, 2026-11-26" in out and 'benchmarks/RESULTS.md "On a GPU"' in out
    assert "| table | trainings | training steps | GPU-h measured | GPU-h estimated | GPU-h total | models GB |" in out
    total = next(line for line in out.splitlines() if line.startswith("| **total**"))
    assert "| **24** |" in total
    assert "1 GPU" in out and "4 GPUs" in out and "8 GPUs" in out and "Estimated inputs:" in out
    assert "- transfer: 5 min a model (not timed on a GPU)" in out


def test_paper_lite_costs_a_fraction_of_paper(paper):
    lite = plan(load_params(REPO / "params.yaml", profile="paper-lite"))
    assert lite["total"].trainings == 24
    assert lite["trainings"]["simcse"].gpu_s == pytest.approx(paper["trainings"]["simcse"].gpu_s)
    assert lite["total"].gpu_s < paper["total"].gpu_s / 4
    assert "l2p_table4" in render("paper-lite", lite)


def test_the_readme_projection_is_the_plans(paper):
    from sentlab.campaign.plan import makespan

    text = (REPO / "README.md").read_text()
    assert "16,484" not in text and "2-core CPU hours" not in text     # the CPU-hours table is gone
    lite = plan(load_params(REPO / "params.yaml", profile="paper-lite"))
    for name, p in (("paper-lite", lite), ("paper", paper)):
        row = next(line for line in text.splitlines() if line.startswith(f"| `{name}` (") and "GPU" not in line)
        t = p["total"]
        want = (f"| {t.trainings} | {t.gpu_s / 3600:.1f} ({t.measured_s / 3600:.1f} + {t.estimated_s / 3600:.1f}) | "
                + " | ".join(f"{makespan(p['tasks'], n) / 3600:.1f} h" for n in (1, 4, 8)) + " |")
        assert row.endswith(want), (row, want)


def _changes(cost, method: str) -> set[str]:
    from sentlab.campaign.plan import CHANGED

    return {e.split(CHANGED, 1)[1] for e in cost.estimated if e.startswith(f"{method}{CHANGED}")}


def test_a_step_measured_with_other_settings_counts_as_estimated(as_measured):
    """#65 §5: each step time names its source (the commit the H100 checklist ran at, the values it ran with); since
    then PT-BERT's max length went 32 -> 64, PaSeR ran RD where the profile says SR (no WordNet on the device),
    paser_sup read the SICK stand-in's triples, L2P-CSR's perturbation settings changed: those steps are estimated,
    each change named; SimCSE, CT, MoCo and MoCo-SRL run as measured and stay measured."""
    tr = as_measured["trainings"]
    dev = (15_625 // 250 + 1) * 4.7 * 1_500 / 31_099
    for m in ("simcse", "ct", "moco", "moco_srl"):
        assert _changes(tr[m], m) == set() and tr[m].measured_s > tr[m].steps * 0.04, m
    assert {"max_length 32 -> 64", "key_second_attention 'momentum' -> 'online'"} <= _changes(tr["ptbert"], "ptbert")
    assert "eda 'rd' -> 'sr'" in _changes(tr["paser"], "paser")
    assert "prepare.nli 'sick_standin' -> 'simcse'" in _changes(tr["paser_sup"], "paser_sup")
    assert "token_norm 'vector' -> 'element'" in _changes(tr["l2p"], "l2p")
    assert tr["ptbert"].measured_s == pytest.approx((15_625 // 125 + 1) * 4.7 * 1_500 / 31_099 + 4.7)   # dev + STS
    assert tr["ptbert"].estimated_s == pytest.approx(15_625 * 0.10 + 20.0 + 20.0)   # the training, two starts
    assert tr["simcse"].measured_s == pytest.approx(15_625 * 0.04 + dev + 4.7)


def test_editing_a_measured_methods_settings_makes_its_step_estimated():
    from sentlab.config import validate
    from sentlab.stages.stage_list import models_for
    from sentlab.campaign.plan import training_cost

    def simcse(values):
        params = validate(values)
        return training_cost(params, models_for(params)["simcse"])

    values = _values("paper-lite", precision="bf16")
    assert not [x for x in render("paper-lite", plan(validate(values))).splitlines() if x.startswith("- simcse:")]
    assert _changes(simcse(_values("paper-lite", precision="fp32")), "simcse") == {"precision 'bf16' -> 'fp32'"}
    assert _changes(simcse(_values("paper-lite", precision="auto")), "simcse") == set()   # auto: bf16 on an H100
    values["methods"]["simcse"]["max_length"] = 64
    params = validate(values)
    cost = simcse(values)
    assert _changes(cost, "simcse") == {"max_length 32 -> 64"}
    assert cost.measured_s == pytest.approx((15_625 // 250 + 1) * 4.7 * 1_500 / 31_099)   # the dev evaluations only
    assert [x for x in render("paper-lite", plan(params)).splitlines() if x.startswith("- simcse:")] == [
        "- simcse: step time measured at fd5a861 with other values (measured -> this profile), so estimated: "
        "max_length 32 -> 64"]


def test_the_disk_figure_counts_exports_hub_snapshots_and_worktrees_each_with_its_source():
    """Issue #65 §6: the figure was the models alone (x2 for DVC's cache: ~160 GB for paper); exports/ holds another
    copy of every model, the hub snapshots and each running chain's worktree (its model, its resume checkpoint) come
    on top. Inputs chosen here: 10 GB of trained models, 3 chains at once, bert-base-uncased with DiffCSE (its
    generator: distilbert-base-uncased), wiki1m, the GloVe baseline."""
    from sentlab.config import validate
    from sentlab.campaign.plan import disk

    values = _values("quick", methods=["simcse", "diffcse"])
    values["model"] = {"backbone": "bert-base-uncased"}
    values["prepare"]["corpus"] = "wiki1m"
    values["evaluate"]["baselines"] = ["cls", "glove"]
    rows = disk(validate(values), 10.0, 3)
    bert, distilbert = 109_482_240 * 4 / 1e9, 66_362_880 * 4 / 1e9   # the hub checkpoints' parameters, fp32
    expected = {"models/": 10.0, "DVC cache": 10.0, "exports/": 10.0, "hub snapshots": bert + distilbert,
                "worktrees (3 chains at once)": 3 * (bert + 1.8),     # a bert-base model and a ~1.8 GB checkpoint
                "data: wiki1m": 0.12, "data: glove": 7.6}
    assert [w for w, _, _ in rows] == list(expected)
    assert {w: gb for w, gb, _ in rows} == pytest.approx(expected)
    assert sum(gb for _, gb, _ in rows) == pytest.approx(45.13716736)
    src = {w: s for w, _, s in rows}
    assert src["hub snapshots"].startswith("bert-base-uncased, distilbert-base-uncased:")
    assert "resume checkpoint" in src["worktrees (3 chains at once)"]


def test_the_printed_disk_total_is_the_sum_of_its_lines_and_no_longer_the_models_twice(capsys):
    assert cli.main(["plan", "--profile", "paper", "--params", str(REPO / "params.yaml"), "--gpus", "1,8"]) == 0
    out = capsys.readouterr().out.splitlines()
    start = out.index(next(x for x in out if x.startswith("Disk a run fills: **")))
    rows = [x.split(" | ") for x in out[start + 4:] if x.startswith("| ")]
    gb = {r[0][2:]: float(r[1].replace(",", "")) for r in rows}
    assert list(gb)[:5] == ["models/", "DVC cache", "exports/", "hub snapshots", "worktrees (8 chains at once)"]
    assert gb["models/"] == gb["DVC cache"] == gb["exports/"] == 80.8
    total = float(out[start].split("**")[1].split()[0].replace(",", ""))
    assert total == pytest.approx(sum(gb.values()), abs=0.2) and total > 2 * gb["models/"] + 80


@pytest.mark.parametrize("precision, lower_bound", [("fp32", True), ("auto", False), ("bf16", False)])
def test_glue_is_costed_at_its_precision_and_fp32_says_it_is_a_lower_bound(precision, lower_bound):
    """#65 §5: GLUE fine-tunes in `glue.finetune.precision` (fp32: run_glue's default); the plan's only GPU step is
    SimCSE's bf16 one, so an fp32 GLUE cost says it is a lower bound and names the benchmark that times it."""
    from sentlab.config import validate
    from sentlab.campaign.plan import evaluation_cost

    values = _values("paper")
    values["glue"].setdefault("finetune", {})["precision"] = precision
    (why,) = evaluation_cost("glue", validate(values)).estimated
    assert ("a lower bound" in why) is lower_bound and ("glue.finetune.precision" in why)
    assert ("gpu_checklist.py --parts glue" in why) is lower_bound
