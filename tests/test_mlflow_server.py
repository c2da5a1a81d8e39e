"""A real `mlflow server` on loopback over a store written the way a pipeline run writes it:
a parent run, method runs with step curves and artifacts (from the report stage); the REST API
must show the nesting, the metric history and the artifacts."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _support.report_tree import BACKBONE, make_tree  # noqa: E402

MLFLOW = [sys.executable, "-m", "mlflow"]   # a hard dependency: the server of the Python that runs the tests


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(base: str, endpoint: str, **query) -> dict:
    url = f"{base}/api/2.0/mlflow/{endpoint}" + (("?" + urllib.parse.urlencode(query)) if query else "")
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def _post(base: str, path: str, body: dict) -> dict:
    req = urllib.request.Request(f"{base}/api/2.0/mlflow/{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


@pytest.fixture()
def store(tmp_path, monkeypatch):
    """Write runs into a SQLite store as the pipeline does (tracking.run under a parent, step curves,
    then the report stage attaching its tables and figures)."""
    from sentlab import tracking
    from sentlab.tracking import runs as tracking_runs
    from sentlab.methods import get_method
    from sentlab.report.build import build_report, log_to_mlflow

    db = tmp_path / "mlflow.db"
    monkeypatch.chdir(tmp_path)  # the default artifact root (./mlruns) lands in tmp
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{db}")
    parent = tracking_runs.start_parent("pipeline quick", params={"profile": "quick"})
    monkeypatch.setenv(tracking.PARENT_ENV, parent)
    curves = {"simcse": [(4, 60.0, 0.30, -2.0), (8, 62.0, 0.25, -2.2)],
              "ptbert": [(4, 61.0, 0.28, -2.1), (8, 63.0, 0.22, -2.4), (12, 64.0, 0.21, -2.5)]}
    for method, rows in curves.items():
        params = {"pseudo_len": 128, "queue_size": 256} if method == "ptbert" else {"max_length": 32}
        name = tracking.run_name(method, params, train={"batch_size": 64, "lr": 3e-5},
                                 keys=get_method(method).run_name_params)
        with tracking.run(name, params={"method": params}, tags={"stage": "train", "method": method,
                                                                  "sentlab.model": method}):
            for step, dev, al, un in rows:
                tracking.log_metrics({"stsb_dev": dev, "alignment": al, "uniformity": un}, step=step)
    root = tmp_path / "repo"
    root.mkdir()
    make_tree(root)
    rep = build_report(root, BACKBONE, "quick")
    done = log_to_mlflow(rep)
    tracking_runs.end_parent(parent)
    return db, parent, done


def test_server_shows_parent_method_runs_curves_and_artifacts(store, tmp_path):
    db, parent, done = store
    assert done["parent"] == parent and {"simcse", "ptbert"} <= set(done)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = open(tmp_path / "server.log", "w")
    proc = subprocess.Popen([*MLFLOW, "server", "--host", "127.0.0.1", "--port", str(port),
                             "--backend-store-uri", f"sqlite:///{db}", "--workers", "1"],
                            cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail("mlflow server did not come up:\n" + (tmp_path / "server.log").read_text()[-3000:])
            time.sleep(0.5)

        exp = _get(base, "experiments/get-by-name", experiment_name="sentlab")["experiment"]
        found = _post(base, "runs/search", {"experiment_ids": [exp["experiment_id"]],
                                            "filter": f"tags.mlflow.parentRunId = '{parent}'"})["runs"]
        by_model = {next(t["value"] for t in r["data"]["tags"] if t["key"] == "sentlab.model"): r for r in found}
        assert set(by_model) == {"simcse", "ptbert"}
        pt = by_model["ptbert"]
        assert pt["info"]["run_name"].startswith("ptbert pseudo_len=128 queue_size=256")
        assert pt["info"]["status"] == "FINISHED"

        hist = _get(base, "metrics/get-history", run_id=pt["info"]["run_id"], metric_key="alignment")["metrics"]
        assert [(m["step"], m["value"]) for m in sorted(hist, key=lambda m: m["step"])] == \
            [(4, 0.28), (8, 0.22), (12, 0.21)]

        arts = _get(base, "artifacts/list", run_id=pt["info"]["run_id"], path="report")["files"]
        assert {"report/rows.csv", "report/figures"} <= {a["path"] for a in arts}
        figs = _get(base, "artifacts/list", run_id=pt["info"]["run_id"], path="report/figures")["files"]
        assert "report/figures/ptbert_fig3_alignment_uniformity.png" in {a["path"] for a in figs}

        par = _get(base, "runs/get", run_id=parent)["run"]
        assert par["info"]["status"] == "FINISHED"
        tables = _get(base, "artifacts/list", run_id=parent, path="report/tables")["files"]
        assert "report/tables/ptbert_table3.md" in {a["path"] for a in tables}
        # the artifact bytes are served too (the proxied/served artifact endpoint of the UI)
        url = f"{base}/get-artifact?" + urllib.parse.urlencode({"path": "report/rows.csv",
                                                                 "run_uuid": pt["info"]["run_id"]})
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
        assert text.startswith("table,section,row,model,column") and "ptbert_table3,Continuous augmentation" in text
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 15)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait(timeout=10)
        log.close()
