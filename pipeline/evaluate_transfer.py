"""Stage `transfer@<name>`: SentEval's transfer tasks on one model's frozen embeddings
-> reports/metrics/transfer/<name>.json (:mod:`sentlab.evaluate.suites.transfer_stage`).

    python pipeline/evaluate_transfer.py simcse      # dvc.yaml transfer@simcse: models/simcse
    python pipeline/evaluate_transfer.py base-mean   # the backbone with mean pooling (L2P-CSR Table 2 "Mean")
"""

from __future__ import annotations

import argparse
import sys

from sentlab.stages.entry import run_stage


def main() -> None:
    from sentlab.evaluate.suites.transfer_stage import run_transfer_stage

    ap = argparse.ArgumentParser()
    ap.add_argument("name", help="a model of models.yaml (models/<name>) or base-<pooling>")
    run_transfer_stage(ap.parse_args().name)


if __name__ == "__main__":
    sys.exit(run_stage(main))
