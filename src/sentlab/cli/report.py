"""``sentlab report [--from-run]``: every paper table and figure from the workspace's outputs (``reports/index.md``),
or a parallel run's report from the stages it finished (:mod:`sentlab.report.run_report`). A command, not a module of
the report: the profile's models come from the stage list (:func:`sentlab.stages.stage_list.profile_models`), a floor
above the report."""

from __future__ import annotations


def cmd_report(args) -> int:
    from ..stages.stage_list import profile_models
    from ..methods.blocks import load_checked
    from ..report.build import build_report, log_to_mlflow

    params = load_checked(args.params)
    if args.from_run:   # a parallel run's report from what it finished, into a folder of its own (not reports/)
        from ..errors import SentlabError
        from ..report.run_report import build_run_report

        if args.mlflow:
            raise SentlabError("`sentlab report --from-run --mlflow`: a partial report is not attached to the MLflow "
                               "runs (the run's final `dvc repro` attaches the whole one). Drop --mlflow.")
        rep, index, done = build_run_report(args.root, args.out, params.model.backbone, params.profile,
                                            profile_models(params))
        print(f"report: from the {len(done['finished'])} stages the last `sentlab run` finished "
              f"({len(done['unfinished'])} not finished); index: {index}")
    else:
        rep = build_report(args.root, params.model.backbone, params.profile, profile_models(params))
        print(f"report: {len(rep.files)} files; index: {args.root}/reports/index.md")
    if args.mlflow:
        logged = log_to_mlflow(rep)
        print(f"report: artifacts logged to {len(logged)} MLflow runs")
    return 0


def register_cli(subparsers) -> None:
    p = subparsers.add_parser("report", help="regenerate every paper table and figure (reports/index.md)")
    p.add_argument("--params", default="params.yaml")
    p.add_argument("--root", default=".", help="repository root holding reports/, models/, data/")
    p.add_argument("--mlflow", action="store_true", help="also attach the tables/figures to the MLflow runs")
    p.add_argument("--from-run", action="store_true",
                   help="the last `sentlab run`'s report from the stages it finished (while it runs or after a kill), "
                        "into --out, never reports/ (sentlab.report.run_report)")
    p.add_argument("--out", default=None, help="with --from-run: the folder (default .dvc/tmp/sentlab/report)")
    p.set_defaults(func=cmd_report)
