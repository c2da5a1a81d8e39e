"""Stage `evaluate_baseline`: the backbone with a pooling, BERT-whitening, BERT-flow or averaged GloVe ->
reports/metrics/base-<kind>.json.

    python pipeline/evaluate_baseline.py cls        # the backbone with cls pooling -> base-cls
    python pipeline/evaluate_baseline.py whitening  # BERT-whitening (evaluate.whitening) -> base-whitening
    python pipeline/evaluate_baseline.py bert_flow  # BERT-flow (evaluate.bert_flow) -> base-bert_flow
    python pipeline/evaluate_baseline.py glove      # averaged GloVe vectors (evaluate.glove) -> base-glove

Its own entry script (not ``pipeline/evaluate.py baseline``): its code file lists only what a baseline
executes, so an edit of the training code does not re-run the baselines (:mod:`sentlab.evaluate.baselines.stage`).
"""

from __future__ import annotations

import sys

from sentlab.stages.entry import run_stage

if __name__ == "__main__":
    from sentlab.evaluate.baselines.stage import run_baseline_stage

    if len(sys.argv) != 2:
        print("usage: python pipeline/evaluate_baseline.py {cls,mean,first_last,whitening,bert_flow,glove}",
              file=sys.stderr)
        sys.exit(2)
    sys.exit(run_stage(lambda: run_baseline_stage(sys.argv[1])))
