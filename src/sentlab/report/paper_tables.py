"""Every paper table of docs/reproducing.md#the-tables from ``reports/metrics/*.json``: reproduced, paper, difference.

A table is a :class:`TableSpec`: columns (metric keys) and rows; a row names the sentlab
model(s) that reproduce it (``"ptbert_m64"``, or ``"posbow_adv/posbow_adv_bow"`` for an extra
row of a model's metrics) and the paper's values. :func:`resolve` fills a row:

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

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from . import backbones as B
from . import paper_numbers as P

STS7 = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness")
LABELS = {"STSBenchmark": "STS-B", "SICKRelatedness": "SICK-R", "STSBenchmark-dev": "STS-B dev", "Avg": "Avg."}
EVALUATED = "evaluated"
OTHER_SETTINGS = "sentlab runs at other settings (no paper row)"


@dataclass(frozen=True)
class RowSpec:
    label: str
    models: tuple[str, ...] = ()          # candidates, first found wins; () = paper-only row
    paper: Optional[dict] = None          # column -> paper value (None: the paper prints none)
    note: str = ""                        # shown in the Note column (why paper-only, caveats)
    section: str = ""
    extract: str = "sts"                  # sts | hard_subset | hard_full | density
    expects: dict = field(default_factory=dict)   # method key -> value (a tuple: any of these) the model needs
    backbone: str = ""                    # the paper numbers' backbone ("": BERT-base; report.backbones)
    delta: bool = True                    # False: the model differs from the paper's run; no Δ (note says how)


@dataclass(frozen=True)
class TableSpec:
    id: str                               # file stem: reports/tables/<id>.{md,csv,tex}
    title: str
    source: str                           # paper + table, e.g. "PT-BERT (ACL 2022) Table 3"
    columns: tuple[str, ...]
    rows: tuple[RowSpec, ...]
    paper_setting: str = "BERT-base"
    context: str = ""
    main: bool = False                    # LaTeX too
    digits: int = 2
    settings: tuple[str, ...] = ()        # method keys each filled row reports as "trained with"


@dataclass
class Resolved:
    spec: RowSpec
    model: Optional[str] = None           # the sentlab model that filled the row
    status: str = ""                      # EVALUATED or the reason the row has no numbers
    values: dict = field(default_factory=dict)
    backbone: str = ""
    profile: str = ""
    method: dict = field(default_factory=dict)   # the method block the model was trained with
    trained_with: str = ""                # the table's settings keys of ``method``, as text
    marks: Optional[object] = None        # seeds / CI / significance (:class:`sentlab.report.significance.Marks`)

    @property
    def evaluated(self) -> bool:
        return self.status == EVALUATED


# --- reading ---------------------------------------------------------------------------------

def load_metrics(folder: Path) -> dict[str, dict]:
    """``{name: metrics}`` of ``folder/*.json``; an unreadable file becomes a status saying so."""
    out = {}
    for f in sorted(Path(folder).glob("*.json")):
        try:
            data = json.loads(f.read_text())
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            out[f.stem] = data
        except (ValueError, OSError) as e:
            out[f.stem] = {"model": f.stem, "status": f"unreadable metrics file {f} ({e}); re-run its evaluate stage"}
    return out


def _num(v) -> Optional[float]:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return None if math.isnan(float(v)) else float(v)


def _mean(vals) -> Optional[float]:
    vals = [_num(v) for v in vals]
    return None if not vals or any(v is None for v in vals) else sum(vals) / len(vals)


def extract(m: dict, how: str) -> tuple[dict, Optional[str]]:
    """(column -> value, reason when the needed part is absent)."""
    if how == "sts":
        vals = {k: _num(m.get(k)) for k in (*STS7, "Avg", "STSBenchmark-dev")}
        vals["STS12-16"] = _mean([m.get(t) for t in STS7[:5]])
        return vals, None
    diag = m.get("diagnostics")
    if not isinstance(diag, dict):
        return {}, "evaluated without diagnostics (evaluate.diagnostics is false)"
    if how in ("hard_subset", "hard_full"):
        which = "subset" if how == "hard_subset" else "full"
        hs = diag.get("hard_subset") or {}
        vals = {t: _num((hs.get("tasks") or {}).get(t, {}).get(which)) for t in STS7[:5]}
        vals["Avg"] = _num(hs.get(f"Avg_{which}"))
        return vals, None
    if how == "density":
        vals = {}
        for b in (diag.get("density") or {}).get("bins", []):
            vals[f"{b['level']} mean"] = _num(b.get("mean"))
            vals[f"{b['level']} var"] = _num(b.get("var"))
        return vals, None
    raise ValueError(f"unknown extractor {how!r}")


def _why_missing(name: str, models_dir: Path) -> str:
    base = name.split("/")[0]
    info_file = Path(models_dir) / base / "sentlab.json"
    metrics = f"reports/metrics/{base}.json"
    if base.startswith("base-"):
        return f"{metrics} missing: the evaluate_baseline stage for {base[5:]} did not run or failed"
    if not info_file.is_file():
        return (f"{metrics} and models/{base}/sentlab.json missing: the train stage of {base} did not run or "
                f"failed (see `dvc repro` output)")
    try:
        status = json.loads(info_file.read_text()).get("status", "?")
    except ValueError:
        return f"{metrics} missing and models/{base}/sentlab.json unreadable: the train stage of {base} failed"
    if status == "trained":
        return f"{metrics} missing: {base} was trained but its evaluate stage did not run or failed"
    return f"{metrics} missing; models/{base}/sentlab.json says: {status}"


def _fmt(v) -> str:
    return "/".join(map(_fmt, v)) if isinstance(v, tuple) else ("null" if v is None else str(v))


def settings_text(d: dict) -> str:
    return ", ".join(f"{k}={_fmt(v)}" for k, v in d.items())


def mismatch(expects: dict, method: Optional[dict]) -> Optional[str]:
    """Why a model trained with the ``method`` block cannot fill a row expecting ``expects`` (None: it can)."""
    if not expects:
        return None
    if not isinstance(method, dict) or not method:
        return "its metrics record no method settings (evaluated before they were recorded); re-run its evaluate stage"
    bad = {k: method.get(k, "absent") for k, want in expects.items()
           if method.get(k) not in (want if isinstance(want, tuple) else (want,))}
    if bad:
        return f"trained with {settings_text(bad)}, this row expects {settings_text({k: expects[k] for k in bad})}"
    return None


def resolve(row: RowSpec, metrics: dict[str, dict], models_dir: Path = Path("models")) -> Resolved:
    if not row.models:
        return Resolved(row, status=row.note or "paper only")
    reasons: list[str] = []
    for cand in row.models:
        base, _, extra = cand.partition("/")
        m = metrics.get(base)
        if m is None:
            reasons.append(_why_missing(cand, models_dir))
            continue
        status = m.get("status", EVALUATED)
        if status != EVALUATED:
            reasons.append(f"{base}: {status}")
            continue
        why = mismatch(row.expects, m.get("method"))
        if why:
            reasons.append(f"{base}: {why}")
            continue
        method = m.get("method") if isinstance(m.get("method"), dict) else {}
        if extra:
            m2 = (m.get("extra_rows") or {}).get(extra)
            if m2 is None:
                reasons.append(f"{base} was evaluated without the extra row {extra}")
                continue
            m = {**m2, "backbone": m.get("backbone"), "profile": m.get("profile")}
        vals, why = extract(m, row.extract)
        if why:
            reasons.append(f"{base}: {why}")
            continue
        return Resolved(row, cand, EVALUATED, vals, str(m.get("backbone", "")), str(m.get("profile", "")), method)
    return Resolved(row, row.models[0], "; ".join(reasons) or "not evaluated")


# --- rendering ---------------------------------------------------------------------------------

def _f(v, digits=2) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def _diff(r, p, res=None) -> Optional[float]:
    """r − p; None without both, or when the row's model and the paper's numbers are different backbones."""
    if r is None or p is None or (res and (not res.spec.delta or not B.comparable(res.backbone, res.spec.backbone))):
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


def _reproduced_text(res: Resolved, col: str, r: Optional[float], digits: int) -> str:
    """The reproduced number with its seeds / CI and marks (:func:`sentlab.report.significance.marked_text`)."""
    from .significance import marked_text

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


def _row_note(res: Resolved, backbone: str, profile: str) -> str:
    parts = []
    if res.evaluated:
        parts.append(f"`{res.model}`")
        other = res.backbone and res.backbone not in (backbone, res.spec.backbone)
        if other or (res.profile and res.profile != profile):
            parts.append(f"stale: evaluated with {res.backbone}, profile {res.profile}")
        if res.backbone and not B.comparable(res.backbone, res.spec.backbone):
            parts.append(B.no_delta_note(res.backbone, res.spec.backbone))
        if res.trained_with:
            parts.append(f"trained with {res.trained_with}")
    else:
        parts.append(res.status)
    if res.spec.expects:
        parts.append(f"row expects {settings_text(res.spec.expects)}")
    if res.spec.note and res.spec.models:
        parts.append(res.spec.note)
    return "; ".join(parts)


def render_rows(spec: TableSpec, metrics: dict[str, dict], models_dir: Path = Path("models")) -> list[Resolved]:
    """The table's rows resolved, each filled row labelled with its model's settings, then the
    models of the table whose settings fit none of its rows (:data:`OTHER_SETTINGS`)."""
    rows = [resolve(r, metrics, models_dir) for r in spec.rows]
    rows += unplaced_rows(spec, rows, metrics)
    for res in rows:
        if res.evaluated and spec.settings and res.method:
            res.trained_with = settings_text({k: res.method[k] for k in spec.settings if k in res.method})
    return rows


def unplaced_rows(spec: TableSpec, rows: list[Resolved], metrics: dict[str, dict]) -> list[Resolved]:
    """A row "``<model>`` as trained" for each evaluated model that settings-checked rows name but
    whose recorded settings fit none of the rows naming it."""
    filled = {res.model for res in rows if res.evaluated}
    out, seen = [], set()
    for row in spec.rows:
        for cand in row.models if row.expects else ():
            m = metrics.get(cand)
            if (cand in filled or cand in seen or "/" in cand or m is None or m.get("status", EVALUATED) != EVALUATED
                    or not isinstance(m.get("method"), dict) or not m["method"]):
                continue
            if any(cand in r.models and mismatch(r.expects, m["method"]) is None for r in spec.rows):
                continue                                   # fits a row another model of its settings filled
            seen.add(cand)
            vals, why = extract(m, row.extract)
            if why is None:
                out.append(Resolved(RowSpec(f"{cand} (as trained)", (cand,), None, "its settings fit no row of this table",
                                            OTHER_SETTINGS, row.extract), cand, EVALUATED, vals,
                                    str(m.get("backbone", "")), str(m.get("profile", "")), m["method"]))
    return out


def header_text(spec: TableSpec, backbone: str, profile: str, warnings: dict[str, str]) -> str:
    lines = [f"Source: {spec.source} ({spec.paper_setting}, as printed). Reproduced: backbone `{backbone}`, "
             f"profile `{profile}`, docs/evaluation.md protocol (Spearman × 100).",
             "", "Cell: **reproduced / paper (Δ = reproduced − paper)**; `–` = no number (the row's note says why)."]
    if spec.context:
        lines += ["", spec.context]
    for t, w in warnings.items():
        if t in spec.columns:
            lines += ["", f"Data warning ({LABELS.get(t, t)}): {w}."]
    return "\n".join(lines)


def to_markdown(spec: TableSpec, rows: list[Resolved], backbone: str, profile: str, warnings: dict[str, str],
                legend: str = "") -> str:
    head = ["Row", *[LABELS.get(c, c) for c in spec.columns], "Note"]
    out = [f"# {spec.title}", "", header_text(spec, backbone, profile, warnings), ""]
    section = None
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for res in rows:
        if res.spec.section and res.spec.section != section:
            section = res.spec.section
            out.append(f"| **{section}** |" + " |" * (len(head) - 1))
        cells = [cell_text(res, c, spec.digits) for c in spec.columns]
        out.append("| " + " | ".join(x.replace("|", "\\|") for x in [res.spec.label, *cells,
                                                                      _row_note(res, backbone, profile)]) + " |")
    if legend:
        out += ["", legend]
    return "\n".join(out) + "\n"


def csv_header() -> list[str]:
    from .significance import STAT_HEADER

    return ["table", "section", "row", "model", "column", "reproduced", "paper", "diff", "status", "backbone",
            "profile", "expects", "trained_with", "note", *STAT_HEADER]


def _stat_fields(res: Resolved, col: str) -> list:
    from .significance import stat_fields

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
           "Row & " + " & ".join(tex_escape(LABELS.get(c, c)) for c in cols) + r" & Note \\", r"\midrule"]
    section = None
    for res in rows:
        if res.spec.section and res.spec.section != section:
            if section is not None:
                out.append(r"\midrule")
            section = res.spec.section
            out.append(r"\multicolumn{%d}{l}{\textit{%s}} \\" % (len(cols) + 2, tex_escape(section)))
        cells = [tex_escape(cell_text(res, c, spec.digits)) for c in cols]   # the Markdown cells, marks included
        note = tex_escape(_row_note(res, backbone, profile))
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


# --- the tables ----------------------------------------------------------------------------------

COLS7 = (*STS7, "Avg")
COLS_HARD = (*STS7[:5], "Avg")
COLS3 = ("STS12-16", "STSBenchmark", "SICKRelatedness")
NOT_IMPL = "not implemented in sentlab"


def _paper_only(label: str, paper: dict, why: str, section: str = "") -> RowSpec:
    return RowSpec(label, (), paper, f"{NOT_IMPL}: {why}", section)


PTBERT_SETTINGS = ("pseudo_len", "queue_size", "attend_to")
PTBERT_CLS_NOTE = "attend_to: cls (released code): P receives no gradient"


def _ptbert_sweep(attend_to: str, section: str, which: str) -> list[RowSpec]:
    """PT-BERT Table 5a (``which`` = m) or 5b (q) rows in one reading of Y: variants
    ``ptbert[_tokens]_m<m>`` / ``_q<q>``; m = 128, q = 256 is ``ptbert`` / ``ptbert_tokens``."""
    prefix = "ptbert" if attend_to == "cls" else "ptbert_tokens"
    note = PTBERT_CLS_NOTE if attend_to == "cls" else "attend_to: tokens"
    rows = []
    for v, paper in (P.PTBERT_TABLE5A if which == "m" else P.PTBERT_TABLE5B).items():
        main = v == (128 if which == "m" else 256)
        m, q = (v, 256) if which == "m" else (128, v)
        models = tuple(dict.fromkeys((prefix, "ptbert"))) if main else (f"{prefix}_{which}{v}",)
        note_v = note + ("; queue in sentences (64 + 3 queued batches = 256, docs/methods.md)" if which == "q" else "")
        note_v += "; 320 is the released code's queue_size=4 (it keeps 5 batches of 64)" if (which, v) == ("q", 320) \
            else ""
        rows.append(RowSpec(f"{'L' if which == 'm' else 'Q'}-{v}" + (" (ours)" if main else ""), models, dict(paper),
                            note_v, section, expects={"pseudo_len": m, "queue_size": q, "attend_to": attend_to}))
    return rows


def ptbert_tables(backbone: str) -> list[TableSpec]:
    t3 = P.PTBERT_TABLE3
    hs = P.PTBERT_HARD_SUBSET
    table3_rows = [
        RowSpec("BERT [CLS] (no training)", ("base-cls",), None, "baseline, not in PT-BERT Table 3", "Baselines"),
        RowSpec("BERT mean (no training)", ("base-mean",), None, "baseline, not in PT-BERT Table 3", "Baselines"),
        RowSpec("BERT first-last (no training)", ("base-first_last",), None, "baseline", "Baselines"),
        RowSpec("BERT whitening (no training)", ("base-whitening",), None, "baseline", "Baselines"),
    ]
    if backbone == "sentence-transformers/all-MiniLM-L6-v2":
        table3_rows.append(RowSpec("all-MiniLM-L6-v2 mean vs MTEB", ("base-mean",), dict(P.MTEB_MINILM_MEAN),
                                   "reference = the public MTEB evaluation (not a paper): |Δ| ≤ 0.01 on STS12–16/STS-B "
                                   "checks the evaluator; no SICK-R reference: MTEB's SICK-R "
                                   f"({P.MTEB_MINILM_SICKR_ALL_PAIRS:.2f}) scores all 9,927 SICK pairs, a different "
                                   "protocol from the 4,927-pair test split", "Baselines"))
    table3_rows += [
        _paper_only("CLEAR", P.PTBERT_CLEAR, "own pre-training on Wikipedia + BookCorpus (500k steps)",
                    "Discrete augmentation"),
        *[RowSpec(t3[k][0], (k,), dict(t3[k][1]), "", "Discrete augmentation")
          for k in ("moco", "moco_reorder", "moco_duplication", "moco_deletion", "moco_srl")],
        *[RowSpec(t3[k][0], (k,), dict(t3[k][1]), "", "Continuous augmentation") for k in ("ct", "simcse")],
        RowSpec(t3["ptbert"][0], ("ptbert",), dict(t3["ptbert"][1]), PTBERT_CLS_NOTE, "Continuous augmentation",
                expects={"attend_to": "cls"}),
        RowSpec("PT-BERT, Y = all token states", ("ptbert_tokens", "ptbert"), None,
                "docs/methods.md#pt-bert reading of the equations (attend_to: tokens); the paper reports one variant",
                "Continuous augmentation", expects={"attend_to": "tokens"}),
    ]
    t4 = P.PTBERT_TABLE4
    t4_rows = [
        RowSpec("SimCSE-BERTbase + None", ("simcse",), {"STSBenchmark-dev": t4["SimCSE-BERTbase + None"]}),
        _paper_only("SimCSE-BERTbase + Crop", {"STSBenchmark-dev": t4["SimCSE-BERTbase + Crop"]},
                    "SimCSE's own augmentation ablation, quoted from the SimCSE paper"),
        _paper_only("SimCSE-BERTbase + Deletion", {"STSBenchmark-dev": t4["SimCSE-BERTbase + Deletion"]},
                    "SimCSE's own augmentation ablation, quoted from the SimCSE paper"),
        *[RowSpec(label, (m,), {"STSBenchmark-dev": t4[label]}) for label, m in (
            ("MoCo-BERTbase + None", "moco"), ("MoCo-BERTbase + Reorder", "moco_reorder"),
            ("MoCo-BERTbase + Duplication", "moco_duplication"), ("MoCo-BERTbase + Deletion", "moco_deletion"),
            ("MoCo-BERTbase + SRL", "moco_srl"), ("PT-BERTbase", "ptbert"))],
    ]
    t5_rows = [
        *_ptbert_sweep("cls", "(a) pseudo sequence length m, attend_to: cls (P receives no gradient)", "m"),
        *_ptbert_sweep("tokens", "(a') pseudo sequence length m, attend_to: tokens "
                                 "(docs/methods.md#pt-bert reading)", "m"),
        *_ptbert_sweep("cls", "(b) queue size, attend_to: cls (P receives no gradient)", "q"),
        *_ptbert_sweep("tokens", "(b') queue size, attend_to: tokens (docs/methods.md#pt-bert reading)", "q"),
        *[RowSpec(hs[k][0], (k,), dict(hs[k][1], Avg=hs[k][2]), "hard length subset (docs/evaluation.md#diagnostics)",
                  "(c) hard sentence pairs of STS12–16", "hard_subset") for k in ("simcse", "ptbert")],
    ]
    return [
        TableSpec("ptbert_table1", "PT-BERT Table 1: SimCSE on the hard length subset of STS12–16",
                  "PT-BERT (ACL 2022) Table 1", COLS_HARD, (
                      RowSpec("SimCSE sub-dataset", ("simcse",), P.PTBERT_TABLE1["sub-dataset"],
                              "positives with |length diff| > 5 words, negatives < 2 "
                              "(docs/evaluation.md#diagnostics, evaluate.hard_subset)",
                              extract="hard_subset"),
                      RowSpec("SimCSE original", ("simcse",), P.PTBERT_TABLE1["original"],
                              "every scored pair ('all' setting); paper Avg not printed", extract="hard_full"),
                      RowSpec("BERT [CLS] sub-dataset", ("base-cls",), None, "untrained reference",
                              extract="hard_subset"),
                  ), context="Avg = mean of the five tasks (printed only in Table 5c for the subset)."),
        TableSpec("ptbert_table2", "PT-BERT Table 2: SimCSE's training max length", "PT-BERT (ACL 2022) Table 2",
                  ("Avg",), tuple(RowSpec(f"SimCSE{n}", ("simcse",) if n == 32 else (f"simcse_len{n}", "simcse"),
                                          {"Avg": P.PTBERT_TABLE2[n]}, "methods.simcse.max_length (null: train.max_length = 32)",
                                          expects={"max_length": (None, 32) if n == 32 else n})
                                  for n in P.PTBERT_TABLE2), settings=("max_length",)),
        TableSpec("ptbert_table3", "PT-BERT Table 3: STS results", "PT-BERT (ACL 2022) Table 3", COLS7,
                  tuple(table3_rows), context="BERT-base, 1M Wikipedia sentences in the paper.", main=True,
                  settings=PTBERT_SETTINGS),
        TableSpec("ptbert_table4", "PT-BERT Table 4: STS-B development set", "PT-BERT (ACL 2022) Table 4",
                  ("STSBenchmark-dev",), tuple(t4_rows),
                  context="Reproduced: the best checkpoint (selected on STS-B dev) evaluated on all 1,500 dev pairs."),
        TableSpec("ptbert_table5", "PT-BERT Table 5: ablations and hard sentence pairs", "PT-BERT (ACL 2022) Table 5",
                  COLS7, tuple(t5_rows), main=True, settings=PTBERT_SETTINGS,
                  context="(c) has no STS-B / SICK-R columns; its Avg is the mean of STS12–16 on the subset. "
                          "(a), (b): the released code's reading (attend_to: cls). There the pseudo tokens P are the "
                          "queries of an attention with one key, whose weight is 1, so Z' = V(y) whatever P holds: P "
                          "receives no gradient and m tests nothing about the pseudo tokens. (a'), (b'): Y = all "
                          "token states (ptbert_tokens*); the paper prints one number per m / queue size, shown in "
                          "both readings."),
    ]


PASER_SETTINGS = ("eda", "phrases", "chunk_k", "top_k", "m", "n", "pooling", "decoder_layers", "memory_norm", "head_lr",
                  "epochs")
# what every PaSeR ablation row needs besides its own setting: the paper's recipe (one learning rate, no memory
# LayerNorm, which makes m and n immaterial, 5 epochs); the quick paser (memory_norm, head_lr, a step budget)
# fills none of them, not even Table 8's "m = 10, n = 10" although its m and n are 10
PASER_PAPER_RECIPE = {"memory_norm": False, "head_lr": None, "epochs": 5}


def _paser_row(label: str, variant: Optional[str], paper, note: str, **expects) -> RowSpec:
    """A PaSeR ablation row: filled by ``variant`` (None: the paper's own setting, no variant) or, when
    trained so, the main ``paser`` model, only with the ``expects`` settings and the paper's recipe
    (:data:`PASER_PAPER_RECIPE`)."""
    return RowSpec(label, (variant, "paser") if variant else ("paser",), paper, note,
                   expects={**expects, **{k: v for k, v in PASER_PAPER_RECIPE.items() if k not in expects}})


def paser_tables() -> list[TableSpec]:
    t1 = P.PASER_TABLE1
    rows1 = [
        _paper_only("GloVe embeddings", t1["GloVe embeddings"], "not a BERT model", "Original BERT/GloVe"),
        RowSpec("BERTbase-[CLS]", ("base-cls",), t1["BERTbase-[CLS]"], section="Original BERT/GloVe"),
        RowSpec("BERTbase-mean", ("base-mean",), t1["BERTbase-mean"], section="Original BERT/GloVe"),
        RowSpec("BERTbase-first-last avg.", ("base-first_last",), t1["BERTbase-first-last avg."],
                section="Original BERT/GloVe"),
        _paper_only("BERT-flow", t1["BERT-flow"], "normalising-flow post-processing", "Post-processing"),
        RowSpec("BERT-whitening", ("base-whitening",), t1["BERT-whitening"], "evaluate.whitening", "Post-processing"),
        RowSpec("CT-BERTbase", ("ct",), t1["CT-BERTbase"], "PaSeR prints STS12–16 only", "Contrastive"),
        _paper_only("ConSERTbase", t1["ConSERTbase"], "token-shuffle/cutoff contrastive framework", "Contrastive"),
        _paper_only("SimCSE-BERTbase + MLM", t1["SimCSE-BERTbase + MLM"], "SimCSE's auxiliary-MLM ablation",
                    "Contrastive"),
        RowSpec("SimCSE-BERTbase", ("simcse",), t1["SimCSE-BERTbase"], section="Contrastive"),
        _paper_only("CMLM-BERTbase", t1["CMLM-BERTbase"], "conditional MLM pre-training", "Generative"),
        RowSpec("PaSeR-BERTbase", ("paser",), t1["PaSeR-BERTbase"], "unlabelled STS sentences", "Generative"),
    ]
    cls_row = lambda label, paper: RowSpec(label, ("base-cls",), paper, "untrained [CLS]")  # noqa: E731
    t4, t5, t8, t9 = P.PASER_TABLE4, P.PASER_TABLE5, P.PASER_TABLE8, P.PASER_TABLE9
    rows4 = [cls_row("BERT-[CLS]", t4["BERT-[CLS]"]),
             *[_paser_row(label, m, t4[label], "", eda=e) for label, m, e in (
                 ("no aug", "paser_aug_none", "none"), ("+ RS", "paser_aug_rs", "rs"), ("+ RD", "paser_aug_rd", "rd"),
                 ("+ SR", None, "sr"), ("+ SR + RD", "paser_aug_sr_rd", "sr+rd"),
                 ("+ SR + RS", "paser_aug_sr_rs", "sr+rs"))]]
    rows5 = [cls_row("None (BERT-[CLS])", t5["None (BERT-[CLS])"]),
             *[_paser_row(label, m, t5[label], "chunks from the annotate backend (VP: the regexp verb group)", phrases=p) for
               label, m, p in (("NP only", "paser_np", "np"), ("VP only", "paser_vp", "verb_group"),
                               ("NP+VP", "paser_np_vp", "np_verb_group"))],
             *[_paser_row(f"RAKE (top{k})", f"paser_rake{k}" if k < 5 else None, t5[f"RAKE (top{k})"], "", phrases="rake", top_k=k)
               for k in range(1, 6)]]
    rows8 = [_paser_row(f"m = {m:g}, n = {n:g}", None if (m, n) == (10.0, 10.0) else f"paser_m{m:g}_n{n:g}".replace(".", "p"),
                        t8[(m, n)], "", m=m, n=n) for m, n in t8]
    rows9 = [_paser_row(label, variant, t9[label], note, pooling=pool) for label, variant, pool, note in (
        ("Top1 avg.", "paser_pool_mean", "mean", "trained and evaluated with mean pooling"),
        ("Top2 avg.", "paser_pool_top2", "top2_mean", "mean of the last two layers"),
        ("First-last avg.", "paser_pool_first_last", "first_last", "mean of embeddings + last layer"),
        ("[CLS]", None, "cls", ""))]
    levels = P.DENSITY_LEVELS
    cols10 = tuple(f"{lv} {s}" for lv in levels for s in ("mean", "var"))
    rows10 = [RowSpec(label, (m,), {f"{lv} {s}": v for lv in levels for s, v in zip(("mean", "var"), P.PASER_TABLE10[paper][lv])},
                      extract="density") for label, m, paper in (
        ("BERT-[CLS]", "base-cls", "BERT-[CLS]"), ("SimCSE-base", "simcse", "SimCSE-base"),
        ("PaSeR-base", "paser", "PaSeR-base"))]
    fig4 = [_paser_row(f"{d} decoder layer" + ("s" if d > 1 else ""), f"paser_dec{d}" if d != 6 else None, None,
                       "Fig. 4 is a plot: its values are not printed", decoder_layers=d) for d in P.PASER_FIG4_DEPTHS]
    sub3 = "STS12-16 = mean of the five STS12–16 Spearmans (one decimal in the paper)."
    sub3 += (" A row is filled by a model trained with the setting it expects (its variant, else the main paser "
             "model when that is how paser was trained); every filled row says what else its model was trained with.")
    S = PASER_SETTINGS
    return [
        TableSpec("paser_table1", "PaSeR Table 1: unsupervised STS", "PaSeR (EMNLP 2022) Table 1", COLS7, tuple(rows1),
                  main=True, settings=S),
        TableSpec("paser_table4", "PaSeR Table 4: data augmentation", "PaSeR Table 4", COLS3, tuple(rows4), context=sub3,
                  settings=S),
        TableSpec("paser_table5", "PaSeR Table 5: phrases to mask", "PaSeR Table 5", COLS3, tuple(rows5), context=sub3,
                  settings=S),
        TableSpec("paser_table8", "PaSeR Table 8: decoding-signal scales m, n", "PaSeR Table 8 (App. A)", COLS3,
                  tuple(rows8), context=sub3, settings=S),
        TableSpec("paser_table9", "PaSeR Table 9: pooling", "PaSeR Table 9 (App. B)", COLS3, tuple(rows9),
                  context=sub3 + " Each pooling is a model trained and evaluated with it (paser_pool_*).", settings=S),
        TableSpec("paser_table10", "PaSeR Table 10: cosine mean / variance by STS-B gold level",
                  "PaSeR Table 10 (App. C)", cols10, tuple(rows10), digits=3, settings=S,
                  context="STS-B test, population variance; level [4,5] includes 5.0."),
        TableSpec("paser_fig4", "PaSeR Fig. 4: STS Avg. vs decoder depth", "PaSeR Fig. 4", ("Avg",), tuple(fig4),
                  settings=S,
                  context="Avg of the seven STS tasks per decoder depth (methods.paser.decoder_layers); the figure is "
                          "figures/paser_fig4_decoder_depth.png."),
    ]


def all_tables(backbone: str) -> list[TableSpec]:
    return [*ptbert_tables(backbone), *paser_tables(), *paser_sup_tables(), *l2p_tables(), *posbow_tables()]


def models_in_tables(specs: list[TableSpec]) -> set[str]:
    return {c.split("/")[0] for s in specs for r in s.rows for c in r.models}


# they build on the specs above
from .tables_l2p_posbow import l2p_tables, paser_sup_tables, posbow_tables  # noqa: E402
