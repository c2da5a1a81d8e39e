"""Reliability round 4 (issue #64): a result always carries the settings that made it, and a dead neighbour never
stalls or corrupts a run."""

from __future__ import annotations

import pytest
import yaml
from conftest import stage_workspace


# --- a params edit while a stage runs -------------------------------------------------------------------------


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.delenv("DVC_STAGE", raising=False)
    monkeypatch.chdir(stage_workspace(tmp_path))
    return tmp_path


def _set_lr(work, lr):
    raw = yaml.safe_load((work / "params.yaml").read_text())
    raw["train"]["lr"] = lr
    (work / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))


def _stage_that_edits(work, edit):
    """A train@simcse stage's script: it reads its params, writes its output, and params.yaml is edited meanwhile."""
    from sentlab.config.stage_params import stage_params

    def main():
        p = stage_params("train@simcse")
        out = work / "models" / "simcse"
        out.mkdir(parents=True)
        (out / "sentlab.json").write_text(f'{{"lr": {p.train.lr}}}')
        edit()
        return 0
    return main


def test_a_declared_params_edit_while_a_stage_runs_fails_it_naming_the_key_and_removes_its_outputs(work, capsys):
    from sentlab.stages.entry import run_stage

    rc = run_stage(_stage_that_edits(work, lambda: _set_lr(work, 5e-5)))
    err = capsys.readouterr().err
    assert rc == 2
    assert "params.yaml changed while stage `train@simcse` ran: `train.lr` 3e-05 -> 5e-05" in err
    assert "dvc repro train@simcse" in err and "Traceback" not in err
    assert not (work / "models" / "simcse").exists()              # nothing made with 3e-05 left to label 5e-05


def test_an_edit_of_a_key_the_stage_does_not_declare_lets_it_finish(work, capsys):
    from sentlab.stages.entry import run_stage

    def other():
        raw = yaml.safe_load((work / "params.yaml").read_text())
        raw["methods"]["moco"]["queue_size"] = 512                  # another method's line
        raw["runtime"] = {**(raw.get("runtime") or {}), "checkpoint_every": 7}   # how it runs, never declared
        (work / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))

    assert run_stage(_stage_that_edits(work, other)) == 0
    assert (work / "models" / "simcse" / "sentlab.json").read_text() == '{"lr": 3e-05}'


# --- evaluate refuses a model labelled with params it was not trained with -------------------------------------


def _trained_model(work, edit_inputs=None, key=None):
    """models/simcse as training writes it, its run_key_inputs from params.yaml as committed (``edit_inputs``: what
    training saw instead)."""
    import json

    from sentlab.config import validate
    from sentlab.config.yaml_files import read_yaml
    from sentlab.methods.blocks import method_params
    from sentlab.train.run import key_of, run_key_inputs

    p = validate(read_yaml(work / "params.yaml"))
    inputs = run_key_inputs(p, "simcse", method_params(p, "simcse"), "corpus-fp")
    if edit_inputs:
        edit_inputs(inputs)
    out = work / "models" / "simcse"
    out.mkdir(parents=True, exist_ok=True)
    (out / "sentlab.json").write_text(json.dumps({"method": "simcse", "status": "trained", "name": "simcse",
                                                  "run_key": key or key_of(inputs), "run_key_inputs": inputs}))


def _evaluate_stage(monkeypatch):
    import runpy

    monkeypatch.setattr("sys.argv", ["pipeline/evaluate.py", "simcse"])
    return runpy.run_path("pipeline/evaluate.py", run_name="not_main")["main"]


def test_evaluate_refuses_a_model_trained_with_other_method_settings(work, monkeypatch, capsys):
    from sentlab.stages.entry import run_stage

    stage_workspace(work, lambda r: r["methods"]["simcse"].update(temperature=0.07))   # labelled 0.07 ...
    _trained_model(work, lambda i: i["method_params"].update(temperature=0.05))        # ... trained with 0.05
    assert run_stage(_evaluate_stage(monkeypatch)) == 2
    err = capsys.readouterr().err
    assert "`method_params.temperature` trained with 0.05, labelled 0.07" in err
    assert "dvc repro train@simcse" in err and "Traceback" not in err
    assert not (work / "reports").exists()                           # refused before anything is written


