"""A parallel run's report at any time (#65 §5): each Ray task keeps what the report reads of a stage as soon as it
succeeds, and `sentlab report --from-run` builds the report from the stages that finished, naming the ones that did
not, into a folder of its own (the workspace's reports/, DVC's, untouched)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from sentlab.parallel import task
from sentlab.parallel.task import write_state

sys.path.insert(0, str(Path(__file__).parent))
from _support.report_tree import BACKBONE, PTBERT, _metrics  # noqa: E402

MODELS = {"simcse": True, "ptbert": True, "ct": True}
CURVE = "step,stsb_dev,alignment,uniformity,loss\n4,60,0.3,-2,1\n"


def _fake_dvc(outputs: dict[str, dict[str, str]]):
    """A ``run_dvc`` whose ``repro --single-item <stage>`` writes the stage's files into the checkout and its
    ``dvc.lock`` entry, as DVC does."""
    def run_dvc(args, wt, log, env, **kw):
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        if args[0] == "repro":
            stage = args[-1]
            for rel, text in outputs[stage].items():
                (Path(wt) / rel).parent.mkdir(parents=True, exist_ok=True)
                (Path(wt) / rel).write_text(text)
            lock_file = Path(wt) / "dvc.lock"
            lock = yaml.safe_load(lock_file.read_text()) if lock_file.is_file() else {"schema": "2.0", "stages": {}}
            outs = sorted({rel.split("/")[0] + "/" + rel.split("/")[1] if rel.startswith("models/") else rel
                           for rel in outputs[stage]})
            lock["stages"][stage] = {"cmd": "python pipeline/x.py", "outs": [{"path": o, "md5": "0"} for o in outs]}
            lock_file.write_text(yaml.safe_dump(lock))
        return 0
    return run_dvc


@pytest.fixture
def run_root(tmp_path, monkeypatch):
    """A workspace whose `sentlab run` finished simcse's and ptbert's chains (through the real task, a fake dvc) and
    was killed while ``evaluate@ct`` ran; the workspace still holds ct's numbers of an earlier run."""
    root = tmp_path / "work"
    state = root / ".dvc/tmp/sentlab"
    (root / "reports/metrics").mkdir(parents=True)
    (root / "reports/metrics/ct.json").write_text(json.dumps(_metrics("ct", 55.0)))       # an earlier run's
    (root / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": {
        "evaluate@ct": {"cmd": "python pipeline/evaluate.py ct", "outs": [{"path": "reports/metrics/ct.json"}]}}}))
    (state / "stages").mkdir(parents=True)
    (state / "run.json").write_text(json.dumps({"run_id": "20261207-040000", "pid": 4242, "host": "node1"}))
    outputs = {}
    for name, base, method in (("simcse", 70.0, {"id": "simcse", "max_length": None}), ("ptbert", 72.0, PTBERT)):
        outputs[f"train@{name}"] = {f"models/{name}/sentlab.json": json.dumps({"method": name, "status": "trained"}),
                                    f"models/{name}/model.safetensors": "weights",
                                    f"reports/curves/{name}.csv": CURVE}
        outputs[f"evaluate@{name}"] = {f"reports/metrics/{name}.json": json.dumps(_metrics(name, base, method=method))}
    monkeypatch.setattr(task, "run_dvc", _fake_dvc(outputs))
    monkeypatch.setattr(task, "make_worktree", lambda root, wt, cache: Path(wt).mkdir(parents=True) or Path(wt))
    for name in ("simcse", "ptbert"):
        spec = {"id": name, "stages": [f"train@{name}", f"evaluate@{name}"], "restore": [], "checkout": [],
                "root": str(root), "state_dir": str(state), "worktree": str(state / "worktrees" / name),
                "run_id": "20261207-040000"}
        assert task.run_chain(spec)["status"] == "done"
    write_state(state, "evaluate@ct", status="running", log=str(state / "logs/evaluate@ct.log"), chain="ct")
    return root


def test_the_report_of_a_killed_run_holds_what_finished_and_names_what_did_not(run_root):
    results = run_root / ".dvc/tmp/sentlab/results"
    kept = json.loads((results / "evaluate@simcse/kept.json").read_text())
    assert kept["files"] == ["reports/metrics/simcse.json"]
    assert json.loads((results / "train@ptbert/kept.json").read_text())["files"] == [
        "models/ptbert/sentlab.json", "reports/curves/ptbert.csv"]           # never the weights
    assert not (results / "train@ptbert/models/ptbert/model.safetensors").exists()
    from sentlab.report.run_report import build_run_report

    rep, index, done = build_run_report(run_root, None, BACKBONE, "paper", MODELS)
    assert index == run_root / ".dvc/tmp/sentlab/report/reports/index.md"
    assert done == {"finished": ["evaluate@ptbert", "evaluate@simcse", "train@ptbert", "train@simcse"],
                    "unfinished": {"evaluate@ct": "running"}}
    text = index.read_text()
    assert "A partial report of `sentlab run` 20261207-040000" in text and "`evaluate@ct` (running)" in text
    assert "Evaluated models (2): `ptbert`, `simcse`." in text
    log = run_root / ".dvc/tmp/sentlab/logs/evaluate@ct.log"
    assert f"- `ct`: not finished: evaluate@ct running, log {log}" in text
    table3 = (index.parent / "tables/ptbert_table3.md").read_text()
    assert "| SimCSE-BERTbase | 70.00 / 68.40 |" in table3 and "| PT-BERTbase | 72.00 / 71.20 |" in table3
    assert "not finished: evaluate@ct running" in table3 and "55.00" not in table3   # not the earlier run's ct
    # the workspace's reports/ is DVC's: nothing written there
    assert sorted(p.relative_to(run_root).as_posix() for p in (run_root / "reports").rglob("*")) == [
        "reports/metrics", "reports/metrics/ct.json"]


def test_from_run_without_a_run_says_so(tmp_path):
    from sentlab.errors import SentlabError
    from sentlab.report.run_report import build_run_report

    with pytest.raises(SentlabError, match=r"No `sentlab run` here .*run.json.*Run `sentlab report`"):
        build_run_report(tmp_path, None, BACKBONE, "paper", MODELS)
    assert not (tmp_path / ".dvc/tmp/sentlab/report").exists()


def test_sentlab_report_from_run_on_the_command_line(run_root, tmp_path, capsys):
    from sentlab.cli import main

    params = str(Path(__file__).resolve().parents[1] / "params.yaml")
    out = tmp_path / "partial"
    assert main(["report", "--from-run", "--root", str(run_root), "--params", params, "--out", str(out)]) == 0
    assert f"index: {out / 'reports/index.md'}" in capsys.readouterr().out
    assert "A partial report of `sentlab run` 20261207-040000" in (out / "reports/index.md").read_text()
    assert main(["report", "--from-run", "--mlflow", "--root", str(run_root), "--params", params]) != 0


def test_a_stage_a_remote_node_finished_is_named_not_here_yet():
    from sentlab.provenance.failures import missing_reason

    assert missing_reason("ct", {"evaluate@ct": {"status": "done", "log": None}}) == (
        "not here yet: evaluate@ct finished on another node (the run's final dvc repro restores it)")
    assert missing_reason("ct", {"evaluate@ct": {"status": "queued", "log": "/l/evaluate@ct.log"}}) == (
        "not finished: evaluate@ct queued, log /l/evaluate@ct.log")
