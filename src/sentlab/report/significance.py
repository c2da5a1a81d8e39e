"""Seeds, confidence intervals and significance marks for the report's tables.

For every filled row of a table with STS columns, :func:`annotate` adds:

* **seeds** — when the row's model has seed runs (``<model>-s<seed>``, params.yaml ``seeds``):
  mean ± std (n) of each column over the seeds and its 95 % prediction interval
  (:func:`sentlab.evaluate.stats.seed_summary`);
* **ci** — otherwise the 95 % bootstrap CI of the value over pairs (``ci95`` of the metrics JSON,
  computed by the evaluate stage from the model's cosines);
* **outside** — the paper's number lies outside that range (†);
* **sig** — the row differs from the table's reference row (SimCSE, ``simcse``) at p < 0.05 (*):
  Welch's t-test over seeds when both rows ran ≥ 2 seeds, else the paired bootstrap of the
  difference on the same pairs (:func:`sentlab.evaluate.stats.difference_from_bootstrap`: the two
  models' bootstrap distributions, stored by the evaluate stage and drawn with the same resamples,
  subtracted resample by resample).

Paired comparisons are computed once per pair of models and reused by every table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from ..evaluate import stats as S
from .backbones import family
from ..evaluate.cosines import bootstrap_intervals, bootstrap_path, read_bootstrap, read_cosines

REFERENCE = "simcse"
SEED_NAME = re.compile(r"^(?P<base>.+)-s(?P<seed>\d+)$")
STS7 = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness")
TESTED = (*STS7, "Avg", "STSBenchmark-dev")
TESTED_TASKS = (*STS7, "STSBenchmark-dev")


def seed_groups(metrics: dict[str, dict]) -> dict[str, list[str]]:
    """``{model: [model, model-s43, ...]}``: each evaluated model and its evaluated seed runs (first
    the model trained with ``seed``)."""
    ok = {n for n, m in metrics.items() if m.get("status", "evaluated") == "evaluated"}
    groups: dict[str, list[str]] = {n: [n] for n in sorted(ok) if not (SEED_NAME.match(n) and
                                                                        SEED_NAME.match(n)["base"] in metrics)}
    for n in sorted(ok, key=lambda x: (len(x), x)):
        m = SEED_NAME.match(n)
        if m and m["base"] in groups:
            groups[m["base"]].append(n)
    return groups


@dataclass
class Marks:
    seeds: dict = field(default_factory=dict)      # column -> SeedSummary
    ci: dict = field(default_factory=dict)         # column -> [low, high]
    outside: set = field(default_factory=set)      # columns whose paper number lies outside the range
    sig: dict = field(default_factory=dict)        # column -> Difference vs the reference row
    reference: Optional[str] = None


@dataclass
class Context:
    """What the marks are computed from: every model's metrics, its seed group and cached cosines."""
    metrics: dict[str, dict]
    cosines_dir: Path
    groups: dict[str, list[str]] = field(default_factory=dict)
    _cos: dict = field(default_factory=dict)
    _boot: dict = field(default_factory=dict)
    _pairs: dict = field(default_factory=dict)

    def __post_init__(self):
        self.groups = seed_groups(self.metrics)

    def cosines(self, model: str):
        if model not in self._cos:
            self._cos[model] = read_cosines(self.cosines_dir / f"{model}.parquet")
        return self._cos[model]

    def seed_values(self, model: str, col: str, extract) -> list[float]:
        vals = []
        for name in self.groups.get(model, [model]):
            v = extract(self.metrics[name]).get(col)
            if v is not None:
                vals.append(v)
        return vals

    def bootstrap(self, model: str) -> Optional[tuple[dict, int]]:
        """(task -> bootstrap distribution, seed) of ``model``: the evaluate stage's
        ``<name>.bootstrap.parquet``, else recomputed from its cosines with the metrics' seed."""
        if model not in self._boot:
            path = self.cosines_dir / f"{model}.parquet"
            found = read_bootstrap(bootstrap_path(path))
            if found is None and self.cosines(model) is not None:
                seed = int((self.metrics.get(model) or {}).get("bootstrap_seed", 0))
                found = ({t: iv.distribution for t, iv in bootstrap_intervals(self.cosines(model), TESTED_TASKS, seed).items()},
                         seed)
            self._boot[model] = found
        return self._boot[model]

    def paired(self, a: str, b: str) -> Optional[dict]:
        """Per-task and Avg. :class:`~sentlab.evaluate.stats.Difference` of model ``a`` vs ``b`` on the same
        pairs, from their bootstrap distributions (same seed: the same resamples); None when either has
        none or they were drawn with different seeds."""
        key = (a, b)
        if key not in self._pairs:
            ba, bb = self.bootstrap(a), self.bootstrap(b)
            res = None
            if ba is not None and bb is not None and ba[1] == bb[1]:
                res = {}
                ma, mb = self.metrics[a], self.metrics[b]
                common = [t for t in TESTED_TASKS if t in ba[0] and t in bb[0] and len(ba[0][t]) == len(bb[0][t])]
                for t in common:
                    if isinstance(ma.get(t), (int, float)) and isinstance(mb.get(t), (int, float)):
                        res[t] = S.difference_from_bootstrap(ba[0][t], bb[0][t], float(ma[t]) - float(mb[t]))
                if all(t in res for t in STS7):
                    res["Avg"] = S.difference_from_bootstrap(np.mean([ba[0][t] for t in STS7], axis=0),
                                                             np.mean([bb[0][t] for t in STS7], axis=0),
                                                             float(ma["Avg"]) - float(mb["Avg"]), n_tasks=7)
            self._pairs[key] = res
        return self._pairs[key]