@pytest.mark.parametrize("case, said", [
    ("key", "hash to"),                    # run_key_inputs that do not hash to the run_key
    ("none", "records no run_key"),        # a model folder from before the record
])
def test_evaluate_refuses_a_model_whose_run_key_does_not_match_its_record(work, monkeypatch, capsys, case, said):
    import json

    from sentlab.stages.entry import run_stage

    _trained_model(work, key="0123456789abcdef" if case == "key" else None)
    if case == "none":
        f = work / "models" / "simcse" / "sentlab.json"
        f.write_text(json.dumps({k: v for k, v in json.loads(f.read_text()).items() if k != "run_key_inputs"}))
    assert run_stage(_evaluate_stage(monkeypatch)) == 2
    assert said in capsys.readouterr().err


def test_evaluate_accepts_a_model_trained_with_the_params_it_is_labelled_with(work):
    import json

    from sentlab.evaluate.sts.trained import check_trained_with
    from sentlab.config.stage_params import stage_params

    _trained_model(work)
    info = json.loads((work / "models" / "simcse" / "sentlab.json").read_text())
    assert check_trained_with(info, stage_params("evaluate@simcse"), "simcse", "simcse") is None


def test_a_training_records_what_its_run_key_hashes(tmp_path, tok):
    import json

    from _support.training import factory, fake_dev_eval, make_root, params

    from sentlab.evaluate.sts.trained import check_trained_with
    from sentlab.train.run import key_of, train_method

    root = make_root(tmp_path)
    train_method(params(lr=2e-3), "simcse", root=root, dev_eval=fake_dev_eval(), encoder_factory=factory(tok),
                 tracking=False, progress=False)
    meta = json.loads((root / "models" / "simcse" / "sentlab.json").read_text())
    assert key_of(meta["run_key_inputs"]) == meta["run_key"]
    assert meta["run_key_inputs"]["train"]["lr"] == 2e-3 and meta["run_key_inputs"]["seed"] == 3
    check_trained_with(meta, params(lr=2e-3), "simcse", "simcse")      # the params it was trained with: accepted
    with pytest.raises(Exception, match="temperature"):
        check_trained_with(meta, params().model_copy(update={"methods": {"simcse": {"temperature": 0.5}}}), "simcse",
                           "simcse")


# --- tracking: a write-locked store, a server that never answers ---------------------------------------------


def _dead_pid() -> int:
    import subprocess
    import sys

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=60)
    return dead.pid


def test_a_write_locked_store_does_not_fail_the_rerun_of_a_killed_training(tmp_path, monkeypatch, caplog):
    import contextlib
    import sqlite3

    from sentlab import tracking
    from sentlab.tracking import runs as tracking_runs

    db = tmp_path / "mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{db}")
    c = tracking.client()
    tags = {"stage": "train", "sentlab.model": "simcse", "sentlab.run_key": "K0", **tracking.owner_tags(_dead_pid())}
    orphan = c.create_run(tracking.experiment_id(), run_name="simcse", tags=tags).info.run_id   # a killed training's
    with contextlib.closing(sqlite3.connect(db, timeout=1)) as other:
        other.execute("BEGIN IMMEDIATE")           # another process holds the store's write lock
        with caplog.at_level("WARNING"):
            assert tracking_runs.interrupted_training_run("simcse", "K1", resumable=True) is None
        other.rollback()
    assert tracking.degraded()                      # the training goes on untracked
    assert sum("MLflow could not look for or close interrupted runs of simcse" in r.getMessage()
               for r in caplog.records) == 1
    tracking._DEGRADED.clear()
    assert c.get_run(orphan).info.status == "RUNNING"   # the next training's sweep closes it


class HungServer:
    """A TCP server on 127.0.0.1 that accepts connections and never answers; it counts them and stops itself
    after ``life`` seconds (or when the test ends)."""

    def __init__(self, life: float = 120.0):
        import socket
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.accepted, self.held, self.stop = 0, [], threading.Event()
        self.uri = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, args=(life,), daemon=True)
        self.thread.start()

    def _serve(self, life):
        import socket
        import time

        end = time.monotonic() + life
        while not self.stop.is_set() and time.monotonic() < end:
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            self.accepted += 1
            self.held.append(conn)                    # read nothing, answer nothing
        for conn in self.held:
            conn.close()
        self.sock.close()

    def close(self):
        self.stop.set()
        self.thread.join(timeout=10)


@pytest.fixture
def hung(monkeypatch):
    server = HungServer()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server.uri)
    yield server
    server.close()


