"""Per-pair cosines of an evaluated model, cached beside its metrics (``reports/cosines/<name>.parquet``).

One row per scored pair of every task the evaluation ran — the seven test sets, STS-B dev and
``SICK-all`` (every SICK pair: train + trial + test, the 9,927 pairs MTEB's SICK-R scores, where
SentEval and the papers use the 4,927 test pairs) — with the task, the subset (source file / genre),
the pair's index within its task, the cosine and the gold score. The report computes every
confidence interval, paired test and protocol variant from these tables: nothing is encoded twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..io import atomic_path

SCHEMA = pa.schema([("task", pa.string()), ("subset", pa.string()), ("pair", pa.int32()),
                    ("cos", pa.float64()), ("gold", pa.float64())])
SICK_ALL = "SICK-all"
BOOTSTRAP_SCHEMA = pa.schema([("task", pa.string()), ("resample", pa.int32()), ("spearman", pa.float64()),
                              ("seed", pa.int64())])


def sick_all(table: pd.DataFrame) -> pd.DataFrame:
    """Every SICK pair (train, trial, test) in the table's order."""
    return table[table.task == "SICKRelatedness"]


def cosine_frame(splits: dict[str, pd.DataFrame], lookup: dict[str, np.ndarray]) -> pd.DataFrame:
    """The rows of :data:`SCHEMA` for ``splits`` (task -> its pairs) from a sentence -> embedding lookup."""
    from .protocol import pair_cosines

    frames = []
    for task, df in splits.items():
        frames.append(pd.DataFrame({"task": task, "subset": df.subset.astype(str).to_numpy(),
                                    "pair": np.arange(len(df), dtype=np.int32), "cos": pair_cosines(df, lookup),
                                    "gold": df.score.to_numpy(dtype=np.float64)}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame({f.name: [] for f in SCHEMA})


def write_cosines(path: Path, frame: pd.DataFrame) -> None:
    with atomic_path(Path(path)) as tmp:
        pq.write_table(pa.Table.from_pandas(frame, schema=SCHEMA, preserve_index=False), tmp)


def read_cosines(path: Path) -> Optional[pd.DataFrame]:
    """The cosines table of one model, or None when it is absent or empty (a model not run)."""
    path = Path(path)
    if not path.is_file():
        return None
    frame = pq.read_table(path, schema=SCHEMA).to_pandas()
    return frame if len(frame) else None


def task_arrays(frame: pd.DataFrame, task: str) -> tuple[np.ndarray, np.ndarray]:
    """(cosines, gold) of one task, in pair order."""
    sub = frame[frame.task == task].sort_values("pair")
    return sub.cos.to_numpy(), sub.gold.to_numpy()


def bootstrap_intervals(frame: pd.DataFrame, tasks, seed: int = 0) -> dict:
    """task -> :class:`~sentlab.evaluate.stats.Interval` (95 % bootstrap CI and distribution) of each task
    with pairs. Task ``i`` of ``tasks`` is resampled with ``seed + i``: every model evaluated with the
    same seed draws the same resamples of the same pairs, so two models' distributions subtract into
    the paired bootstrap of their difference (:func:`~sentlab.evaluate.stats.difference_from_bootstrap`)."""
    from .stats import spearman_ci

    out = {}
    for i, task in enumerate(tasks):
        cos, gold = task_arrays(frame, task)
        if len(cos) >= 3:
            out[task] = spearman_ci(cos, gold, seed=seed + i)
    return out


def confidence_intervals(frame: pd.DataFrame, tasks, seed: int = 0, intervals: Optional[dict] = None) -> dict:
    """``{task: [low, high]}`` of each task's Spearman × 100 and of their average (``Avg``, when every task
    has pairs): :func:`bootstrap_intervals` / :func:`~sentlab.evaluate.stats.avg_ci`."""
    from .stats import avg_ci

    tasks = list(tasks)
    intervals = intervals if intervals is not None else bootstrap_intervals(frame, tasks, seed)
    out = {t: iv.as_list() for t, iv in intervals.items() if t in tasks}
    if all(t in intervals for t in tasks):
        out["Avg"] = avg_ci([intervals[t] for t in tasks]).as_list()
    return out


def write_bootstrap(path: Path, intervals: dict, seed: int) -> None:
    """The bootstrap distributions behind ``ci95`` (one row per task and resample; ``seed`` is the base
    seed they were drawn with), for the report's paired comparisons."""
    rows = [pd.DataFrame({"task": t, "resample": np.arange(len(iv.distribution), dtype=np.int32),
                          "spearman": iv.distribution, "seed": seed}) for t, iv in intervals.items()]
    frame = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame({f.name: [] for f in BOOTSTRAP_SCHEMA})
    with atomic_path(Path(path)) as tmp:
        pq.write_table(pa.Table.from_pandas(frame, schema=BOOTSTRAP_SCHEMA, preserve_index=False), tmp)


def read_bootstrap(path: Path) -> Optional[tuple[dict[str, np.ndarray], int]]:
    """(task -> bootstrap distribution, seed), or None when absent or empty."""
    path = Path(path)
    if not path.is_file():
        return None
    frame = pq.read_table(path, schema=BOOTSTRAP_SCHEMA).to_pandas()
    if not len(frame):
        return None
    return ({t: g.sort_values("resample").spearman.to_numpy() for t, g in frame.groupby("task", sort=False)},
            int(frame.seed.iloc[0]))


def bootstrap_path(cosines_path: Path) -> Path:
    """``reports/cosines/<name>.bootstrap.parquet`` beside ``reports/cosines/<name>.parquet``."""
    return Path(cosines_path).with_suffix(".bootstrap.parquet")
