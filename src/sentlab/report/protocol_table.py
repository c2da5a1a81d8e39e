"""Protocol sensitivity: how far each model's published-style number moves with the protocol.

One row per evaluated model (its first seed; the baselines too), from what the evaluate stage
already computed — the metrics JSON and the cached per-pair cosines — and the training curve:

* STS12–16, averaged over the five: SimCSE's "all" (one Spearman over the concatenated subsets,
  docs/evaluation.md) vs SentEval's ``mean`` and ``wmean`` of the per-subset Spearmans, and the largest
  |all − wmean| of one task;
* SICK-R on its test split (4,927 pairs, SentEval and the papers) vs on every SICK pair (9,927,
  MTEB's SICK-R), and the 7-task Avg. under each;
* model selection: STS-B dev at the best-dev checkpoint (the one evaluated) vs at the last step.
  The test sets of the last checkpoint are not encoded (only the best checkpoint is kept), so this
  column is the dev score.
"""

from __future__ import annotations

import csv
import io
from typing import Optional

import numpy as np

from ..config.tasks import STS_ALL, STS_TASKS
from ..evaluate.sts.cosines import SICK_ALL, task_arrays
from ..evaluate.sts.stats import spearman_vec
from .diagnostics_tables import _fmt

STS5, STS7 = STS_ALL, STS_TASKS   # STS12-16 and the seven, as declared (sentlab.config.tasks)
HEADER = ["model", "STS12-16 all", "STS12-16 mean", "STS12-16 wmean", "max |all-wmean|", "task",
          "SICK-R test", "SICK-R all pairs", "SICK delta", "Avg (papers)", "Avg (SICK all pairs)",
          "dev best", "best step", "dev last", "last step"]


def _num(v) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def row(name: str, m: dict, cosines, curve: Optional[list]) -> list:
    per = m.get("per_task") or {}
    alls = [_num(m.get(t)) for t in STS5]
    means = [_num((per.get(t) or {}).get("mean")) for t in STS5]
    wmeans = [_num((per.get(t) or {}).get("wmean")) for t in STS5]
    avg = (lambda xs: float(np.mean(xs)) if xs and None not in xs else None)
    gaps = [abs(a - w) if a is not None and w is not None else -1 for a, w in zip(alls, wmeans)]
    worst = int(np.argmax(gaps)) if gaps else 0
    sick_test = _num(m.get("SICKRelatedness"))
    sick_all = None
    if cosines is not None:
        cos, gold = task_arrays(cosines, SICK_ALL)
        if len(cos) > 2:
            sick_all = float(spearman_vec(cos, gold))
    seven = [_num(m.get(t)) for t in STS7]
    avg_all = avg(seven[:-1] + [sick_all]) if sick_all is not None else None
    best = last = None
    if curve:
        pts = [(r["step"], r["stsb_dev"]) for r in curve if r.get("stsb_dev") is not None]
        if pts:
            best, last = max(pts, key=lambda x: x[1]), pts[-1]
            best, last = (int(best[0]), best[1]), (int(last[0]), last[1])
    return [name, avg(alls), avg(means), avg(wmeans), gaps[worst] if gaps and gaps[worst] >= 0 else None,
            STS5[worst] if gaps and gaps[worst] >= 0 else "", sick_test, sick_all,
            None if sick_all is None or sick_test is None else sick_all - sick_test, _num(m.get("Avg")), avg_all,
            best[1] if best else None, best[0] if best else None, last[1] if last else None, last[0] if last else None]


def render(metrics: dict[str, dict], ctx, curves: dict[str, list], backbone: str, profile: str) -> tuple[str, str]:
    """(Markdown, CSV) of the protocol-sensitivity table for every evaluated model (seed runs left
    out: each group's first model stands for it)."""
    rows = [row(name, metrics[name], ctx.cosines(name), curves.get(name)) for name in sorted(ctx.groups)]
    md = ["# Protocol sensitivity", "",
          f"Backbone `{backbone}`, profile `{profile}`. The same embeddings scored under the protocols papers and "
          "benchmarks use (Spearman × 100): STS12–16 averaged over the five tasks as SimCSE's \"all\" (sentlab's "
          "protocol), SentEval's per-subset mean and wmean; SICK-R on its 4,927 test pairs (SentEval, the papers) "
          "vs all 9,927 SICK pairs (MTEB) and the 7-task Avg. under each; STS-B dev at the best-dev checkpoint "
          "(the model evaluated) vs the last training step (dev only: the last checkpoint's test sets are not "
          "encoded). Computed from the metrics and the cached per-pair cosines; nothing is re-encoded.", "",
          "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    md += ["| " + " | ".join(_fmt(v) for v in r) + " |" for r in rows]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(HEADER)
    w.writerows([["" if v is None else (round(v, 4) if isinstance(v, float) else v) for v in r] for r in rows])
    return "\n".join(md) + "\n", buf.getvalue()
