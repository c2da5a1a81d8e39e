"""``sentlab plan --profile P``: what a profile costs on GPUs (:mod:`sentlab.campaign.plan`)."""

from __future__ import annotations


def register_cli(subparsers) -> None:
    pp = subparsers.add_parser("plan", help="what a profile costs on GPUs: per paper table and in total, "
                                            "trainings, steps, GPU-hours, disk (measured or estimated)")
    pp.add_argument("--profile", default=None, help="a profile (profiles/<name>.yaml); default: params.yaml's")
    pp.add_argument("--params", default="params.yaml")
    pp.add_argument("--gpus", default="1,4,8", help="GPU counts for the wall-time line")
    pp.set_defaults(func=_cmd_plan)


def _cmd_plan(args) -> int:
    from ..campaign.plan import plan, render
    from ..methods.blocks import load_checked

    params = load_checked(args.params, profile=args.profile)
    gpus = tuple(int(g) for g in args.gpus.split(","))
    print(render(params.profile, plan(params, max(gpus)), gpus))
    return 0
