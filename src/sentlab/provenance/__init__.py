"""Provenance: what produced an output, and what a stage that did not produce one leaves behind. Its modules:

* :mod:`.code` — the code each kind of stage executes (its imports followed, comments and docstrings left out): the
  ``sources`` stage writes its sha256 per kind (``data/sources/code/``), so DVC re-runs exactly the stages whose code
  changed; a training's resume key includes the code it runs
  (:func:`~sentlab.provenance.code.training_code_fingerprint`).
* :mod:`.environment` — the environment a number was produced in (git commit and dirty flag, library versions,
  device, precision, the sha256 of the data read), recorded with every training and evaluation; the dirty check
  reads what ``sentlab profile`` recorded it wrote.
* :mod:`.markers` — a train stage's outputs for a model the profile does not train (the reason, an empty curve).
* :mod:`.failures` — the stages that failed, with their logs, so the report is built from what finished and names
  the rest.
* :mod:`.run_results` — what a parallel run's tasks finished, kept in the workspace as each stage succeeds, so its
  report can be built at any time (``sentlab report --from-run``).

In the core (docs/architecture.md): nothing here imports a method, a trainer or an evaluator (the method ids are read
from the source). This ``__init__`` imports nothing: a stage that records its failure does not execute the code walker.
"""
