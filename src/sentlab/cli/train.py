"""``sentlab train``: :func:`cmd_train`, which ``sentlab.cli`` registers with the STS-B dev check (train/ imports
no evaluator: the check is :func:`sentlab.evaluate.sts.diagnostics.make_dev_evaluator`, passed in from above).
``sentlab methods``, which lists the baselines of ``sentlab.evaluate`` too, is ``sentlab.cli``'s own."""

from __future__ import annotations


def cmd_train(args, make_dev_eval) -> int:
    """Train one method (``make_dev_eval``: :data:`sentlab.train.run.DevEvalMaker`). It refuses a method (or an
    ablation) the active profile does not train instead of writing a "not run" marker into the tracked
    ``models/`` (the pipeline has no stage for it)."""
    from ..methods.blocks import load_checked
    from ..errors import SentlabError
    from ..train.run import run_from_args

    params = load_checked(args.params)
    if args.ablation or args.variant:
        if not params.ablations.enabled:
            name = args.ablation or args.variant
            raise SentlabError(
                f"`sentlab train` was asked for the ablation `{name}`, but ablations.enabled is false in "
                f"{args.params} (profile `{params.profile}`): nothing would train and models/{name} would hold a "
                f"\"not run\" marker. Set `ablations.enabled: true` there, run `sentlab stages` (which writes the "
                f"stage list) and `dvc repro train@{name}`.")
        if args.ablation:
            params.ablations.variant(args.ablation)  # an unknown variant fails here, naming the list
    elif args.method and args.method not in params.train.methods:
        raise SentlabError(
            f"`sentlab train {args.method}`: `{args.method}` is not in train.methods of profile `{params.profile}` "
            f"({args.params}: {', '.join(params.train.methods)}), so nothing would train and models/{args.method} "
            f"would hold a \"not run\" marker. Add it to `train.methods` there, run `sentlab stages` (which writes "
            f"the stage list) and `dvc repro train@{args.method}`.")
    return run_from_args(args, params, make_dev_eval)

