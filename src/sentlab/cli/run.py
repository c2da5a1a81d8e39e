"""``sentlab run`` and ``sentlab status``."""

from __future__ import annotations

import subprocess
import sys


def run_targets(args) -> list[str] | None:
    """The stages ``--table``/``--target`` ask for (None: the whole pipeline)."""
    if not args.table and not args.target:
        return None
    targets = [t for arg in args.target for t in arg.split(",") if t]
    if args.table:
        from ..methods.blocks import load_checked
        from ..campaign.scope import table_stages

        targets += [s for s in table_stages(load_checked("params.yaml"), [t for arg in args.table
                                                                         for t in arg.split(",") if t])
                    if s not in targets]
    return targets


def _cmd_run(args) -> int:
    targets = run_targets(args)
    if args.jobs <= 1 and not args.address and not args.no_final:
        if targets is None:
            return subprocess.run([sys.executable, "-m", "dvc", "repro"]).returncode
        return _serial_targets(targets)
    from ..parallel.ray_run import run

    remote = args.remote or bool(args.address and not args.shared_fs)
    return run(".", jobs=args.jobs, address=args.address, gpus=args.gpus, remote=remote,
               keep_worktrees=args.keep_worktrees, targets=targets, final=not args.no_final)


def _serial_targets(targets: list[str]) -> int:
    """``dvc repro --keep-going`` of the targets (and what they need), then the report from what exists."""
    import os
    from pathlib import Path

    from ..parallel import STATE_DIR
    from ..parallel.graph import stage_names
    from ..parallel.ray_run import REPORT, partial_outputs

    unknown = [t for t in targets if t not in stage_names(".")]
    if unknown:
        from ..errors import SentlabError

        raise SentlabError(f"no stage {', '.join(unknown)} in this workspace's dvc.yaml (`dvc stage list` names "
                           f"them); regenerate the stage list (`sentlab stages`) if params.yaml changed.")
    print(f"sentlab run: {len(targets)} stage(s) and what they need: {' '.join(targets)}", file=sys.stderr)
    rc = subprocess.run([sys.executable, "-m", "dvc", "repro", "--keep-going", *targets]).returncode
    logs = Path(STATE_DIR) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    built = partial_outputs(Path("."), list(REPORT), logs, dict(os.environ))
    for s, c in built.items():
        print(f"sentlab run: {s} built from what exists, outside DVC ({'ok' if c == 0 else f'exit {c}'}; log "
              f"{logs / (s + '.partial.log')}): rows of other tables say \"not run\"", file=sys.stderr)
    return rc or max(built.values(), default=0)


def _cmd_status(args) -> int:
    from ..parallel.status import print_status

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
    r.add_argument("--no-final", action="store_true", help="the chains only: their outputs stay in DVC's run cache, "
                                                           "and a later `dvc repro` here restores them and runs the "
                                                           "report and export (a CPU job after the GPU job: "
                                                           "scripts/slurm/, docs/slurm.md)")
    r.add_argument("--table", action="append", default=[], metavar="ID",
                   help="only the stages that fill this paper table (repeatable or comma-separated; the ids: "
                        "`sentlab plan`), then the report from what exists; widening later re-runs nothing done")
    r.add_argument("--target", action="append", default=[], metavar="STAGE",
                   help="only this DVC stage and what it needs (repeatable or comma-separated), then the report")
    r.set_defaults(func=_cmd_run)
    s = sub.add_parser("status", help="every stage of the profile: up to date / stale / running / failed, with logs")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=_cmd_status)
