"""One paper table at a time (issue #54 §3): ``sentlab run --table ID`` / ``make repro TABLE=ID`` runs the stages that
fill that table and what they need, builds the report from what exists, and widening the scope later re-runs
nothing already done."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sentlab.config import load_params
from sentlab.errors import SentlabError
from sentlab.parallel.graph import plan
from sentlab.campaign.scope import base_name, table_stages

sys.path.insert(0, str(Path(__file__).parent))
from toy import make_toy, sentlab_run  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _params(profile: str):
    return load_params(str(ROOT / "params.yaml"), profile=profile)


def test_a_tables_stages_are_its_rows_models_baselines_and_suites():
    # PT-BERT Table 3's rows (report/paper_tables/ptbert.py): the four baselines, MoCo and its four augmentations,
    # CT, SimCSE, PT-BERT; in paper-lite each is one model line at one seed.
    assert table_stages(_params("paper-lite"), ["ptbert_table3"]) == [
        "evaluate@simcse", "evaluate@ct", "evaluate@moco", "evaluate@moco_reorder", "evaluate@moco_duplication",
        "evaluate@moco_deletion", "evaluate@moco_srl", "evaluate@ptbert", "evaluate_baseline@cls",
        "evaluate_baseline@mean", "evaluate_baseline@first_last", "evaluate_baseline@whitening"]
    # L2P-CSR Table 4 is GLUE: its suite's stages, not only the STS evaluations
    assert table_stages(_params("paper-lite"), ["l2p_table4"]) == [
        "evaluate@l2p", "evaluate_baseline@cls", "glue@base-cls", "glue@l2p"]
    # the quick profile's seeds are the same rows
    quick = table_stages(_params("quick"), ["ptbert_table3"])
    assert {"evaluate@simcse-s43", "evaluate@ptbert-s44"} <= set(quick) and "evaluate@moco_reorder" not in quick


def test_an_unknown_table_names_the_tables():
    with pytest.raises(SentlabError, match=r"--table nope: no such paper table\. The tables are: ptbert_table1, "):
        table_stages(_params("quick"), ["nope"])


def test_base_name_strips_only_a_seed_suffix():
    assert [base_name(n) for n in ("simcse-s43", "simcse", "moco-srl", "x-s")] == ["simcse", "simcse", "moco-srl",
                                                                                 "x-s"]


def test_the_parallel_plan_keeps_only_the_targets_and_what_they_need():
    names = ["sources", "prepare", "annotate", "train@a", "train@b", "evaluate@a", "evaluate@b", "report"]
    edges = [("sources", "prepare"), ("prepare", "annotate"), ("annotate", "train@a"), ("annotate", "train@b"),
             ("train@a", "evaluate@a"), ("train@b", "evaluate@b"), ("evaluate@a", "report"),
             ("evaluate@b", "report")]
    everything = set(names)
    p = plan(names, edges, everything, targets=["evaluate@a"])
    assert [c.stages for c in p.chains] == [["train@a", "evaluate@a"]] and p.final == []
    assert p.shared == ["sources", "prepare", "annotate"]
    assert [c.stages for c in plan(names, edges, everything).chains] == [["train@a", "evaluate@a"],
                                                                          ["train@b", "evaluate@b"]]
    with pytest.raises(SentlabError, match="no stage evaluate@z"):
        plan(names, edges, everything, targets=["evaluate@z"])


def test_a_targeted_run_then_the_whole_pipeline_reruns_nothing_done(tmp_path):
    repo, env = make_toy(tmp_path, "repo")
    first = sentlab_run(repo, env, "--target", "evaluate@a")
    assert first.returncode == 0, first.stderr[-3000:]
    assert (repo / "reports/metrics/a.json").exists() and not (repo / "reports/metrics/b.json").exists()
    assert (repo / "reports/index.md").exists()            # the report, from what exists
    assert "report built from what exists" in first.stderr
    wide = subprocess.run([sys.executable, "-m", "dvc", "repro"], cwd=repo, env=env, capture_output=True, text=True)
    assert wide.returncode == 0, wide.stderr[-3000:]
    ran = {ln.split("'")[1] for ln in wide.stdout.splitlines() if ln.startswith("Running stage")}
    assert ran == {"sources", "train@b", "evaluate@b", "train@c", "evaluate@c", "evaluate_baseline@mean", "report"}
