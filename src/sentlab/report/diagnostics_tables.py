"""Diagnostics tables (docs/evaluation.md#diagnostics) from ``reports/metrics/*.json``, the papers' numbers beside.

* hard length subset of STS12–16: PT-BERT Table 1 / Table 5c shape (subset and full
  Spearman per task, pair counts);
* alignment and uniformity on STS-B test and dev (PaSeR Fig. 6 / PT-BERT Fig. 3 quantities);
* cosine mean / variance by gold level on STS-B test: PaSeR Table 10 shape (levels as rows,
  one column per model), with each model's density figure linked.

Models without diagnostics (not run in this profile, or ``evaluate.diagnostics`` off) are
listed with the reason, never silently dropped. :func:`render` returns
``{relative path under reports/: text}``; the report stage writes them.
"""

from __future__ import annotations

import csv
import io
from pathlib import PurePosixPath

from .paper_numbers import DENSITY_LEVELS, HARD_TASKS, PASER_ALIGNMENT, PASER_TABLE10, PTBERT_HARD_SUBSET

AU_SPLITS = ("STSBenchmark-test", "STSBenchmark-dev")


def _fmt(v, digits: int = 2) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return "nan" if v != v else f"{v:.{digits}f}"
    return str(v)


def _csv(header: list[str], rows: list[list]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(header)
    for r in rows:
        w.writerow(["" if v is None else v for v in r])
    return buf.getvalue()


def _md(header: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(c if isinstance(c, str) else _fmt(c) for c in r) + " |" for r in rows]
    return out


def _order(metrics: dict[str, dict]) -> list[str]:
    return sorted(metrics, key=lambda k: (not k.startswith("base-"), k))


def diagnosed(metrics: dict[str, dict]) -> tuple[list[tuple[str, dict, dict]], list[tuple[str, str]]]:
    """``([(row name, diagnostics, row metrics)], [(model, why no diagnostics)])``; extra rows
    (e.g. a model's channels) follow their model as ``model/row``."""
    rows, missing = [], []
    for name in _order(metrics):
        m = metrics[name]
        if m.get("status", "evaluated") != "evaluated":
            missing.append((name, m.get("status", "not evaluated")))
            continue
        if "diagnostics" not in m:
            missing.append((name, "evaluated without diagnostics (evaluate.diagnostics was false)"))
            continue
        rows.append((name, m["diagnostics"], m))
        for row, res in (m.get("extra_rows") or {}).items():
            if "diagnostics" in res:
                rows.append((f"{name}/{row}", res["diagnostics"], res))
    return rows, missing


def hard_subset_table(rows) -> tuple[list[str], list[str]]:
    """(Markdown lines, CSV text): PT-BERT Table 1 / 5c shape."""
    header = ["Model", "Source", "Set", *HARD_TASKS, "Avg", "Note"]
    md_rows, csv_rows = [], []
    for name, d, _ in rows:
        hs = d["hard_subset"]
        for which in ("subset", "full"):
            vals = [hs["tasks"][t][which] for t in HARD_TASKS]
            counts = "; ".join(f"{t} {hs['tasks'][t]['subset_pairs' if which == 'subset' else 'full_pairs']}"
                               for t in HARD_TASKS)
            note = ("pairs: " + counts) if which == "subset" else "full set: every scored pair of the task"
            if d.get("subsampled_pairs_per_task"):
                note += f" (sample of {d['subsampled_pairs_per_task']} pairs per task)"
            md_rows.append([name, "reproduced", which, *vals, hs[f"Avg_{which}"], note])
            csv_rows.append([name, "reproduced", which, *vals, hs[f"Avg_{which}"],
                             *[hs["tasks"][t]["subset_pairs" if which == "subset" else "full_pairs"]
                               for t in HARD_TASKS]])
    for key, (paper_name, sub, avg, full) in PTBERT_HARD_SUBSET.items():
        full_avg = round(sum(full.values()) / len(full), 2)
        md_rows.append([f"{paper_name} (paper)", "paper", "subset", *[sub[t] for t in HARD_TASKS], avg,
                        "PT-BERT Table 1 / 5c; pair counts not published"])
        md_rows.append([f"{paper_name} (paper)", "paper", "full", *[full[t] for t in HARD_TASKS], full_avg,
                        "PT-BERT Tables 1/3; Avg of the five computed here"])
        csv_rows.append([f"{paper_name} (paper)", "paper", "subset", *[sub[t] for t in HARD_TASKS], avg, *[None] * 5])
        csv_rows.append([f"{paper_name} (paper)", "paper", "full", *[full[t] for t in HARD_TASKS], full_avg,
                         *[None] * 5])
    csv_text = _csv(["model", "source", "set", *HARD_TASKS, "Avg", *[f"pairs_{t}" for t in HARD_TASKS]], csv_rows)
    return _md(header, md_rows), csv_text


def hard_subset_counts(rows) -> list[str]:
    """Positive / negative counts of the subset (the same for every model evaluated on the same pairs)."""
    if not rows:
        return []
    name, d, _ = rows[0]
    hs = d["hard_subset"]
    th = hs["thresholds"]
    lines = [f"Subset: positives gold ≥ {th['pos_min_score']} with a length difference > {th['pos_len_diff_gt']} "
             f"words, negatives gold ≤ {th['neg_max_score']} with a difference < {th['neg_len_diff_lt']} words "
             f"({hs['length_unit']}; params `evaluate.hard_subset`). Counts (from `{name}`):", ""]
    lines += _md(["Task", "Positives", "Negatives", "Subset pairs", "Full pairs"],
                 [[t, str(hs["tasks"][t]["positives"]), str(hs["tasks"][t]["negatives"]),
                   str(hs["tasks"][t]["subset_pairs"]), str(hs["tasks"][t]["full_pairs"])] for t in HARD_TASKS])
    return lines


def alignment_uniformity_table(rows) -> tuple[list[str], list[str]]:
    header = ["Model", "Source", "Split", "Alignment", "Uniformity", "Positive pairs", "Sentences", "STS-B test ρ",
              "Note"]
    md_rows, csv_rows = [], []
    for name, d, m in rows:
        for split in AU_SPLITS:
            v = d["alignment_uniformity"].get(split)
            if not isinstance(v, dict):
                continue
            rho = m.get("STSBenchmark") if split == "STSBenchmark-test" else m.get("STSBenchmark-dev")
            md_rows.append([name, "reproduced", split, _fmt(v["alignment"], 4), _fmt(v["uniformity"], 4),
                            str(v["positive_pairs"]), str(v["sentences"]), rho, ""])
            csv_rows.append([name, "reproduced", split, v["alignment"], v["uniformity"], v["positive_pairs"],
                             v["sentences"], rho])
    for paper_name, a in PASER_ALIGNMENT.items():
        md_rows.append([f"{paper_name} (paper)", "paper", "STSBenchmark", _fmt(a), "–", "–", "–", None,
                        "PaSeR App. D text; uniformity only drawn in its Fig. 6"])
        csv_rows.append([f"{paper_name} (paper)", "paper", "STSBenchmark", a, None, None, None, None])
    csv_text = _csv(["model", "source", "split", "alignment", "uniformity", "positive_pairs", "sentences",
                     "spearman"], csv_rows)
    return _md(header, md_rows), csv_text


def density_table(rows) -> tuple[list[str], str]:
    """PaSeR Table 10 shape: gold levels as rows, ``mean / var`` per model (reproduced, then paper)."""
    cols = [(name, {b["level"]: b for b in d["density"]["bins"]}) for name, d, _ in rows]
    header = ["Level", *[n for n, _ in cols], *[f"{n} (paper)" for n in PASER_TABLE10]]
    md_rows, csv_rows = [], []
    for level in DENSITY_LEVELS:
        cells = [level]
        for name, bins in cols:
            b = bins.get(level)
            cells.append(f"{_fmt(b['mean'])} / {_fmt(b['var'], 3)} (n={b['pairs']})" if b else "–")
            if b:
                csv_rows.append([name, "reproduced", level, b["pairs"], b["mean"], b["var"]])
        for paper_name, vals in PASER_TABLE10.items():
            mean, var = vals[level]
            cells.append(f"{mean:.2f} / {var:.3f}")
            csv_rows.append([f"{paper_name} (paper)", "paper", level, None, mean, var])
        md_rows.append(cells)
    return _md(header, md_rows), _csv(["model", "source", "level", "pairs", "mean", "var"], csv_rows)


def figure_links(rows, prefix: str = "") -> list[str]:
    """Markdown image links to the density figures, relative to reports/ (``prefix`` "../" from reports/tables)."""
    out = []
    for name, d, _ in rows:
        fig = d["density"].get("figure")
        if not fig:
            continue
        p = PurePosixPath(fig)
        rel = p.relative_to("reports") if p.parts and p.parts[0] == "reports" else p
        out += [f"**{name}**", "", f"![{name}: cosine density by gold level]({prefix}{rel.as_posix()})", ""]
    return out


def render(metrics: dict[str, dict], backbone: str, profile: str, figures_prefix: str = "") -> dict[str, str]:
    """Markdown + CSV files of the diagnostics tables: ``{file name: text}``; figure links are relative to
    reports/ with ``figures_prefix`` in front ("../" when the Markdown goes to reports/tables/)."""
    rows, missing = diagnosed(metrics)
    hs_md, hs_csv = hard_subset_table(rows)
    au_md, au_csv = alignment_uniformity_table(rows)
    de_md, de_csv = density_table(rows)
    lines = ["# Diagnostics: hard length subset, alignment/uniformity, cosine density", "",
             f"Reproduced rows: backbone `{backbone}`, profile `{profile}` (docs/evaluation.md#diagnostics). "
             f"Paper rows: BERT-base, as printed.", ""]
    if missing:
        lines += ["Models without diagnostics: " + "; ".join(f"`{n}` ({why})" for n, why in missing) + ".", ""]
    lines += ["## Hard length subset of STS12–16 (PT-BERT Table 1 / Table 5c)", "",
              "Spearman × 100 on the subset and on the full set (\"all\" setting), side by side.", "",
              *hs_md, "", *hard_subset_counts(rows), "",
              "## Alignment and uniformity on STS-B (Wang & Isola 2020; PaSeR Fig. 6, PT-BERT Fig. 3)", "",
              "Normalised embeddings; positives = pairs with gold ≥ 4.0; uniformity = log mean exp(−2‖f(x)−f(y)‖²) "
              "over all pairs of distinct sentences of the split. Lower is better for both.", "",
              *au_md, "",
              "## Cosine similarity by gold level on STS-B test (PaSeR Table 10)", "",
              "mean / variance (population) of the cosine per gold level; [4,5] includes 5.0.", "",
              *de_md, "", "## Cosine density figures (PaSeR Fig. 5)", "", *figure_links(rows, figures_prefix)]
    return {"diagnostics.md": "\n".join(lines).rstrip() + "\n", "hard_subset.csv": hs_csv,
            "alignment_uniformity.csv": au_csv, "cosine_density.csv": de_csv}
