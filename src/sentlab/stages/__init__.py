"""The library side of the DVC stages (their scripts are the top-level ``pipeline/``): how a profile becomes DVC's
stages, and what every stage's entry point shares.

``dvc.yaml`` declares the stages; ``pipeline/<stage>.py`` is each one's thin entry point; this package is the
plumbing between them and a profile, on the floor above the report (docs/architecture.md). Its modules, in the
order ``make repro`` meets them:

1. :mod:`.profiles` — ``sentlab profile NAME``: params.yaml written from ``profiles/<name>.yaml`` (over the base,
   ``quick``), every profile validated whole, hand edits kept or refused.
2. :mod:`.stage_list` — ``models.yaml``: the one model list dvc.yaml's ``foreach`` groups read (which models the
   profile trains, with which params lines, from what, and what each evaluation suite runs on).
3. :mod:`.sources` — the ``sources`` stage: the sha256 of every source file outside the repository and of the code
   each kind of stage executes (:mod:`sentlab.provenance.code`), so DVC re-runs exactly what changed; it refuses a
   stale ``models.yaml``.
4. :mod:`.entry` — what every entry point shares: logging set-up, one paragraph and exit 2 for a
   :class:`~sentlab.errors.SentlabError`, the failure record of a stage that crashed.

What a stage reads of params.yaml stays below, on the ground floor, because the training and the evaluations read
it too: the schema (:mod:`sentlab.config`, :mod:`sentlab.config.sections`), the profile files
(:mod:`sentlab.config.profile_files`), the keys a stage declares (:mod:`sentlab.config.stage_params`); the methods'
blocks are checked by :mod:`sentlab.methods.blocks`. Above this package: the preflight slice
(:mod:`sentlab.preflight`), the cost plan (:mod:`sentlab.campaign.plan`, :mod:`sentlab.campaign.scope`), the parallel
runner (:mod:`sentlab.parallel`) and the command line (:mod:`sentlab.cli`).

This ``__init__`` imports nothing: an entry point that imports :mod:`.entry` executes only that module (the code
each stage depends on, :mod:`sentlab.provenance.code`, stays its own).
"""
