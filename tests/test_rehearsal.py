"""The dress rehearsal's CI-sized slice (issue #54 §8; the whole run: benchmarks/rehearsal.py): paper-lite's
sources -> prepare -> annotate -> train@simcse -> evaluate@simcse -> report with `dvc repro` in a scratch copy,
every data file downloaded from the synthetic local upstream (no mirror), the backbone a tiny hub-shaped stand-in."""

from __future__ import annotations

import csv
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import synthetic_upstream as su
from upstream import SIMCSE, serve

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rehearsed(tmp_path_factory):
    scratch = tmp_path_factory.mktemp("rehearsal") / "repo"
    with serve() as up:
        info = su.populate(up)
        env = su.prepare_workdir(REPO, scratch, up, hub_ids=["bert-base-uncased"])
        env["PYTHONPATH"] = str(scratch / "src")
        py = sys.executable
        subprocess.run([py, "-m", "sentlab.cli", "profile", su.PROFILE], cwd=scratch, env=env, check=True,
                       capture_output=True)
        run = subprocess.run([py, "-m", "dvc", "repro", "sources", "prepare", "annotate", "train@simcse",
                              "evaluate@simcse"], cwd=scratch, env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        rep = subprocess.run([py, "pipeline/report.py"], cwd=scratch, env=env, capture_output=True, text=True)
        assert rep.returncode == 0, rep.stdout[-2000:] + rep.stderr[-2000:]
        requests = list(up.requests)
        served = dict(up.files)
    return scratch, env, info, requests, served


def test_every_data_file_came_through_the_local_upstream(rehearsed):
    scratch, env, _, requests, served = rehearsed
    assert "SENTLAB_DATA_MIRROR" not in env
    paths = {p for p, _ in requests}
    for name in ("wiki1m_for_simcse.txt", "senteval.tar", "nli_for_simcse.csv"):
        assert f"{SIMCSE}/{name}" in paths
    # the downloaded corpus in the scratch cache is byte for byte the served one
    cached = Path(env["SENTLAB_CACHE"]) / "wiki" / "wiki1m_for_simcse.txt"
    assert cached.read_bytes() == served[f"{SIMCSE}/wiki1m_for_simcse.txt"]


def test_the_report_names_the_synthetic_corpus(rehearsed):
    scratch, _, info, _, served = rehearsed
    sha = hashlib.sha256(served[f"{SIMCSE}/wiki1m_for_simcse.txt"]).hexdigest()
    first = (scratch / "reports" / "index.md").read_text().splitlines()[:4]
    corpus = next(line for line in first if line.startswith("**Training corpus:**"))
    assert "asset `wiki1m`" in corpus and "1,000,000 lines" in corpus and f"sha256 `{sha}`" in corpus
    assert "1,200 sentences sampled" in corpus   # the rehearsal profile's prepare.size (the preflight slice)


def test_the_trained_models_row_is_in_the_report(rehearsed):
    scratch = rehearsed[0]
    metrics = json.loads((scratch / "reports" / "metrics" / "simcse.json").read_text())
    with open(scratch / "reports" / "tables" / "paser_table1.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["model"] == "simcse"]
    assert {r["column"] for r in rows} >= {"STS12", "STSBenchmark", "SICKRelatedness"}
    for r in rows:
        if r["column"] in metrics:
            assert float(r["reproduced"]) == pytest.approx(metrics[r["column"]], abs=0.01)
    sj = json.loads((scratch / "models" / "simcse" / "sentlab.json").read_text())
    assert sj["init"]["encoder"] == "checkpoint"   # the stand-in's weights, loaded from the HF cache



def test_the_stand_ins_are_as_deep_as_the_deepest_l2p_line_the_profile_trains():
    """The paper profile's ablation l2p_layers_6 perturbs 6 encoder layers: a 2-layer stand-in stopped it
    (``methods.l2p.layers = 4 exceeds the encoder's 2 transformer layers``, the paper rehearsal); paper-lite trains
    no such line and keeps the 2-layer stand-ins."""
    from sentlab.config.profile_files import profile_values

    profiles = Path(__file__).resolve().parents[1] / "profiles"
    assert su.deepest_layers(profile_values("paper", profiles)) == 6
    assert su.deepest_layers(profile_values("paper-lite", profiles)) == 2
