"""Failures stay local (issue #54 §5): a failed stage records itself (plain `dvc repro --keep-going`) or is recorded
by `sentlab run`; the report and the export are built from what finished, each missing row naming the failed stage
and its log; `sentlab status` lists the failed stages."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sentlab.config.models import ModelSpec
from sentlab.provenance import failures
from sentlab.errors import SentlabError
from sentlab.stages.entry import run_stage
from sentlab.report.build import build_report

sys.path.insert(0, str(Path(__file__).parent))
from _support.report_tree import BACKBONE, _metrics  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def test_a_stage_records_its_failure_and_its_next_run_clears_it(tmp_path, monkeypatch):
    monkeypatch.setenv("DVC_ROOT", str(tmp_path))
    monkeypatch.setenv("DVC_STAGE", "train@ct")

    def boom():
        raise SentlabError("GloVe's vectors are missing: fetch them")

    assert run_stage(boom) == 2
    rec = failures.failed_stages(tmp_path)["train@ct"]
    assert rec["status"] == "failed" and "GloVe's vectors are missing" in Path(rec["log"]).read_text()

    def crash():
        raise ValueError("a bug")

    monkeypatch.setenv("DVC_STAGE", "evaluate@simcse")
    with pytest.raises(ValueError):
        run_stage(crash)
    assert "Traceback" in Path(failures.failed_stages(tmp_path)["evaluate@simcse"]["log"]).read_text()
    monkeypatch.setenv("DVC_STAGE", "train@ct")
    assert run_stage(lambda: 0) == 0
    assert set(failures.failed_stages(tmp_path)) == {"evaluate@simcse"}


def _workspace(root: Path, failed: dict[str, str]) -> Path:
    (root / "reports/metrics").mkdir(parents=True)
    (root / "models").mkdir()
    for name, base in (("simcse", 70.0), ("base-cls", 40.0)):
        (root / "reports/metrics" / f"{name}.json").write_text(json.dumps(_metrics(name, base)))
    line = lambda m, init="data/sources/model.json": ModelSpec(  # noqa: E731
        name=m, method=m, seed=42, line=f"methods.{m}", own=f"methods.{m}", init=init).entry()
    (root / "models.yaml").write_text(json.dumps({
        "models": {"simcse": line("simcse"), "ct": line("ct"), "paser": line("paser"),
                   "paser_sup": line("paser_sup", "models/paser")},
        "baselines": ["cls", "glove"]}))
    for stage, why in failed.items():
        failures.record_failure(stage, 2, why, root)
    return root


def test_the_report_is_built_from_what_finished_and_names_each_failed_stage(tmp_path):
    root = _workspace(tmp_path, {"train@ct": "sentlab: error: CUDA out of memory",
                                 "train@paser": "sentlab: error: NLTK resource 'wordnet' is not installed",
                                 "evaluate_baseline@glove": "sentlab: error: GloVe's vectors are missing"})
    models = {"simcse": True, "ct": True, "paser": True, "paser_sup": True}
    build_report(root, BACKBONE, "paper", models)
    index = (root / "reports/index.md").read_text()
    log = root / ".dvc/tmp/sentlab/failed"
    assert "Built from what finished: 4 models have no results" in index
    assert f"- `ct`: failed: train@ct, log {(log / 'train@ct.log').resolve()}" in index
    assert f"- `paser_sup`: failed: train@paser, log {(log / 'train@paser.log').resolve()} (it starts from " \
           f"models/paser)" in index
    assert "- `base-glove`: failed: evaluate_baseline@glove" in index
    table3 = (root / "reports/tables/ptbert_table3.md").read_text()
    assert "failed: train@ct" in table3 and "train@ct.log" in table3
    assert "failed" not in next(line for line in table3.splitlines() if "SimCSE" in line and "70" in line)


def test_the_parallel_runners_failed_and_skipped_stages_are_read_too(tmp_path):
    from sentlab.parallel.task import write_state

    state = tmp_path / ".dvc/tmp/sentlab"
    write_state(state, "train@ct", status="failed", log=str(state / "logs/train@ct.log"), reason="exit 1")
    write_state(state, "evaluate@ct", status="skipped")
    write_state(state, "train@simcse", status="restored")
    got = failures.failed_stages(tmp_path)
    assert set(got) == {"train@ct", "evaluate@ct"}
    assert failures.missing_reason("ct", got) == f"failed: train@ct, log {state / 'logs/train@ct.log'}"


def test_a_model_whose_start_failed_names_that_stage(tmp_path):
    """paser_sup starts from models/paser (its ModelSpec's init): paser's failed training is why it has none."""
    from sentlab.config.models import ModelSpec
    from sentlab.parallel.task import write_state

    state = tmp_path / ".dvc/tmp/sentlab"
    log = state / "logs/train@paser.log"
    write_state(state, "train@paser", status="failed", log=str(log), reason="exit 1")
    got = failures.failed_stages(tmp_path)
    models = {"paser_sup": ModelSpec(name="paser_sup", method="paser_sup", seed=42, line="methods_from.paser_sup",
                                     own="methods_from.paser_sup", init="models/paser")}
    assert failures.missing_reason("paser_sup", got, models) == \
        f"failed: train@paser, log {log} (it starts from models/paser)"
    assert failures.missing_reason("simcse", got, models) is None


def test_status_lists_a_stage_that_failed_under_plain_dvc_repro(tmp_path, monkeypatch):
    from sentlab.parallel import status

    failures.record_failure("train@ct", 2, "sentlab: error: CUDA out of memory", tmp_path)
    monkeypatch.setattr(status, "stage_names", lambda root: ["train@simcse", "train@ct"])
    monkeypatch.setattr(status, "stage_edges", lambda root: {})
    monkeypatch.setattr(status, "changed_stages", lambda root: {"train@ct"})
    monkeypatch.setattr(status, "descendants", lambda edges, changed: set(changed))
    rows, _ = status.stage_status(tmp_path)
    ct = next(r for r in rows if r["stage"] == "train@ct")
    assert ct["status"] == "failed" and ct["detail"] == "sentlab: error: CUDA out of memory"
    assert ct["log"].endswith("train@ct.log")
    assert next(r for r in rows if r["stage"] == "train@simcse")["status"] == "up to date"


def test_the_runner_builds_report_and_export_outside_dvc_when_a_chain_failed(tmp_path):
    from sentlab.parallel.ray_run import partial_outputs

    (tmp_path / "dvc.yaml").write_text(
        "stages:\n  report:\n    cmd: echo built > report.txt\n  export:\n    cmd: echo $DVC_STAGE- > export.txt\n")
    (tmp_path / "logs").mkdir()
    rc = partial_outputs(tmp_path, ["report", "export"], tmp_path / "logs", {"PATH": "/usr/bin:/bin",
                                                                             "DVC_STAGE": "x"})
    assert rc == {"report": 0, "export": 0}
    assert (tmp_path / "report.txt").read_text() == "built\n" and (tmp_path / "export.txt").read_text() == "-\n"


def test_the_export_leaves_out_what_failed_naming_the_stage(tmp_path, monkeypatch):
    import runpy

    from conftest import stage_workspace

    from sentlab.stages.entry import report_errors

    work = stage_workspace(tmp_path / "work")
    monkeypatch.chdir(work)
    (work / "models" / "simcse").mkdir(parents=True)
    (work / "models" / "simcse" / "sentlab.json").write_text(json.dumps({"method": "simcse", "status": "trained"}))
    (work / "reports" / "metrics").mkdir(parents=True)
    failures.record_failure("evaluate@simcse", 2, "sentlab: error: out of memory", work)
    failures.record_failure("train@ct", 2, "sentlab: error: a bug", work)
    main = runpy.run_path(str(REPO / "pipeline" / "export.py"), run_name="export")["main"]
    assert report_errors(main) == 0
    index = (work / "exports" / "index.md").read_text()
    assert "- simcse: failed: evaluate@simcse, log" in index and "- ct: failed: train@ct, log" in index


def test_the_export_after_a_failed_first_stage_has_no_models_folder_and_no_traceback(tmp_path, monkeypatch):
    """`make repro` in a fresh clone whose `sources` stage failed: the export built from what finished found no
    models/ at all and raised FileNotFoundError."""
    import runpy

    from conftest import stage_workspace

    from sentlab.stages.entry import report_errors

    work = stage_workspace(tmp_path / "work")
    monkeypatch.chdir(work)
    assert not (work / "models").exists()
    failures.record_failure("sources", 2, "sentlab: error: a download failed", work)
    main = runpy.run_path(str(REPO / "pipeline" / "export.py"), run_name="export")["main"]
    assert report_errors(main) == 0
    assert (work / "exports" / "index.md").is_file()


def test_the_runner_shows_the_paragraph_of_a_shared_stage_that_stopped_the_run(tmp_path, monkeypatch, capsys):
    """`make repro PROFILE=paper-lite JOBS=8` where torch sees no GPU: `sources` stops the shared stages. Before, the
    runner said only "the shared stages failed (exit 255); log ..." and the paragraph stayed in that log."""
    from sentlab.parallel import ray_run

    said = "sentlab: error: params.yaml `runtime.device: cuda` (the profile is meant for GPUs) but torch sees no GPU"

    def fake_dvc(args, root, log, env, **kw):
        assert args == ["repro", "sources", "prepare", "annotate"]
        failures.record_failure("sources", 2, said, root=root)
        return 255
    monkeypatch.setattr(ray_run, "stage_names", lambda root: ["sources", "prepare", "annotate", "train@simcse"])
    monkeypatch.setattr(ray_run, "run_dvc", fake_dvc)
    rc = ray_run._run(None, tmp_path, 2, None, 0, False, False, None, tmp_path / "state", "run-id")
    out = capsys.readouterr().err.strip().splitlines()   # the runner's log
    assert rc == 255 and "the shared stages failed (exit 255)" in out[-2] and out[-1] == said
