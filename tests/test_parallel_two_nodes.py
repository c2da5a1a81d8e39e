"""The Ray part of docs/slurm.md's recipe with two local nodes: `ray start --head` on a free loopback port (no
resources, like a head that only coordinates), a second node `ray start --address` with 1 CPU and 1 (declared)
GPU, then a driver joins with ``ray.init(address=...)`` and two quarter-GPU tasks (the ``auto`` share of a short
chain) run on the worker node together. Every node is ended through its own process group (SIGKILL: a graceful
stop takes ~30 s here), never `ray stop`, which would stop every Ray on the machine. ~11 s on 2 busy cores."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the two-node check needs ray: pip install 'sentlab[ray]'")


def _node(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    exe = str(Path(sys.executable).parent / "ray")
    return subprocess.Popen([exe, "start", "--block", "--disable-usage-stats", *args], env=env,
                            stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)


def _alive(n_nodes: int, timeout_s: float) -> int:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        n = len([x for x in ray.nodes() if x["Alive"]])
        if n >= n_nodes:
            return n
        time.sleep(0.5)
    return len([x for x in ray.nodes() if x["Alive"]])


def test_two_local_ray_nodes_run_quarter_gpu_tasks_on_the_worker(tmp_path, monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    addr = f"127.0.0.1:{port}"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")   # the driver as the nodes: no token to share
    nodes = [_node(["--head", "--port", str(port), "--node-ip-address", "127.0.0.1", "--num-cpus", "0",
                    "--num-gpus", "0", "--include-dashboard", "false"], env, tmp_path / "head.log")]
    try:
        deadline = time.time() + 60
        while time.time() < deadline and "Ray runtime started" not in (tmp_path / "head.log").read_text():
            assert nodes[0].poll() is None, (tmp_path / "head.log").read_text()[-3000:]
            time.sleep(0.5)
        nodes.append(_node(["--address", addr, "--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--num-gpus",
                            "1"], env, tmp_path / "worker.log"))
        ray.init(address=addr, log_to_driver=False)
        assert _alive(2, 60) == 2, (tmp_path / "worker.log").read_text()[-3000:]
        assert ray.cluster_resources().get("GPU") == 1.0

        @ray.remote(num_gpus=0.25, num_cpus=0.5)
        def where():
            import ray as r

            return r.get_runtime_context().get_node_id(), r.get_gpu_ids(), os.environ.get("CUDA_VISIBLE_DEVICES")

        worker = {n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("GPU")}
        got = ray.get([where.remote(), where.remote()], timeout=60)
        assert len(worker) == 1 and {g[0] for g in got} == worker           # both on the worker node
        assert all(g[1] == [0] and g[2] == "0" for g in got)               # sharing its one GPU
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for p in reversed(nodes):   # each node's group: `ray start` and the GCS, raylet and workers it started
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(timeout=30)
        current = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
        if current.is_file() and current.read_text().strip().endswith(f":{port}"):
            current.unlink()
