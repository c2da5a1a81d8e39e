"""Stage `retrieval@<name>`: QQP retrieval and AskUbuntu reranking of one model's frozen embeddings (PaSeR
Table 3) -> reports/metrics/retrieval/<name>.json (:mod:`sentlab.evaluate.suites.retrieval_stage`).

    python pipeline/evaluate_retrieval.py paser      # dvc.yaml retrieval@paser: models/paser
    python pipeline/evaluate_retrieval.py base-cls   # the backbone with CLS pooling
"""

from __future__ import annotations

import argparse
import sys

from sentlab.stages.entry import run_stage


def main() -> None:
    from sentlab.evaluate.suites.retrieval_stage import run_retrieval_stage

    ap = argparse.ArgumentParser()
    ap.add_argument("name", help="a model of models.yaml (models/<name>) or base-<pooling>")
    run_retrieval_stage(ap.parse_args().name)


if __name__ == "__main__":
    sys.exit(run_stage(main))
