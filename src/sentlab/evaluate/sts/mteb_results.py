"""MTEB's result JSON for the STS tasks sentlab scores exactly as MTEB does (issue #55 "Results in the formats the
field reads"): ``sentlab evaluate --format mteb`` writes, for each, the file the MTEB results repository holds,

    <out>/<org>__<model>/<revision>/<TaskName>.json      (+ model_meta.json beside them)

a :class:`mteb.TaskResult` (``mteb.results.task_result``, mteb 2.x) as ``TaskResult.to_disk`` writes it::

    {"dataset_revision": ..., "task_name": "STS12", "mteb_version": ..., "evaluation_time": s,
     "kg_co2_emissions": null, "date": unix time,
     "scores": {"test": [{"pearson", "spearman", "cosine_pearson", "cosine_spearman", "manhattan_pearson",
                          "manhattan_spearman", "euclidean_pearson", "euclidean_spearman", "main_score",
                          "hf_subset": "default", "languages": ["eng-Latn"]}]}}

Scores are fractions (MTEB's scale: Spearman × 100 / 100), computed as MTEB's STS evaluator computes them on the
same embeddings sentlab's STS table scores: cosine similarity, negative Manhattan and Euclidean distance, each
against the gold score with Pearson and Spearman; ``pearson``/``spearman`` are the cosine ones (the model's own
similarity: sentlab's encoders compare by cosine); ``main_score`` is ``cosine_spearman``.

Which tasks. STS12–16 and STS-B test: MTEB's test sets are the same pairs as sentlab's (STS12–16: every subset
of the year concatenated, 3,108 / 1,500 / 3,750 / 3,000 / 1,186 pairs, SimCSE's "all" setting, which is MTEB's
one Spearman over the whole test set; STS-B: the 1,379 test pairs). **SICK-R is left out**: MTEB's SICK-R scores
all 9,927 SICK pairs, sentlab's SICK-R (SentEval's, the papers') its 4,927-pair test split, so sentlab's number
is not MTEB's task (the protocol-sensitivity table puts both side by side). ``dataset_revision`` is the revision
of MTEB's copy of each data set (:data:`TASKS`, mteb 2.26's task metadata); sentlab reads the original releases,
whose pairs and gold scores those copies hold.

Distances: MTEB measures them on what the model's ``encode`` returns; a sentence-transformers folder whose
``modules.json`` ends in a ``Normalize`` module (all-MiniLM-L6-v2) returns unit vectors, while sentlab's encoder
stops at the pooling, so for such a model (:func:`normalizes`) the Manhattan/Euclidean scores are computed on the
L2-normalised embeddings (cosine scores do not change).

``evaluation_time``: the STS evaluation's seconds (every task's sentences are encoded together, once), the same
in each file.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional

import numpy as np

from ...config.tasks import tasks_of

# task -> (MTEB task name, MTEB dataset revision, test pairs): mteb 2.26's metadata, declared with each task
TASKS = {t.name: t.mteb for t in tasks_of("sts") if t.mteb}
LEFT_OUT = {t.name: t.mteb_left_out for t in tasks_of("sts") if t.mteb_left_out}   # the STS tasks MTEB scores otherwise
NO_REVISION = "no_revision_available"   # MTEB's folder name for a model without a hub revision
SCORE_KEYS = ("pearson", "spearman", "cosine_pearson", "cosine_spearman", "manhattan_pearson", "manhattan_spearman",
              "euclidean_pearson", "euclidean_spearman", "main_score")


def mteb_version() -> Optional[str]:
    """The installed mteb's version (the format written is its TaskResult), else None."""
    try:
        from importlib.metadata import version

        return version("mteb")
    except Exception:  # noqa: BLE001 - mteb is optional
        return None


def normalizes(model: str) -> bool:
    """Whether ``model`` (a folder or a hub id :func:`sentlab.assets.resolve.resolve_model` finds) is a
    sentence-transformers model whose last module is ``Normalize`` (its ``encode`` returns unit vectors)."""
    try:
        from ...assets.resolve import resolve_model

        mods = json.loads((resolve_model(model) / "modules.json").read_text())
        return bool(mods) and str(mods[-1].get("type", "")).endswith("Normalize")
    except Exception:  # noqa: BLE001 - no modules.json (a plain HF model, a sentlab folder): not normalised
        return False


def sts_scores(a: np.ndarray, b: np.ndarray, gold: np.ndarray, normalize: bool = False) -> dict[str, float]:
    """MTEB's STS metrics of paired embeddings ``a``, ``b`` against ``gold`` (``normalize``: the distances on
    L2-normalised embeddings, what a model ending in ``Normalize`` hands MTEB)."""
    from scipy.stats import pearsonr, spearmanr

    a, b, gold = np.asarray(a, np.float64), np.asarray(b, np.float64), np.asarray(gold, np.float64)
    if normalize:
        a = a / np.linalg.norm(a, axis=1, keepdims=True)
        b = b / np.linalg.norm(b, axis=1, keepdims=True)
    cos = np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    sims = {"cosine": cos, "manhattan": -np.abs(a - b).sum(axis=1), "euclidean": -np.linalg.norm(a - b, axis=1)}
    out: dict[str, float] = {}
    for k, s in sims.items():
        out[f"{k}_pearson"] = float(pearsonr(s, gold)[0])
        out[f"{k}_spearman"] = float(spearmanr(s, gold)[0])
    out["pearson"], out["spearman"] = out["cosine_pearson"], out["cosine_spearman"]
    out["main_score"] = out["cosine_spearman"]
    return {k: out[k] for k in SCORE_KEYS}


