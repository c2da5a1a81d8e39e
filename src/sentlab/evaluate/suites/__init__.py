"""The evaluation suites: ``<suite>@<model>`` (``transfer@simcse``) -> ``reports/metrics/<suite>/<model>.json``.

* :mod:`.suite_stage` — what the suite stages share: the model or backbone pooling to evaluate, missing data,
  the metrics file and MLflow record.
* :mod:`.transfer_data`, :mod:`.transfer`, :mod:`.transfer_stage` — SentEval's seven transfer tasks on frozen
  embeddings: loaders, batched classifiers, the stage.
* :mod:`.glue`, :mod:`.glue_stage` — GLUE fine-tuning (L2P-CSR Table 4) and its stage.
* :mod:`.retrieval`, :mod:`.retrieval_examples`, :mod:`.retrieval_stage` — QQP retrieval and AskUbuntu
  reranking (PaSeR Table 3), Table 6's examples of top hits, the stage.

Transfer, GLUE and retrieval import none of each other (import-linter contract ``suites-independent``).
Nothing is imported here: import the module you use.
"""
