"""Per-pair cosines of an evaluated model, cached beside its metrics (``reports/cosines/<name>.parquet``).

One row per scored pair of every task the evaluation ran — the seven test sets, STS-B dev and
``SICK-all`` (every SICK pair: train + trial + test, the 9,927 pairs MTEB's SICK-R scores, where
SentEval and the papers use the 4,927 test pairs) — with the task, the subset (source file / genre),
the pair's index within its task, the cosine, the gold score and the pair's **cluster**
(:func:`sentence_clusters`: pairs linked by a shared sentence, the bootstrap's resampling unit). The
report computes every confidence interval, paired test and protocol variant from these tables: nothing
is encoded twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ...runtime.io import atomic_path

SCHEMA = pa.schema([("task", pa.string()), ("subset", pa.string()), ("pair", pa.int32()),
                    ("cos", pa.float64()), ("gold", pa.float64()), ("cluster", pa.int32())])
SICK_ALL = "SICK-all"
BOOTSTRAP_SCHEMA = pa.schema([("task", pa.string()), ("resample", pa.int32()), ("spearman", pa.float64()),
                              ("seed", pa.int64()), ("unit", pa.string())])
UNIT = "cluster"   # what the stored bootstrap distributions resample (older files: pairs, recomputed)


def sentence_clusters(s1, s2) -> np.ndarray:
    """Cluster id of each pair: the connected components of the graph whose nodes are sentences and whose
    edges are the pairs (``scipy.sparse.csgraph.connected_components``); two pairs sharing a sentence, directly
    or through other pairs, get the same id. Ids are numbered in order of first appearance."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    s1, s2 = list(s1), list(s2)
    codes, uniq = pd.factorize(pd.Series(s1 + s2, dtype=object))
    n, m = len(uniq), len(s1)
    if m == 0:
        return np.zeros(0, dtype=np.int32)
    graph = coo_matrix((np.ones(m), (codes[:m], codes[m:])), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    first, _ = pd.factorize(labels[codes[:m]])
    return first.astype(np.int32)


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
                                    "gold": df.score.to_numpy(dtype=np.float64),
                                    "cluster": sentence_clusters(df.sentence1, df.sentence2)}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame({f.name: [] for f in SCHEMA})


def write_cosines(path: Path, frame: pd.DataFrame) -> None:
    with atomic_path(Path(path)) as tmp:
        pq.write_table(pa.Table.from_pandas(frame, schema=SCHEMA, preserve_index=False), tmp)


def read_cosines(path: Path) -> Optional[pd.DataFrame]:
    """The cosines table of one model, or None when it is absent or empty (a model not run)."""
    path = Path(path)
    if not path.is_file():
        return None
    names = pq.read_schema(path).names
    if "cluster" not in names:
        from ...errors import SentlabError

        raise SentlabError(f"{path} has no `cluster` column (written by an evaluate stage before pairs sharing a "
                           f"sentence were clustered for the bootstrap). Re-run its evaluate stage "
                           f"(`dvc repro` re-runs it: the evaluate code changed), then the report.")
    frame = pq.read_table(path, schema=SCHEMA).to_pandas()
    return frame if len(frame) else None


def task_arrays(frame: pd.DataFrame, task: str) -> tuple[np.ndarray, np.ndarray]:
    """(cosines, gold) of one task, in pair order."""
    sub = frame[frame.task == task].sort_values("pair")
    return sub.cos.to_numpy(), sub.gold.to_numpy()


def task_clusters(frame: pd.DataFrame, task: str) -> np.ndarray:
    """The cluster id of each pair of one task (:func:`sentence_clusters`), in pair order."""
    return frame[frame.task == task].sort_values("pair").cluster.to_numpy()


def bootstrap_intervals(frame: pd.DataFrame, tasks, seed: int = 0) -> dict:
    """task -> :class:`~sentlab.evaluate.sts.stats.Interval` (95 % cluster-bootstrap CI and distribution) of each
    task with pairs: the clusters of pairs sharing a sentence (the ``cluster`` column) are resampled. Task
    ``i`` of ``tasks`` is resampled with ``seed + i``: every model evaluated with the same seed draws the same
    resamples of the same clusters, so two models' distributions subtract into the paired cluster bootstrap of
    their difference (:func:`~sentlab.evaluate.sts.stats.difference_from_bootstrap`)."""
    from .stats import spearman_ci

    out = {}
    for i, task in enumerate(tasks):
        cos, gold = task_arrays(frame, task)
        if len(cos) >= 3:
            out[task] = spearman_ci(cos, gold, seed=seed + i, clusters=task_clusters(frame, task))
    return out


def confidence_intervals(frame: pd.DataFrame, tasks, seed: int = 0, intervals: Optional[dict] = None) -> dict:
    """``{task: [low, high]}`` of each task's Spearman × 100 and of their average (``Avg``, when every task
    has pairs): :func:`bootstrap_intervals` / :func:`~sentlab.evaluate.sts.stats.avg_ci`."""
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
                          "spearman": iv.distribution, "seed": seed, "unit": UNIT}) for t, iv in intervals.items()]
    frame = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame({f.name: [] for f in BOOTSTRAP_SCHEMA})
    with atomic_path(Path(path)) as tmp:
        pq.write_table(pa.Table.from_pandas(frame, schema=BOOTSTRAP_SCHEMA, preserve_index=False), tmp)


def read_bootstrap(path: Path) -> Optional[tuple[dict[str, np.ndarray], int]]:
    """(task -> bootstrap distribution, seed), or None when absent, empty or not of :data:`UNIT` resamples
    (written before the cluster bootstrap: the caller recomputes them from the cosines)."""
    path = Path(path)
    if not path.is_file():
        return None
    if "unit" not in pq.read_schema(path).names:
        return None                     # an older file of pair resamples: the report recomputes from the cosines
    frame = pq.read_table(path, schema=BOOTSTRAP_SCHEMA).to_pandas()
    if not len(frame) or (frame.unit != UNIT).any():
        return None
    return ({t: g.sort_values("resample").spearman.to_numpy() for t, g in frame.groupby("task", sort=False)},
            int(frame.seed.iloc[0]))


def bootstrap_path(cosines_path: Path) -> Path:
    """``reports/cosines/<name>.bootstrap.parquet`` beside ``reports/cosines/<name>.parquet``."""
    return Path(cosines_path).with_suffix(".bootstrap.parquet")
