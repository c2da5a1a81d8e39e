"""Seeds, confidence intervals and significance marks for the report's tables (issue #35).

A mark claims only what its test measures. For every filled row of a table with STS columns,
:func:`annotate` adds:

* **seeds** — when the row's model has ≥ 2 seed runs (``<model>-s<seed>``, params.yaml ``seeds``):
  mean ± std (n) of each column over the seeds and its 95 % prediction interval of one more run
  (:func:`sentlab.evaluate.sts.stats.seed_summary`);
* **ci** — otherwise (n = 1) the 95 % bootstrap CI of the value over the test pairs (``ci95`` of the metrics
  JSON): clusters of pairs that share a sentence resampled (:func:`sentlab.evaluate.sts.cosines.sentence_clusters`).
  It is the uncertainty of one checkpoint on this test set; seed variance is not in it;
* **outside** (†) — the paper's number lies outside the seeds' prediction interval; drawn only for rows with
  ≥ 2 seeds (a single-seed row's CI is no prediction interval for another run: those cells say n = 1);
* **method** (``*``) — the method differs from the reference method (SimCSE, ``simcse``): Welch's t-test over
  seeds (``scipy.stats.ttest_ind(equal_var=False)``), only where both rows ran ≥ 2 seeds;
* **checkpoint** (``§``) — where a method-level test is impossible (a row with one seed): the row's
  checkpoint differs from the reference's checkpoint of seed ``seed`` on the same test pairs (paired cluster
  bootstrap: the two models' stored bootstrap distributions, drawn with the same resamples of the same
  clusters, subtracted resample by resample, :func:`sentlab.evaluate.sts.stats.difference_from_bootstrap`).
  It says nothing about the methods: another seed of either may well reverse it.

Multiple comparisons: within each table, the method-level p-values form one family and the checkpoint-level
p-values another; each family is Holm-corrected (:func:`holm`) and a mark is drawn where the adjusted p is below
:data:`~sentlab.evaluate.sts.stats.ALPHA`. STS-B dev cells carry no marks and no CI: the dev set chose the checkpoint,
so any interval on it would be selection-biased. :func:`legend` writes all of this under each table.

Paired comparisons are computed once per pair of models and reused by every table.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from ..config.models import split_seed
from ..config.tasks import STS_DEV, STS_TASKS
from ..evaluate.sts import stats as S
from .backbones import comparable, family
from ..evaluate.sts.cosines import bootstrap_intervals, bootstrap_path, read_bootstrap, read_cosines

REFERENCE = "simcse"
STS7, DEV = STS_TASKS, STS_DEV   # as declared (sentlab.config.tasks)
TESTED = (*STS7, "Avg")                         # columns that get a CI and marks (dev: none, see the docstring)
TESTED_TASKS = (*STS7, DEV)                     # tasks with stored bootstrap distributions
METHOD_MARK, CHECKPOINT_MARK, OUTSIDE_MARK = "*", "§", "†"
CORRECTION = "Holm"
STS_ROWS = ("sts", "sts_transfer")            # row extractors whose STS columns get seeds, CIs and marks


def seed_groups(metrics: dict[str, dict]) -> dict[str, list[str]]:
    """``{model: [model, model-s43, ...]}``: each evaluated model and its evaluated seed runs (first
    the model trained with ``seed``)."""
    ok = {n for n, m in metrics.items() if m.get("status", "evaluated") == "evaluated"}
    groups: dict[str, list[str]] = {}
    for n in sorted(ok):
        base, seed = split_seed(n)
        if seed is None or base not in metrics:
            groups[n] = [n]
    for n in sorted(ok, key=lambda x: (len(x), x)):
        base, seed = split_seed(n)
        if seed is not None and base in groups:
            groups[base].append(n)
    return groups


@dataclass
class Marks:
    seeds: dict = field(default_factory=dict)      # column -> SeedSummary
    ci: dict = field(default_factory=dict)         # column -> [low, high]
    outside: set = field(default_factory=set)      # columns whose paper number lies outside the seeds' PI
    method: dict = field(default_factory=dict)     # column -> Difference (Welch over seeds) vs the reference
    checkpoint: dict = field(default_factory=dict)  # column -> Difference (paired cluster bootstrap) vs reference
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
                intervals = bootstrap_intervals(self.cosines(model), TESTED_TASKS, seed)
                found = ({t: iv.distribution for t, iv in intervals.items()}, seed)
            self._boot[model] = found
        return self._boot[model]

    def paired(self, a: str, b: str) -> Optional[dict]:
        """Per-task and Avg. :class:`~sentlab.evaluate.sts.stats.Difference` of model ``a`` vs ``b`` on the same
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
    from .paper_tables.resolve import extract

    return extract(m, "sts")[0]


