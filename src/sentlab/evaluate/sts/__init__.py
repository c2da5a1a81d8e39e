"""The STS protocol (docs/evaluation.md): what ``evaluate@<model>`` and ``sentlab evaluate`` run.

* :mod:`.protocol` — the seven STS tasks, SimCSE's protocol: each distinct sentence encoded once, cosine,
  Spearman × 100, the task selection and genre-stratified pair samples.
* :mod:`.cache` — the content-addressed embedding cache every evaluate stage encodes through.
* :mod:`.runner` — one model (hub id / folder + pooling, or ``models/<method>``) evaluated and recorded: the
  metrics JSON, MLflow, the fitted encoders of the whitening and flow baselines.
* :mod:`.trained` — what a trained model's evaluation needs of the training code (its own module, so the
  baseline stages do not depend on ``sentlab.train``).
* :mod:`.cosines` — per-pair cosines and bootstrap intervals cached beside the metrics (``reports/cosines/``).
* :mod:`.stats` — confidence intervals and significance tests from those cosines (no encoding).
* :mod:`.diagnostics` — alignment, uniformity, the hard length subset, cosine densities; the STS-B dev check.
* :mod:`.figures` — the diagnostic figures (PNG).
* :mod:`.mteb_results` — MTEB's result JSON of the STS tasks (``sentlab evaluate --format mteb``).
* :mod:`.not_run` — the evaluate stage's outputs for a model the profile does not train (run by hand).

Nothing is imported here: import the module you use.
"""