def test_a_hung_tracking_server_costs_one_bounded_probe_per_pipeline_run(hung, capsys):
    import time

    from sentlab import tracking
    from sentlab.cli import main
    from sentlab.tracking import budget
    from sentlab.tracking import runs as tracking_runs

    t0 = time.monotonic()
    assert main(["mlflow", "start-parent", "--profile", "quick", "--params", "none.yaml"]) == 0   # `make repro`'s
    assert capsys.readouterr().out.strip() == ""                             # no parent run: tracking is off
    # the probe, plus the CLI's start (seconds on a loaded machine); one MLflow call would wait 3 x 20 s
    assert time.monotonic() - t0 < budget.PROBE_S + 30 and hung.accepted == 1
    for stage in ("sources", "train", "evaluate"):                           # each stage: a process of its own
        tracking._DEGRADED.clear()
        t0 = time.monotonic()
        assert budget.probe(max_age_s=600) is not None                       # the sources stage: the verdict reused
        assert tracking_runs.sweep_orphans() == 0
        assert tracking_runs.method_parent("simcse") is None
        assert tracking_runs.interrupted_training_run("simcse", "K", resumable=True) is None
        assert tracking.find_training_run("simcse", "K") is None
        with tracking.run(f"{stage}/simcse") as run:
            run.log_metrics({"a": 1.0})
        assert time.monotonic() - t0 < 3, stage
    assert hung.accepted == 1                                                # not one call more on the server


def test_sentlab_mlflow_wrap_runs_its_command_untracked_after_one_probe(hung, tmp_path):
    import sys
    import time

    from sentlab.cli import main
    from sentlab.tracking import budget

    done = tmp_path / "ran"
    t0 = time.monotonic()
    assert main(["mlflow", "wrap", "--", sys.executable, "-c", f"open({str(done)!r}, 'w').close()"]) == 0
    assert done.is_file() and time.monotonic() - t0 < budget.PROBE_S + 30 and hung.accepted == 1


# --- files -----------------------------------------------------------------------------------------------------


def test_an_export_killed_between_its_renames_is_put_back_by_the_sweep(tmp_path):
    from sentlab.runtime.io import sweep_temporaries

    (tmp_path / ".exports.old").mkdir()                                 # exports/ moved aside ...
    (tmp_path / ".exports.old" / "index.md").write_text("the last good export\n")
    (tmp_path / ".exports.1234.tmp").mkdir()                            # ... the new one not yet renamed in
    (tmp_path / ".exports.1234.tmp" / "index.md").write_text("the killed export\n")
    sweep_temporaries(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exports"]
    assert (tmp_path / "exports" / "index.md").read_text() == "the last good export\n"   # what dvc.lock describes


def test_a_replaced_folder_killed_after_its_second_rename_keeps_the_new_one(tmp_path):
    from sentlab.runtime.io import sweep_temporaries

    for where in (tmp_path, tmp_path / "models"):
        (where / ".simcse.old").mkdir(parents=True)
        (where / "simcse").mkdir()
        (where / "simcse" / "sentlab.json").write_text("new")
    sweep_temporaries(tmp_path)
    for where in (tmp_path, tmp_path / "models"):
        assert not (where / ".simcse.old").exists() and (where / "simcse" / "sentlab.json").read_text() == "new"


def test_exports_old_is_git_ignored_so_no_bundle_ships_it(tmp_path):
    import shutil
    import subprocess
    from pathlib import Path

    root = tmp_path / "ws"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True, timeout=60)
    shutil.copy(Path(__file__).resolve().parents[1] / ".gitignore", root / ".gitignore")
    (root / ".exports.old").mkdir()
    (root / ".exports.old" / "index.md").write_text("x")
    out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=root, capture_output=True,
                         text=True, check=True, timeout=60).stdout
    assert out.split() == ["??", ".gitignore"]


@pytest.mark.parametrize("key, kind", [("? [a, b]\n: 3\n", "list"), ("? {a: 1}\n: 3\n", "dict")])
def test_a_params_key_that_is_a_list_or_mapping_is_one_paragraph(tmp_path, capsys, key, kind):
    from sentlab.cli import main

    p = tmp_path / "params.yaml"
    p.write_text("seed: 1\n" + key)
    assert main(["params", "--params", str(p)]) == 2
    err = capsys.readouterr().err
    assert f"{p} has a key that is a {kind} at line 2" in err and "Traceback" not in err


def test_a_params_key_that_is_a_list_is_named_by_a_stage_too(work):
    from sentlab.config.stage_params import stage_params
    from sentlab.errors import SentlabError

    params = work / "params.yaml"
    params.write_text(params.read_text() + "\n? [a, b]\n: 3\n")
    with pytest.raises(SentlabError, match="has a key that is a list at line"):
        stage_params("train@simcse")


