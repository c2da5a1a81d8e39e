"""``reports/index.html``: the whole report on one static page that opens from disk (no server, no network, no
CDN: the styles, the sorting script and the curves are inline).

Built by the report stage from the same data as the Markdown tables (the :class:`~.build.Report`'s resolved rows,
the metrics JSON, ``reports/curves``):

* the environment fingerprint the evaluations recorded;
* the one-protocol ranking (``unsupervised_one_protocol``), sortable by clicking a column header;
* each trained method's dev curves — STS-B dev Spearman, alignment vs uniformity (PT-BERT Fig. 3's axes) and the
  training loss over steps — one line per seed, drawn as inline SVG, with each seed's test scores;
* the protocol-sensitivity table (``reports/tables/protocol_sensitivity.csv``);
* every paper table, each cell the reproduced number with the paper's beside and the difference;
* links to the MLflow runs where the store knows them (:func:`mlflow_links`).
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Optional

from . import figures
from .paper_tables import EVALUATED, Resolved, TableSpec
from .paper_tables.render import _reproduced_text, cell_values
from .svg import _num, e, svg_chart

HTML = Path("reports/index.html")
RANKING = "unsupervised_one_protocol"
UI_ENV = "SENTLAB_MLFLOW_UI"   # the MLflow UI's address the run links point at (default http://127.0.0.1:5000)

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1320px;
color:#222;line-height:1.4;padding:0 16px}
h1{margin-bottom:4px}h2{border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:36px}
h3{margin:22px 0 6px}nav a{margin-right:14px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px;display:block;max-width:100%;overflow-x:auto}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:right;vertical-align:top}
.r,.p,.d,.s,code{white-space:nowrap}.s{font-size:11px;color:#374151}tr.no td{color:#9ca3af}
tr.section th{background:#e5e7eb;position:static}
details summary{cursor:pointer}
th{background:#f3f4f6;position:sticky;top:0}td.l,th.l{text-align:left}
table.sortable th{cursor:pointer;user-select:none}table.sortable th:hover{background:#e5e7eb}
th.asc::after{content:" \\25B2"}th.desc::after{content:" \\25BC"}
tr:nth-child(even) td{background:#fafafa}
.r{font-weight:600}.p{color:#6b7280}.d{color:#6b7280;font-size:11px}.note{color:#6b7280;font-size:11px;
min-width:260px;max-width:520px;text-align:left;white-space:normal}.why{color:#9ca3af;font-style:italic}
.warn{background:#fff7ed;border-left:4px solid #f97316;padding:6px 10px}
.curves{display:flex;flex-wrap:wrap;gap:12px}.curves figure{margin:0}
figcaption{font-size:12px;color:#555}.ctx{color:#555;font-size:13px;max-width:1100px}
svg text{font-family:system-ui,Helvetica,Arial,sans-serif}
"""

# click a header: sort the body's rows by that column (data-v, numeric where both are numbers); again: reverse
JS = """
document.querySelectorAll('table.sortable').forEach(function(t){
 t.querySelectorAll('thead th').forEach(function(th,i){th.addEventListener('click',function(){
  var asc=!th.classList.contains('asc'),b=t.tBodies[0],rows=Array.from(b.rows);
  var key=function(r){var c=r.cells[i];var v=c?(c.dataset.v!==undefined?c.dataset.v:c.textContent):'';
   var n=parseFloat(v);return (v===''||isNaN(n))?v:n};
  rows.sort(function(a,c){var x=key(a),y=key(c);if(x===''&&y!=='')return 1;if(y===''&&x!=='')return -1;
   var s=(typeof x==='number'&&typeof y==='number')?x-y:String(x).localeCompare(String(y));return asc?s:-s});
  rows.forEach(function(r){b.appendChild(r)});
  t.querySelectorAll('thead th').forEach(function(h){h.classList.remove('asc','desc')});
  th.classList.add(asc?'asc':'desc')})})});
"""


# --- MLflow -----------------------------------------------------------------------------------------------

