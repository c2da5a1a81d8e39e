"""Stage `report`: every paper table and figure (docs/reproducing.md) -> reports/ (tables, figures, index.md).

Reads reports/metrics/*.json, reports/curves/*.csv, models/*/sentlab.json, models/paser/reconstruction.json
and data/prepare_stats.json; see :mod:`sentlab.report.build`. The tables and figures are also attached to
the MLflow runs (the method runs they come from and the pipeline's parent run, SENTLAB_PARENT_RUN_ID);
``SENTLAB_REPORT_MLFLOW=0`` skips that.
"""

from __future__ import annotations

import logging
import os
import sys

from sentlab.stages.entry import run_stage
from sentlab.report.build import build_report, log_to_mlflow
from sentlab.stages.stage_list import profile_models
from sentlab.config.stage_params import stage_params

log = logging.getLogger("report")


def main() -> None:
    params = stage_params("report")
    rep = build_report(".", params.model.backbone, params.profile, profile_models(params))
    filled = {k: sum(r.evaluated for r in rows) for k, (_, rows) in rep.tables.items()}
    print(f"report: {len(rep.tables)} tables ({sum(filled.values())} rows reproduced), {len(rep.figures)} figures "
          f"-> reports/index.md")
    if os.environ.get("SENTLAB_REPORT_MLFLOW", "1") != "0":
        try:
            done = log_to_mlflow(rep)
            print(f"report: tables and figures attached to {len(done)} MLflow runs")
        except Exception as e:  # the files are the stage's output; the tracking store is a mirror of them
            log.warning("report: MLflow logging failed (%s: %s); the report files are complete", type(e).__name__, e)


if __name__ == "__main__":
    sys.exit(run_stage(main))
