"""Stages in parallel through Ray: ``sentlab run --jobs N [--address ADDRESS]`` (``make repro JOBS=N``).

DVC runs the stages of one ``dvc repro`` one after another. This package runs the shared upstream stages
(``sources``, ``prepare``, ``annotate``) once in the workspace, takes the stale stages below them from DVC's
stage graph (``dvc dag --dot``, ``dvc status --json``), groups them into chains (a model's train and evaluate
stages; a chain whose model starts from another model's waits for that chain) and hands each chain to Ray as
one task asking for ``runtime.gpus_per_task`` GPUs (``auto``: a share from the plan's step times) and
``runtime.cpus_per_task`` CPUs, longest planned chains first (:mod:`.schedule`). A task runs its
stages with ``dvc repro --single-item`` in its own git worktree (under ``.dvc/tmp/sentlab/worktrees``) whose
DVC cache is the workspace's; a final ``dvc repro`` in the workspace then restores every stage's outputs
from DVC's run cache (no stage runs twice), writes ``dvc.lock`` and runs the report.

Modules: :mod:`.graph` (stages, chains), :mod:`.worktree` (a task's checkout, dvc with lock retries),
:mod:`.task` (the Ray task), :mod:`.schedule` (GPU shares, order, nproc), :mod:`.gpus` (which GPU a share goes
to), :mod:`.tracking_server` (MLflow under concurrency), :mod:`.ray_run` (the run on Ray), :mod:`.stop` (how it
stops: SIGTERM, its chains cancelled), :mod:`.status` (what ``sentlab status`` prints), :mod:`.guard` (a stage dies
with its worker), :mod:`.workspace_lock` (one pipeline run per workspace). The commands that drive it are in
:mod:`sentlab.cli`: ``sentlab run`` and ``sentlab status`` (:mod:`sentlab.cli.run`), ``sentlab repro``
(:mod:`sentlab.cli.repro`: what ``make repro`` runs, the profile written and the pipeline run under that lock),
``sentlab report [--from-run]`` (:mod:`sentlab.cli.report`: a run's report from what it finished).
Ray is an optional extra: ``pip install sentlab[ray]``.
"""

STATE_DIR = ".dvc/tmp/sentlab"      # logs, per-stage state, worktrees (ignored by git and by DVC's stage collection)
SHARED = ("sources", "prepare", "annotate")
