"""Every paper table of docs/reproducing.md#the-tables from ``reports/metrics/*.json``: reproduced, paper, difference.

The tables are data, one module per paper: :mod:`.ptbert`, :mod:`.paser` (Table 2, supervised, included),
:mod:`.l2p`, :mod:`.posbow`, :mod:`.followups` (DiffCSE's and RankCSE's two readings), and :mod:`.unsupervised`
(every unsupervised method, ranked). A table is a
:class:`~.spec.TableSpec`: columns (metric keys) and rows; a row
names the sentlab model(s) that reproduce it literally (``"ptbert_m64"``, or ``"posbow_adv/posbow_adv_bow"``
for an extra row of a model's metrics; a variant is an entry of params.yaml ``ablations.variants``) and the
paper's values. The machinery is shared: :mod:`.spec` (what a table is), :mod:`.resolve` (filling a row),
:mod:`.render` (Markdown, CSV, LaTeX). :func:`~.resolve.resolve` fills a row:

* evaluated → the reproduced values (and Δ = reproduced − paper where the paper has a number);
* ``status`` other than "evaluated" (e.g. "not run in this profile") → that reason in the row;
* metrics file missing or unreadable → why, with what ``models/<name>/sentlab.json`` says
  (train stage failed / not run / trained but not evaluated);
* a paper row with no sentlab model (another paper's system) → "not implemented in sentlab: …".

A row states the method settings it expects (``RowSpec.expects``, e.g. PaSeR Table 4's "+ SR" row:
``eda = sr``); a model fills it only when the ``method`` block its metrics record (copied from
``models/<name>/sentlab.json`` by the evaluate stage) has those values. Each filled row's note says
what the model was trained with (``TableSpec.settings``), and a model of the table that fits no row
is listed under :data:`OTHER_SETTINGS` with its real settings: the quick profile's PaSeR (RD, 2
decoder layers) never stands in the "+ SR" or "6 layers" rows.

Never a silent gap: every row is printed, every empty cell has its row's reason beside it.
Renderers: :func:`to_markdown`, :func:`to_csv` (long format, one line per cell),
:func:`to_latex` (booktabs). A data warning of the prepare stage (e.g. a SICK copy that is not
English) is printed in the header of every table with that column.
"""

from __future__ import annotations

from . import followups, l2p, paser, posbow, ptbert, unsupervised
from .render import cell_text, cell_values, csv_header, csv_records, header_text, rank, tex_escape, to_csv, to_latex, \
    to_markdown
from .resolve import extract, load_metrics, mismatch, render_rows, resolve, settings_text, unplaced_rows
from .spec import (COLS3, COLS7, COLS_HARD, EVALUATED, LABELS, NOT_IMPL, OTHER_SETTINGS, STS7, Resolved, RowSpec,
                   TableSpec, paper_only)

__all__ = ["COLS3", "COLS7", "COLS_HARD", "EVALUATED", "LABELS", "NOT_IMPL", "OTHER_SETTINGS", "STS7", "Resolved",
           "RowSpec", "TableSpec", "all_tables", "cell_text", "cell_values", "csv_header", "csv_records", "extract",
           "header_text", "load_metrics", "mismatch", "models_in_tables", "paper_only", "rank", "render_rows",
           "resolve", "settings_text", "tex_escape", "to_csv", "to_latex", "to_markdown", "unplaced_rows"]


def all_tables(backbone: str) -> list[TableSpec]:
    return [*ptbert.tables(backbone), *paser.tables(), paser.table2(), paser.table3(), *l2p.tables(),
            *posbow.tables(), followups.table(), unsupervised.table()]


def models_in_tables(specs: list[TableSpec]) -> set[str]:
    return {c.split("/")[0] for s in specs for r in s.rows for c in r.models}
