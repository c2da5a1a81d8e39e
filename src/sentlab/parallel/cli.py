"""``sentlab run`` and ``sentlab status``."""

from __future__ import annotations

import subprocess
import sys


def _cmd_run(args) -> int:
    if args.jobs <= 1 and not args.address:
        return subprocess.run([sys.executable, "-m", "dvc", "repro"]).returncode
    from .runner import run

    remote = args.remote or bool(args.address and not args.shared_fs)
    return run(".", jobs=args.jobs, address=args.address, gpus=args.gpus, remote=remote,
               keep_worktrees=args.keep_worktrees)


def _cmd_status(args) -> int:
    from .status import print_status

    return print_status(".", as_json=args.json)


def register_cli(sub) -> None:
    r = sub.add_parser("run", help="the pipeline with independent stages in parallel on Ray (--jobs N; --address: "
                                   "an existing Ray cluster); --jobs 1 is `dvc repro`")
    r.add_argument("--jobs", "-j", type=int, default=1, help="tasks at once on this machine (CPUs given to Ray: "
                                                              "jobs x runtime.cpus_per_task); with --address the "
                                                              "cluster's resources decide")
    r.add_argument("--address", default=None, help="join this Ray cluster (ray://host:10001, host:6379, auto)")
    r.add_argument("--gpus", type=float, default=None, help="GPUs a local Ray declares (default: detected)")
    r.add_argument("--remote", action="store_true", help="the workers share no filesystem with this workspace: they "
                                                         "pull their inputs from the default DVC remote and push "
                                                         "their outputs and run-cache entries to it (the default "
                                                         "with --address, unless --shared-fs)")
    r.add_argument("--shared-fs", action="store_true", help="with --address: every node sees this workspace at the "
                                                            "same path (no DVC remote needed)")
    r.add_argument("--keep-worktrees", action="store_true", help="keep the tasks' worktrees after success")
    r.set_defaults(func=_cmd_run)
    s = sub.add_parser("status", help="every stage of the profile: up to date / stale / running / failed, with logs")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=_cmd_status)
