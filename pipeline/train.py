"""DVC train stage: ``python pipeline/train.py METHOD [--variant NAME --set key=value ...]``.

Trains METHOD when it is in ``train.methods`` of the active profile (ablation
variants: when ``ablations.enabled`` is true); otherwise writes
``models/<name>/sentlab.json`` = {"method", "status": "not run in this profile"}
and an empty curve file, and exits 0. See :mod:`sentlab.train.run`.
"""

import sys

from sentlab.pipeline_util import run_stage
from sentlab.train.run import stage_main

if __name__ == "__main__":
    sys.exit(run_stage(lambda: stage_main(sys.argv[1:])))
