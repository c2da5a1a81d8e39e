"""PaSeR Table 6: QQP retrieval examples. Per query, each model's top hits side by side (cosine, ✓ = a labelled
duplicate), from ``retrieval.QQP.examples`` of ``reports/metrics/retrieval/<model>.json``
(:mod:`sentlab.evaluate.suites.retrieval_examples`), and beside them the paper's own hits where the query is one of
the paper's (:data:`~sentlab.evaluate.suites.retrieval_examples.PASER_TABLE6`). A model without results says why (QQP
is not in the offline mirror: "needs data" with the fetch command, as PaSeR Table 3's rows do)."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Optional

from ..evaluate.suites.retrieval_examples import PASER_TABLE6, PASER_TABLE6_MODELS, query_key
from .paper_tables import RowSpec, resolve

TABLE_ID = "paser_table6"
TITLE = "PaSeR Table 6: retrieval examples"
# the paper's models (PASER_TABLE6_MODELS) and the sentlab models that reproduce them, as PaSeR Table 3 maps them
MODELS = (("SimCSE-BERTbase", "simcse"), ("PaSeR-BERTbase", "paser"))
CSV_HEADER = ["source", "query", "query_source", "column", "model", "rank", "text", "score", "duplicate", "status"]


def _esc(s) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def model_examples(metrics: dict[str, dict], model: str, label: str,
                   models_dir: Path) -> tuple[Optional[dict], str]:
    """(``retrieval.QQP.examples`` of ``model``'s retrieval results, "") or (None, why there are none)."""
    res = resolve(RowSpec(label, (model,), extract="retrieval"), metrics, models_dir)
    if not res.evaluated:
        return None, res.status
    t = metrics[model].get("retrieval_metrics") or {}
    ex = ((t.get("retrieval") or {}).get("QQP") or {}).get("examples")
    if not isinstance(ex, dict) or not isinstance(ex.get("queries"), list):
        return None, (f"reports/metrics/retrieval/{model}.json holds no QQP examples (written before they were "
                      f"recorded, or without QQP): re-run its stage, `dvc repro -f -s retrieval@{model}`")
    return ex, ""


def _order(found: dict[str, dict]) -> list[tuple[str, str, int, str]]:
    """(query, source, relevant, key) in table order: the paper's queries (as QQP spells them where a model found
    them), then every other query as first found; ``key`` (:func:`query_key`) matches them across models."""
    out = {query_key(e["query"]): [e["query"], "paper", -1] for e in PASER_TABLE6}
    for ex in found.values():
        for q in ex["queries"]:
            e = out.setdefault(query_key(q["query"]), [q["query"], q.get("source", "?"), -1])
            if e[2] < 0:
                e[0], e[2] = q["query"], q.get("relevant", -1)
    return [(q, s, r, k) for k, (q, s, r) in out.items()]


def _cell(hit: Optional[dict]) -> str:
    if hit is None:
        return "–"
    return f"{hit['text']} ({hit['score']:.4f})" + (" ✓" if hit.get("duplicate") else "")


def render(metrics: dict[str, dict], backbone: str, profile: str,
           models_dir: Path = Path("models")) -> tuple[str, str, int]:
    """(Markdown, CSV, how many models' examples were found)."""
    found: dict[str, dict] = {}
    why: dict[str, str] = {}
    for label, model in MODELS:
        ex, reason = model_examples(metrics, model, label, models_dir)
        if ex is None:
            why[model] = reason
        else:
            found[model] = ex
    md = [f"# {TITLE}", "",
          "Source: PaSeR (EMNLP 2022) Table 6 (QQP, BERT-base; the top 3 questions for two hand-picked queries, "
          "no scores). Reproduced: backbone `{}`, profile `{}`; each model ranks QQP's corpus (every distinct q2) by "
          "cosine, as PaSeR Table 3's retrieval does (docs/evaluation.md#retrieval-and-reranking).".format(
              backbone, profile), "",
          "Queries: the paper's two where this copy of QQP holds them as queries (a q1 with a labelled duplicate), "
          "then a seeded draw of others. Cell: **retrieved question (cosine)**, ✓ = labelled a duplicate of the "
          "query in QQP.", "", "Models:"]
    for label, model in MODELS:
        if model in found:
            ex = found[model]
            md.append(f"- {label}: `{model}` — top {ex.get('k')} of {len(ex['queries'])} queries "
                      f"({ex.get('n_seeded')} seeded, seed {ex.get('seed')})")
        else:
            md.append(f"- {label}: `{model}` — **no examples**: {why[model]}")
    md.append("")
    if not found:
        md += ["**Reproduced: none** (the reasons above); the paper's examples follow.", ""]
    rows: list[list] = []
    paper = {query_key(e["query"]): e["hits"] for e in PASER_TABLE6}
    n = 0
    for query, source, relevant, key in _order(found):
        per = {m: {query_key(q["query"]): q for q in ex["queries"]}.get(key) for m, ex in found.items()}
        if source != "paper" and not any(per.values()):
            continue
        n += 1
        md += [f"## {n}. {_esc(query)}", ""]
        notes = ["The paper's Table 6 query" if source == "paper" else f"{source.capitalize()} query"]
        if relevant >= 0:
            notes.append(f"{relevant} labelled duplicate{'s' * (relevant != 1)} in the corpus")
        for m, ex in found.items():
            if per[m] is None:
                gone = key in {query_key(p) for p in ex.get("paper_missing") or ()}
                notes.append(f"`{m}`: " + ("QQP holds no such query with a duplicate" if gone
                                           else "not among its example queries"))
        md += ["; ".join(notes) + ".", ""]
        cols = [(label, m) for label, m in MODELS if m in found]
        head = ["Rank", *[f"{label} (`{m}`)" for label, m in cols]]
        if key in paper:
            head += [f"{label}, paper" for label in PASER_TABLE6_MODELS]
        k = max([len(paper.get(key, {}).get(label, ())) for label in PASER_TABLE6_MODELS]
                + [len(p["hits"]) for p in per.values() if p])
        md += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in range(k):
            hits = {m: (per[m]["hits"][r] if per[m] and r < len(per[m]["hits"]) else None) for _, m in cols}
            cells = [_cell(hits[m]) for _, m in cols]
            pap = [(label, (paper[key].get(label) or ())[r:r + 1]) for label in PASER_TABLE6_MODELS] \
                if key in paper else []
            cells += [p[0] if p else "–" for _, p in pap]
            md.append("| " + " | ".join(_esc(c) for c in [str(r + 1), *cells]) + " |")
            for label, m in cols:
                h = hits[m]
                if h is not None:
                    rows.append(["reproduced", query, source, label, m, r + 1, h["text"], h["score"],
                                 bool(h.get("duplicate")), "evaluated"])
            for label, p in pap:
                if p:
                    rows.append(["paper", query, "paper", label, "", r + 1, p[0], "", "", "as printed"])
        md.append("")
    for label, model in MODELS:
        if model in why:
            rows.append(["reproduced", "", "", label, model, "", "", "", "", why[model]])
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_HEADER)
    w.writerows(rows)
    return "\n".join(md).rstrip() + "\n", buf.getvalue(), len(found)