def test_credentials_reach_a_remote_node_only_when_its_stages_use_them(monkeypatch, tmp_path):
    import json
    import time

    from sentlab.parallel.ray_run import task_env

    for k in list(__import__("os").environ):
        if k.startswith(("HF_", "HUGGING_FACE", "MLFLOW_")):
            monkeypatch.delenv(k)
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")                              # the stages read the mirror only
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")     # this machine's own server
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "ml_secret")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")
    remote = task_env(local=False)
    assert "HF_TOKEN" not in remote and "MLFLOW_TRACKING_TOKEN" not in remote
    assert remote["MLFLOW_TRACKING_URI"] == "http://127.0.0.1:5000" and remote["HF_HUB_OFFLINE"] == "1"
    assert remote["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "20"
    local = task_env(local=True)                                             # one machine: its own environment
    assert local["HF_TOKEN"] == "hf_secret" and local["MLFLOW_TRACKING_TOKEN"] == "ml_secret"

    # a cluster's tracking server that answered this run's probe, and stages that may download: both needed
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "https://tracking.example.org")
    marker = tmp_path / "tracking.json"
    marker.write_text(json.dumps({"uri": "https://tracking.example.org", "reachable": True, "why": "",
                                  "checked": time.time()}))
    monkeypatch.setenv("SENTLAB_TRACKING_MARKER", str(marker))
    remote = task_env(local=False)
    assert remote["HF_TOKEN"] == "hf_secret" and remote["MLFLOW_TRACKING_TOKEN"] == "ml_secret"
    marker.write_text(json.dumps({"uri": "https://tracking.example.org", "reachable": False, "why": "no answer",
                                  "checked": time.time()}))                   # a server that did not answer
    assert "MLFLOW_TRACKING_TOKEN" not in task_env(local=False)


# --- a stopped `dvc repro` leaves no stage running; a stage never starts beside a live writer ------------------

STAGE_CHILD = """
import os, sys, time
from pathlib import Path
from sentlab.runtime.io import atomic_path
from sentlab.stages.entry import run_stage

def main():
    with atomic_path(Path("models/simcse"), is_dir=True) as tmp:
        (tmp / "half").write_text("x")
        Path("started").write_text(str(os.getpid()))
        time.sleep(120)                                  # a training; never ends by itself within the test

rc = run_stage(main)
Path("rc").write_text(str(rc))
sys.exit(rc)
"""

DVC_LIKE = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "child.py"])          # as `dvc repro` starts a stage (it does not pass SIGTERM on)
time.sleep(120)
"""


def _gone(pid: int) -> bool:
    from pathlib import Path

    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["foreground", "background-job"])
def test_a_stage_ends_with_the_dvc_repro_that_started_it(tmp_path, sigint_ignored):
    """``background-job``: `dvc repro` started as a non-interactive shell's `cmd &` (nohup … &, a batch script)
    ignores SIGINT, and so does every process it starts: the lifeline's interrupt must land all the same (the fault
    probe found the stage running on to its end after its `dvc repro` was gone)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / ".dvc").mkdir()
    (tmp_path / "child.py").write_text(STAGE_CHILD)
    (tmp_path / "dvc_like.py").write_text(DVC_LIKE)
    env = {**os.environ, "DVC_STAGE": "train@simcse", "PYTHONPATH": os.pathsep.join(sys.path)}
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None
    dvc = subprocess.Popen([sys.executable, "dvc_like.py"], cwd=tmp_path, env=env, preexec_fn=ignore)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "started").is_file():
            assert time.monotonic() < deadline and dvc.poll() is None
            time.sleep(0.2)
        stage = int((tmp_path / "started").read_text())
        assert (tmp_path / ".dvc/tmp/sentlab/writers/train@simcse.json").is_file()   # its writer lock
        dvc.terminate()                                  # SIGTERM to `dvc repro`
        dvc.wait(timeout=30)
        deadline = time.monotonic() + 15   # the lifeline polls every second (its SIGKILL comes only after 30 s)
        while not _gone(stage):
            assert time.monotonic() < deadline, "the stage outlived its dvc repro"
            time.sleep(0.2)
    finally:
        dvc.kill()
        if (tmp_path / "started").is_file() and not _gone(int((tmp_path / "started").read_text())):
            os.kill(int((tmp_path / "started").read_text()), 9)
    assert (tmp_path / "rc").read_text() == "130"             # interrupted, as by Ctrl-C
    assert not list((tmp_path / "models").iterdir())          # its temporary folder removed: nothing half-written
    assert not (tmp_path / ".dvc/tmp/sentlab/writers/train@simcse.json").exists()   # its lock released


