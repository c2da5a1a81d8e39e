"""Stage `evaluate`: docs/evaluation.md protocol for one model -> reports/metrics/<name>.json.

    python pipeline/evaluate.py simcse      # dvc.yaml evaluate@simcse: models/simcse (its own pooling)

A trained model's metrics JSON holds its ``method`` block: the method params it was trained with
(:func:`~sentlab.evaluate.sts.trained.trained_method_block`: the Params in force, which this stage
declares as DVC params like the train stage), and every JSON the device and precision it was
evaluated with.
Every evaluated model's per-pair cosines go to reports/cosines/<name>.parquet (the report's CIs, paired
tests and protocol table read them) and its metrics JSON holds the 95 % bootstrap CI of each task.
A model folder that says it was not trained (``pipeline/train.py`` run by hand for a method the profile
does not train) gets its "not run" metrics, a placeholder figure and an empty cosines table
(:mod:`sentlab.evaluate.sts.not_run`); under ``dvc repro`` every evaluate stage is of a model the profile trains.
With ``evaluate.diagnostics`` (docs/evaluation.md#diagnostics) the metrics JSON also holds alignment/uniformity,
the hard length subset and the cosine density table, and the density figure is written to
reports/figures/<name>_density.png.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sentlab.evaluate.sts.not_run import eval_not_run
from sentlab.stages.entry import run_stage


FIGURES = Path("reports/figures")


def main() -> None:
    from sentlab.data.sts import read_sts_table
    from sentlab.evaluate.sts.cache import embedding_cache
    from sentlab.evaluate.sts.figures import note_figure
    from sentlab.evaluate.sts.runner import evaluate_sts, evaluation_pooling, read_model_info, stage_encoders
    from sentlab.evaluate.sts.writers import STAGE_WRITERS, StageOutputs, write_all
    from sentlab.evaluate.sts.trained import check_trained_with, missing_model_error, trained_method_block
    from sentlab.config.stage_params import stage_params

    ap = argparse.ArgumentParser()
    ap.add_argument("name", help="the model (models.yaml): models/<name>")
    args = ap.parse_args()
    params = stage_params(f"evaluate@{args.name}")
    model_dir = Path("models") / args.name
    info = read_model_info(model_dir)
    if info is None:
        raise missing_model_error(args.name, model_dir)
    if info.get("status") == "trained":   # refused before anything is written
        check_trained_with(info, params, args.name, info["method"])
    table = read_sts_table("data/sts/sts.parquet")
    figures = FIGURES if params.evaluate.diagnostics else None
    if not params.evaluate.diagnostics:
        # the stage's declared figure output must exist: say why it has no plot
        note_figure(FIGURES / f"{args.name}_density.png", args.name, "evaluate.diagnostics is false")
    if info.get("status") != "trained":
        eval_not_run(args.name, info.get("status", "not trained"), params.model.backbone, params.profile)
        return
    # the method block it was trained with: the report files each row by what the model really was
    block = trained_method_block(params, args.name, info["method"])
    # evaluate.pooling: null (its own pooling) or another declared pooling, recorded in the JSON when it is another
    pooling = evaluation_pooling(params.evaluate.pooling, info)
    with embedding_cache():  # a re-run of this stage for an evaluate param or code change encodes nothing again
        result = evaluate_sts(stage_encoders(str(model_dir), pooling, params, args.name), table, params,
                              model=str(model_dir), kind="trained", figures_dir=figures,
                              extra_params={"method": {"id": info["method"], **block}},
                              extra_metrics={"method_id": info["method"], "method": block,
                                             **({"pooling": pooling} if pooling else {})})
    # the cosines and bootstrap, MTEB's result JSON, the metrics JSON, then the MLflow run (evaluate.sts.writers)
    write_all(result, StageOutputs.of(args.name), STAGE_WRITERS)


if __name__ == "__main__":
    sys.exit(run_stage(main))