def task_result(task: str, scores: dict[str, float], evaluation_time: Optional[float],
                date: Optional[float] = None) -> dict:
    """One task's TaskResult dict (scores rounded to 6 decimals, as ``TaskResult.to_disk`` does)."""
    name, revision, _ = TASKS[task]
    return {"dataset_revision": revision, "task_name": name, "mteb_version": mteb_version(),
            "scores": {"test": [{**{k: round(v, 6) for k, v in scores.items()}, "hf_subset": "default",
                                 "languages": ["eng-Latn"]}]},
            "evaluation_time": None if evaluation_time is None else float(evaluation_time),
            "kg_co2_emissions": None, "date": time.time() if date is None else date}


def model_dir(out: Path, model_name: str, revision: Optional[str] = None) -> Path:
    """``out/<org>__<model>/<revision>``: the results repository's folder of one model revision."""
    return Path(out) / model_name.strip("/").replace("/", "__") / (revision or NO_REVISION)


def partial(table) -> Optional[str]:
    """Why ``table``'s scores would not be MTEB's tasks (a task whose test-pair count is not MTEB's: a partial or
    subsampled table, ``evaluate.max_pairs``), or None."""
    from ...data.sts import eval_split

    for task, (name, _, n) in TASKS.items():
        got = len(eval_split(table, task))
        if got != n:
            return (f"{task} has {got} test pairs here, MTEB's {name} has {n}: the STS table is partial or subsampled "
                    f"(evaluate.max_pairs), so its score is not MTEB's task")
    return None


def results(table, lookup: dict[str, np.ndarray], evaluation_time: Optional[float] = None,
            normalize: bool = False) -> dict[str, dict]:
    """``{MTEB task name: TaskResult dict}`` for :data:`TASKS` from the STS ``table`` and the embeddings
    ``lookup`` (sentence -> vector) the evaluation computed. A task whose pair count is not MTEB's (a partial
    table, ``evaluate.max_pairs``) is an error: its number would not be MTEB's task."""
    from ...data.sts import eval_split
    from ...errors import SentlabError

    why = partial(table)
    if why:
        raise SentlabError(f"--format mteb: {why}. Evaluate on the full table (the prepare stage's "
                           f"data/sts/sts.parquet).")
    out = {}
    for task, (name, _, n) in TASKS.items():
        df = eval_split(table, task)
        a = np.stack([lookup[s] for s in df.sentence1])
        b = np.stack([lookup[s] for s in df.sentence2])
        out[name] = task_result(task, sts_scores(a, b, df.score.to_numpy(), normalize), evaluation_time)
    return out


def write(out: Path, model_name: str, res: dict[str, dict], revision: Optional[str] = None) -> list[Path]:
    """Write each TaskResult and ``model_meta.json`` (name, revision) under :func:`model_dir`; returns the paths."""
    from ...runtime.io import write_text

    d = model_dir(out, model_name, revision)
    paths = []
    for name, r in res.items():
        write_text(d / f"{name}.json", json.dumps(r, indent=2) + "\n")
        paths.append(d / f"{name}.json")
    meta = {"name": model_name, "revision": revision or NO_REVISION, "framework": ["Sentence Transformers"],
            "languages": ["eng-Latn"], "note": "written by sentlab evaluate --format mteb; SICK-R left out: "
                                               + LEFT_OUT["SICKRelatedness"]}
    write_text(d / "model_meta.json", json.dumps(meta, indent=2) + "\n")
    return paths + [d / "model_meta.json"]


# The evaluate stages' copy (evaluate@<model>, evaluate_baseline@<name>): reports/mteb/sentlab__<model>/, a declared
# output of the stage, as `sentlab evaluate --format mteb` writes it for a model named sentlab/<model>.
STAGE_DIR = Path("reports/mteb")


def stage_dir(name: str, out: Path = STAGE_DIR) -> Path:
    """``<out>/sentlab__<name>``: the stage's output folder (the results repository's folder of model
    ``sentlab/<name>``)."""
    return model_dir(out, f"sentlab/{name}").parent


def write_none(name: str, why: str, out: Path = STAGE_DIR) -> Path:
    """The stage's folder without results: a README.md saying why (a model not trained, a partial table)."""
    from ...runtime.io import write_text

    path = stage_dir(name, out) / "README.md"
    write_text(path, f"# sentlab/{name}: no MTEB results\n\n{why}.\n")
    return path


def write_stage(name: str, table, lookup: dict[str, np.ndarray], evaluation_time: Optional[float] = None,
                normalize: bool = False, out: Path = STAGE_DIR, max_pairs: Optional[int] = None) -> list[Path]:
    """An evaluate stage's MTEB results of model ``name`` (:func:`results`, :func:`write`) under ``out``; a
    partial table, or an evaluation of a sample of each task (``max_pairs``, ``evaluate.max_pairs``):
    :func:`write_none` with the reason."""
    why = (f"evaluate.max_pairs is {max_pairs}: each task was evaluated on a sample of its pairs, so its score is "
           f"not MTEB's task" if max_pairs is not None else partial(table))
    if why:
        return [write_none(name, why, out)]
    return write(out, f"sentlab/{name}", results(table, lookup, evaluation_time, normalize))
