"""Every evaluate stage writes MTEB's result JSON of its STS tasks (issue #55): reports/mteb/sentlab__<model>/, a
declared output of evaluate@<model> and evaluate_baseline@<name> in dvc.yaml, the files `sentlab evaluate --format
mteb` writes for a model named sentlab/<model>; a partial table or an untrained model: a README saying why."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy.stats import spearmanr

from _support.sts_tables import sts_pairs_table

from sentlab.evaluate.sts import mteb_results as R

REPO = Path(__file__).resolve().parents[1]
MTEB_PAIRS = {"STS12": 3108, "STS13": 1500, "STS14": 3750, "STS15": 3000, "STS16": 1186, "STSBenchmark": 1379}


def _table(pairs, seed=0):
    return sts_pairs_table(pairs, seed)


def test_the_stage_writes_what_format_mteb_writes_for_sentlab_model(tmp_path):
    table, lookup = _table(MTEB_PAIRS)
    paths = R.write_stage("simcse", table, lookup, 3.5, out=tmp_path / "reports" / "mteb")
    d = tmp_path / "reports" / "mteb" / "sentlab__simcse" / "no_revision_available"
    assert sorted(p.name for p in paths) == sorted(["STS12.json", "STS13.json", "STS14.json", "STS15.json",
                                                    "STS16.json", "STSBenchmark.json", "model_meta.json"])
    assert all(p.parent == d for p in paths)
    cli = R.write(tmp_path / "cli", "sentlab/simcse", R.results(table, lookup, 3.5))   # --format mteb's functions
    for p in cli:
        mine, theirs = json.loads((d / p.name).read_text()), json.loads(p.read_text())
        mine.pop("date", None), theirs.pop("date", None)
        assert mine == theirs
    df = table[table.task == "STS12"]
    a = np.stack([lookup[x] for x in df.sentence1])
    b = np.stack([lookup[x] for x in df.sentence2])
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    got = json.loads((d / "STS12.json").read_text())["scores"]["test"][0]
    assert got["main_score"] == pytest.approx(spearmanr(cos, df.score).statistic, abs=1e-6)
    assert json.loads((d / "model_meta.json").read_text())["name"] == "sentlab/simcse"


def test_a_partial_table_and_an_untrained_model_leave_a_readme_saying_why(tmp_path):
    from sentlab.evaluate.sts.not_run import eval_not_run

    table, lookup = _table({**MTEB_PAIRS, "STS13": 500})
    (path,) = R.write_stage("m", table, lookup, out=tmp_path / "mteb")
    assert path == tmp_path / "mteb" / "sentlab__m" / "README.md"
    assert path.read_text() == ("# sentlab/m: no MTEB results\n\nSTS13 has 500 test pairs here, MTEB's STS13 has 1500: "
                                "the STS table is partial or subsampled (evaluate.max_pairs), so its score is not "
                                "MTEB's task.\n")
    full, lookup = _table(MTEB_PAIRS)
    (path,) = R.write_stage("s", full, {}, out=tmp_path / "mteb", max_pairs=100)   # the smoke profile's sample
    assert path.read_text() == ("# sentlab/s: no MTEB results\n\nevaluate.max_pairs is 100: each task was evaluated "
                                "on a sample of its pairs, so its score is not MTEB's task.\n")
    eval_not_run("ct", "not run in this profile", "b", "quick", metrics_dir=tmp_path / "metrics",
                 figures_dir=tmp_path / "figures", cosines_dir=tmp_path / "cosines", mteb_dir=tmp_path / "mteb")
    assert (tmp_path / "mteb" / "sentlab__ct" / "README.md").read_text() == (
        "# sentlab/ct: no MTEB results\n\nthe model was not trained (not run in this profile).\n")
    # the placeholder figure is the package's static PNG (found from evaluate/sts/, two folders below the package)
    assert (tmp_path / "figures" / "ct_density.png").read_bytes() == (
        REPO / "src" / "sentlab" / "static" / "not_run.png").read_bytes()


def test_dvc_yaml_declares_the_folder_as_an_output_of_every_evaluate_stage():
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    assert "reports/mteb/sentlab__${key}" in stages["evaluate"]["do"]["outs"]
    assert "reports/mteb/sentlab__base-${item}" in stages["evaluate_baseline"]["do"]["outs"]
