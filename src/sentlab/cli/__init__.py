"""The ``sentlab`` command line: one entry point for every stage's library code.

This package is the one folder of commands (docs/architecture.md): this module builds the parser (``sentlab``,
``python -m sentlab.cli``) and holds the commands it registers itself (evaluate, glue, params, doctor, profile,
stages, methods, train); each other command is a module beside it, named for the command, listed in :data:`PLUGINS`.

Errors meant for the user (:class:`~sentlab.errors.SentlabError`) are printed
as one paragraph without a traceback, with exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys


# The command modules beside this one that add subcommands through ``register_cli(subparsers)``.
PLUGINS: list[str] = ["sentlab.cli.annotate", "sentlab.cli.mlflow", "sentlab.cli.report", "sentlab.cli.preflight",
                      "sentlab.cli.standin", "sentlab.cli.run", "sentlab.cli.plan", "sentlab.cli.push",
                      "sentlab.cli.fetch", "sentlab.cli.repro"]


def _cmd_evaluate(args) -> int:
    import time
    from pathlib import Path

    from ..config import EvaluateParams
    from ..methods.blocks import load_checked
    from ..data.sts import sts_table
    from ..evaluate.sts.protocol import evaluate_table
    from .. import tracking
    from ..evaluate.sts.runner import build_encoders, precision_record
    from ..runtime.io import write_json

    params = load_checked(args.params) if args.params else None
    ep = params.evaluate if params else EvaluateParams()
    tasks = {"sts": ["sts"], "transfer": ["transfer"], "retrieval": ["retrieval"],
             "all": ["sts", "transfer"]}[args.tasks]
    if args.format in ("mteb", "senteval") and "sts" not in tasks:
        what = "MTEB's result JSON" if args.format == "mteb" else "SentEval's results dict"
        print(f"--format {args.format} writes {what} of the STS tasks; --tasks {args.tasks} evaluates none. "
              f"Use --tasks sts (or all).", file=sys.stderr)
        return 2
    table = None
    if "sts" in tasks:
        table, origin = sts_table(args.sts)
        print(f"STS pairs: {origin}", file=sys.stderr)
    precision = args.precision or ep.precision
    batch = args.batch_size or ep.batch_size
    encoders = build_encoders(args.model, pooling=args.pooling, precision=precision, name=args.name,
                              device=args.device or ep.device, max_length=ep.max_length, workers=ep.workers)
    figures_dir = Path(args.json).parent if args.json else None
    out = {}
    for i, (name, enc) in enumerate(encoders.items()):
        if "retrieval" in tasks:
            out[name] = {**precision_record(enc), **_retrieval_metrics(enc, batch)}
            continue
        if "sts" not in tasks:
            out[name] = {**precision_record(enc), **_transfer_metrics(enc, batch)}
            continue
        t0 = time.perf_counter()
        res, lookup = evaluate_table(enc, table, batch_size=batch, return_embeddings=True)
        if args.format == "mteb":  # MTEB's result JSON of the STS tasks that are MTEB's (evaluate.sts.mteb_results)
            from ..evaluate.sts import mteb_results

            hub = i == 0 and "/" in args.model and not Path(args.model).exists()
            written = mteb_results.write(Path(args.out), args.model if hub else f"sentlab/{name}",
                                         mteb_results.results(table, lookup, time.perf_counter() - t0,
                                                              normalize=i == 0 and mteb_results.normalizes(args.model)),
                                         args.revision)
            print(f"{name}: MTEB results -> {written[0].parent} ({len(written) - 1} tasks; SICK-R left out: "
                  f"{mteb_results.LEFT_OUT['SICKRelatedness']})", file=sys.stderr)
        if "transfer" in tasks:
            res.update(_transfer_metrics(enc, batch))
        if args.diagnostics:
            from ..evaluate.sts.diagnostics import run_diagnostics

            res["diagnostics"], dens = run_diagnostics(table, lookup, ep)
            if figures_dir is not None:
                from ..evaluate.sts.figures import density_figure

                fig = density_figure(dens["gold"], dens["cos"], figures_dir / f"{name}_density.png",
                                     title=f"{name}: cosine density on STS-B test by gold level")
                res["diagnostics"]["density"]["figure"] = fig.as_posix()
        out[name] = {**precision_record(enc), **res}
    main = next(iter(out.values()))
    flat = {k: v for k, v in main.items()}
    if len(out) > 1:
        flat["extra_rows"] = {k: v for k, v in list(out.items())[1:]}
    if args.format == "senteval":   # SentEval's results dict of the STS tasks (sentlab.report.senteval_results)
        import json

        from ..report.senteval_results import results as senteval_results

        layout = senteval_results(main)
        if args.json:
            write_json(args.json, layout)
        else:
            print(json.dumps(layout, indent=1))
    elif args.json:
        write_json(args.json, flat)
    if not args.no_mlflow:  # one eval/<name> run per row, as the pipeline's evaluate stage logs
        for name, res in out.items():
            with tracking.run(f"eval/{name}", params={"model": args.model, "pooling": encoders[name].pooling,
                                                      "kind": "cli", "evaluate": ep.model_dump()},
                              tags={"sentlab.stage": "evaluate", "sentlab.model": name}):
                tracking.log_metrics({k: v for k, v in res.items()
                                      if k not in ("diagnostics", "transfer", "retrieval")})
    from ..config.tasks import RETRIEVAL_KEYS, STS_KEYS, TRANSFER_KEYS

    keys = [*STS_KEYS] * ("sts" in tasks) + [*TRANSFER_KEYS] * ("transfer" in tasks)
    keys += [*RETRIEVAL_KEYS] * ("retrieval" in tasks)
    for name, res in out.items():
        print(name + ": " + "  ".join(f"{k} {res[k]:.2f}" for k in keys))
        if "diagnostics" in res:
            _print_diagnostics(res["diagnostics"])
    if args.diagnostics and figures_dir is None:
        print("density figure not written: pass --json PATH (figures go next to the JSON)")
    return 0


def _transfer_metrics(enc, batch: int) -> dict:
    """SentEval's seven transfer tasks on ``enc``'s embeddings (:mod:`sentlab.evaluate.suites.transfer_stage`)."""
    from ..evaluate.suites.transfer_stage import transfer_metrics
    from ..evaluate.suites.transfer_data import TASKS

    return transfer_metrics(enc, TASKS, batch)


def _retrieval_metrics(enc, batch: int) -> dict:
    """PaSeR Table 3 (:mod:`sentlab.evaluate.suites.retrieval`): QQP retrieval and AskUbuntu reranking of ``enc``, with
    Table 6's examples at their defaults (params.yaml ``retrieval.examples``)."""
    from ..evaluate.suites.retrieval import load_askubuntu, load_qqp
    from ..evaluate.suites.retrieval_stage import retrieval_metrics
    from ..config.sections import RetrievalExamplesParams

    from ..config.tasks import RETRIEVAL_TASKS

    loaders = {"QQP": load_qqp, "AskUbuntu": load_askubuntu}   # each declared retrieval task's data
    data = {t: loaders[t]() for t in RETRIEVAL_TASKS}
    return retrieval_metrics(enc, RETRIEVAL_TASKS, data, batch, examples=RetrievalExamplesParams())


