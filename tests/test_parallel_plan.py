"""sentlab.parallel without a pipeline run (no Ray needed): chains from a stage graph, the guard ending a dead
worker's stage, DVC lock contention retried and never counted as success."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sentlab.parallel import graph, worktree
from sentlab.parallel.graph import plan

SHARED = ["sources", "prepare", "annotate"]


def _graph(models: dict[str, str | None], baselines=("cls",)):
    names = list(SHARED) + [f"train@{m}" for m in models] + [f"evaluate@{m}" for m in models]
    names += [f"evaluate_baseline@{b}" for b in baselines] + ["report", "export"]
    edges = [("sources", "prepare"), ("prepare", "annotate")]
    for m, frm in models.items():
        edges += [("annotate", f"train@{m}"), ("prepare", f"train@{m}"), (f"train@{m}", f"evaluate@{m}"),
                  (f"evaluate@{m}", "report"), (f"train@{m}", "export")]
        if frm:
            edges.append((f"train@{frm}", f"train@{m}"))
    edges += [("prepare", f"evaluate_baseline@{b}") for b in baselines]
    edges += [(f"evaluate_baseline@{b}", "report") for b in baselines]
    return names, edges


def test_chains_from_the_stage_graph():
    names, edges = _graph({"simcse": None, "paser": None, "paser_sup": "paser"})
    p = plan(names, edges, set(names))
    assert p.shared == SHARED and p.final == ["report", "export"]
    chains = {c.id: c for c in p.chains}
    assert set(chains) == {"simcse", "paser", "paser_sup", "evaluate_baseline-cls"}
    assert chains["simcse"].stages == ["train@simcse", "evaluate@simcse"]
    assert chains["simcse"].checkout == SHARED and not chains["simcse"].needs

    # paser_sup starts from models/paser: it waits for paser's chain and restores train@paser from the run cache
    assert chains["paser_sup"].needs == ["paser"] and chains["paser_sup"].restore == ["train@paser"]
    assert chains["evaluate_baseline-cls"].checkout == ["sources", "prepare"]


def test_a_models_suite_stages_join_its_chain():
    names, edges = _graph({"simcse": None})
    names[-2:-2] = ["transfer@simcse", "glue@simcse", "glue@base-cls"]
    edges += [("train@simcse", "transfer@simcse"), ("train@simcse", "glue@simcse"),
              ("sources", "glue@base-cls")]
    chains = {c.id: c for c in plan(names, edges, set(names)).chains}
    assert chains["simcse"].stages == ["train@simcse", "evaluate@simcse", "transfer@simcse", "glue@simcse"]
    assert chains["glue-base-cls"].stages == ["glue@base-cls"]


def test_a_distilled_models_chain_is_named_by_its_model_and_waits_for_its_teachers():
    names, edges = _graph({"simcse": None})
    names[-2:-2] = ["train@rankcse", "evaluate@rankcse", "transfer@rankcse"]
    edges += [("annotate", "train@rankcse"), ("train@simcse", "train@rankcse"),
              ("train@rankcse", "evaluate@rankcse"), ("train@rankcse", "transfer@rankcse")]
    chains = {c.id: c for c in plan(names, edges, set(names)).chains}
    assert chains["rankcse"].stages == ["train@rankcse", "evaluate@rankcse", "transfer@rankcse"]
    assert chains["rankcse"].needs == ["simcse"] and chains["rankcse"].restore == ["train@simcse"]


def test_only_stale_stages_and_what_is_below_them():
    names, edges = _graph({"simcse": None, "paser": None, "paser_sup": "paser"})
    # a params edit of paser: dvc status names train@paser only; its evaluation and paser_sup's chain are below it
    p = plan(names, edges, {"train@paser"})
    assert p.shared == [] and p.final == ["report", "export"]
    assert {c.id: c.stages for c in p.chains} == {
        "paser": ["train@paser", "evaluate@paser"], "paser_sup": ["train@paser_sup", "evaluate@paser_sup"]}
    # an evaluation alone: its train stage is up to date, so its output is checked out, not run
    p = plan(names, edges, {"evaluate@simcse"})
    (c,) = p.chains
    assert c.stages == ["evaluate@simcse"] and c.checkout == [*SHARED, "train@simcse"]
    assert plan(names, edges, set()).chains == []


def test_guard_ends_the_stage_when_its_worker_dies(tmp_path):
    pidfile = tmp_path / "child.pid"
    worker = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-m', 'sentlab.parallel.guard', '--', sys.executable, '-c', "
        f"\"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(600)\"])\n"
        "time.sleep(600)\n")], env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")})
    deadline = time.time() + 60
    while not (pidfile.is_file() and pidfile.read_text()) and time.time() < deadline:
        time.sleep(0.2)
    child = int(pidfile.read_text())
    worker.kill()                     # the Ray worker is killed (SIGKILL: no cleanup of its own)
    worker.wait()
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        try:                          # reap it if it became ours (it did not: it is the guard's)
            os.waitpid(child, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.2)
    else:
        os.kill(child, signal.SIGKILL)
        raise AssertionError("the stage outlived its worker")


def test_dvc_lock_contention_is_retried(tmp_path, monkeypatch):
    calls = []

    def fake_run(cmd, cwd, env, stdout, stderr):   # worktree.run_stoppable: subprocess.run that stops gently
        calls.append(cmd)
        stdout.write("ERROR: Unable to acquire lock. Most likely another DVC process is running\n" if len(calls) < 3
                     else "Running stage 'x':\n")
        return subprocess.CompletedProcess(cmd, 1 if len(calls) < 3 else 0)

    monkeypatch.setattr(worktree, "run_stoppable", fake_run)
    monkeypatch.setattr(worktree.time, "sleep", lambda s: None)
    log = tmp_path / "x.log"
    assert worktree.run_dvc(["repro", "x"], tmp_path, log, guard=False) == 0 and len(calls) == 3
    assert log.read_text().count("DVC's lock is held by another process") == 2
    calls.clear()
    assert worktree.run_dvc(["repro", "x"], tmp_path, log, guard=False, lock_retries=1) == 1   # never success
    calls.clear()

    def other_error(cmd, cwd, env, stdout, stderr):
        calls.append(cmd)
        stdout.write("ERROR: failed to reproduce 'x'\n")
        return subprocess.CompletedProcess(cmd, 255)

    monkeypatch.setattr(worktree, "run_stoppable", other_error)
    assert worktree.run_dvc(["repro", "x"], tmp_path, log, guard=False) == 255 and len(calls) == 1


def test_status_edges_parse():
    dot = 'strict digraph {\n"a";\n"b";\n"a" -> "b";\n"train@x" -> "evaluate@x";\n}\n'
    assert [(m.group(1), m.group(2)) for ln in dot.splitlines() if (m := graph.EDGE.match(ln))] == \
        [("a", "b"), ("train@x", "evaluate@x")]


def test_the_runner_says_when_the_profiles_training_threads_oversubscribe_the_cpu(monkeypatch, capsys):
    """The runner never changes a training's thread count (its bits depend on it: train.num_threads); it says when
    N local tasks of that many threads ask for more than the cores, and what fits."""
    from sentlab.parallel import ray_run as runner

    monkeypatch.setattr(runner.os, "cpu_count", lambda: 2)
    assert runner.oversubscribed(2, 2, None)
    assert "`train.num_threads: 1` fits them" in capsys.readouterr().err
    assert not runner.oversubscribed(2, 1, None)
    assert not runner.oversubscribed(1, 2, None)
    assert not runner.oversubscribed(4, 2, "ray://head:10001")   # a cluster's nodes have their own cores


def test_status_reads_a_coordinator_on_another_host_as_running_not_stale(tmp_path, monkeypatch, capsys):
    """Issue #65 §3: `sentlab status` on a login node, the run's coordinator on a compute node: its pid means nothing
    here, so the running stage stays running (not stale) and the run is named with its host; on the coordinator's
    own host a dead pid still reads as ended."""
    import json
    import socket

    from sentlab.parallel import STATE_DIR, status

    state = tmp_path / STATE_DIR
    (state / "stages").mkdir(parents=True)
    (state / "stages" / "train@simcse.json").write_text(json.dumps(
        {"status": "running", "host": "gpu-node-7", "started": time.time(), "cuda_visible_devices": "0"}))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()   # a pid that ran and ended (on this host; on another host the same number is someone else's)
    monkeypatch.setattr(status, "stage_names", lambda root: ["train@simcse"])
    monkeypatch.setattr(status, "stage_edges", lambda root: {})
    monkeypatch.setattr(status, "changed_stages", lambda root: {"train@simcse"})
    for host, want, active in (("gpu-node-7", "running", None), (socket.gethostname(), "stale", False)):
        (state / "run.json").write_text(json.dumps({"run_id": "r1", "pid": dead.pid, "host": host}))
        rows, run = status.stage_status(tmp_path)
        assert rows[0]["status"] == want and run["active"] is active
    (state / "run.json").write_text(json.dumps({"run_id": "r1", "pid": dead.pid, "host": "gpu-node-7"}))
    status.print_status(tmp_path)
    out = capsys.readouterr().out
    assert "on gpu-node-7" in out and f"pid {dead.pid}, runs on gpu-node-7: not checked from here" in out


def test_the_guard_waits_for_the_stage_it_stops_to_write_its_checkpoint(tmp_path):
    """A task cancelled (a scheduler's time limit): the guard's SIGTERM reaches the training under `dvc`, which dies
    at once; the guard waits for the training (its subreaper) to finish writing, not only for `dvc`."""
    done = tmp_path / "checkpoint-written"
    training = (f"import signal, time, pathlib\n"
                f"signal.signal(signal.SIGTERM, lambda *a: (time.sleep(2),\n"
                f"              pathlib.Path({str(done)!r}).write_text('ok'), exit(143)))\n"
                f"pathlib.Path({str(tmp_path / 'ready')!r}).write_text('')\ntime.sleep(600)\n")
    dvc = f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {training!r}])\ntime.sleep(600)\n"
    guard = subprocess.Popen([sys.executable, "-m", "sentlab.parallel.guard", "--", sys.executable, "-c", dvc],
                             env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")})
    deadline = time.time() + 60
    while not (tmp_path / "ready").exists():
        assert time.time() < deadline and guard.poll() is None
        time.sleep(0.1)
    guard.send_signal(signal.SIGTERM)
    assert guard.wait(timeout=60) == 128 + signal.SIGTERM
    assert done.read_text() == "ok"   # written 2 s after the signal, before the guard returned
