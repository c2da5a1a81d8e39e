"""``sentlab preflight``: the command line."""

from __future__ import annotations

from pathlib import Path

from ..preflight.slice import SLICE


def cmd_preflight(args) -> int:
    from ..preflight.run import preflight

    sl = {k: getattr(args, k) for k in SLICE if getattr(args, k, None) is not None}
    rc, _, _ = preflight(Path(args.workspace), args.profile, out=Path(args.out) if args.out else None,
                         scratch=Path(args.scratch) if args.scratch else None, sl=sl, keep_weights=args.keep_weights,
                         stages_filter=args.stages)
    return rc


def register_cli(subparsers) -> None:
    p = subparsers.add_parser("preflight", help="run every stage of a profile on a tiny slice in a scratch copy; a "
                                                "table of ok / failed / needs asset with time and memory projections")
    p.add_argument("--profile", default=None,
                   help="a profile (profiles/<name>.yaml); default: params.yaml's `profile:` line")
    p.add_argument("--workspace", default=".", help="the repository to check (default: here); never written")
    p.add_argument("--scratch", default=None, help="scratch folder (default: a new temporary folder)")
    p.add_argument("--out", default=None, help="folder for preflight.md/.json (default: <scratch>/reports/preflight)")
    p.add_argument("--stages", default=None, help="only stages whose name matches this regex (and their upstream)")
    p.add_argument("--keep-weights", action="store_true",
                   help="keep the trained models' weights in the scratch folder")
    for k, v in SLICE.items():
        p.add_argument(f"--{k.replace('_', '-')}", dest=k, type=int, default=None, help=f"slice {k} (default {v})" + (
                       "; 0: the profile's own batch sizes" if k == "batch_size" else ""))
    p.set_defaults(func=cmd_preflight)