def _cmd_glue(args) -> int:
    from ..evaluate.suites.glue import GlueConfig, run_glue
    from ..runtime.io import write_json

    cfg = GlueConfig(max_train=args.max_train, max_steps=args.max_steps)
    res = run_glue(args.model, args.tasks.split(","), cfg, seed=args.seed, device=args.device)
    flat = {t: r.get("score") for t, r in res.items()}
    if args.json:
        write_json(args.json, {**flat, "status": "evaluated", "glue": res})
    for t, r in res.items():
        print(f"{t}: {r['score']:.2f}" if "score" in r else f"{t}: {r['status']}")
    return 0


def _print_diagnostics(d: dict) -> None:
    for split, v in d["alignment_uniformity"].items():
        if isinstance(v, dict):
            print(f"  {split}: alignment {v['alignment']:.4f}  uniformity {v['uniformity']:.4f}  "
                  f"({v['positive_pairs']} positive pairs, {v['sentences']} sentences)")
    hs = d["hard_subset"]
    print("  hard subset (subset / full Spearman, pairs): " + "  ".join(
        f"{t} {v['subset']:.2f}/{v['full']:.2f} ({v['subset_pairs']})" for t, v in hs["tasks"].items())
        + f"  Avg {hs['Avg_subset']:.2f}/{hs['Avg_full']:.2f}")
    print("  cosine by gold level (mean/var): " + "  ".join(
        f"{b['level']} {b['mean']:.2f}/{b['var']:.3f}" for b in d["density"]["bins"]))
    if d["density"].get("figure"):
        print(f"  density figure: {d['density']['figure']}")


