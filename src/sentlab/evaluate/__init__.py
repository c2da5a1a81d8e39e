"""Evaluation of sentence encoders, by concern (docs/architecture.md):

* :mod:`.sts` — the STS protocol every model goes through (``evaluate@<model>``): encode, score, per-pair cosines,
  statistics, diagnostics, MTEB's result files.
* :mod:`.baselines` — the untrained baselines (``evaluate_baseline@<kind>``): backbone poolings, BERT-whitening,
  BERT-flow, averaged GloVe.
* :mod:`.suites` — the evaluation suites on frozen or fine-tuned encoders (``<suite>@<model>``): SentEval
  transfer, GLUE, QQP/AskUbuntu retrieval.

The packages import nothing on import: a module imports what it uses, so a stage's code files
(``sentlab.stages.sources`` traces them) are only those it runs.
"""
