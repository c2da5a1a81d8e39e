"""Stage `evaluate`: SPEC §2 protocol for one model -> reports/metrics/<name>.json.

    python pipeline/evaluate.py baseline cls      # the backbone with cls pooling -> base-cls
    python pipeline/evaluate.py trained simcse    # models/simcse (its own pooling) -> simcse
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sentlab.config import load_params
from sentlab.data.sts import read_sts_table
from sentlab.errors import SentlabError
from sentlab.evaluate.runner import evaluate_and_record, read_model_info, write_not_run
from sentlab.pipeline_util import run_stage


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["baseline", "trained"])
    ap.add_argument("name")
    args = ap.parse_args()
    params = load_params()
    table = read_sts_table("data/sts/sts.parquet")
    if args.kind == "baseline":
        if args.name not in ("cls", "mean", "first_last"):
            raise SentlabError(f"Unknown baseline {args.name!r} in stage_lists.baselines; allowed: cls, mean, first_last.")
        name = f"base-{args.name}"
        evaluate_and_record(name, params.model.backbone, args.name, params, table,
                            Path(f"reports/metrics/{name}.json"), kind="baseline")
        return
    model_dir = Path("models") / args.name
    info = read_model_info(model_dir)
    if info is None:
        raise SentlabError(f"{model_dir}/sentlab.json is missing: the train stage for {args.name} did not finish. "
                           f"Run `dvc repro train@{args.name}`.")
    out = Path(f"reports/metrics/{args.name}.json")
    if info.get("status") != "trained":
        write_not_run(args.name, params, out, info.get("status", "not trained"))
        return
    evaluate_and_record(args.name, str(model_dir), None, params, table, out, kind="trained",
                        extra_params={"method": info.get("method"), "train": info.get("train", {})})


if __name__ == "__main__":
    sys.exit(run_stage(main))
