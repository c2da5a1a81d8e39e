"""Stage `report`: the papers' tables from reports/metrics/*.json -> reports/*.md, *.csv."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sentlab.config import load_params
from sentlab.io import write_text
from sentlab.pipeline_util import run_stage
from sentlab.report.diagnostics_tables import render as render_diagnostics
from sentlab.report.tables import load_metrics, ptbert_table3, to_csv, to_markdown


def main() -> None:
    params = load_params()
    metrics = load_metrics(Path("reports/metrics"))
    stats_file = Path("data/prepare_stats.json")
    warnings = json.loads(stats_file.read_text()).get("language_warnings", {}) if stats_file.exists() else {}
    rows = ptbert_table3(metrics, params.model.backbone, params.profile, warnings)
    context = (f"Spearman × 100, SPEC §2 protocol (STS12–16 'all' setting). Reproduced rows: backbone "
               f"`{params.model.backbone}`, profile `{params.profile}`. Paper rows: as printed in PT-BERT (ACL 2022) "
               f"Table 3 (BERT-base).")
    if warnings:
        context += "\n\n" + "\n".join(f"> **Data warning — {t}:** {w}." for t, w in warnings.items())
    write_text(Path("reports/ptbert_table3.md"), to_markdown(rows, "PT-BERT Table 3: STS results", context))
    write_text(Path("reports/ptbert_table3.csv"), to_csv(rows))
    for rel, text in render_diagnostics(metrics, params.model.backbone, params.profile).items():
        write_text(Path("reports") / rel, text)
    print(f"report: {len(metrics)} evaluated models -> reports/ptbert_table3.md, reports/diagnostics.md")


if __name__ == "__main__":
    sys.exit(run_stage(main))
