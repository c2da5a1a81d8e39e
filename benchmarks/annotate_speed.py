"""Annotation throughput: the ``nltk`` backend (all fields, Parquet shards) vs a naive loop.

    NLTK_DATA=../shared/nltk_data python benchmarks/annotate_speed.py [--lines N] [--jobs 1 2]

Both run in the same process tree on the same sentences (the real wiki sample,
``$SENTLAB_DATA_MIRROR/wiki/wiki1m_head.txt`` or --input):

* naive: one process, per sentence ``TreebankWordTokenizer().tokenize``,
  ``nltk.pos_tag``, rake-nltk ``extract_keywords_from_text`` and
  ``RegexpParser.parse`` (objects built once, outside the timing; no spans, no
  frames, nothing written);
* sentlab: :func:`sentlab.annotate.annotate_corpus` end to end (backend load --
  tagger, stopwords, grammar --, tokens with offsets, batched tagging, RAKE with
  spans, chunks, frames, Parquet shards written), at each ``--jobs``; imports are
  excluded for both, the tagger load only for the naive loop.

Prints, for each, sentences per wall-clock second, the ratio to the naive loop,
and sentences per CPU-second (user + system time of the process and its workers).
On a shared machine the wall-clock rates depend on the other processes' load
(printed); the CPU-second rates do not (much): on an otherwise idle machine the
wall rate at ``jobs=J`` approaches J x the per-CPU-second rate.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path


def _cpu() -> float:
    """User + system CPU seconds of this process and its (waited-for) children."""
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def naive_loop(texts: list[str]) -> tuple[float, float]:
    import nltk
    from nltk.corpus import stopwords
    from nltk.tokenize import TreebankWordTokenizer, wordpunct_tokenize
    from rake_nltk import Rake

    from sentlab.annotate.nltk_backend import GRAMMAR

    tok = TreebankWordTokenizer()
    rake = Rake(stopwords=set(stopwords.words("english")), sentence_tokenizer=lambda s: [s],
                word_tokenizer=wordpunct_tokenize, max_length=4)
    parser = nltk.RegexpParser(GRAMMAR)
    nltk.pos_tag(["warm", "up"])  # load the tagger outside the timing
    t0, c0 = time.perf_counter(), _cpu()
    for text in texts:
        if not text.strip():
            continue
        tagged = nltk.pos_tag(tok.tokenize(text))
        rake.extract_keywords_from_text(text)
        rake.get_ranked_phrases_with_scores()
        if tagged:
            parser.parse(tagged)
    return time.perf_counter() - t0, _cpu() - c0


def sentlab_run(texts: list[str], jobs: int, shard_size: int) -> tuple[float, float]:
    """Wall and CPU seconds of one complete annotation, backend load included (its cache is cleared first)."""
    import sentlab.annotate.corpus as runner
    from sentlab.annotate import annotate_corpus

    runner._BACKEND = runner._BACKEND_KEY = None
    with tempfile.TemporaryDirectory() as tmp:
        t0, c0 = time.perf_counter(), _cpu()
        annotate_corpus(list(range(len(texts))), texts, Path(tmp) / "out", backend="nltk", jobs=jobs,
                        shard_size=shard_size, progress=False)
        return time.perf_counter() - t0, _cpu() - c0


def main(argv=None) -> int:
    mirror = os.environ.get("SENTLAB_DATA_MIRROR", str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", default=str(Path(mirror) / "wiki" / "wiki1m_head.txt"))
    ap.add_argument("--lines", type=int, default=None, help="first N lines only (default: all)")
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--shard-size", type=int, default=5000)
    ap.add_argument("--json", default=None, help="also write the numbers to this JSON file")
    args = ap.parse_args(argv)
    os.environ.setdefault("NLTK_DATA", str(Path(mirror).parent / "nltk_data"))

    from sentlab.annotate import read_texts

    _, texts = read_texts(args.input)
    texts = texts[: args.lines] if args.lines else texts
    n = len(texts)
    res = {"sentences": n, "cpus": os.cpu_count(), "loadavg_before": os.getloadavg()[0]}
    t, c = naive_loop(texts)
    res["naive_sent_per_s"] = round(n / t, 1)
    res["naive_sent_per_cpu_s"] = round(n / c, 1)
    print(f"naive loop (1 process):          {n / t:8.1f} sentences/s  ({t:.2f} s for {n}; {n / c:.0f} per CPU-second)")
    for j in args.jobs:
        t, c = sentlab_run(texts, j, args.shard_size)
        res[f"jobs{j}_sent_per_s"] = round(n / t, 1)
        res[f"jobs{j}_sent_per_cpu_s"] = round(n / c, 1)
        res[f"jobs{j}_ratio"] = round(res[f"jobs{j}_sent_per_s"] / res["naive_sent_per_s"], 2)
        print(f"sentlab nltk backend, jobs={j}:   {n / t:8.1f} sentences/s  ({t:.2f} s; {n / c:.0f} per CPU-second)  "
              f"ratio to naive: {res[f'jobs{j}_ratio']:.2f}x")
    res["loadavg_after"] = os.getloadavg()[0]
    print(f"load average before/after: {res['loadavg_before']:.2f} / {res['loadavg_after']:.2f} "
          f"on {os.cpu_count()} CPUs")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
