"""``sentlab mlflow start-parent | end-parent | wrap``: the MLflow parent run of one pipeline run (``sentlab repro``,
:mod:`sentlab.cli.repro`, opens and closes it the same way).

The Makefile groups one pipeline run under one MLflow parent run::

    RUN_ID=$(sentlab mlflow start-parent --profile quick)
    SENTLAB_PARENT_RUN_ID=$RUN_ID dvc repro; rc=$?
    sentlab mlflow end-parent $RUN_ID --rc $rc

or in one command (also for ``dvc exp run``): ``sentlab mlflow wrap -- dvc exp run -S train.max_steps=120``.
"""

from __future__ import annotations

import os
import subprocess
import sys


def cmd_start_parent(args) -> int:
    # the recipe's shell owns the run: it closes it after `dvc repro` (the sweep closes it if it dies)
    print(start_pipeline_parent(args.params, args.profile, args.name, owner_pid=os.getppid()))
    return 0


def start_pipeline_parent(params_path: str | None, profile: str | None = None, name: str | None = None,
                          owner_pid: int | None = None) -> str:
    """The parent run of one pipeline run, with the params in force (``params_path``) and ``profile``; its id, ''
    when tracking is off (the stages then run untracked). ``owner_pid``: the process that closes it."""
    from .. import tracking
    from ..tracking import runs as tracking_runs

    params = {}
    if params_path and os.path.exists(params_path):
        from ..methods.blocks import load_checked

        p = load_checked(params_path)
        params = {"profile": p.profile, "backbone": p.model.backbone, "seed": p.seed,
                  "train.methods": ",".join(p.train.methods),
                  "ablations.enabled": p.ablations.enabled}
    if profile:
        params["profile"] = profile
    name = name or f"pipeline {params.get('profile', '')}".strip()
    from ..tracking.budget import probe

    probe()   # this pipeline run's one wait on a tracking server: its stages read the verdict
    try:
        return tracking_runs.start_parent(name, params=params, tags={"sentlab.profile": str(params.get("profile", ""))},
                                          owner_pid=owner_pid)
    except Exception as e:  # noqa: BLE001 - tracking never stops the pipeline: no parent run, stages untracked
        tracking.degrade("create the pipeline's parent run", e)
        return ""


def cmd_end_parent(args) -> int:
    end_pipeline_parent(args.run_id, args.rc, args.status)
    return 0


def end_pipeline_parent(run_id: str, rc: int, status: str | None = None) -> None:
    """Close the parent run ``run_id`` (none when '') with ``status`` (default from the pipeline's exit status
    ``rc``), then close the runs of stages killed under it."""
    from .. import tracking
    from ..tracking import runs as tracking_runs

    status = status or ("FINISHED" if rc == 0 else ("KILLED" if rc in (130, 137, 143) else "FAILED"))
    if run_id:
        try:
            tracking_runs.end_parent(run_id, status)
            print(f"mlflow: parent run {run_id} {status}", file=sys.stderr)
        except Exception as e:  # noqa: BLE001 - a side channel: the pipeline's exit status stands
            tracking.degrade(f"close the parent run {run_id}", e)
    tracking_runs.sweep_orphans()   # runs of stages killed under it (their process is gone)


def cmd_wrap(args) -> int:
    """Run a command (no shell) with SENTLAB_PARENT_RUN_ID set to a new parent run; close it with the exit status."""
    from .. import tracking
    from ..tracking import runs as tracking_runs
    from ..errors import SentlabError

    cmd = [c for c in args.cmd if c != "--"]
    if not cmd:
        raise SentlabError("`sentlab mlflow wrap` needs a command after `--`, e.g. `sentlab mlflow wrap -- dvc repro`.")
    from ..tracking.budget import probe

    probe()   # this pipeline run's one wait on a tracking server: its stages read the verdict
    try:
        run_id = tracking_runs.start_parent(args.name or " ".join(cmd)[:200])
    except Exception as e:  # noqa: BLE001 - tracking never stops the command: it runs without a parent run
        tracking.degrade("create the parent run", e)
        run_id = ""
    env = dict(os.environ, **({tracking.PARENT_ENV: run_id} if run_id else {}))
    rc = 1
    try:
        rc = subprocess.call(cmd, env=env)
    except KeyboardInterrupt:
        rc = 130
    finally:
        if run_id:
            try:
                tracking_runs.end_parent(run_id, "FINISHED" if rc == 0 else ("KILLED" if rc == 130 else "FAILED"))
            except Exception as e:  # noqa: BLE001 - the command's exit status stands
                tracking.degrade(f"close the parent run {run_id}", e)
    return rc


def register_cli(subparsers) -> None:
    m = subparsers.add_parser("mlflow", help="MLflow parent runs grouping one pipeline run's stage runs")
    msub = m.add_subparsers(dest="mlflow_command", required=True)
    s = msub.add_parser("start-parent", help="create the parent run; prints its id (export SENTLAB_PARENT_RUN_ID)")
    s.add_argument("--name", default=None)
    s.add_argument("--profile", default=None)
    s.add_argument("--params", default="params.yaml", help="params logged on the parent run")
    s.set_defaults(func=cmd_start_parent)
    e = msub.add_parser("end-parent", help="close the parent run")
    e.add_argument("run_id", nargs="?", default="", help="the parent run's id (empty: none was created)")
    e.add_argument("--rc", type=int, default=0, help="exit status of the pipeline (0: FINISHED, else FAILED)")
    e.add_argument("--status", choices=["FINISHED", "FAILED", "KILLED"], default=None)
    e.set_defaults(func=cmd_end_parent)
    w = msub.add_parser("wrap", help="run a command under a new parent run: sentlab mlflow wrap -- dvc repro")
    w.add_argument("--name", default=None)
    w.add_argument("cmd", nargs=argparse_remainder())
    w.set_defaults(func=cmd_wrap)


def argparse_remainder():
    import argparse

    return argparse.REMAINDER
