"""The report stage: every paper table and figure, then ``reports/index.md``.

:func:`build_report` reads ``reports/metrics``, ``reports/curves``, ``models/*/sentlab.json``,
``models/paser/reconstruction.json`` and ``data/prepare_stats.json`` under ``root`` and writes

* ``reports/tables/<table>.md`` + ``.csv`` (every table), ``.tex`` (booktabs, the main tables);
* ``reports/tables/paser_table7.md`` / ``paser_table6.md`` (+ CSV): the decoder's and the retrieval examples;
* ``reports/tables/diagnostics.md`` + its CSVs (hard subset, alignment/uniformity, density);
* ``reports/figures/ptbert_fig3_alignment_uniformity.png``, ``reports/figures/dev_curves.png``,
  ``reports/figures/paser_fig4_decoder_depth.png``;
* ``reports/index.md`` linking exactly the files that exist, one line of context each.

It returns a :class:`Report` (paths, resolved rows, figure data) that :func:`log_to_mlflow` can
attach to the MLflow runs.

``models`` (:func:`sentlab.config.profile_models`: every model name params.yaml can make, and whether
the active profile trains it) keeps the report to the profile's own models: the pipeline has stages
for those only, so the outputs another profile left in the workspace (``reports/metrics/ct.json`` of
an earlier paper run) are not read as current, and a row whose model the profile does not train says
"not run in this profile".
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..runtime.io import write_text
from ..provenance.markers import NOT_RUN
from . import diagnostics_tables, examples, figures, protocol_table, retrieval_examples, significance
from .paper_tables import (EVALUATED, Resolved, TableSpec, all_tables, load_metrics, models_in_tables, rank,
                           render_rows, to_csv, to_latex, to_markdown)

log = logging.getLogger(__name__)

TABLES = Path("reports/tables")
FIGURES = Path("reports/figures")
FIG3 = FIGURES / "ptbert_fig3_alignment_uniformity.png"
DEV = FIGURES / "dev_curves.png"
FIG4 = FIGURES / "paser_fig4_decoder_depth.png"
INDEX = Path("reports/index.md")


def profile_metrics(root: Path, models: Optional[dict[str, bool]] = None,
                    failures: Optional[dict[str, dict]] = None) -> dict[str, dict]:
    """``reports/metrics`` as :func:`load_metrics` reads it, restricted to the active profile when
    ``models`` is given: its models and the baselines; a known model it does not train is
    ``{"status": "not run in this profile"}``; files of other models are left out. A model (or baseline) of the
    profile without metrics whose stage failed (``failures``, :func:`sentlab.provenance.failures.failed_stages`) is
    ``{"status": "failed: <stage>, log <path>"}``: its rows name the stage and the log (issue #54 §5)."""
    from ..config.models import models_of
    from ..provenance.failures import missing_reason

    metrics = load_metrics(Path(root) / "reports/metrics")
    if models is None:
        return metrics
    out = {n: m for n, m in metrics.items() if n.startswith("base-") or models.get(n)}
    out.update({n: {"model": n, "status": NOT_RUN} for n, active in models.items() if not active})
    if failures:
        lists = _stage_list(Path(root))
        expected = [n for n, active in models.items() if active] + [f"base-{b}" for b in lists.get("baselines", [])]
        for n in expected:
            why = None if n in out else missing_reason(n, failures, models_of(lists))
            if why:
                out[n] = {"model": n, "status": why}
    return out


def _stage_list(root: Path) -> dict:
    from ..config.yaml_files import read_yaml

    f = root / "models.yaml"
    return (read_yaml(f) or {}) if f.is_file() else {}


@dataclass
class Report:
    root: Path
    backbone: str
    profile: str
    files: dict[str, str] = field(default_factory=dict)          # path (relative to root) -> one line of context
    tables: dict[str, tuple[TableSpec, list[Resolved]]] = field(default_factory=dict)
    figures: dict[str, figures.FigureResult] = field(default_factory=dict)
    unused_models: list[str] = field(default_factory=list)
    warnings: dict[str, str] = field(default_factory=dict)
    seed_groups: dict[str, list[str]] = field(default_factory=dict)   # model -> its evaluated seed runs
    models: Optional[dict[str, bool]] = None                           # profile_models (None: every file)
    prepared: dict = field(default_factory=dict)                       # data/prepare_stats.json
    failed: dict[str, str] = field(default_factory=dict)               # model -> the failed stage and its log
    banner: str = ""                                                   # a partial report's first paragraph


def corpus_lines(prepared: dict) -> list[str]:
    """The report's first lines: the corpus every model trained on (asset, file, lines, sha256, sentences sampled)
    and paser_sup's NLI file, from data/prepare_stats.json (issue #54 §2: a sample can never pass unnoticed)."""
    c = prepared.get("corpus_file")
    if not isinstance(c, dict):
        return ["**Training corpus: unknown** (data/prepare_stats.json has no `corpus_file`: run the prepare stage).",
                ""]
    out = [f"**Training corpus:** asset `{c.get('asset')}`, file `{c.get('path')}`, {c.get('lines', 0):,} lines, "
           f"sha256 `{c.get('sha256')}`; {c.get('sampled', 0):,} sentences sampled into data/corpus/train.parquet, "
           f"the corpus of every model that trains on `train` (the others: the STS sentences, or the NLI triples "
           f"below)."]
    nli = prepared.get("nli") or {}
    if nli.get("source") not in (None, "none"):
        out.append(f"**NLI triples** (paser_sup): {nli.get('label', nli.get('source'))}, `{nli.get('file')}`, "
                   f"{nli.get('triples', 0):,} triples.")
    return out + [""]


def _write(root: Path, rel: Path, text: str, report: Report, context: str) -> None:
    write_text(root / rel, text)
    report.files[rel.as_posix()] = context


def _filled(rows: list[Resolved]) -> str:
    n = sum(r.evaluated for r in rows)
    return f"{n}/{len(rows)} rows reproduced"


def build_report(root: Path | str = ".", backbone: str = "", profile: str = "",
                 models: Optional[dict[str, bool]] = None, failures: Optional[dict[str, dict]] = None,
                 banner: str = "") -> Report:
    """Every table, figure and the index from what is there; ``banner`` opens the index; ``failures`` (default: the
    recorded ones, :func:`sentlab.provenance.failures.failed_stages`) name the failed stage of each missing row."""
    from ..provenance.failures import failed_stages

    root = Path(root)
    failures = failed_stages(root) if failures is None else failures
    metrics = profile_metrics(root, models, failures)
    stats = root / "data/prepare_stats.json"
    try:
        prepared = json.loads(stats.read_text()) if stats.is_file() else {}
    except ValueError:
        prepared = {}
    warnings = prepared.get("language_warnings", {})
    rep = Report(root, backbone, profile, warnings=warnings, models=models, prepared=prepared, banner=banner)
    rep.failed = {m["model"]: m["status"] for m in metrics.values() if str(m.get("status", "")).startswith(
        ("failed: ", "not run: ", "not finished: ", "not here yet: "))}
    models_dir = root / "models"

    specs = all_tables(backbone)
    stats_ctx = significance.Context(metrics, root / "reports/cosines")
    for spec in specs:
        rows = render_rows(spec, metrics, models_dir)
        family = significance.annotate(rows, stats_ctx, spec.columns)
        if spec.rank_by:
            rows = rank(rows, spec.rank_by)
        rep.tables[spec.id] = (spec, rows)
        ctx = f"{spec.title} — {spec.source}; {_filled(rows)}"
        legend = significance.legend(family) if any(r.marks is not None for r in rows) else ""
        _write(root, TABLES / f"{spec.id}.md", to_markdown(spec, rows, backbone, profile, warnings, legend), rep, ctx)
        _write(root, TABLES / f"{spec.id}.csv", to_csv(spec, rows, backbone, profile, warnings), rep,
               f"{spec.title}: one line per cell (reproduced, paper, diff, status)")
        if spec.main:
            _write(root, TABLES / f"{spec.id}.tex", to_latex(spec, rows, backbone, profile, warnings, legend), rep,
                   f"{spec.title}: LaTeX (booktabs)")

    md, csv_text, ok = examples.render(models_dir / "paser", backbone, profile,
                                       not_run=models is not None and not models.get("paser"))
    _write(root, TABLES / "paser_table7.md", md, rep,
           "PaSeR Table 7: decoder reconstructions beside the paper's examples"
           + ("" if ok else " (paper only: see why)"))
    _write(root, TABLES / "paser_table7.csv", csv_text, rep, "PaSeR Table 7 examples (reproduced and paper)")
    md, csv_text, n = retrieval_examples.render(metrics, backbone, profile, models_dir)
    _write(root, TABLES / "paser_table6.md", md, rep, f"{retrieval_examples.TITLE}: QQP top hits per query, model "
           f"beside model and the paper's ({n}/{len(retrieval_examples.MODELS)} models' examples)")
    _write(root, TABLES / "paser_table6.csv", csv_text, rep, "PaSeR Table 6 hits (reproduced and paper)")

    diag = diagnostics_tables.render(metrics, backbone, profile, figures_prefix="../")
    diag_ctx = {"diagnostics.md": "Diagnostics: hard length subset, alignment/uniformity, cosine density "
                                  "(docs/evaluation.md#diagnostics)",
                "hard_subset.csv": "Hard length subset per model (PT-BERT Tables 1 / 5c)",
                "alignment_uniformity.csv": "Alignment and uniformity on STS-B test/dev per model",
                "cosine_density.csv": "Cosine mean/variance by gold level (PaSeR Table 10)"}
    for name, text in diag.items():
        _write(root, TABLES / name, text, rep, diag_ctx.get(name, name))

    curves, missing = figures.load_curves(root / "reports/curves", models_dir)
    if models is not None:
        curves = {n: c for n, c in curves.items() if models.get(n)}
        missing = {n: why for n, why in missing.items() if models.get(n)}
        missing.update({n: NOT_RUN for n in ("ptbert", "simcse") if not models.get(n)})
    md, csv_text = protocol_table.render(metrics, stats_ctx, curves, backbone, profile)
    _write(root, TABLES / "protocol_sensitivity.md", md, rep,
           "Protocol sensitivity: STS12–16 all/mean/wmean, SICK-R test vs all pairs, best-dev vs last dev score")
    _write(root, TABLES / "protocol_sensitivity.csv", csv_text, rep, "Protocol sensitivity, one line per model")
    rep.seed_groups = {k: v for k, v in stats_ctx.groups.items() if len(v) > 1}
    for name in ("ptbert", "simcse"):
        if name not in curves and name not in missing:
            missing[name] = "no reports/curves/%s.csv: %s" % (name, figures.curve_status(name, models_dir))
    rep.figures["fig3"] = figures.alignment_uniformity_figure(curves, missing, root / FIG3, backbone, profile)
    rep.files[FIG3.as_posix()] = ("PT-BERT Fig. 3: alignment and uniformity on STS-B dev over training steps ("
                                  + (", ".join(sorted(rep.figures["fig3"].series)) or "no curves in this profile")
                                  + ")")
    rep.figures["dev"] = figures.dev_curve_figure(curves, missing, root / DEV, backbone, profile)
    rep.files[DEV.as_posix()] = "STS-B dev Spearman over training steps (model selection), every trained method"

    fig4_spec, fig4_rows = rep.tables["paser_fig4"]
    points, reasons = {}, {}
    for d, res in zip(range(1, 9), fig4_rows):
        points[d] = res.values.get("Avg") if res.evaluated else None
        if not res.evaluated:
            reasons[d] = res.status
    rep.figures["fig4"] = figures.decoder_depth_figure(points, reasons, root / FIG4, backbone, profile)
    rep.files[FIG4.as_posix()] = "PaSeR Fig. 4: STS Avg. vs decoder depth (reproduced only; the paper prints no values)"

    used = models_in_tables(specs) | {"paser"}
    rep.unused_models = sorted(m for m in metrics if m not in used and metrics[m].get("status") != NOT_RUN)
    write_index(rep, metrics)
    from . import html_page  # reports/index.html and reports/seeds.csv

    html_page.write(rep, metrics)
    return rep


def _link(path: str, base: Path = Path("reports")) -> str:
    return Path(path).relative_to(base).as_posix() if Path(path).parts[0] == "reports" else path


def write_index(rep: Report, metrics: dict[str, dict]) -> None:
    """``reports/index.md``: every table and figure that exists, with a line of context."""
    root = rep.root
    failed = ([f"**Built from what finished: {len(rep.failed)} models have no results** (their rows say which "
               f"stage failed; `sentlab status` lists every stage):", ""]
              + [f"- `{m}`: {why}" for m, why in sorted(rep.failed.items())] + [""]) if rep.failed else []
    failed = ([rep.banner, ""] if rep.banner else []) + failed
    lines = ["# sentlab report", "", *corpus_lines(rep.prepared), *failed,
             f"Backbone `{rep.backbone}`, profile `{rep.profile}`. Every table shows the reproduced value, the "
             f"paper's value and the difference; a row without numbers says why (e.g. \"not run in this profile\"). "
             f"Regenerate with `dvc repro report` (or `make repro PROFILE=…`).", ""]
    if rep.warnings:
        lines += [f"> **Data warning — {t}:** {w}." for t, w in rep.warnings.items()] + [""]
    lines += environment_lines(metrics)
    ev = sorted(k for k, m in metrics.items() if m.get("status", EVALUATED) == EVALUATED)
    not_run = [k for k in metrics if metrics[k].get("status") == NOT_RUN]
    other = sorted(k for k in metrics if k not in ev and k not in not_run)
    lines += [f"Evaluated models ({len(ev)}): " + (", ".join(f"`{k}`" for k in ev) or "none") + ".",
              f"Not evaluated ({len(other)}): " + (", ".join(f"`{k}` ({metrics[k].get('status')})" for k in other)
                                                     or "none") + "."]
    if not_run:
        lines.append(f"Not run in this profile: {len(not_run)} more models of params.yaml (other method lines, seeds "
                     f"and ablation variants; `sentlab params` shows the profile's `train.methods`, `seeds`, "
                     f"`ablations`).")
    lines.append("")
    if rep.seed_groups:
        lines += ["Seeds: " + "; ".join(f"`{k}` × {len(v)} ({', '.join(v)})"
                                        for k, v in sorted(rep.seed_groups.items()))
                  + ". Their rows show mean ± std (n); see each table's last line for the tests.", ""]
    groups = [("Protocol sensitivity", ("protocol_sensitivity",)), ("PT-BERT (ACL 2022)", ("ptbert_",)),
              ("PaSeR (EMNLP 2022)", ("paser_",)), ("L2P-CSR", ("l2p_",)),
              ("SimCSE + POS/BOW adversarial", ("posbow_",)),
              ("Diagnostics (docs/evaluation.md#diagnostics)",
               ("diagnostics", "hard_subset", "alignment_uniformity", "cosine_density")),
              ("Training curves", ("dev_curves",))]
    listed = set()
    for title, prefixes in groups:
        entries = [(p, c) for p, c in rep.files.items()
                   if Path(p).name.startswith(prefixes) and (root / p).is_file() and p != INDEX.as_posix()]
        if not entries:
            continue
        lines += [f"## {title}", ""]
        for p, c in sorted(entries, key=lambda e: (Path(e[0]).stem, Path(e[0]).suffix != ".md")):
            lines.append(f"- [{_link(p)}]({_link(p)}) — {c}")
            listed.add(p)
        lines.append("")
    dens = sorted((root / FIGURES).glob("*_density.png")) if (root / FIGURES).is_dir() else []
    if rep.models is not None:  # the profile's models and the baselines, not another profile's leftovers
        dens = [f for f in dens if f.stem.startswith("base-") or rep.models.get(f.stem.removesuffix("_density"))]
    if dens:
        lines += ["## Cosine density per model (evaluate stage, PaSeR Fig. 5 shape)", ""]
        lines += [f"- [figures/{f.name}](figures/{f.name}) — {f.stem.removesuffix('_density')}" for f in dens]
        lines.append("")
    if rep.unused_models:
        lines += ["## Models in no paper table", "",
                  "Evaluated or listed in reports/metrics but not part of any paper table above: "
                  + ", ".join(f"`{m}`" for m in rep.unused_models) + " (see their metrics JSON).", ""]
    write_text(root / INDEX, "\n".join(lines).rstrip() + "\n")
    rep.files[INDEX.as_posix()] = "this index"


def environment_lines(metrics: dict[str, dict]) -> list[str]:
    """The report header's environment: the fingerprint the evaluations recorded (commit, versions,
    device, precision), with every value on which the evaluated models disagree listed per model."""
    fps = {k: m["fingerprint"] for k, m in metrics.items() if isinstance(m.get("fingerprint"), dict)}
    if not fps:
        return []
    keys = [k for k in next(iter(fps.values())) if k not in ("data_sha256",)]
    same = {k: v for k, v in next(iter(fps.values())).items() if k in keys and all(f.get(k) == v for f in fps.values())}
    out = ["Environment (recorded by every evaluation): " + ", ".join(f"{k} `{v}`" for k, v in same.items()) + "."]
    differ = [k for k in keys if k not in same]
    for k in differ:
        out.append(f"- {k} differs: " + ", ".join(f"`{m}` {f.get(k)}" for m, f in sorted(fps.items())))
    return out + [""]


def log_seed_aggregates(rep: Report, metrics: dict[str, dict]) -> dict[str, str]:
    """Log, on the MLflow run grouping each model's seeds (:func:`sentlab.tracking.runs.method_parent`),
    the mean, std and n of every STS column over its evaluated seeds. Returns ``{model: run id}``."""
    import numpy as np

    from .. import tracking
    from ..tracking import runs as tracking_runs
    from .paper_tables import STS7, extract

    done = {}
    for model, names in sorted(rep.seed_groups.items()):
        run_id = tracking_runs.method_parent(model)
        if run_id is None:
            continue
        vals = [extract(metrics[n], "sts")[0] for n in names]
        agg = {}
        for col in (*STS7, "Avg"):
            xs = [v[col] for v in vals if v.get(col) is not None]
            if xs:
                agg.update({f"seeds.{col}.mean": float(np.mean(xs)), f"seeds.{col}.n": float(len(xs))})
                if len(xs) > 1:
                    agg[f"seeds.{col}.std"] = float(np.std(xs, ddof=1))
        tracking.log_to_run(run_id, agg, prefix="")
        done[model] = run_id
    return done


# --- MLflow -----------------------------------------------------------------------------------------

def _rows_csv(rep: Report, model: str) -> Optional[str]:
    """The table rows (all tables) filled by ``model`` as CSV, or None."""
    import csv
    import io

    from .paper_tables import csv_header, csv_records

    recs = []
    for spec, rows in rep.tables.values():
        mine = [r for r in rows if r.model and r.model.split("/")[0] == model]
        recs += csv_records(spec, mine, rep.backbone, rep.profile, rep.warnings)
    if not recs:
        return None
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(csv_header())
    w.writerows(recs)
    return buf.getvalue()


def log_to_mlflow(rep: Report, parent_run_id: Optional[str] = None) -> dict[str, str]:
    """Attach the report to MLflow; returns ``{model or "parent": run id}`` of the runs written to.

    * every model that fills a table row: the newest run about it (its train run, else its
      eval run; tag ``sentlab.model`` or run name) gets ``report/rows.csv`` (its rows of every
      table) and the figures it is drawn in;
    * the parent run (``parent_run_id`` / ``SENTLAB_PARENT_RUN_ID``), or a new run named
      ``report`` when there is none, gets every table and figure and ``index.md``.
    """
    import os
    import tempfile

    from .. import tracking
    from ..tracking import runs as tracking_runs

    parent_run_id = parent_run_id or os.environ.get(tracking.PARENT_ENV)
    c = tracking.client()
    done: dict[str, str] = {}
    models = sorted({r.model.split("/")[0] for _, rows in rep.tables.values() for r in rows
                     if r.model and r.evaluated})
    with tempfile.TemporaryDirectory() as tmp:
        for model in models:
            runs = (tracking_runs.find_runs(model, stage="train", max_results=1)
                    or tracking_runs.find_runs(model, stage="evaluate", max_results=1))
            if not runs:
                log.warning("MLflow: no run found for %s; its table rows are logged only on the parent run", model)
                continue
            run_id = runs[0].info.run_id
            text = _rows_csv(rep, model)
            f = Path(tmp) / model / "rows.csv"
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(text or "")
            c.log_artifact(run_id, str(f), artifact_path="report")
            for fig in rep.figures.values():
                if model in fig.series and fig.path.is_file():
                    c.log_artifact(run_id, str(fig.path), artifact_path="report/figures")
            done[model] = run_id
    target = parent_run_id
    if not target:
        target = tracking_runs.start_parent("report", tags={"sentlab.stage": "report"})
    for p in sorted(rep.files):
        f = rep.root / p
        if f.is_file():
            sub = Path(p).parent.relative_to("reports").as_posix() if Path(p).parts[0] == "reports" else ""
            c.log_artifact(target, str(f), artifact_path="report" + (f"/{sub}" if sub not in ("", ".") else ""))
    if not parent_run_id:
        tracking_runs.end_parent(target)
    done["parent"] = target
    done.update({f"seeds:{k}": v for k, v in log_seed_aggregates(rep, profile_metrics(rep.root, rep.models)).items()})
    return done