def _cmd_params(args) -> int:
    import yaml

    from ..methods.blocks import load_checked
    from ..stages.profiles import load_all_profiles
    from ..config.profile_files import profiles_dir

    if profiles_dir(args.params).is_dir():
        load_all_profiles(profiles_dir(args.params))  # every profile must be valid, not only the one printed
    p = load_checked(args.params, profile=args.profile)
    print(yaml.safe_dump(p.model_dump(), sort_keys=False))
    return 0


def _cmd_doctor(args) -> int:
    """``sentlab doctor``: what this machine has and whether the profile in force runs here (exit 1 where not)."""
    from ..config import load_params
    from ..runtime.device import doctor

    text, ok = doctor(load_params(args.params, profile=args.profile))
    print(text)
    return 0 if ok else 1


def _cmd_profile(args) -> int:
    from ..stages.profiles import write_profile

    changed = write_profile(args.params, args.name, force=args.force)
    print(f"{args.params}: profile {args.name}" + (" (written from profiles/)" if changed else " (kept)")
          + "; models.yaml: its stage list")
    return 0


def _cmd_methods(args) -> int:
    """``sentlab methods``: the registered training methods, then the baselines (one evaluate_baseline stage each)."""
    from ..evaluate.baselines.stage import DESCRIPTIONS
    from ..methods import registered

    methods = registered()
    width = max((len(m) for m in methods), default=0)
    for mid in sorted(methods):
        cls = methods[mid]
        extra = f"  [needs annotations: {', '.join(cls.corpus_columns)}]" if cls.corpus_columns else ""
        print(f"{mid:<{width}}  {cls.summary or (cls.__doc__ or '').strip().splitlines()[0]}{extra}")
    print("\nbaselines (evaluate.baselines: one evaluate_baseline stage each, no training):")
    for name, text in DESCRIPTIONS.items():
        print(f"{name:<{width}}  {text}")
    return 0


def _cmd_train(args) -> int:
    """``sentlab train``: :func:`sentlab.cli.train.cmd_train` with the STS-B dev check of ``sentlab.evaluate``."""
    from ..evaluate.sts.diagnostics import make_dev_evaluator
    from .train import cmd_train

    return cmd_train(args, make_dev_evaluator)


