"""End to end: the smoke profile's `dvc repro` in a temporary copy of the repository."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

REPO = Path(__file__).resolve().parents[1]


def _run(*args, **kw):
    """subprocess.run with a timeout: a hung stage fails this test with the command named, not at the suite's limit."""
    kw.setdefault("timeout", 1800)
    return subprocess.run(*args, **kw)


TASKS = ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness", "Avg"]


def _copy_repo(dest: Path) -> None:
    """The files of a fresh clone (tracked + untracked not ignored), no dvc.lock (a first run), a git repo."""
    from sentlab.preflight.scratch import make_scratch

    make_scratch(REPO, dest)


def _env(mirror: Path, tmp: Path) -> dict:
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env.update(PATH=bindir + os.pathsep + env.get("PATH", ""), SENTLAB_DATA_MIRROR=str(mirror), HF_HUB_OFFLINE="1",
               MLFLOW_TRACKING_URI=f"sqlite:///{tmp / 'mlflow.db'}", SENTLAB_LOG="WARNING")
    return env


def edited_params(text: str, edit) -> str:
    """params.yaml's ``text`` with ``edit`` applied, read and written as DVC reads it (YAML 1.2, ruamel): PyYAML (YAML
    1.1) would rewrite ``compile: off`` as ``false``, a change of ``train.compile`` to DVC."""
    rt = YAML()
    raw = rt.load(text)
    edit(raw)
    buf = io.StringIO()
    rt.dump(raw, buf)
    return buf.getvalue()


