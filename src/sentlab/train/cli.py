"""``sentlab methods`` and ``sentlab train``: the lead wires :func:`register_cli` into ``sentlab.cli``.

Usage in ``sentlab/cli.py``::

    from .train.cli import register_cli as register_train_cli
    register_train_cli(subparsers)      # each subparser sets ``func(args) -> int``
"""

from __future__ import annotations


def cmd_methods(args) -> int:
    from ..methods import registered

    methods = registered()
    width = max((len(m) for m in methods), default=0)
    for mid in sorted(methods):
        cls = methods[mid]
        extra = f"  [needs annotations: {', '.join(cls.corpus_columns)}]" if cls.corpus_columns else ""
        print(f"{mid:<{width}}  {cls.summary or (cls.__doc__ or '').strip().splitlines()[0]}{extra}")
    return 0


def cmd_train(args) -> int:
    from ..config import load_params
    from .run import run_from_args

    return run_from_args(args, load_params(args.params))


def register_cli(subparsers) -> None:
    """Add the ``methods`` and ``train`` subcommands to an argparse ``subparsers`` object."""
    from .run import add_train_arguments

    p = subparsers.add_parser("methods", help="list the registered training methods, one line each")
    p.set_defaults(func=cmd_methods)
    p = subparsers.add_parser("train", help="train one method with params.yaml (what the DVC train stage runs)")
    add_train_arguments(p)
    p.set_defaults(func=cmd_train)
