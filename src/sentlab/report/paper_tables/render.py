"""Rendering a table's resolved rows: Markdown (:func:`to_markdown`), CSV in long format, one line per cell
(:func:`to_csv`), LaTeX booktabs (:func:`to_latex`). A cell is **reproduced / paper (Δ)**; a data warning
of the prepare stage is printed in the header of every table with that column."""

from __future__ import annotations

import csv
import io
from typing import Optional

from .. import backbones as B
from .resolve import settings_text
from .spec import LABELS, Resolved, TableSpec

def _f(v, digits=2) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def _diff(r, p, res=None) -> Optional[float]:
    """r − p; None without both, or when the row's model and the paper's numbers are different backbones."""
    if r is None or p is None or (res and (not res.spec.delta or res.caveat
                                           or not B.comparable(res.backbone, res.spec.backbone))):
        return None
    return r - p


def cell_values(res: Resolved, col: str) -> tuple[Optional[float], Optional[float], Optional[float]]:
    """(reproduced, paper, Δ); reproduced is the mean over the seeds when the row's model ran several."""
    r = res.values.get(col) if res.evaluated else None
    seeds = getattr(res.marks, "seeds", {}) or {}
    if r is not None and col in seeds:
        r = seeds[col].mean
    p = (res.spec.paper or {}).get(col)
    return r, p, _diff(r, p, res)


def rank(rows: list[Resolved], column: str) -> list[Resolved]:
    """Rows with a reproduced ``column`` (the seed mean where there are seeds) best first, ties by label; then the
    others in their order (``TableSpec.rank_by``)."""
    scored = [(cell_values(r, column)[0], i, r) for i, r in enumerate(rows)]
    top = sorted(((v, i, r) for v, i, r in scored if v is not None), key=lambda t: (-t[0], t[2].spec.label))
    return [r for _, _, r in top] + [r for v, _, r in scored if v is None]


def _reproduced_text(res: Resolved, col: str, r: Optional[float], digits: int) -> str:
    """The reproduced number with its seeds / CI and marks (:func:`sentlab.report.significance.marked_text`)."""
    from ..significance import marked_text

    text = marked_text(res.marks, col, r, digits)
    return _f(r, digits) if text is None else text


def cell_text(res: Resolved, col: str, digits: int = 2) -> str:
    r, p, d = cell_values(res, col)
    rs = _reproduced_text(res, col, r, digits)
    if p is None:
        return rs if r is not None else "–"
    ps = _f(p, digits) + ("†" if res.marks is not None and col in res.marks.outside else "")
    if r is None or d is None:
        return f"{rs if r is not None else '–'} / {ps}"
    return f"{rs} / {ps} ({d:+.{digits}f})"


def _row_note(res: Resolved, backbone: str) -> str:
    parts = []
    if res.evaluated:
        parts.append(f"`{res.model}`")
        # another backbone is stale; another profile's name is not (a profile that widens the one a result was
        # evaluated under keeps it: its stage's values are the ones in force; the CSV's `profile` column names it)
        if res.backbone and res.backbone not in (backbone, res.spec.backbone):
            parts.append(f"stale: evaluated with {res.backbone}, profile {res.profile}")
        if res.backbone and not B.comparable(res.backbone, res.spec.backbone):
            parts.append(B.no_delta_note(res.backbone, res.spec.backbone))
        if res.trained_with:
            parts.append(f"trained with {res.trained_with}")
        if res.caveat:
            parts.append(res.caveat)
    else:
        parts.append(res.status)
    if res.spec.expects:
        parts.append(f"row expects {settings_text(res.spec.expects)}")
    if res.spec.note and res.spec.models:
        parts.append(res.spec.note)
    return "; ".join(parts)


def header_text(spec: TableSpec, backbone: str, profile: str, warnings: dict[str, str]) -> str:
    lines = [f"Source: {spec.source} ({spec.paper_setting}, as printed). Reproduced: backbone `{backbone}`, "
             f"profile `{profile}`, {spec.measure}.",
             "", "Cell: **reproduced / paper (Δ = reproduced − paper)**; `–` = no number "
                 "(the row's note says why)."]
    if spec.context:
        lines += ["", spec.context]
    for t, w in warnings.items():
        if t in spec.columns:
            lines += ["", f"Data warning ({LABELS.get(t, t)}): {w}."]
    return "\n".join(lines)


