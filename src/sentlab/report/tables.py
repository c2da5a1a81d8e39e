"""Render the result tables (Markdown + CSV) from ``reports/metrics/*.json``.

Every row says where it came from (reproduced, paper, reference) and every
cell that was not run says why, never a silent gap.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .paper_numbers import COLUMNS, MTEB_MINILM_MEAN, PTBERT_TABLE3

SHORT = {"STSBenchmark": "STS-B", "SICKRelatedness": "SICK-R"}


@dataclass
class Row:
    name: str
    source: str  # "reproduced" | "paper" | "reference"
    values: dict = field(default_factory=dict)
    note: str = ""


def load_metrics(folder: Path) -> dict[str, dict]:
    out = {}
    for f in sorted(Path(folder).glob("*.json")):
        try:
            out[f.stem] = json.loads(f.read_text())
        except ValueError as e:
            out[f.stem] = {"model": f.stem, "status": f"unreadable metrics file ({e})"}
    return out


def _fmt(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, (int, float)):
        return f"{v:.2f}"
    return str(v)


def reproduced_row(name: str, m: dict) -> Row:
    status = m.get("status", "evaluated")
    if status != "evaluated":
        return Row(name, "reproduced", {}, note=status)
    return Row(name, "reproduced", {c: m.get(c) for c in COLUMNS})


def ptbert_table3(metrics: dict[str, dict], backbone: str, profile: str, warnings: dict[str, str]) -> list[Row]:
    """PT-BERT Table 3 shape: baselines, then each method reproduced with the paper's row beside it."""
    rows: list[Row] = []
    for name in sorted(k for k in metrics if k.startswith("base-")):
        rows.append(reproduced_row(name, metrics[name]))
        if name == "base-mean" and backbone == "sentence-transformers/all-MiniLM-L6-v2":
            rows.append(Row("all-MiniLM-L6-v2 (MTEB)", "reference", dict(MTEB_MINILM_MEAN),
                            note="public MTEB evaluation; must match base-mean within 0.01 on STS12-16/STS-B"))
    for key, (paper_name, paper_vals) in PTBERT_TABLE3.items():
        if key in metrics:
            rows.append(reproduced_row(key, metrics[key]))
        else:
            rows.append(Row(key, "reproduced", {}, note="no train stage in this pipeline yet"))
        rows.append(Row(f"{paper_name} (paper)", "paper", dict(paper_vals), note="BERT-base, 1M Wikipedia sentences"))
    for name in sorted(set(metrics) - set(PTBERT_TABLE3) - {k for k in metrics if k.startswith("base-")}):
        rows.append(reproduced_row(name, metrics[name]))
    return rows


def to_markdown(rows: list[Row], title: str, context: str) -> str:
    head = ["Model", "Source", *[SHORT.get(c, c) for c in COLUMNS], "Note"]
    lines = [f"# {title}", "", context, "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r.name, r.source] + ([_fmt(r.values.get(c)) for c in COLUMNS] if r.values else ["–"] * len(COLUMNS))
        lines.append("| " + " | ".join(cells + [r.note]) + " |")
    return "\n".join(lines) + "\n"


def to_csv(rows: list[Row]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["model", "source", *COLUMNS, "note"])
    for r in rows:
        w.writerow([r.name, r.source, *[("" if r.values.get(c) is None else r.values.get(c)) for c in COLUMNS], r.note])
    return buf.getvalue()
