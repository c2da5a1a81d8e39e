"""DVC train stage: ``python pipeline/train.py METHOD [--seed S] [--variant NAME --set key=value ...]``.

Under ``dvc repro`` every train stage is one the active profile trains (dvc.yaml's loops read
the stage list, models.yaml). Run by hand for a method outside ``train.methods`` (``--seed S``: a
seed outside the method's seeds, params.yaml ``seeds``; an ablation variant while
``ablations.enabled`` is false) it writes ``models/<name>/sentlab.json`` = {"method", "status":
"not run in this profile"} and an empty curve file, and exits 0. See :mod:`sentlab.train.run`.
"""

import sys

from sentlab.stages.entry import run_stage

if __name__ == "__main__":
    from sentlab.evaluate.sts.diagnostics import make_dev_evaluator   # the STS-B dev check during training
    from sentlab.train.run import stage_main

    sys.exit(run_stage(lambda: stage_main(sys.argv[1:], make_dev_eval=make_dev_evaluator)))
