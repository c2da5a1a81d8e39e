"""The untrained baselines: ``evaluate_baseline@<kind>`` -> ``reports/metrics/base-<kind>.json``.

* :mod:`.stage` — the stage itself (``pipeline/evaluate_baseline.py KIND``): the backbone with a pooling, or
  one of the fitted baselines below, evaluated by :mod:`sentlab.evaluate.sts.runner`; ``DESCRIPTIONS``.
* :mod:`.fitted` — the encoders of the fitted baselines: the backbone with the whitening or the flow as its
  ``post``, fitted on the STS pool, NLI sentences or the training corpus.
* :mod:`.whitening` — BERT-whitening (Su et al. 2021): a linear map fitted on embeddings.
* :mod:`.flow` — BERT-flow (Li et al. 2020): a Glow-style flow fitted on sentence embeddings.
* :mod:`.glove` — averaged GloVe vectors, as SentEval's bag-of-words example (no backbone).

Whitening, flow and GloVe import none of each other (import-linter contract ``suites-independent``).
Nothing is imported here: import the module you use.
"""