def mlflow_links(root: Path, names, models_dir: Path) -> dict[str, str]:
    """``{model: MLflow UI address of its training run}`` for the models whose ``sentlab.json`` records a
    ``run_key`` the store has a training run for. Looked up only when there is a store to ask (``MLFLOW_TRACKING_URI``
    set, or ``mlflow.db`` under ``root``) and ``SENTLAB_REPORT_MLFLOW`` is not 0; any failure: no links."""
    if os.environ.get("SENTLAB_REPORT_MLFLOW", "1") == "0":
        return {}
    if not (os.environ.get("MLFLOW_TRACKING_URI") or (Path(root) / "mlflow.db").is_file()):
        return {}
    try:
        from .. import tracking

        exp = tracking.experiment_id()
        ui = os.environ.get(UI_ENV, "http://127.0.0.1:5000").rstrip("/")
        out = {}
        for name in names:
            try:
                key = json.loads((models_dir / name / "sentlab.json").read_text()).get("run_key")
            except (OSError, ValueError):
                continue
            run_id = tracking.find_training_run(name, key) if key else None
            if run_id:
                out[name] = f"{ui}/#/experiments/{exp}/runs/{run_id}"
        return out
    except Exception:  # noqa: BLE001 - the page is the report's; the store is a side channel
        return {}


def _run_link(links: dict[str, str], model: Optional[str]) -> str:
    url = links.get(model or "")
    return f'<a href="{e(url)}">run</a>' if url else ""


# --- sections ----------------------------------------------------------------------------------------------

def _environment(metrics: dict[str, dict]) -> str:
    fps = {k: m["fingerprint"] for k, m in sorted(metrics.items()) if isinstance(m.get("fingerprint"), dict)}
    if not fps:
        return '<p class="why">No evaluation recorded an environment fingerprint.</p>'
    keys = [k for k in next(iter(fps.values())) if k != "data_sha256"]
    rows = []
    for k in keys:
        vals = {m: f.get(k) for m, f in fps.items()}
        if len({json.dumps(v, sort_keys=True, default=str) for v in vals.values()}) == 1:
            rows.append(f'<tr><th class="l">{e(k)}</th><td class="l"><code>{e(next(iter(vals.values())))}</code>'
                        f"</td></tr>")
        else:
            rows.append(f'<tr><th class="l">{e(k)}</th><td class="l">differs: '
                        + "; ".join(f"<code>{e(m)}</code> {e(v)}" for m, v in vals.items()) + "</td></tr>")
    return f'<table id="environment"><tbody>{"".join(rows)}</tbody></table>'


def _cell(res: Resolved, col: str, digits: int) -> str:
    r, p, d = cell_values(res, col)
    rs = _reproduced_text(res, col, r, digits) if r is not None else "–"
    head, _, seeds = rs.partition(" ± ")   # seeds: the mean bold, "± std (n)" beside it, smaller
    head, bracket, ci = head.partition(" [")   # one seed: its CI "[lo, hi] (1)" on a line of its own, smaller
    parts = [f'<span class="r">{e(head)}</span>' + (f' <span class="s">± {e(seeds)}</span>' if seeds else "")
             + (f'<br><span class="s">{e(bracket.strip() + ci)}</span>' if bracket else "")]
    if p is not None:
        parts.append(f'<br><span class="p" title="paper">{p:.{digits}f}</span>')
    if d is not None:
        parts.append(f' <span class="d">({d:+.{digits}f})</span>')
    v = "" if r is None else f"{r:.6g}"
    return f'<td data-v="{v}">{"".join(parts)}</td>'


def _note(res: Resolved) -> str:
    bits = []
    if res.evaluated:
        if res.trained_with:
            bits.append(f"trained with {res.trained_with}")
        if res.caveat:
            bits.append(res.caveat)
    else:
        bits.append(res.status)
    if res.spec.note:
        bits.append(res.spec.note)
    return "; ".join(b for b in bits if b)


def _short(text: str, n: int = 110) -> str:
    """A long note folded: its start, the whole on a click (``<details>``, no script)."""
    if len(text) <= n:
        return e(text)
    return f"<details><summary>{e(text[:n].rsplit(' ', 1)[0])} …</summary>{e(text)}</details>"


def paper_table(spec: TableSpec, rows: list[Resolved], links: dict[str, str], sortable: bool = False,
                ranked: bool = False) -> str:
    head = (["#"] if ranked else []) + ["Row"] + [spec.label(c) for c in spec.columns] + ["Model", "MLflow", "Note"]
    cls = ' class="sortable"' if sortable else ""
    out = [f'<table id="t-{e(spec.id)}"{cls}><thead><tr>'
           + "".join(f'<th class="{"l" if h in ("Row", "Model", "Note", "MLflow") else ""}">{e(h)}</th>'
                     for h in head) + "</tr></thead><tbody>"]
    n, section = 0, None
    for res in rows:
        if res.spec.section and res.spec.section != section and not sortable:   # the Markdown's section rows
            section = res.spec.section
            out.append(f'<tr class="section"><th class="l" colspan="{len(head)}">{e(section)}</th></tr>')
        vals = "".join(_cell(res, c, spec.digits) for c in spec.columns)
        rank_cell = ""
        if ranked:
            has = cell_values(res, spec.rank_by)[0] is not None
            n += has
            rank_cell = f'<td data-v="{n if has else ""}">{n if has else ""}</td>'
        model = f"<code>{e(res.model)}</code>" if res.evaluated and res.model else ""
        out.append(f'<tr class="{"ok" if res.status == EVALUATED else "no"}">{rank_cell}'
                   f'<td class="l">{e(res.spec.label)}</td>{vals}<td class="l">{model}</td>'
                   f'<td class="l">{_run_link(links, res.model if res.evaluated else None)}</td>'
                   f'<td class="note">{_short(_note(res))}</td></tr>')
    out.append("</tbody></table>")
    return "".join(out)