def holm(pvalues) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error rate): sorted ascending, the i-th (from 0) of m is
    multiplied by m − i, made monotone, capped at 1 (Holm 1979). Six lines, so no statsmodels dependency for it;
    the test pins it to a worked example."""
    p = np.asarray(pvalues, dtype=np.float64)
    m = len(p)
    order = np.argsort(p, kind="stable")
    adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adj
    return out


def holm_family(diffs: list) -> list:
    """The :class:`~sentlab.evaluate.sts.stats.Difference` of one family with ``p_adjusted`` set by :func:`holm`
    (a test without a finite p keeps NaN: it marks nothing and is not counted in the family)."""
    ok = [i for i, d in enumerate(diffs) if np.isfinite(d.p)]
    adj = dict(zip(ok, holm([diffs[i].p for i in ok]))) if ok else {}
    return [dataclasses.replace(d, p_adjusted=float(adj.get(i, float("nan")))) for i, d in enumerate(diffs)]


def _correct(rows, kind: str) -> int:
    """Holm over the ``marks.<kind>`` tests of a table's rows (one family); returns its size."""
    cells = [(res.marks, col) for res in rows if res.marks is not None for col in getattr(res.marks, kind)]
    for (m, col), d in zip(cells, holm_family([getattr(m, kind)[col] for m, col in cells])):
        getattr(m, kind)[col] = d
    return sum(1 for m, col in cells if np.isfinite(getattr(m, kind)[col].p))


@dataclass
class Family:
    """What :func:`annotate` tested in one table: the reference of each backbone family and the size of each
    Holm family."""
    references: tuple = ()
    method_tests: int = 0
    checkpoint_tests: int = 0

    @property
    def reference(self) -> Optional[str]:
        """The references as the legend names them (one per backbone family in the table), or None."""
        return "`, `".join(self.references) or None


def annotate(rows, ctx: Context, columns) -> Family:
    """Fill ``res.marks`` of each evaluated STS row (main rows of a model; extra rows such as a channel get
    seeds only), then Holm-correct each family of the table. Returns the table's :class:`Family`."""
    # one reference per backbone family (report.backbones): a row is never tested against another backbone's
    refs = {}
    for r in rows:
        if r.evaluated and r.model in (REFERENCE, f"{REFERENCE}_roberta") and r.spec.extract in STS_ROWS:
            refs.setdefault(family(r.backbone), r.model)
    fam = Family(tuple(dict.fromkeys(refs.values())))
    for res in rows:
        if res.evaluated and res.spec.extract == "glue":
            res.marks = glue_marks(ctx.metrics.get(res.model) or {}, columns)
        if not res.evaluated or res.spec.extract not in STS_ROWS:
            continue
        base, _, extra = res.model.partition("/")
        reference = refs.get(family(res.backbone))
        marks = Marks(reference=reference)

        def values(m, extra=extra):
            if extra:
                m = (m.get("extra_rows") or {}).get(extra) or {}
            return _sts_values(m)

        for col in columns:
            if col not in (*TESTED, DEV):
                continue
            seeds = ctx.seed_values(base, col, values)
            if len(seeds) >= 2:
                marks.seeds[col] = S.seed_summary(seeds)
            if col == DEV:                              # the checkpoint was chosen on it: no CI, no marks
                continue
            if col in marks.seeds:
                paper = (res.spec.paper or {}).get(col)
                if (paper is not None and comparable(res.backbone, res.spec.backbone)   # the paper's own backbone
                        and not marks.seeds[col].low <= paper <= marks.seeds[col].high):
                    marks.outside.add(col)
            elif not extra and col in (ctx.metrics[base].get("ci95") or {}):
                marks.ci[col] = list(ctx.metrics[base]["ci95"][col])
            if reference and base != reference and not extra:
                a, b = ctx.seed_values(base, col, values), ctx.seed_values(reference, col, values)
                if len(a) >= 2 and len(b) >= 2:
                    marks.method[col] = S.seed_difference(a, b)
                else:
                    diff = (ctx.paired(base, reference) or {}).get(col)
                    if diff is not None:
                        marks.checkpoint[col] = diff
        res.marks = marks
    fam.method_tests, fam.checkpoint_tests = _correct(rows, "method"), _correct(rows, "checkpoint")
    return fam


