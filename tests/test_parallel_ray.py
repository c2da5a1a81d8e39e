"""`sentlab run --jobs 2` on a local Ray cluster with two fake GPUs (declared on a CPU machine): the smoke
profile's metrics are byte-identical to a serial `dvc repro`, `dvc status` is clean, no stage ran twice (the
final `dvc repro` restored every parallel stage from DVC's run cache) and each task saw its own GPU through
CUDA_VISIBLE_DEVICES. A task whose worker is killed mid-training is retried and the run completes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_pipeline_smoke import _copy_repo, _env  # noqa: E402

ray = pytest.importorskip("ray", reason="`ray` is not installed: pip install 'sentlab[ray]' (the parallel runner's "
                                        "optional extra)")

STATE = ".dvc/tmp/sentlab"


def _repo(tmp: Path, name: str, mirror: Path) -> tuple[Path, dict]:
    repo = tmp / name
    repo.mkdir()
    _copy_repo(repo)
    env = {**_env(mirror, tmp / name), "MLFLOW_TRACKING_URI": f"sqlite:///{repo / 'mlflow.db'}",
           "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    env.pop("SENTLAB_PARENT_RUN_ID", None)
    subprocess.run([sys.executable, "-m", "sentlab.cli", "profile", "smoke"], cwd=repo, env=env, check=True)
    # one commit id for every copy (the metrics' fingerprint records it): fixed author, committer and dates
    fixed = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
             "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}
    for args in (["add", "-A"], ["commit", "-qm", "smoke"]):
        subprocess.run(["git", *args], cwd=repo, env={**env, **fixed}, check=True)
    return repo, env


def _metrics(repo: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((repo / "reports/metrics").glob("*.json"))}


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    """The smoke profile's metrics from a serial `dvc repro` (the reference)."""
    from conftest import MIRROR as mirror

    if not (mirror / "STS").is_dir():
        pytest.skip(f"needs the data mirror (STS/, SICK/, wiki/) at {mirror} (set SENTLAB_DATA_MIRROR)")
    tmp = tmp_path_factory.mktemp("serial")
    repo, env = _repo(tmp, "repo", mirror)
    # one thread, as each of the 2 jobs on 2 cores: the fingerprint records the thread count and a reduction over
    # 2 threads rounds differently in the 7th digit (the STS numbers agree either way)
    env["OMP_NUM_THREADS"] = "1"
    run = subprocess.run([sys.executable, "-m", "dvc", "repro"], cwd=repo, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return _metrics(repo)


def _numbers(raw: bytes) -> dict:
    data = json.loads(raw)
    data.pop("fingerprint", None)
    return data


def _changed(repo: Path, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-m", "dvc", "status", "--json"], cwd=repo, env=env, capture_output=True,
                         text=True, check=True).stdout
    data = json.loads(out[out.find("{"):]) if "{" in out else {}
    return {k: v for k, v in data.items() if v != ["always changed"]}


@pytest.mark.slow
def test_two_jobs_on_two_fake_gpus_match_serial(serial, mirror, tmp_path):
    repo, env = _repo(tmp_path, "repo", mirror)
    run = subprocess.run([sys.executable, "-m", "sentlab.cli", "run", "--jobs", "2", "--gpus", "2"], cwd=repo,
                         env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    got = _metrics(repo)
    assert set(got) == set(serial) and len(got) == 8, sorted(got)
    assert got == serial, [k for k in got if got[k] != serial[k]]
    assert _changed(repo, env) == {}
    final = (repo / STATE / "logs/final.log").read_text()
    ran = [ln for ln in final.splitlines() if ln.startswith("Running stage")]
    assert sorted(ran) == sorted(f"Running stage '{s}':" for s in ("sources", "report", "export")), ran
    assert final.count("is cached - skipping run") >= 12, final[-3000:]
    states = [json.loads(p.read_text()) for p in (repo / STATE / "stages").glob("*@*.json")]
    seen = {s["cuda_visible_devices"] for s in states}
    assert seen == {"0", "1"}, seen          # one GPU each, both used
    assert all(s["status"] == "restored" for s in states), states
    status = subprocess.run([sys.executable, "-m", "sentlab.cli", "status"], cwd=repo, env=env, capture_output=True,
                            text=True)
    assert status.returncode == 0 and "17 up to date" in status.stdout, status.stdout


@pytest.mark.slow
def test_killed_worker_is_retried_and_failed_stage_reported(serial, mirror, tmp_path):
    """The worker running train@ptbert is killed (SIGKILL) after its first checkpoint: Ray runs the task again, the
    training resumes and the numbers are the serial run's. A stage that fails (a broken evaluate command) is
    listed with its log, the others' results are kept, the exit status is 1 and `sentlab status` says failed."""
    repo, env = _repo(tmp_path, "repo", mirror)
    dvc_yaml = repo / "dvc.yaml"
    dvc_yaml.write_text(dvc_yaml.read_text().replace(
        "cmd: python pipeline/evaluate_baseline.py ${item}",
        "cmd: python -c \"import sys; sys.exit('${item}' == 'cls')\" && python pipeline/evaluate_baseline.py ${item}"))
    killed = {}

    def killer():
        f = repo / STATE / "stages" / "train@ptbert.json"
        deadline = time.time() + 900
        while time.time() < deadline and not killed:
            st = json.loads(f.read_text()) if f.is_file() else {}
            ck = list((repo / STATE / "worktrees/ptbert/checkpoints").glob("ptbert/*/last/state.json"))
            if st.get("status") == "running" and ck:
                killed["pid"] = st["pid"]
                os.kill(st["pid"], signal.SIGKILL)
            time.sleep(0.5)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    run = subprocess.run([sys.executable, "-m", "sentlab.cli", "run", "--jobs", "2", "--gpus", "2"], cwd=repo,
                         env=env, capture_output=True, text=True)
    t.join(timeout=5)
    assert killed, "the training never reached a checkpoint"
    assert run.returncode == 1, run.stderr[-4000:]
    assert "evaluate_baseline@cls: log" in run.stderr and "FAILED stages" in run.stderr, run.stderr[-4000:]
    # the edited dvc.yaml makes this checkout "dirty" in the metrics' fingerprint: the rest must be the serial run's
    got = {k: _numbers(v) for k, v in _metrics(repo).items()}
    assert "base-cls.json" not in got and got["ptbert.json"] == _numbers(serial["ptbert.json"])
    assert {k: _numbers(v) for k, v in serial.items() if k != "base-cls.json"} == got
    info = json.loads((repo / "models/ptbert/sentlab.json").read_text())
    assert info["resumed_from_step"] in (2, 4), info      # the retry resumed from its checkpoint
    status = subprocess.run([sys.executable, "-m", "sentlab.cli", "status"], cwd=repo, env=env, capture_output=True,
                            text=True)
    line = next(ln for ln in status.stdout.splitlines() if ln.startswith("evaluate_baseline@cls "))
    assert status.returncode == 1 and " failed " in line and "evaluate_baseline@cls.log" in line, status.stdout


def _ray_node(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    """A Ray node of its own (`ray start --block` in a new session: ended by its process group, never `ray stop`,
    which would stop every Ray on the machine)."""
    exe = str(Path(sys.executable).parent / "ray")
    return subprocess.Popen([exe, "start", "--block", "--disable-usage-stats", *args], env=env,
                            stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)


@pytest.mark.slow
def test_two_ray_nodes_through_a_dvc_remote(serial, mirror, tmp_path):
    """A head node without resources and a worker node with 2 fake GPUs; the tasks share no worktree with the
    workspace: they pull their inputs from a directory DVC remote and push their outputs and run-cache entries
    to it; the coordinator's final `dvc repro --pull` restores them. Same metrics, clean status."""
    import socket

    repo, env = _repo(tmp_path, "repo", mirror)
    # in .dvc/config.local: the checkout stays clean (the metrics' fingerprint records a dirty one)
    subprocess.run([sys.executable, "-m", "dvc", "remote", "add", "--local", "-d", "store", str(tmp_path / "remote")],
                   cwd=repo, env=env, check=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    addr = f"127.0.0.1:{port}"
    nodes = [_ray_node(["--head", "--port", str(port), "--num-cpus", "0", "--num-gpus", "0", "--include-dashboard",
                        "false"], env, tmp_path / "head.log")]
    try:
        time.sleep(15)
        nodes.append(_ray_node(["--address", addr, "--num-cpus", "2", "--num-gpus", "2"], env, tmp_path / "w.log"))
        time.sleep(15)
        run = subprocess.run([sys.executable, "-m", "sentlab.cli", "run", "--jobs", "2", "--address", addr],
                             cwd=repo, env=env, capture_output=True, text=True)
    finally:
        for p in nodes:
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(p.pid, signal.SIGKILL)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    assert _metrics(repo) == serial
    assert _changed(repo, env) == {}
    assert not (repo / STATE / "worktrees").exists()      # no task worked in the workspace's filesystem tree
    final = (repo / STATE / "logs/final.log").read_text()
    assert final.count("is cached - skipping run") >= 12, final[-3000:]