def _csv_table(path: Path, table_id: str) -> str:
    try:
        rows = list(csv.reader(io.StringIO(path.read_text())))
    except OSError:
        return f'<p class="why">{e(path.name)} was not written.</p>'
    if len(rows) < 2:
        return f'<p class="why">{e(path.name)}: no rows.</p>'
    out = [f'<table id="{table_id}" class="sortable"><thead><tr>'
           + "".join(f'<th class="{"l" if i == 0 else ""}">{e(h)}</th>' for i, h in enumerate(rows[0]))
           + "</tr></thead><tbody>"]
    for r in rows[1:]:
        cells = []
        for i, v in enumerate(r):
            try:
                shown = f"{float(v):.2f}" if "." in v else v
            except ValueError:
                shown = v
            cells.append(f'<td class="{"l" if i == 0 else ""}" data-v="{e(v)}">{e(shown)}</td>')
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _curve_points(curve: list[dict], x: str, y: str) -> list[tuple[float, float]]:
    return [(r.get(x), r.get(y)) for r in curve]


def curves_section(groups: dict[str, list[str]], curves: dict[str, list[dict]], missing: dict[str, str],
                   metrics: dict[str, dict], links: dict[str, str]) -> str:
    """One block per trained model (a seed group): three SVG charts, one line per seed, and the seeds' scores."""
    names = sorted({g for g, runs in groups.items() if any(r in curves for r in runs)} | set(missing))
    names = [n for n in names if not n.startswith("base-") and not (n in missing and any(
        n in runs and n != g for g, runs in groups.items()))]
    if not names:
        return '<p class="why">No training curves in this profile.</p>'
    out = []
    for name in names:
        runs = groups.get(name, [name])
        out.append(f'<section class="method" id="m-{e(name)}"><h3>{e(name)}</h3>')
        have = {r: curves[r] for r in runs if r in curves}
        if not have:
            out.append(f'<p class="why">No curve: {e(missing.get(name, "no reports/curves file"))}</p></section>')
            continue
        dev = svg_chart({r: _curve_points(c, "step", "stsb_dev") for r, c in have.items()},
                        "STS-B dev Spearman", "step", "Spearman × 100")
        au = svg_chart({r: _curve_points(c, "uniformity", "alignment") for r, c in have.items()},
                       "alignment vs uniformity (dev)", "uniformity (lower: better)", "alignment (lower: better)")
        loss = svg_chart({r: _curve_points(c, "step", "loss") for r, c in have.items()},
                         "training loss", "step", "loss")
        out.append('<div class="curves">' + "".join(f"<figure>{s}</figure>" for s in (dev, au, loss)) + "</div>")
        from ..config.tasks import STS_DEV, STS_KEYS

        cols = (*STS_KEYS, STS_DEV)
        rows = []
        for r in runs:
            m = metrics.get(r, {})
            curve = have.get(r) or []
            best = max((p for p in curve if _num(p.get("stsb_dev")) is not None), key=lambda p: p["stsb_dev"],
                       default=None)
            rows.append(f'<tr><td class="l"><code>{e(r)}</code></td>'
                        + "".join(f'<td data-v="{"" if _num(m.get(c)) is None else m[c]}">'
                                  f'{"–" if _num(m.get(c)) is None else f"{m[c]:.2f}"}</td>' for c in cols)
                        + f'<td>{"" if best is None else int(best["step"])}</td>'
                        + f'<td class="l">{_run_link(links, r)}</td></tr>')
        out.append('<table class="sortable seeds"><thead><tr><th class="l">run (seed)</th>'
                   + "".join(f"<th>{e(c)}</th>" for c in cols)
                   + '<th>best step</th><th class="l">MLflow</th></tr></thead><tbody>' + "".join(rows)
                   + "</tbody></table></section>")
    return "".join(out)


