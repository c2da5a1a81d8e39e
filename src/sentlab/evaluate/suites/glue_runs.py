"""Each GLUE fine-tuning kept as it finishes, so a stage killed (preemption, SIGTERM/SIGKILL, a failure) re-runs
only the fine-tunings it had not finished.

A ``glue@<name>`` stage fine-tunes every task of ``glue.tasks`` once per seed of ``glue.seeds`` (the paper profile:
5 × 5, hours on a GPU). Each (task, seed) result is written, atomically, to
``checkpoints/glue@<name>/<task>.s<seed>.<key>.json`` as it finishes: outside DVC's outputs (DVC removes
``reports/metrics/glue/<name>.json`` before it runs the stage again; ``checkpoints/`` is where the trainings keep
their resume state, git- and DVC-ignored, and a Ray task's worktree keeps it between tries). ``<key>`` is the
sha256 of everything that decides that result (:func:`run_inputs`): the weights, config and tokenizer the
fine-tuning starts from, the task's train and dev data, the seed, ``glue.finetune``, the device, the thread count,
the code the stage executes and the torch/transformers versions. The stage run again loads a file whose key
matches instead of fine-tuning; a fine-tuning's result is a JSON of rounded numbers, so the metrics the stage
writes are byte for byte those of an uninterrupted run. A result whose inputs changed has another key and is
never read; the stage removes the older keys of the (task, seed) it writes. The files stay after the stage
succeeds: a profile that adds a task or a seed fine-tunes only those.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Optional

import numpy as np

log = logging.getLogger(__name__)

ROOT = Path("checkpoints")


def folder(name: str, root: Path = ROOT) -> Path:
    """Where ``glue@<name>`` keeps its finished fine-tunings (beside the trainings' ``checkpoints/<model>/``; a model
    name never holds an ``@``)."""
    return root / f"glue@{name}"


def split_fingerprint(split) -> str:
    """sha256 of a :class:`~sentlab.evaluate.suites.glue.GlueSplit` (its sentences, in order, and its labels)."""
    from ..sts.cache import sentences_fingerprint

    h = hashlib.sha256(sentences_fingerprint(split.a).encode())
    h.update(b"\0" + (sentences_fingerprint(split.b).encode() if split.b is not None else b"-"))
    y = np.ascontiguousarray(split.y)
    h.update(f"\0{y.dtype.str}\0{y.shape}\0".encode() + y.tobytes())
    return h.hexdigest()


def stage_inputs(model_hash: str, cfg, device: str) -> dict:
    """What every fine-tuning of the stage shares (:func:`run_inputs` adds the task, its data and the seed): the
    threads are torch's count in force (a CPU fine-tuning's last bits depend on it)."""
    import torch
    import transformers

    from ...provenance.code import stage_code

    return {"model": model_hash, "config": asdict(cfg), "device": device, "threads": torch.get_num_threads(),
            "code": stage_code("evaluate_glue")["files"], "torch": torch.__version__,
            "transformers": transformers.__version__}


def task_inputs(shared: dict, task: str, splits: dict) -> dict:
    """The stage's inputs with the task and its data (``{train, dev}``, hashed once per task)."""
    return {**shared, "task": task, "data": {k: split_fingerprint(v) for k, v in sorted(splits.items())}}


def run_inputs(task_in: dict, seed: int) -> dict:
    """The inputs of one fine-tuning: :func:`task_inputs` and the seed."""
    return {**task_in, "seed": int(seed)}


def key_of(inputs: dict) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:20]


def _path(where: Path, task: str, seed: int, key: str) -> Path:
    return where / f"{task}.s{int(seed)}.{key}.json"


def load_run(where: Path, task: str, seed: int, inputs: dict) -> Optional[dict]:
    """The result kept for (``task``, ``seed``) with exactly ``inputs``, else None."""
    from ...errors import SentlabError

    path = _path(where, task, seed, key_of(inputs))
    if not path.is_file():
        return None
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SentlabError(f"{path} (a GLUE fine-tuning kept by an earlier run of this stage) cannot be read ({e}). "
                           f"Delete it and run the stage again: that fine-tuning runs again.") from None
    if kept.get("inputs") != inputs:   # a 20-hex-digit key collision or an edited file: never used
        raise SentlabError(f"{path} holds a GLUE fine-tuning of other inputs than its name says. Delete it and run "
                           f"the stage again: that fine-tuning runs again.")
    return kept["result"]


def save_run(where: Path, task: str, seed: int, inputs: dict, result: dict) -> Path:
    """Keep ``result`` (temporary file + rename), then remove the results of (``task``, ``seed``) kept with other
    inputs (superseded)."""
    from ...runtime.io import write_json

    path = _path(where, task, seed, key_of(inputs))
    write_json(path, {"inputs": inputs, "result": result})
    for old in where.glob(f"{task}.s{int(seed)}.*.json"):
        if old != path:
            old.unlink(missing_ok=True)
    return path