@pytest.mark.slow
def test_smoke_pipeline_end_to_end(mirror, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _copy_repo(repo)
    env = _env(mirror, tmp_path)
    dvc = [sys.executable, "-m", "dvc"]
    _run([sys.executable, "-m", "sentlab.cli", "profile", "smoke"], cwd=repo, env=env, check=True)
    # the smoke profile's own stages only: its 3 methods, simcse's second seed, the 3 baselines (no "not run" stages),
    # the suite stages (transfer: base-mean, simcse; GLUE: base-cls) and `sources`, which hashes the files outside
    # the repository
    stages = _run(dvc + ["stage", "list", "--name-only"], cwd=repo, env=env, capture_output=True, text=True,
                            check=True).stdout.split()
    assert len(stages) == 19 and "sources" in stages, stages
    assert {"transfer@base-mean", "transfer@simcse", "glue@base-cls"} <= set(stages), stages
    assert "train@simcse-s43" in stages and "train@ct" not in stages, stages
    run = _run(dvc + ["repro"], cwd=repo, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]

    # Baseline metrics: each of the seven tasks is 100 x Spearman of its scored pairs' cosines (reports/cosines: the
    # smoke profile's evaluate.max_pairs sample of the task's test pairs) with their gold scores, those of data/sts
    # (the "all" setting: one Spearman over the task's pairs), and Avg their mean
    import pandas as pd
    from scipy.stats import spearmanr

    sts = pd.read_parquet(repo / "data/sts/sts.parquet")
    for base in ("cls", "mean"):
        m = json.loads((repo / f"reports/metrics/base-{base}.json").read_text())
        cosines = pd.read_parquet(repo / f"reports/cosines/base-{base}.parquet")
        assert m["status"] == "evaluated"
        for k in TASKS[:-1]:
            pairs = cosines[cosines.task == k]
            gold = sts[(sts.task == k) & (sts.split == "test")].score
            assert len(pairs) == min(m["subsampled_pairs_per_task"], len(gold)) > 0, (base, k)
            assert set(pairs.gold) <= set(gold), (base, k)                      # scores of that task's test pairs
            assert m[k] == pytest.approx(100 * spearmanr(pairs.cos, pairs.gold).statistic, abs=1e-3), (base, k)
        assert m["Avg"] == pytest.approx(sum(m[k] for k in TASKS[:-1]) / 7, abs=1e-3)
    assert m["STS12"] != json.loads((repo / "reports/metrics/base-cls.json").read_text())["STS12"]   # two poolings
    table = (repo / "reports/tables/ptbert_table3.md").read_text()
    assert "base-mean" in table and "PT-BERTbase" in table and "/ 77.74" in table
    assert (repo / "data/corpus/train.parquet").is_file()

    # SentEval transfer (#39): the sampled tasks of the smoke profile, L2P-CSR Table 2's rows filled, no Δ
    tr = json.loads((repo / "reports/metrics/transfer/simcse.json").read_text())
    assert tr["max_examples"] == 80 and set(tr["transfer"]) == {"CR", "TREC", "MRPC"}
    assert tr["TransferAvg"] == pytest.approx((tr["CR"] + tr["TREC"] + tr["MRPC"]) / 3, abs=0.01)
    t2 = (repo / "reports/tables/l2p_table2.md").read_text()
    assert f"{tr['CR']:.2f} / 85.30 |" in t2 and "a seeded sample of 80 examples per split" in t2
    # GLUE (#39): the smoke slice of the backbone's fine-tuning fills L2P-CSR Table 4's BERT-base row, labelled
    g = json.loads((repo / "reports/metrics/glue/base-cls.json").read_text())
    assert set(g["glue"]) == {"SST-2", "STS-B"} and g["glue"]["SST-2"]["steps"] == 4 and g["slice"]
    assert g["glue"]["STS-B"]["dev_examples"] == 64 and json.loads((repo / "data/sources/glue.json").read_text())
    t4 = (repo / "reports/tables/l2p_table4.md").read_text()
    assert f"{g['SST-2']:.2f} / " in t4 and "CPU slice" in t4

    # MLflow: the test results are on the training run one compares, beside its dev curve
    import mlflow

    from sentlab.tracking import EXPERIMENT

    client = mlflow.MlflowClient(tracking_uri=env["MLFLOW_TRACKING_URI"])
    runs = client.search_runs([client.get_experiment_by_name(EXPERIMENT).experiment_id],
                              "tags.stage = 'train' and tags.`sentlab.model` = 'simcse'")
    simcse = json.loads((repo / "reports/metrics/simcse.json").read_text())
    assert len(runs) == 1 and runs[0].data.metrics["test.Avg"] == pytest.approx(simcse["Avg"], abs=1e-6)
    assert "stsb_dev" in runs[0].data.metrics

    # Seeds: smoke trains simcse with a second seed; both runs nest under the method's run, which carries
    # the seed aggregate; the table shows mean ± std (2) and says which test.
    seed_run = client.search_runs([client.get_experiment_by_name(EXPERIMENT).experiment_id],
                                  "tags.stage = 'train' and tags.`sentlab.model` = 'simcse-s43'")
    s43 = json.loads((repo / "reports/metrics/simcse-s43.json").read_text())
    assert s43["status"] == "evaluated" and s43["Avg"] != simcse["Avg"]
    assert seed_run[0].data.tags["mlflow.parentRunId"] == runs[0].data.tags["mlflow.parentRunId"]
    group = client.get_run(runs[0].data.tags["mlflow.parentRunId"])
    assert group.data.tags["sentlab.stage"] == "method" and group.data.tags["sentlab.model"] == "simcse"
    assert group.data.metrics["seeds.Avg.mean"] == pytest.approx((simcse["Avg"] + s43["Avg"]) / 2, abs=1e-6)
    assert group.data.metrics["seeds.Avg.n"] == 2
    assert "(2)" in table and "Welch" in table and "Holm-corrected" in table     # issue #35: marks and families
    assert not (repo / "models/ptbert-s43").exists() and not (repo / "models/ct").exists()
    assert "ct: not run in this profile" in table   # the report's row for a method the profile has no stage for
    assert (repo / "reports/tables/protocol_sensitivity.md").is_file()

    # The trained model's evaluation stored its embeddings (sentlab.evaluate.sts.cache): the stage run again (as DVC
    # does after an evaluate param or code change) encodes nothing and writes the same metrics.
    cache = repo / ".sentlab_cache/embeddings"
    entries = {f.name: f.stat().st_ino for f in cache.glob("*.npy")}   # a miss would replace a file (a new inode)
    assert "simcse" in {json.loads(f.read_text())["name"] for f in cache.glob("*.json")}
    rerun = _run([sys.executable, "pipeline/evaluate.py", "simcse"], cwd=repo,
                           env={**env, "SENTLAB_LOG": "INFO"}, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "embedding cache hit: simcse" in rerun.stderr, rerun.stderr[-3000:]
    assert {f.name: f.stat().st_ino for f in cache.glob("*.npy")} == entries
    assert json.loads((repo / "reports/metrics/simcse.json").read_text())["Avg"] == simcse["Avg"]

    # A second repro does nothing but look at the sources again (always_changed), which re-runs nothing.
    again = _run(dvc + ["repro"], cwd=repo, env=env, capture_output=True, text=True)
    assert again.returncode == 0
    assert [ln for ln in again.stdout.splitlines() if ln.startswith("Running stage")] == \
        ["Running stage 'sources':"], again.stdout

    # An edit of `runtime` (how a training runs) re-runs nothing; an edit of a method's line is seen by `dvc status`
    # at once, before anything runs, and names exactly that method's stages (and the report and export that read
    # every model).
    params_file = repo / "params.yaml"
    original = params_file.read_text()
    assert "checkpoint_every: null" in original
    params_file.write_text(original.replace("checkpoint_every: null", "checkpoint_every: 1", 1))
    edited = _run(dvc + ["repro"], cwd=repo, env=env, capture_output=True, text=True)
    assert edited.returncode == 0, edited.stdout[-3000:] + edited.stderr[-3000:]
    ran = [ln for ln in edited.stdout.splitlines() if ln.startswith("Running stage")]
    assert ran == ["Running stage 'sources':"], edited.stdout[-3000:]
    params_file.write_text(edited_params(original, lambda raw: raw["methods"].__setitem__("simcse",
                                                                                          {"temperature": 0.07})))
    status = _run(dvc + ["status", "--json"], cwd=repo, env=env, capture_output=True, text=True, check=True)
    assert set(json.loads(status.stdout)) - {"sources"} == {"train@simcse", "train@simcse-s43", "evaluate@simcse",
                                                             "evaluate@simcse-s43", "report", "export"}, status.stdout
    params_file.write_text(original)
    shown = _run(dvc + ["metrics", "show"], cwd=repo, env=env, capture_output=True, text=True)
    assert "base-mean.json" in shown.stdout and "STS12" in shown.stdout

    # Adding a seed changes the stage list: the `sources` stage refuses to run on the stale models.yaml (nothing
    # else runs); `sentlab stages` rewrites it, and then `dvc status` (what `dvc repro` runs) names only that seed's
    # stages, the report and the export (they read every model). Not run here: the seed stages already ran above
    # (simcse-s43), and a third seed would add about 80 s to CI.
    params_file.write_text(edited_params(original, lambda raw: raw["seeds"]["per_method"].__setitem__("simcse", 3)))
    stale = _run(dvc + ["repro"], cwd=repo, env=env, capture_output=True, text=True)
    assert stale.returncode != 0 and "sentlab stages" in stale.stdout + stale.stderr, stale.stdout[-3000:]
    assert [ln for ln in stale.stdout.splitlines() if ln.startswith("Running stage")] == \
        ["Running stage 'sources':"], stale.stdout[-3000:]
    _run([sys.executable, "-m", "sentlab.cli", "stages"], cwd=repo, env=env, check=True)
    status = _run(dvc + ["status", "--json"], cwd=repo, env=env, capture_output=True, text=True, check=True)
    assert set(json.loads(status.stdout)) == {"sources", "train@simcse-s44", "evaluate@simcse-s44", "report",
                                              "export"}, status.stdout
