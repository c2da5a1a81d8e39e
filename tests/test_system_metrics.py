"""A training run carries MLflow's system metrics (issue #55): ``system/`` CPU and memory sampled while it trains
(mlflow's log_system_metrics, psutil), at MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL; no run, no sampling, when tracking
is off; other runs (evaluation) do not sample."""

from __future__ import annotations

import mlflow
from _support.training import factory, fake_dev_eval, make_root, params

from sentlab import tracking
from sentlab.train.run import train_method


def _runs():
    c = mlflow.tracking.MlflowClient()
    exp = c.get_experiment_by_name("sentlab")
    return c.search_runs([exp.experiment_id]) if exp else []


def test_a_training_run_carries_system_metrics(tmp_path, tok, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", "0.1")
    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLES_BEFORE_LOGGING", "1")
    train_method(params(), "simcse", root=make_root(tmp_path), dev_eval=fake_dev_eval(), encoder_factory=factory(tok),
                 tracking=True, progress=False)
    with tracking.run("eval/x") as ml:            # a run without the flag: no sampling
        ml.log_metrics({"a": 1.0})
    runs = {r.data.tags.get("stage", r.info.run_name): r for r in _runs()}
    train = runs["train"].data.metrics
    assert {"system/cpu_utilization_percentage", "system/system_memory_usage_megabytes"} <= set(train)
    assert not any(k.startswith("system/") for k in runs["eval/x"].data.metrics)


def test_no_tracking_no_run_and_no_sampling(tmp_path, tok, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    train_method(params(), "simcse", root=make_root(tmp_path), dev_eval=fake_dev_eval(), encoder_factory=factory(tok),
                 tracking=False, progress=False)
    assert not (tmp_path / "mlflow.db").exists() or _runs() == []
