"""Stage `evaluate`: SPEC §2 protocol for one model -> reports/metrics/<name>.json.

    python pipeline/evaluate.py baseline cls        # the backbone with cls pooling -> base-cls
    python pipeline/evaluate.py baseline whitening  # BERT-whitening (evaluate.whitening) -> base-whitening
    python pipeline/evaluate.py trained simcse      # models/simcse (its own pooling) -> simcse

A trained model's metrics JSON holds its ``method`` block: the method params it was trained with
(:func:`~sentlab.evaluate.runner.trained_method_block`: the Params in force, which this stage
declares as DVC params like the train stage), and every JSON the device and precision it was
evaluated with.
With ``evaluate.diagnostics`` (SPEC §2) the metrics JSON also holds alignment/uniformity,
the hard length subset and the cosine density table, and the density figure is written to
reports/figures/<name>_density.png.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sentlab.config import load_params
from sentlab.data.sts import read_sts_table
from sentlab.errors import SentlabError
from sentlab.evaluate.figures import note_figure
from sentlab.evaluate.runner import (evaluate_and_record, read_model_info, trained_method_block, whitening_encoder,
                                     write_not_run)
from sentlab.pipeline_util import run_stage


BASELINES = ("cls", "mean", "first_last", "whitening")
FIGURES = Path("reports/figures")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["baseline", "trained"])
    ap.add_argument("name")
    args = ap.parse_args()
    params = load_params()
    table = read_sts_table("data/sts/sts.parquet")
    if args.kind == "baseline" and args.name not in BASELINES:
        raise SentlabError(f"Unknown baseline {args.name!r} in evaluate.baselines; allowed: {', '.join(BASELINES)}.")
    figures = FIGURES if params.evaluate.diagnostics else None
    if not params.evaluate.diagnostics:
        # the stage's declared figure output must exist: say why it has no plot
        name = f"base-{args.name}" if args.kind == "baseline" else args.name
        note_figure(FIGURES / f"{name}_density.png", name, "evaluate.diagnostics is false")
    if args.kind == "baseline":
        name = f"base-{args.name}"
        out = Path(f"reports/metrics/{name}.json")
        if args.name == "whitening":
            enc, embeddings, info = whitening_encoder(params, table, name=name)
            evaluate_and_record(name, params.model.backbone, enc.pooling, params, table, out, kind="baseline",
                                extra_params={"whitening": info}, figures_dir=figures, encoders={name: enc},
                                embeddings=embeddings, extra_metrics={"whitening": info})
            return
        evaluate_and_record(name, params.model.backbone, args.name, params, table, out, kind="baseline",
                            figures_dir=figures)
        return
    model_dir = Path("models") / args.name
    info = read_model_info(model_dir)
    if info is None:
        raise SentlabError(f"{model_dir}/sentlab.json is missing: the train stage for {args.name} did not finish. "
                           f"Run `dvc repro train@{args.name}`.")
    out = Path(f"reports/metrics/{args.name}.json")
    if info.get("status") != "trained":
        write_not_run(args.name, params, out, info.get("status", "not trained"))
        note_figure(FIGURES / f"{args.name}_density.png", args.name, info.get("status", "not trained"))
        return
    # the method block it was trained with: the report files each row by what the model really was
    block = trained_method_block(params, args.name, info["method"])
    evaluate_and_record(args.name, str(model_dir), None, params, table, out, kind="trained",
                        extra_params={"method": {"id": info["method"], **block}}, figures_dir=figures,
                        extra_metrics={"method_id": info["method"], "method": block})


if __name__ == "__main__":
    sys.exit(run_stage(main))
