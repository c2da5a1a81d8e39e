"""MLflow under concurrency: many stages logging at once do not write one SQLite file.

On one machine the run starts ``mlflow server`` over the workspace's store (``mlflow.db``, or the SQLite store
``MLFLOW_TRACKING_URI`` names) on a free loopback port for the run's duration and points every stage at it
(``MLFLOW_TRACKING_URI=http://127.0.0.1:PORT``): the server is the store's one writer. A tracking server the
user names (``MLFLOW_TRACKING_URI=http...``, the cluster case) is used as it is. The experiment is created
(its artifacts beside the store, :mod:`sentlab.tracking.store`) before the server starts, so workers log their
artifacts straight into ``mlruns/``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..errors import SentlabError


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
            return r.status == 200
    except Exception:  # noqa: BLE001 - not up yet
        return False


@contextmanager
def tracking_server(root: str | Path, log: str | Path, timeout_s: float = 120.0) -> Iterator[str]:
    """Yield the tracking URI the run's stages use (a local server over the SQLite store while the block runs,
    or the user's server)."""
    from .. import tracking

    user = os.environ.get("MLFLOW_TRACKING_URI", "")
    if user and not user.startswith("sqlite:"):
        yield user
        return
    db_uri = user or f"sqlite:///{Path(root).resolve() / 'mlflow.db'}"
    os.environ["MLFLOW_TRACKING_URI"] = db_uri
    tracking.experiment_id()           # the experiment exists, its artifacts beside the store
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    fh = open(log, "a", encoding="utf-8")
    # the tracking API only: MLflow's server-side job runner (GenAI scorers, trace archival; huey workers and
    # periodic tasks) is off, which halves the server's start (18-20 s -> 9-11 s on 2 cores)
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    # under a watchdog that leads the server's process group and ends it when this process is gone (a SIGKILL
    # of the coordinator included: no server outlives its run)
    proc = subprocess.Popen([sys.executable, "-m", "sentlab.parallel.watchdog", str(os.getpid()), "--",
                             sys.executable, "-m", "mlflow", "server", "--backend-store-uri", db_uri, "--host",
                             "127.0.0.1", "--port", str(port), "--workers", "1"], cwd=root, stdout=fh,
                            stderr=subprocess.STDOUT, start_new_session=True, env=env)
    try:
        deadline = time.time() + timeout_s
        while not _healthy(url):
            if proc.poll() is not None or time.time() > deadline:
                raise SentlabError(f"the MLflow tracking server over {db_uri} did not start (log: {log})")
            time.sleep(0.5)
        os.environ["MLFLOW_TRACKING_URI"] = url
        yield url
    finally:
        os.environ["MLFLOW_TRACKING_URI"] = user
        if not user:
            del os.environ["MLFLOW_TRACKING_URI"]
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
        fh.close()
