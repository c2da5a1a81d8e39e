"""The parallel runner's faults and a two-node cluster, checked on the toy pipeline (tests/fixtures/toy_pipeline).

    python benchmarks/parallel_faults.py [--only failed_stage,killed_worker,two_nodes] [--keep]

Each scenario runs ``sentlab run --jobs 2`` in a fresh toy repository and checks what it promises
(docs/scale-ray.md); the outputs are compared byte for byte with a serial ``dvc repro`` of the same toy:

- ``failed_stage``: a training that fails (``TOY_FAIL=b``) is reported with its log, its evaluation is not run,
  the other chains' outputs are kept, ``sentlab status`` marks it failed (exit 1); a second run runs only that
  chain and ends with the serial outputs and a clean ``dvc status``.
- ``killed_worker``: the worker of a running training is SIGKILLed once its checkpoint exists; Ray retries the
  task, the retry resumes from the checkpoint (the toy writes "a resumed from 1"), the outputs are the serial ones.
- ``two_nodes``: a Ray head without resources and a worker node with 2 CPUs and 2 fake GPUs (``ray start``, each
  in its own process group: never ``ray stop``); the chains go through a directory DVC remote, no task works in
  the driver's tree, every parallel stage is restored from the remote's run cache.

They take one to two minutes each on 2 CPU cores (Ray's and MLflow's start-up, mostly; benchmarks/RESULTS.md),
beyond CI's 20 minutes, so they are here and not in ``make test`` (which runs the same-outputs check,
tests/test_parallel_toy.py). Prints one row per scenario (ok / FAILED with the assertion, seconds) and exits 1 if
any failed. Needs the ``ray`` extra.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from toy import PARALLEL, STATE, clean, make_toy, outputs, restored, sentlab_run, sentlab_status  # noqa: E402
from toy import serial_outputs  # noqa: E402


def failed_stage(tmp: Path, serial: dict) -> str:
    repo, env = make_toy(tmp, "repo")
    run = sentlab_run(repo, {**env, "TOY_FAIL": "b"}, "--jobs", "2", "--gpus", "2")
    assert run.returncode == 1, run.stderr[-3000:]
    assert f"train@b: log {repo / STATE / 'logs/train@b.log'}" in run.stderr, run.stderr[-3000:]
    assert "evaluate@b: not run" in run.stderr
    kept = {k: v for k, v in serial.items() if "metrics/" in k and "/b.json" not in k}
    assert outputs(repo) == kept, sorted(outputs(repo))
    assert "failing as asked" in (repo / STATE / "logs/train@b.log").read_text()
    status = sentlab_status(repo, env)
    line = next(ln for ln in status.stdout.splitlines() if ln.startswith("train@b "))
    assert status.returncode == 1 and " failed " in line and "logs/train@b.log" in line, status.stdout
    rows = {r["stage"]: r["status"] for r in json.loads(sentlab_status(repo, env, "--json").stdout)["stages"]}
    assert rows["train@b"] == "failed" and rows["evaluate@b"] == "skipped", rows
    assert rows["train@a"] == rows["evaluate@c"] == "up to date" and rows["report"] == "stale", rows
    again = sentlab_run(repo, env, "--jobs", "2", "--gpus", "2")       # only b's chain and the report run
    assert again.returncode == 0, again.stderr[-3000:]
    assert outputs(repo) == serial and clean(repo)
    assert restored(repo) == {"train@b", "evaluate@b"}, restored(repo)
    return "b reported with its log, a and c kept; the second run ran b's chain only"


def killed_worker(tmp: Path, serial: dict) -> str:
    repo, env = make_toy(tmp, "repo")
    killed = {}

    def killer():
        f, ck = repo / STATE / "stages/train@a.json", repo / STATE / "worktrees/a/checkpoints/a"
        deadline = time.time() + 600
        while time.time() < deadline and not killed:
            st = json.loads(f.read_text()) if f.is_file() else {}
            if st.get("status") == "running" and ck.is_file():
                killed["pid"] = st["pid"]
                os.kill(st["pid"], signal.SIGKILL)
            time.sleep(0.2)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    marks = tmp / "marks.txt"
    run = sentlab_run(repo, {**env, "TOY_SLOW": "a", "TOY_MARKS": str(marks)}, "--jobs", "2", "--gpus", "2")
    t.join(timeout=5)
    assert killed, "the training of a never ran with its checkpoint written"
    assert run.returncode == 0, run.stderr[-4000:]
    assert marks.read_text() == "a resumed from 1\n", marks.read_text()   # the retry resumed from the checkpoint
    assert outputs(repo) == serial and clean(repo)
    return f"worker {killed['pid']} killed; the retry resumed from step 1"


def _ray_node(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    """A Ray node of its own (`ray start --block` in a new session, ended through its process group; never
    `ray stop`, which stops every Ray on the machine)."""
    exe = str(Path(sys.executable).parent / "ray")
    return subprocess.Popen([exe, "start", "--block", "--disable-usage-stats", *args], env=env,
                            stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)


def two_nodes(tmp: Path, serial: dict) -> str:
    repo, env = make_toy(tmp, "repo")
    env = {**env, "RAY_AUTH_MODE": "disabled"}   # the same on the head, the worker and the driver: no token to share
    subprocess.run([sys.executable, "-m", "dvc", "remote", "add", "--local", "-d", "store", str(tmp / "remote")],
                   cwd=repo, env=env, check=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    addr = f"127.0.0.1:{port}"
    nodes = [_ray_node(["--head", "--port", str(port), "--num-cpus", "0", "--num-gpus", "0",
                        "--include-dashboard", "false"], env, tmp / "head.log")]
    try:
        time.sleep(10)
        nodes.append(_ray_node(["--address", addr, "--num-cpus", "2", "--num-gpus", "2"], env, tmp / "w.log"))
        time.sleep(10)
        run = sentlab_run(repo, env, "--jobs", "2", "--address", addr)
    finally:
        for p in reversed(nodes):
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        current = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"   # `ray start` wrote it; ray stop would
        if current.is_file() and current.read_text().strip().endswith(f":{port}"):   # remove it
            current.unlink()
    assert run.returncode == 0, run.stderr[-4000:] + (tmp / "w.log").read_text()[-2000:]
    assert outputs(repo) == serial and clean(repo)
    assert restored(repo) == PARALLEL, restored(repo)
    assert not (repo / STATE / "worktrees").exists()           # no task worked in this filesystem tree
    assert (tmp / "remote/files").is_dir() and (tmp / "remote/runs").is_dir()
    return "every parallel stage restored from the remote's run cache; no worktree in the driver's tree"


SCENARIOS = {"failed_stage": failed_stage, "killed_worker": killed_worker, "two_nodes": two_nodes}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenarios (default: all)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = ap.parse_args(argv)
    names = [n for n in args.only.split(",") if n]
    unknown = sorted(set(names) - set(SCENARIOS))
    if unknown:
        ap.error(f"--only: unknown scenario(s) {unknown}; choose from {sorted(SCENARIOS)}")
    try:
        import ray  # noqa: F401
    except ImportError:
        sys.exit("benchmarks/parallel_faults.py needs the `ray` extra: pip install -e '.[ray]'")
    root = Path(tempfile.mkdtemp(prefix="bench-faults-"))
    serial = serial_outputs(root)
    print("| scenario | result | seconds | detail |\n|---|---|---:|---|", flush=True)
    failed = 0
    for name in names:
        tmp = root / name
        tmp.mkdir()
        t0 = time.time()
        try:
            result, detail = "ok", SCENARIOS[name](tmp, serial)
        except Exception as e:   # an assertion or a command that failed: this scenario's row says which
            failed += 1
            last = traceback.extract_tb(e.__traceback__)[-1]
            result, detail = "FAILED", f"line {last.lineno}: {type(e).__name__}: {str(e)[-600:]}".replace("\n", " ")
        print(f"| {name} | {result} | {time.time() - t0:.0f} | {detail} |", flush=True)
    if args.keep:
        print(f"scratch kept in {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
