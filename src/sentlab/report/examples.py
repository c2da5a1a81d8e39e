"""PaSeR Table 7: phrases the decoder reconstructs, from ``models/<paser>/reconstruction.json``
(:mod:`sentlab.methods._paser_reconstruction`), beside the paper's four examples and the frequency baselines."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from .paper_numbers import PASER_TABLE7


def _md_escape(s) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def load_reconstruction(model_dir: Path) -> tuple[dict | None, str]:
    f = Path(model_dir) / "reconstruction.json"
    if f.is_file():
        try:
            return json.loads(f.read_text()), ""
        except ValueError as e:
            return None, f"{f} is unreadable ({e})"
    info = Path(model_dir) / "sentlab.json"
    if not info.is_file():
        return None, f"{f} missing: the paser train stage did not run or failed"
    try:
        status = json.loads(info.read_text()).get("status", "?")
    except ValueError:
        status = "unreadable sentlab.json"
    if status != "trained":
        return None, f"{f} missing: paser {status}"
    return None, f"{f} missing: paser was trained but its reconstruction check was not written"


def render(model_dir: Path, backbone: str, profile: str, not_run: bool = False) -> tuple[str, str, bool]:
    """(Markdown, CSV, reproduced?); ``not_run``: the profile does not train PaSeR (a ``model_dir`` left
    by another profile is not read)."""
    rec, why = (None, "PaSeR is not run in this profile") if not_run else load_reconstruction(model_dir)
    md = ["# PaSeR Table 7: phrases the decoder reconstructs", "",
          f"Source: PaSeR (EMNLP 2022) Table 7 (BERT-base; hand-picked cases where the decoder differs). "
          f"Reproduced: `{model_dir}`, backbone `{backbone}`, profile `{profile}`; greedy decoding of held-out "
          f"sentences with the method's own phrase choice (sentlab.methods._paser_reconstruction).", ""]
    rows = []
    if rec is None:
        md += [f"**Reproduced: none** — {why}.", ""]
    else:
        g, tf, b = rec.get("greedy", {}), rec.get("teacher_forced", {}), rec.get("baseline", {})
        md += [f"{rec.get('sentences')} held-out sentences, {rec.get('phrases')} masked phrases "
               f"(phrases: {rec.get('phrase_source')}, top-k {rec.get('top_k')}); baselines fitted on "
               f"{b.get('fit_on', '?')}.", "",
               "| Decoding | phrase exact | sentence exact | token accuracy |", "|---|---|---|---|"]
        def pct(v):
            return "–" if v is None else f"{100 * v:.1f}%"
        md.append(f"| PaSeR greedy | {pct(g.get('phrase_exact'))} | {pct(g.get('sentence_exact'))} | "
                  f"{pct(g.get('token_accuracy'))} |")
        md.append(f"| PaSeR teacher-forced | – | – | {pct(tf.get('token_accuracy'))} |")
        for k, label in (("most_frequent_phrase", "baseline: most frequent phrase"),
                         ("positional_mode", "baseline: positional mode")):
            v = b.get(k, {})
            md.append(f"| {label} | {pct(v.get('phrase_exact'))} | {pct(v.get('sentence_exact'))} | "
                      f"{pct(v.get('token_accuracy'))} |")
        md.append(f"| baseline: bigram (teacher-forced) | – | – | "
                  f"{pct(b.get('bigram_teacher_forced', {}).get('token_accuracy'))} |")
        beats = rec.get("beats_baseline", {})
        verdict = {True: "yes", False: "**no**"}
        md += ["", f"Held-out sentences: {rec.get('heldout_corpus', '?')}. Beats the frequency baselines: greedy token "
                   f"accuracy {verdict.get(beats.get('greedy_token_accuracy'), '?')}, greedy phrase exact "
                   f"{verdict.get(beats.get('greedy_phrase_exact'), '?')}; teacher-forced token accuracy beats the "
                   f"bigram {verdict.get(beats.get('teacher_forced_token_accuracy'), '?')}.", ""]
        md += ["The paper prints no accuracy; it states that most phrases are regenerated exactly.", ""]
        shown = (rec.get("mismatches") or []) + [e for e in rec.get("examples") or [] if all(e.get("exact", []))]
        md += ["## Reproduced examples (mismatches first, as in the paper)", "",
               "| Raw sentence | Masked version | Masked phrases | Generated | Exact |", "|---|---|---|---|---|"]
        for e in shown[:12]:
            md.append("| " + " | ".join(_md_escape(x) for x in (
                e["sentence"], e["masked"], "; ".join(e["masked_phrases"]), "; ".join(e["generated"]),
                "yes" if all(e.get("exact", [])) else "no")) + " |")
            rows.append(["reproduced", e["sentence"], e["masked"], "; ".join(e["masked_phrases"]),
                         "; ".join(e["generated"]), all(e.get("exact", []))])
        md.append("")
    md += ["## Paper examples (Table 7)", "", "| Raw sentence | Masked version | Generated |", "|---|---|---|"]
    for e in PASER_TABLE7:
        md.append(f"| {_md_escape(e['sentence'])} | {_md_escape(e['masked'])} | {_md_escape(e['generated'])} |")
        rows.append(["paper", e["sentence"], e["masked"], "", e["generated"], False])
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["source", "sentence", "masked", "masked_phrases", "generated", "exact"])
    w.writerows(rows)
    return "\n".join(md) + "\n", buf.getvalue(), rec is not None