@pytest.fixture
def live_writer(tmp_path, monkeypatch):
    """A workspace whose train@simcse lock names a live process of this host (a stage a stopped repro left)."""
    import json
    import socket
    import subprocess
    import sys

    from sentlab.stages.writers import start_time

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    lock = tmp_path / ".dvc/tmp/sentlab/writers/train@simcse.json"
    lock.parent.mkdir(parents=True)
    lock.write_text(json.dumps({"stage": "train@simcse", "host": socket.gethostname(), "pid": proc.pid,
                                "started": start_time(proc.pid), "since": 0}))
    monkeypatch.chdir(tmp_path)
    yield proc
    proc.kill()
    proc.wait(timeout=30)


def test_a_stage_does_not_start_beside_a_live_writer_of_its_outputs(live_writer, monkeypatch, capsys):
    from sentlab.stages.entry import run_stage

    ran = []
    monkeypatch.setenv("DVC_STAGE", "train@simcse")
    assert run_stage(lambda: ran.append(1)) == 2 and ran == []
    err = capsys.readouterr().err
    assert f"stage `train@simcse` is still running in this workspace (pid {live_writer.pid}" in err
    assert f"kill {live_writer.pid}" in err and "Traceback" not in err


def test_the_sources_stage_sweeps_nothing_while_a_writer_lives_and_a_dead_ones_lock_is_taken_over(live_writer,
                                                                                                  monkeypatch):
    from sentlab.errors import SentlabError
    from sentlab.stages.entry import run_stage
    from sentlab.stages.writers import check_no_live_writer

    with pytest.raises(SentlabError, match=f"pid {live_writer.pid}"):
        check_no_live_writer()
    live_writer.kill()
    live_writer.wait(timeout=30)
    check_no_live_writer()                                       # a dead writer's lock is stale
    monkeypatch.setenv("DVC_STAGE", "train@simcse")
    assert run_stage(lambda: None) == 0


HOLDER = """
import sys, time
from pathlib import Path
from sentlab.runtime.io import write_json
from sentlab.parallel.ray_run import exclusive_run

state = Path(sys.argv[1])
state.mkdir(parents=True, exist_ok=True)
with exclusive_run(state):
    write_json(state / "run.json", {"pid": __import__("os").getpid()})
    (state / "holding").write_text("1")
    time.sleep(120)                     # a coordinator between its phases (no DVC lock held)
"""


def test_sentlab_profile_does_not_rewrite_params_under_a_running_coordinator(tmp_path, capsys):
    import os
    import subprocess
    import sys
    import time

    from sentlab.cli import main

    import shutil
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    shutil.copytree(repo / "profiles", tmp_path / "profiles")
    params = tmp_path / "params.yaml"
    shutil.copy(repo / "params.yaml", params)                  # the committed profile, as written from profiles/
    before = params.read_text()
    state = tmp_path / ".dvc" / "tmp" / "sentlab"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(state)], env=env)
    try:
        deadline = time.monotonic() + 60
        while not (state / "holding").is_file():
            assert time.monotonic() < deadline and holder.poll() is None
            time.sleep(0.2)
        assert main(["profile", "smoke", "--params", str(params)]) == 2
    finally:
        holder.kill()
        holder.wait(timeout=30)
    err = capsys.readouterr().err
    assert f"A pipeline run (`sentlab run`; pid {holder.pid}) is running in this workspace" in err
    assert "Traceback" not in err and params.read_text() == before                     # untouched


def test_a_server_that_stops_answering_after_the_probe_is_skipped_by_the_stages_after(monkeypatch):
    import json
    import os
    import time

    from sentlab import tracking

    uri = "http://tracking.example.org:5000"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    from sentlab.tracking import budget

    marker = budget.marker_path()
    assert marker == __import__("pathlib").Path(os.environ["SENTLAB_TRACKING_MARKER"])
    marker.write_text(json.dumps({"uri": uri, "reachable": True, "why": "", "checked": time.time()}))
    assert not tracking.degraded()                                        # the probe said it answers
    tracking.degrade("log params", RuntimeError("INVALID_PARAMETER_VALUE: too long"))   # an answer, not a silence
    tracking._DEGRADED.clear()                                            # the next stage
    assert not tracking.degraded()
    tracking.degrade("log metrics at step 4", RuntimeError("Max retries exceeded with url: ... Read timed out"))
    tracking._DEGRADED.clear()                                            # the next stage: skips it, asks nothing
    assert tracking.degraded() and "Read timed out" in json.loads(marker.read_text())["why"]