def glue_marks(m: dict, columns) -> Optional[Marks]:
    """GLUE's fine-tuning seeds (reports/metrics/glue/<model>.json): ``mean ± std (n)`` of each task run over two
    seeds or more; None with one seed (a plain number)."""
    marks = Marks()
    tasks = ((m.get("glue_metrics") or {}).get("glue") or {})
    for col in columns:
        runs = [r.get("score") for r in (tasks.get(col) or {}).get("runs") or []]
        if len(runs) >= 2 and all(isinstance(v, (int, float)) for v in runs):
            marks.seeds[col] = S.seed_summary(runs)
    return marks if marks.seeds else None


def marked_text(marks: Optional[Marks], col: str, r: Optional[float], digits: int) -> Optional[str]:
    """The reproduced number of a cell with its marks: ``mean ± std (n)`` over seeds, or ``value [CI] (1)``
    for one seed, then ``*`` / ``§``; None when there are no marks to draw (plain number)."""
    if r is None or marks is None:
        return None
    if col in marks.seeds:
        text = marks.seeds[col].text(digits)
    elif col in marks.ci:
        lo, hi = marks.ci[col]
        text = f"{r:.{digits}f} [{lo:.1f}, {hi:.1f}] (1)"
    else:
        return None
    for kind, sym in (("method", METHOD_MARK), ("checkpoint", CHECKPOINT_MARK)):
        d = getattr(marks, kind).get(col)
        if d is not None and d.significant:
            text += sym
    return text


def stat_fields(marks: Optional[Marks], col: str) -> list:
    """CSV fields of a cell: seeds, std, low, high (the seeds' prediction interval, or the n = 1 cluster
    bootstrap CI), paper outside the PI, reference, level of the test (method | checkpoint), raw p, Holm p, test."""
    if marks is None:
        return [""] * 10
    sd = marks.seeds.get(col)
    lo, hi = (sd.low, sd.high) if sd and col != DEV else tuple(marks.ci.get(col) or ("", ""))
    level = "method" if col in marks.method else "checkpoint" if col in marks.checkpoint else ""
    d = marks.method.get(col) or marks.checkpoint.get(col)
    return [sd.n if sd else 1, round(sd.std, 4) if sd else "", "" if lo == "" else round(lo, 4),
            "" if hi == "" else round(hi, 4), col in marks.outside, marks.reference or "", level,
            "" if d is None else round(d.p, 6), "" if d is None or d.p_adjusted is None else round(d.p_adjusted, 6),
            "" if d is None else d.test]


STAT_HEADER = ["seeds", "std", "low", "high", "paper_outside", "reference", "test_level", "p_vs_reference",
               "p_holm", "test"]


def legend(fam: Family) -> str:
    """The sentences under a table (Markdown and LaTeX alike): what the cells show, which test, which family
    and correction, what n."""
    a = S.ALPHA
    parts = ["Cells: **mean ± std (n)** over n seeds where the row's method ran ≥ 2 (params.yaml `seeds`); "
             f"**value [95 % CI] (1)** where it ran one: a bootstrap over the task's test pairs with clusters of "
             f"pairs that share a sentence as the resampling unit ({S.N_RESAMPLES:,} resamples): this one "
             "checkpoint on this test set, seed variance not included",
             f"{OUTSIDE_MARK} the paper's number lies outside the 95 % prediction interval of one run from the "
             "seeds; drawn only for rows with ≥ 2 seeds (n = 1 rows carry no †)"]
    if fam.reference:
        ref = (f"the reference method `{fam.reference}`" if len(fam.references) == 1 else
               f"the reference method of its backbone (`{fam.reference}`)")
        parts.append(f"{METHOD_MARK} the method differs from {ref}: Welch's t-test over seeds, both rows ≥ 2 "
                     f"seeds; family: the {fam.method_tests} method-level tests of this table, Holm-corrected, "
                     f"adjusted p < {a}")
        parts.append(f"{CHECKPOINT_MARK} where a row ran one seed: this checkpoint differs from the reference's "
                     f"checkpoint (both trained with params.yaml `seed`) on the same test pairs — paired cluster "
                     f"bootstrap "
                     f"({S.N_RESAMPLES:,} shared resamples, two-sided); family: the {fam.checkpoint_tests} "
                     f"checkpoint-level tests of this table, Holm-corrected, adjusted p < {a}; seed variance not "
                     f"included: it says nothing about the methods")
    else:
        parts.append(f"no significance marks: the table's reference row (`{REFERENCE}`) was not evaluated")
    parts.append("STS-B dev cells carry no CI and no marks (dev chose the checkpoint: selection-biased)")
    return "; ".join(parts) + "."
