"""The STS evaluator returns a result and writes nothing; the writers each write one output where the stage says
(issue #67 §2: the evaluator no longer writes four files and two MLflow runs, nor guesses folders from
``parent.name == "metrics"``)."""

from __future__ import annotations

import json

import mlflow
import pandas as pd
import pytest

from _support.sts_tables import three_score_table as _table
from sentlab.config import Params
from sentlab.nn.encoder import SentenceEncoder
from sentlab.evaluate.sts.runner import STSResult, evaluate_sts
from sentlab.evaluate.sts.writers import (STAGE_WRITERS, StageOutputs, log_mlflow, write_all, write_cosine_files,
                                          write_metrics_json, write_mteb_files)


@pytest.fixture
def result(tiny_bert, tmp_path, monkeypatch, one_thread) -> STSResult:
    monkeypatch.chdir(tmp_path)
    enc = SentenceEncoder(*tiny_bert, pooling="mean", name="m")
    params = Params(evaluate={"diagnostics": False, "batch_size": 8, "workers": 1})
    return evaluate_sts({"m": enc}, _table(), params, model="some/folder", kind="baseline",
                        extra_metrics={"whitening": {"dim": 4}}, extra_params={"whitening": {"dim": 4}})


def _files(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_the_evaluator_returns_the_result_and_writes_nothing(result, tmp_path):
    assert _files(tmp_path) == []
    m = result.metrics
    assert (m["model"], m["kind"], m["status"], m["whitening"]) == ("m", "baseline", "evaluated", {"dim": 4})
    assert "encode_seconds" not in m and "encode_seconds" in result.timings      # timings: MLflow only
    assert set(m["ci95"]) >= {"STS12", "SICKRelatedness", "Avg"}
    assert result.run_params["pooling"] == "mean" and result.run_params["whitening"] == {"dim": 4}
    assert result.run_params["model"] == "some/folder" and result.seed == m["bootstrap_seed"]
    assert isinstance(result.cosines, pd.DataFrame) and len(result.cosines) > 0


def test_each_writer_writes_its_one_output_where_the_stage_says(result, tmp_path, monkeypatch):
    """The paths are the stage's (no folder guessed from the metrics path's parent): a metrics file in a folder
    not named ``metrics`` leaves the cosines and MTEB files where :class:`StageOutputs` names them."""
    out = StageOutputs(metrics=tmp_path / "a" / "m.json", cosines=tmp_path / "b" / "m.parquet",
                       mteb=tmp_path / "c")
    write_metrics_json(result, out)
    assert _files(tmp_path) == ["a/m.json"]
    assert json.loads(out.metrics.read_text()) == json.loads(json.dumps(result.metrics))
    write_cosine_files(result, out)
    assert _files(tmp_path) == ["a/m.json", "b/m.bootstrap.parquet", "b/m.parquet"]
    pd.testing.assert_frame_equal(pd.read_parquet(out.cosines), result.cosines, check_dtype=False)
    write_mteb_files(result, out)       # a partial table: the folder says why it holds no MTEB result
    assert _files(tmp_path)[-1] == "c/sentlab__m/README.md"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    log_mlflow(result, out)
    runs = mlflow.search_runs(experiment_names=["sentlab"], output_format="list")
    assert [r.info.run_name for r in runs] == ["eval/m"]
    assert runs[0].data.metrics["Avg"] == pytest.approx(result.metrics["Avg"])
    assert runs[0].data.params["pooling"] == "mean"


def test_the_stage_layout_and_its_writers_in_order(result, tmp_path, monkeypatch):
    out = StageOutputs.of("m", tmp_path / "reports")
    assert (out.metrics, out.cosines, out.mteb) == (tmp_path / "reports/metrics/m.json",
                                                    tmp_path / "reports/cosines/m.parquet", tmp_path / "reports/mteb")
    assert STAGE_WRITERS[-1] is log_mlflow                          # the files first, the side channel last
    seen = []
    write_all(result, out, [lambda r, o: seen.append("a"), lambda r, o: seen.append("b")])
    assert seen == ["a", "b"] and not (tmp_path / "reports").exists()   # only the writers given run
