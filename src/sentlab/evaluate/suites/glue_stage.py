"""The stage ``glue@<name>``: L2P-CSR Table 4's GLUE fine-tuning of one model
(:mod:`sentlab.evaluate.suites.glue`).

``<name>`` is a model of the stage list (``models/<name>``) or ``base-cls``, the backbone itself (Table 4's
"BERT-base": a [CLS] head fine-tunes it, whatever a pooling would be). Every task of ``glue.tasks`` is fine-tuned
from a fresh copy of the model once per seed of ``glue.seeds`` with ``glue.finetune`` (transformers' run_glue
defaults; the quick profile caps the steps, the training sample and the dev sample, seeded: the JSON and the
report say so). The data of every task is resolved before any fine-tuning: a task whose data is not here fails
the stage with its fetch command (WNLI, QNLI and QQP are not in this project's offline mirror).

Each (task, seed) result is kept as it finishes (``checkpoints/glue@<name>/``, :mod:`.glue_runs`): the stage run
again after a kill fine-tunes only what it had not finished, and writes the same bytes.

Output: ``reports/metrics/glue/<name>.json``: per task the mean score over the seeds (the number Table 4 prints),
and under ``glue`` each task's mean, standard deviation, the seeds and every run; the same numbers in MLflow.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path
from typing import Optional

import numpy as np

log = logging.getLogger(__name__)


def glue_results(model: str, tasks, splits: dict, cfg, seeds, device: str = "cpu", progress: bool = True,
                 keep: Optional[Path] = None) -> dict:
    """``{task: {score, std, n, seeds, runs, ...}}``: each task fine-tuned from a fresh copy of ``model`` once per
    seed; ``score`` (and each metric) is the mean over the seeds, ``std`` the sample standard deviation (n > 1).
    ``keep``: a folder where each (task, seed) result is kept as it finishes and read back instead of fine-tuning
    again when its inputs are the same (:mod:`sentlab.evaluate.suites.glue_runs`)."""
    from ...assets.resolve import load_model
    from . import glue_runs
    from .glue import finetune

    shared = None
    if keep is not None:
        from ..sts.cache import model_fingerprint

        shared = glue_runs.stage_inputs(model_fingerprint(*load_model(model)), cfg, device)
    out = {}
    for task in tasks:
        runs = []
        task_in = glue_runs.task_inputs(shared, task, splits[task]) if shared is not None else None
        for seed in seeds:
            inputs = glue_runs.run_inputs(task_in, seed) if task_in is not None else None
            kept = glue_runs.load_run(keep, task, seed, inputs) if inputs is not None else None
            if kept is not None:
                log.info("glue %s seed %s: kept from an earlier run of this stage (%s)", task, seed, keep)
                runs.append(kept)
                continue
            encoder, tok = load_model(model)
            run = finetune(encoder, tok, task, splits[task], cfg, seed=seed, device=device, progress=progress)
            if inputs is not None:
                glue_runs.save_run(keep, task, seed, inputs, run)
            runs.append(run)
        keys = [k for k in ("score", "accuracy", "f1", "spearman", "pearson") if k in runs[0]]
        mean = {k: round(float(np.mean([r[k] for r in runs])), 2) for k in keys}
        std = round(float(np.std([r["score"] for r in runs], ddof=1)), 2) if len(runs) > 1 else None
        out[task] = {"task": task, **mean, "std": std, "n": len(runs), "seeds": list(seeds),
                     "steps": runs[0]["steps"], "train_examples": runs[0]["train_examples"],
                     "dev_examples": runs[0]["dev_examples"], "runs": runs}
    return out


def slice_of(cfg) -> str:
    """What of the protocol a CPU slice cut (``""``: none): its caps, for the JSON and the report's caveat."""
    caps = {"max_steps": cfg.max_steps, "max_train": cfg.max_train, "max_dev": cfg.max_dev}
    return ", ".join(f"{k} {v}" for k, v in caps.items() if v)


def run_glue_stage(name: str) -> dict:
    """``glue@<name>`` in the repository's working directory; returns the metrics written."""
    from ...config.stage_params import stage_params
    from .glue import GlueConfig, load_glue
    from .glue_runs import folder
    from ...runtime.device import resolve_precision
    from ..sts.runner import resolve_device_precision
    from .suite_stage import missing_data, record, stage_of, suite_model, use_training_threads

    params = stage_params(stage_of("glue", name))
    use_training_threads(params)
    gp = params.glue
    model, _, info = suite_model(params, name, "glue")
    tasks = list(gp.tasks)
    splits = missing_data({t: (lambda t=t: load_glue(t)) for t in tasks})
    device, _ = resolve_device_precision(params.evaluate.device)
    # glue.finetune.precision resolved on this device (auto: as a training's); the checks before any work
    # (sentlab.config.stage_params.check_machine) refused one that would be emulated
    cfg = GlueConfig(**{**gp.finetune.model_dump(), "precision": resolve_precision(gp.finetune.precision,
                                                                                    device.type)})
    # each (task, seed) kept as it finishes: a stage killed and run again fine-tunes only the rest
    res = glue_results(model, tasks, splits, cfg, list(gp.seeds), device=device.type, keep=folder(name))
    metrics = {"model": name, "backbone": params.model.backbone, "profile": params.profile, "status": "evaluated",
               "device": device.type,
               "protocol": "GLUE dev after fine-tuning: [CLS] + dropout + linear head, AdamW with linear warm-up "
                           "and decay (transformers' run_glue defaults); the mean over the seeds",
               "seeds": list(gp.seeds), "config": asdict(cfg), "slice": slice_of(cfg),
               **{t: r["score"] for t, r in res.items()}, "glue": res}
    record("glue", name, metrics, {**gp.model_dump(), "pooling": "cls"}, info, model)
    return metrics
