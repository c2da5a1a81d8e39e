"""Stage `glue@<name>`: GLUE fine-tuning of one model (L2P-CSR Table 4) -> reports/metrics/glue/<name>.json
(:mod:`sentlab.evaluate.suites.glue_stage`).

    python pipeline/evaluate_glue.py l2p        # dvc.yaml glue@l2p: models/l2p
    python pipeline/evaluate_glue.py base-cls   # the backbone fine-tuned (Table 4's "BERT-base")
"""

from __future__ import annotations

import argparse
import sys

from sentlab.stages.entry import run_stage


def main() -> None:
    from sentlab.evaluate.suites.glue_stage import run_glue_stage

    ap = argparse.ArgumentParser()
    ap.add_argument("name", help="a model of models.yaml (models/<name>) or base-cls (the backbone)")
    run_glue_stage(ap.parse_args().name)


if __name__ == "__main__":
    sys.exit(run_stage(main))
