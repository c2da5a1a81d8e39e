"""SentEval's results dict for the STS tasks (``sentlab evaluate --format senteval``).

The layout SentEval's ``SE.eval(tasks)`` returns (the SimCSE fork, whose ``evaluation.py`` the field compares with):
STS12–16 ``{task: {<subset>: {"spearman": ρ, "nsamples": n}, ..., "all": {"spearman": {"all": ρ, "mean": ρ̄,
"wmean": ρ̄_w}}}}``, STSBenchmark and SICKRelatedness ``{task: {"test": {"spearman": ρ, "nsamples": n}}}`` (and
STSBenchmark's ``"dev"`` when evaluated), ρ a correlation in [−1, 1] as SentEval gives it (SimCSE's evaluation.py
prints ``results["STS12"]["all"]["spearman"]["all"] * 100`` and ``results["STSBenchmark"]["test"]["spearman"] *
100``). SentEval's ``pearson`` entries are left out: sentlab's protocol computes Spearman only (docs/evaluation.md);
SentEval stores ``(ρ, p-value)`` pairs from scipy, here ρ alone.
"""

from __future__ import annotations

from ..config.tasks import STS_ALL

SUBSET_TASKS = STS_ALL   # STS12-16, as declared (sentlab.config.tasks)
SPLIT_TASKS = {"STSBenchmark": (("test", "STSBenchmark"), ("dev", "STSBenchmark-dev")),
               "SICKRelatedness": (("test", "SICKRelatedness"),)}


def _rho(x: float) -> float:
    return round(float(x) / 100, 6)


def results(metrics: dict) -> dict:
    """SentEval's results dict from the metrics of :func:`sentlab.evaluate.sts.protocol.evaluate_table` (Spearman × 100,
    ``per_task`` with each task's subsets and pair counts)."""
    per = metrics["per_task"]
    out: dict = {}
    for task in SUBSET_TASKS:
        if task not in per:
            continue
        p = per[task]
        entry = {name: {"spearman": _rho(s["spearman"]), "nsamples": s["pairs"]} for name, s in p["subsets"].items()}
        entry["all"] = {"spearman": {"all": _rho(metrics[task]), "mean": _rho(p["mean"]), "wmean": _rho(p["wmean"])}}
        out[task] = entry
    for task, splits in SPLIT_TASKS.items():
        got = {split: {"spearman": _rho(metrics[key]), "nsamples": per[key]["pairs"]}
               for split, key in splits if key in per}
        if got:
            out[task] = got
    return out
