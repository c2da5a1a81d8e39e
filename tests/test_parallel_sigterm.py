"""Issue #65 §3: `sentlab run` stopped by SIGTERM (a SLURM time limit) unwinds like Ctrl-C, so that it can stop its
chains gently, even after `ray.init`, whose fatal-signal handler in the driver otherwise aborts the process."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="`ray` is not installed: pip install 'sentlab[ray]' (the parallel runner's extra)")

CHILD = """
import time
from sentlab.parallel.ray_run import import_ray, on_sigterm, start_ray
on_sigterm()
ray = import_ray()
start_ray(ray, 1, None, 0, 1)
try:
    print("ready", flush=True)
    time.sleep(120)
except SystemExit as e:
    print(f"unwound {e.code}", flush=True)
    ray.shutdown()
    raise
"""


def test_a_sigterm_after_ray_init_unwinds_the_coordinator_instead_of_aborting_it():
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"), "RAY_USAGE_STATS_ENABLED": "0"}
    proc = subprocess.Popen([sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()[-3000:]
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "unwound 143" in out and proc.returncode == 143, (proc.returncode, err[-3000:])