def to_markdown(spec: TableSpec, rows: list[Resolved], backbone: str, profile: str, warnings: dict[str, str],
                legend: str = "") -> str:
    head = ["Row", *[spec.label(c) for c in spec.columns], "Note"]
    out = [f"# {spec.title}", "", header_text(spec, backbone, profile, warnings), ""]
    section = None
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for res in rows:
        if res.spec.section and res.spec.section != section:
            section = res.spec.section
            out.append(f"| **{section}** |" + " |" * (len(head) - 1))
        cells = [cell_text(res, c, spec.digits) for c in spec.columns]
        out.append("| " + " | ".join(x.replace("|", "\\|") for x in [res.spec.label, *cells,
                                                                      _row_note(res, backbone)]) + " |")
    if legend:
        out += ["", legend]
    return "\n".join(out) + "\n"


def csv_header() -> list[str]:
    from ..significance import STAT_HEADER

    return ["table", "section", "row", "model", "column", "reproduced", "paper", "diff", "status", "backbone",
            "profile", "expects", "trained_with", "note", *STAT_HEADER]


def _stat_fields(res: Resolved, col: str) -> list:
    from ..significance import stat_fields

    return stat_fields(res.marks, col)


def csv_records(spec: TableSpec, rows: list[Resolved], backbone: str, profile: str,
                warnings: dict[str, str]) -> list[list]:
    recs = []
    for res in rows:
        for c in spec.columns:
            r, p, d = cell_values(res, c)
            recs.append([spec.id, res.spec.section, res.spec.label, res.model or "", c,
                         "" if r is None else round(r, 4), "" if p is None else p,
                         "" if d is None else round(d, 4), res.status,
                         res.backbone or (backbone if res.spec.models else ""),
                         res.profile or (profile if res.spec.models else ""), settings_text(res.spec.expects),
                         res.trained_with, res.spec.note, *_stat_fields(res, c)])
    return recs


def to_csv(spec: TableSpec, rows: list[Resolved], backbone: str, profile: str, warnings: dict[str, str]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(csv_header())
    w.writerows(csv_records(spec, rows, backbone, profile, warnings))
    return buf.getvalue()


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
        "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "Δ": r"$\Delta$",
        "–": "--", "−": "-", "×": r"$\times$", "≥": r"$\geq$", "≤": r"$\leq$", "`": "", "±": r"$\pm$",
        "†": r"$^\dagger$", "§": r"\S{}", "<": r"$<$", ">": r"$>$", "—": "---"}


def tex_escape(s: str) -> str:
    return "".join(_TEX.get(ch, ch) for ch in s)


def to_latex(spec: TableSpec, rows: list[Resolved], backbone: str, profile: str, warnings: dict[str, str],
             legend: str = "") -> str:
    """booktabs table; the Markdown table's cells (marks included) and its ``legend`` in the caption; rows
    without numbers carry their reason in the last column."""
    cols = spec.columns
    out = [r"% generated by sentlab (report stage); needs \usepackage{booktabs}",
           r"\begin{table*}[t]", r"\centering", r"\scriptsize",
           r"\begin{tabular}{l" + "c" * len(cols) + "p{4cm}}", r"\toprule",
           "Row & " + " & ".join(tex_escape(spec.label(c)) for c in cols) + r" & Note \\", r"\midrule"]
    section = None
    for res in rows:
        if res.spec.section and res.spec.section != section:
            if section is not None:
                out.append(r"\midrule")
            section = res.spec.section
            out.append(r"\multicolumn{%d}{l}{\textit{%s}} \\" % (len(cols) + 2, tex_escape(section)))
        cells = [tex_escape(cell_text(res, c, spec.digits)) for c in cols]   # the Markdown cells, marks included
        note = tex_escape(_row_note(res, backbone))
        out.append(tex_escape(res.spec.label) + " & " + " & ".join(cells) + f" & {note} \\\\")
    caption = (f"{spec.title}. Reproduced ({tex_escape(backbone)}, profile {tex_escape(profile)}) / paper "
               f"({tex_escape(spec.source)}, {tex_escape(spec.paper_setting)}), difference in parentheses.")
    for t, w in warnings.items():
        if t in cols:
            caption += " Data warning (" + tex_escape(LABELS.get(t, t)) + "): " + tex_escape(w) + "."
    if legend:
        caption += " " + tex_escape(legend.replace("**", ""))
    out += [r"\bottomrule", r"\end{tabular}", r"\caption{" + caption + "}", r"\label{tab:" + spec.id + "}",
            r"\end{table*}"]
    return "\n".join(out) + "\n"
