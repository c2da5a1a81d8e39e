"""DVC train stage: ``python pipeline/train.py METHOD [--seed S] [--variant NAME --set key=value ...]``.

Trains METHOD when it is in ``train.methods`` of the active profile (``--seed S``: when S is one
of the method's seeds, params.yaml ``seeds``; ablation variants: when ``ablations.enabled`` is
true); otherwise writes ``models/<name>/sentlab.json`` = {"method", "status": "not run in this
profile"} and an empty curve file, and exits 0 — under ``dvc repro`` without importing torch
(:mod:`sentlab.markers`). See :mod:`sentlab.train.run`.
"""

import sys

from sentlab.markers import fast_train_marker
from sentlab.pipeline_util import run_stage

if __name__ == "__main__":
    if fast_train_marker(sys.argv[1:]):
        sys.exit(0)
    from sentlab.train.run import stage_main

    sys.exit(run_stage(lambda: stage_main(sys.argv[1:])))