def _sts_values(m: dict) -> dict:
    from .paper_tables import extract

    return extract(m, "sts")[0]


def annotate(rows, ctx: Context, columns) -> Optional[str]:
    """Fill ``res.marks`` of each evaluated STS row (main rows of a model; extra rows such as a
    channel get seeds only). Returns the reference model used for the significance marks."""
    # one reference per backbone family (report.backbones): a row is never tested against another backbone's
    refs = {}
    for r in rows:
        if r.evaluated and r.model in (REFERENCE, f"{REFERENCE}_roberta") and r.spec.extract == "sts":
            refs.setdefault(family(r.backbone), r.model)
    first = next(iter(refs.values()), None)
    for res in rows:
        if not res.evaluated or res.spec.extract != "sts":
            continue
        base, _, extra = res.model.partition("/")
        reference = refs.get(family(res.backbone))
        marks = Marks(reference=reference)

        def values(m, extra=extra):
            if extra:
                m = (m.get("extra_rows") or {}).get(extra) or {}
            return _sts_values(m)

        for col in columns:
            if col not in TESTED:
                continue
            seeds = ctx.seed_values(base, col, values)
            if len(seeds) >= 2:
                marks.seeds[col] = S.seed_summary(seeds)
                lo, hi = marks.seeds[col].low, marks.seeds[col].high
            elif not extra and col in (ctx.metrics[base].get("ci95") or {}):
                lo, hi = ctx.metrics[base]["ci95"][col]
                marks.ci[col] = [lo, hi]
            else:
                continue
            paper = (res.spec.paper or {}).get(col)
            if paper is not None and not lo <= paper <= hi:
                marks.outside.add(col)
            if reference and base != reference and not extra:
                diff = _difference(ctx, base, reference, col, values)
                if diff is not None:
                    marks.sig[col] = diff
        res.marks = marks
    return first


def _difference(ctx: Context, model: str, reference: str, col: str, values):
    a, b = ctx.seed_values(model, col, values), ctx.seed_values(reference, col, values)
    if len(a) >= 2 and len(b) >= 2:
        return S.seed_difference(a, b)
    paired = ctx.paired(model, reference)
    return (paired or {}).get(col)


def legend(reference: Optional[str], any_seeds: bool) -> str:
    """The sentence under a table: what the cells show, which test, what n."""
    parts = ["Cells: **mean ± std (n seeds)** where a method ran several seeds (params.yaml `seeds`), else the "
             f"value with its 95 % bootstrap CI over the task's pairs ({S.N_RESAMPLES:,} resamples); "
             "† the paper's number lies outside the reproduced range (the 95 % prediction interval of one run from "
             "the seeds, or the bootstrap CI)"]
    if reference:
        parts.append(f"* differs from the reference row `{reference}` at p < {S.ALPHA}: Welch's t-test over seeds "
                     f"when both rows ran ≥ 2 seeds (n = their seed counts), else the paired bootstrap of the "
                     f"difference on the same pairs ({S.N_RESAMPLES:,} shared resamples; two-sided)")
    else:
        parts.append("no significance marks: the table's reference row (`simcse`) was not evaluated")
    return "; ".join(parts) + "."
