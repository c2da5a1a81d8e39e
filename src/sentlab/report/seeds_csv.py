"""``reports/seeds.csv``: every evaluated run's score on every STS task, one line per (run, task), the long
format seed-variance studies publish and ``pandas.read_csv`` loads as is.

Columns: ``model`` (the model the seeds belong to: ``simcse`` for ``simcse``, ``simcse-s43``, ...), ``run`` (the
evaluated model's own name), ``method`` (the method id it was trained with; ``baseline`` for an untrained
pooling baseline), ``seed`` (the training seed from ``models/<run>/sentlab.json``, else the ``-s<seed>`` of the
name; empty for a baseline), ``task`` and ``score`` (Spearman × 100, the metrics JSON's value; ``Avg`` is the
7-task average, ``STSBenchmark-dev`` the dev score of the checkpoint evaluated).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Optional

from ..config.models import split_seed
from ..config.tasks import STS_DEV, STS_KEYS
from .significance import seed_groups

HEADER = ["model", "run", "method", "seed", "task", "score"]
TASKS = (*STS_KEYS, STS_DEV)   # the seven STS tasks, Avg and STS-B dev, as declared (sentlab.config.tasks)
SEEDS_CSV = Path("reports/seeds.csv")


def _info(models_dir: Path, run: str) -> dict:
    try:
        return json.loads((models_dir / run / "sentlab.json").read_text())
    except (OSError, ValueError):
        return {}


def _method(m: dict, info: dict) -> str:
    if m.get("kind") == "baseline" or m.get("model", "").startswith("base-"):
        return "baseline"
    block = m.get("method") if isinstance(m.get("method"), dict) else {}
    return str(m.get("method_id") or block.get("id") or info.get("method") or "")


def _seed(run: str, info: dict) -> Optional[int]:
    if isinstance(info.get("seed"), int):
        return info["seed"]
    return split_seed(run)[1]


def records(metrics: dict[str, dict], models_dir: Path) -> list[list]:
    """The CSV's rows: each seed group (:func:`seed_groups`) in name order, its runs in seed order."""
    out = []
    for model, runs in sorted(seed_groups(metrics).items()):
        for run in runs:
            m, info = metrics[run], _info(models_dir, run)
            method, seed = _method(m, info), _seed(run, info)
            for task in TASKS:
                v = m.get(task)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    out.append([model, run, method, "" if seed is None else seed, task, round(float(v), 4)])
    return out


def render(metrics: dict[str, dict], models_dir: Path) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(HEADER)
    w.writerows(records(metrics, models_dir))
    return buf.getvalue()