def _cmd_stages(args) -> int:
    from pathlib import Path

    from ..methods.blocks import load_checked
    from ..stages.stage_list import stage_list_for, write_stage_list

    params = load_checked(args.params)
    path = Path(args.params).resolve().parent / "models.yaml"
    changed = write_stage_list(params, path)
    lists = stage_list_for(params)
    print(f"{path.name}: {len(lists['models'])} models, {len(lists['baselines'])} baselines "
          f"({'written' if changed else 'unchanged'})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sentlab", description=__doc__.splitlines()[0])
    p.add_argument("-v", "--verbose", action="store_true")
    from ..config.poolings import POOLINGS
    from ..train.run import add_train_arguments

    sub = p.add_subparsers(dest="command", required=True)

    e = sub.add_parser("evaluate", help="STS evaluation (docs/evaluation.md) of a model: 7 tasks + STS-B dev")
    e.add_argument("--model", required=True,
                   help="hub id or folder (a trained models/<method>, any sentence-transformers model folder, "
                        "or any HF model)")
    e.add_argument("--pooling", choices=list(POOLINGS), default=None,
                   help="default: the trained model's own (sentlab.json), else a sentence-transformers folder's own "
                        "(modules.json: Pooling cls/mean, sentlab's modules, its default prompt), else cls")
    e.add_argument("--json", help="write the flat metrics JSON here")
    e.add_argument("--format", choices=["json", "mteb", "senteval"], default="json",
                   help="json: the flat metrics JSON (--json PATH); senteval: SentEval's results dict of the STS "
                        "tasks instead (--json PATH, else stdout; sentlab.report.senteval_results); mteb: also MTEB's "
                        "result JSON for STS12-16 and "
                        "STSBenchmark in the MTEB results repository's layout, <--out>/<org>__<model>/<revision>/"
                        "<Task>.json (SICK-R left out: MTEB scores all 9,927 SICK pairs, sentlab the 4,927-pair "
                        "test split; sentlab.evaluate.sts.mteb_results)")
    e.add_argument("--out", default="results", help="--format mteb: the results folder (default: results)")
    e.add_argument("--revision", default=None,
                   help="--format mteb: the model revision folder (default: no_revision_available, MTEB's name)")
    e.add_argument("--sts", default=None, help="an STS table the prepare stage wrote (default: this workspace's "
                                               "data/sts/sts.parquet, else parsed from the STS/SICK data wherever "
                                               "it is: the mirror, the cache, or a download)")
    g = sub.add_parser("glue", help="L2P-CSR Table 4: fine-tune a model on GLUE tasks, dev metrics "
                                    "(docs/evaluation.md#glue-fine-tuning)")
    g.add_argument("--model", required=True, help="a trained model folder (models/<m>) or a hub id")
    g.add_argument("--tasks", default="WNLI,QNLI,QQP,SST-2,STS-B", help="comma-separated GLUE tasks")
    g.add_argument("--max-train", type=int, default=None, help="a seeded sample of each training split (CPU slice)")
    g.add_argument("--max-steps", type=int, default=None, help="stop each fine-tuning after this many steps")
    g.add_argument("--seed", type=int, default=42)
    g.add_argument("--device", default="cpu")
    g.add_argument("--json", default=None, help="write the results here (reports/metrics/glue/<model>.json)")
    g.set_defaults(func=_cmd_glue)
    e.add_argument("--tasks", choices=["sts", "transfer", "retrieval", "all"], default="sts",
                   help="sts: the STS evaluation; transfer: SentEval's 7 transfer tasks (MR CR SUBJ MPQA SST2 TREC "
                        "MRPC, logistic regression on frozen embeddings, SimCSE's settings); all: both; retrieval: "
                        "PaSeR Table 3's QQP retrieval and AskUbuntu reranking (MAP, MRR@10; needs their data)")
    e.add_argument("--params", default=None, help="params.yaml to take evaluate.* defaults from")
    e.add_argument("--precision", choices=["auto", "fp32", "bf16"], default=None,
                   help="default: evaluate.precision (auto: exact fp32 on every device; bf16: autocast, "
                        "labelled approximate)")
    e.add_argument("--device", choices=["auto", "cpu", "cuda"], default=None, help="default: evaluate.device")
    e.add_argument("--no-mlflow", action="store_true", help="do not log an eval/<name> run to MLflow")
    e.add_argument("--batch-size", type=int, default=None)
    e.add_argument("--name", default=None, help="row name (default: the folder name)")
    e.add_argument("--diagnostics", action="store_true",
                   help="also alignment/uniformity, the hard length subset and the cosine density by gold level "
                        "(docs/evaluation.md), from the same embeddings; the density PNG goes next to --json")
    e.set_defaults(func=_cmd_evaluate)

    pr = sub.add_parser("params", help="print the validated params in force (or a profile's, --profile)")
    pr.add_argument("--params", default="params.yaml")
    pr.add_argument("--profile", default=None, help="a profile: profiles/<name>.yaml")
    pr.set_defaults(func=_cmd_params)

    dr = sub.add_parser("doctor", help="torch, its CUDA build, the NVIDIA driver, the GPUs, the CPU's flags, and "
                                       "whether the profile in force (device, precision) runs here: exit 1 where not")
    dr.add_argument("--params", default="params.yaml")
    dr.add_argument("--profile", default=None, help="a profile's values (profiles/<name>.yaml) instead of params.yaml")
    dr.set_defaults(func=_cmd_doctor)

    pf = sub.add_parser("profile", help="write params.yaml from profiles/<name>.yaml and its stage list (models.yaml)")
    pf.add_argument("name", help="a profile: the name of a file profiles/<name>.yaml (quick, smoke, paper, "
                                 "paper-lite, or one of yours)")
    pf.add_argument("--params", default="params.yaml")
    pf.add_argument("--force", action="store_true", help="switch even when params.yaml has hand edits (drops them)")
    pf.set_defaults(func=_cmd_profile)

    st = sub.add_parser("stages", help="write the stage list (models.yaml) from params.yaml (after an edit of "
                                       "train.methods, seeds, ablations, evaluate.baselines)")
    st.add_argument("--params", default="params.yaml")
    st.set_defaults(func=_cmd_stages)

    m = sub.add_parser("methods", help="list the registered training methods, one line each, then the baselines")
    m.set_defaults(func=_cmd_methods)
    t = sub.add_parser("train", help="train one method with params.yaml (what the DVC train stage runs)")
    add_train_arguments(t)
    t.set_defaults(func=_cmd_train)

    for mod in PLUGINS:
        importlib.import_module(mod).register_cli(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    from ..stages.entry import report_errors

    return report_errors(lambda: args.func(args))


if __name__ == "__main__":
    sys.exit(main())
