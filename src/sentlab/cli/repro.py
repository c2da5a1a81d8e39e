"""``sentlab repro PROFILE [--force] [--table ID] [--jobs N] [--address A]``: what ``make repro`` runs.

The profile is written to params.yaml and the pipeline run under ONE lock, the workspace's coordinator lock
(:mod:`sentlab.parallel.workspace_lock`), held from the profile check to the end: before it, ``make repro`` ran
``sentlab profile``
and then ``dvc repro`` as two commands, and a second ``make repro PROFILE=other`` started in the seconds between them
(before ``dvc repro`` took DVC's lock) rewrote params.yaml under the first (issue #64). Now the second one stops with
one paragraph naming the first, and params.yaml is untouched.

Serial (``--jobs 1``, no ``--address``), as the Makefile's recipe did: a parent MLflow run for the pipeline run
(``SENTLAB_PARENT_RUN_ID`` for its stages), ``dvc repro --keep-going`` (``--table``: ``sentlab run --table``'s
targets, then the report from what exists); when stages failed (without ``--table``) the report and the exports are
built from what finished, unless ``sources`` failed (a profile this machine cannot run stops there: no stage ran,
and an earlier report is left as it was); the parent run is closed with the exit status. ``--jobs N``/``--address``:
``sentlab run`` (:mod:`sentlab.parallel.ray_run`), under the same lock.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..parallel import STATE_DIR
from ..provenance import failures
from ..parallel.workspace_lock import exclusive_run

PARTIAL = ("pipeline/report.py", "pipeline/export.py")   # built from what finished when stages failed


def repro(profile: str, force: bool = False, table: list[str] | None = None, jobs: int = 1,
          address: str | None = None) -> int:
    """``make repro`` in the current directory (the repository root); its exit status."""
    from ..stages.profiles import write_profile

    why = (f"params.yaml is not rewritten (to profile `{profile}`) while its stages read it, and a second pipeline "
           f"run would write the same outputs")
    with exclusive_run(Path(STATE_DIR), what=f"make repro PROFILE={profile}" + (f" JOBS={jobs}" if jobs > 1 else ""),
                       why=why):
        changed = write_profile("params.yaml", profile, force=force, own_lock=True)
        print(f"params.yaml: profile {profile}" + (" (written from profiles/)" if changed else " (kept)")
              + "; models.yaml: its stage list", flush=True)
        from .run import run_targets

        targets = run_targets(argparse.Namespace(table=table or [], target=[]))
        if jobs > 1 or address:
            from ..parallel.ray_run import run

            return run(".", jobs=jobs, address=address, remote=bool(address), targets=targets, lock=False)
        return _serial(profile, targets)


def _serial(profile: str, targets: list[str] | None) -> int:
    from .. import tracking
    from .mlflow import end_pipeline_parent, start_pipeline_parent
    from .run import _serial_targets

    run_id = start_pipeline_parent("params.yaml", profile)   # this process closes it
    os.environ[tracking.PARENT_ENV] = run_id
    rc = 1
    try:
        if targets is not None:
            rc = _serial_targets(targets)
        else:
            started = time.time()
            rc = _call([*_dvc(), "repro", "--keep-going"])
            stopped = failures.failed_since("sources", started) if rc not in (0, 130, 143) else None
            if stopped:   # every stage needs sources' outputs: none ran, there is nothing to report
                print("nothing ran: `sources`, which every other stage needs, stopped the run; the report and the "
                      "exports are left as they were. Its reason:", flush=True)
                print(stopped, flush=True)
            elif rc not in (0, 130, 143):   # not stopped by a signal: the report from what finished
                print("some stages failed (make status lists them with their logs): the report and the exports are "
                      "built from what finished", flush=True)
                for script in PARTIAL:
                    _call([sys.executable, script])
    except KeyboardInterrupt:
        rc = 130
    finally:
        end_pipeline_parent(run_id, rc)
    return rc


def _dvc() -> list[str]:
    """``dvc`` from PATH (the Makefile puts the venv's first), else this Python's."""
    found = shutil.which("dvc")
    return [found] if found else [sys.executable, "-m", "dvc"]


def _call(cmd: list[str]) -> int:
    """Run ``cmd``, passing a SIGTERM on to it (its exit status is then 143 whatever it returned); Ctrl-C reaches it
    too (the same process group): wait for it to end. A child ended by a signal gives 128 + the signal's number."""
    proc = subprocess.Popen(cmd)
    stopped: list[int] = []

    def forward(signum, _frame):
        stopped.append(signum)
        proc.send_signal(signum)

    before = signal.signal(signal.SIGTERM, forward)
    try:
        try:
            rc = proc.wait()
        except KeyboardInterrupt:
            proc.wait()
            raise
    finally:
        signal.signal(signal.SIGTERM, before)
    return 128 + stopped[0] if stopped else 128 - rc if rc < 0 else rc


def _cmd_repro(args) -> int:
    return repro(args.profile, force=args.force, table=args.table, jobs=args.jobs, address=args.address)


def register_cli(sub) -> None:
    rp = sub.add_parser("repro", help="what `make repro` runs: params.yaml from profiles/PROFILE and the pipeline "
                                      "(dvc repro, or sentlab run with --jobs N) under one workspace lock; a second "
                                      "one with another profile is refused while it runs")
    rp.add_argument("profile", help="a profile: profiles/<name>.yaml")
    rp.add_argument("--force", action="store_true", help="switch even when params.yaml has hand edits (drops them)")
    rp.add_argument("--table", action="append", default=[], metavar="ID", help="as `sentlab run --table`")
    rp.add_argument("--jobs", "-j", type=int, default=1, help="N > 1: `sentlab run --jobs N` (Ray)")
    rp.add_argument("--address", default=None, help="as `sentlab run --address`")
    rp.set_defaults(func=_cmd_repro)