def render(rep, metrics: dict[str, dict], links: Optional[dict[str, str]] = None) -> str:
    """The page's HTML for ``rep`` (a :class:`~.build.Report` whose tables are resolved)."""
    links = links or {}
    root = rep.root
    curves, missing = figures.load_curves(root / "reports/curves", root / "models")
    if rep.models is not None:
        curves = {n: c for n, c in curves.items() if rep.models.get(n)}
        missing = {n: w for n, w in missing.items() if rep.models.get(n)}
    from .significance import seed_groups

    groups = seed_groups(metrics)
    for n in curves:                         # trained, curve written, not (yet) evaluated: its own group
        if not any(n in runs for runs in groups.values()):
            groups[n] = [n]
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>sentlab report — "
             f"{e(rep.profile)}</title><style>{CSS}</style></head><body>",
             "<h1>sentlab report</h1>", *([f'<p class="warn">{e(rep.banner)}</p>'] if rep.banner else []),
             f'<p>Backbone <code>{e(rep.backbone)}</code>, profile <code>{e(rep.profile)}</code>. Every cell: '
             f'<span class="r">reproduced</span> <span class="p">paper</span> <span class="d">(difference)</span>; '
             f'a row without numbers says why. Regenerate with <code>dvc repro report</code>. The same tables as '
             f'Markdown/CSV: <a href="index.md">index.md</a>; raw per-seed scores: <a href="seeds.csv">seeds.csv</a>.'
             f'</p>',
             '<nav><a href="#environment-h">Environment</a><a href="#ranking">Ranking</a><a href="#curves">Curves '
             'and seeds</a><a href="#protocol">Protocol sensitivity</a><a href="#tables">Paper tables</a></nav>']
    parts += [f'<p class="warn"><b>Data warning — {e(t)}:</b> {e(w)}.</p>' for t, w in rep.warnings.items()]
    parts += ['<h2 id="environment-h">Environment</h2>', _environment(metrics)]
    parts.append('<h2 id="ranking">Unsupervised methods under one protocol</h2>')
    if RANKING in rep.tables:
        spec, rows = rep.tables[RANKING]
        parts += [f'<p class="ctx">{e(spec.context)} Click a column header to sort.</p>',
                  paper_table(spec, rows, links, sortable=True, ranked=True)]
    else:
        parts.append('<p class="why">The ranking table was not built.</p>')
    parts += ['<h2 id="curves">Training curves and seeds</h2>',
              '<p class="ctx">Per trained model, on STS-B dev at every dev evaluation (<code>reports/curves</code>): '
              'the Spearman used for model selection, alignment against uniformity (PT-BERT Fig. 3), and the '
              'training loss; one line per seed. The table under each lists the seeds\' test scores.</p>',
              curves_section(groups, curves, missing, metrics, links)]
    parts += ['<h2 id="protocol">Protocol sensitivity</h2>',
              _csv_table(root / "reports/tables/protocol_sensitivity.csv", "t-protocol_sensitivity")]
    parts.append('<h2 id="tables">Paper tables</h2>')
    for tid, (spec, rows) in rep.tables.items():
        if tid == RANKING:
            continue
        filled = sum(r.evaluated for r in rows)
        parts += [f'<h3 id="h-{e(tid)}">{e(spec.title)} <span class="p">— {e(spec.source)}; {filled}/{len(rows)} '
                  f'rows reproduced</span></h3>',
                  f'<p class="ctx">{e(spec.context)} Paper setting: {e(spec.paper_setting)}; measure: '
                  f'{e(spec.measure)}. <a href="tables/{e(tid)}.md">Markdown</a> · '
                  f'<a href="tables/{e(tid)}.csv">CSV</a></p>',
                  paper_table(spec, rows, links)]
    parts.append(f"<script>{JS}</script></body></html>")
    return "\n".join(parts) + "\n"


def write(rep, metrics: dict[str, dict]) -> None:
    """The report stage's page and raw results: ``reports/index.html`` and ``reports/seeds.csv``
    (:mod:`.seeds_csv`), both registered in ``rep.files``."""
    from ..runtime.io import write_text
    from . import seeds_csv

    models_dir = rep.root / "models"
    write_text(rep.root / seeds_csv.SEEDS_CSV, seeds_csv.render(metrics, models_dir))
    rep.files[seeds_csv.SEEDS_CSV.as_posix()] = "every evaluated run's STS scores, one line per (run, task)"
    evaluated = [n for n, m in metrics.items() if m.get("status", EVALUATED) == EVALUATED]
    write_text(rep.root / HTML, render(rep, metrics, mlflow_links(rep.root, evaluated, models_dir)))
    rep.files[HTML.as_posix()] = "the report on one page (opens from disk)"
