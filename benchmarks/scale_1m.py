"""Time and peak memory of prepare, annotate and the training data loader on a synthetic 1M-line corpus (issue #56).

    nice -n 10 python benchmarks/scale_1m.py [--lines 1000000] [--annotate 10000,20000,40000] [--old-src DIR]

In a temporary folder: a corpus of ``--lines`` lines, each a sentence of the mirror's wiki sample
(``$SENTLAB_DATA_MIRROR/wiki/wiki1m_head.txt``, 11,913 lines) or, for 98 % of them, the first half of one
sentence's words joined to the second half of another's (seeded), so almost every line is distinct. Then, each
phase in a process of its own (its peak RSS is its own ``ru_maxrss``; annotate's forked workers are reported
apart, the largest of them):

* **prepare**: the corpus part of the prepare stage: filter + dedupe + seeded sample of 80 % of the lines
  (``select_corpus``), written to ``train.parquet`` (``write_sample``);
* **annotate**: the annotate stage's engine (``annotate_file``, nltk, ``jobs`` 2, shards of 5,000) on the first
  N rows of that corpus for each N of ``--annotate`` (at most all of them): time per sentence and peak memory
  against N;
* **loader**: ``load_corpus(train.parquet, ["rake", "chunks"], annotations)`` (PaSeR's columns) and one epoch of
  batches of 128 in the seeded order (``Corpus.batch``: the rows a training step reads). The annotation table it
  joins covers every corpus row: the annotated rows of the smallest N, repeated with the corpus's ids (the same
  column sizes a full annotation has, without hours of tagging).

``--old-src DIR`` also runs prepare and the loader with the ``src`` of another checkout (e.g. main before the
streaming change: ``git archive <commit> src | tar -x -C DIR``), for a before/after of the same corpus.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def generate(path: Path, lines: int, seed: int = 0) -> None:
    mirror = Path(os.environ.get("SENTLAB_DATA_MIRROR", REPO.parent / "shared" / "data"))
    wiki = [ln for ln in (mirror / "wiki" / "wiki1m_head.txt").read_text(encoding="utf-8").splitlines() if ln.strip()]
    words = [w.split() for w in wiki]
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as fh:
        for _ in range(lines):
            if rng.random() < 0.02:
                fh.write(rng.choice(wiki) + "\n")
                continue
            a, b = rng.choice(words), rng.choice(words)
            fh.write(" ".join(a[:len(a) // 2] + b[len(b) // 2:]) + "\n")


def _peak() -> dict:
    return {"peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "workers_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)}


def phase_prepare(work: Path) -> dict:
    t0 = time.perf_counter()
    try:
        from sentlab.data.corpus import select_corpus, write_sample
    except ImportError:   # an older checkout (--old-src): the lists API
        from sentlab.data.corpus import sample_corpus, write_corpus
        lines = sum(1 for _ in open(work / "corpus.txt", "rb"))
        ids, texts, stats = sample_corpus(work / "corpus.txt", int(0.8 * lines), 42)
        write_corpus(work / "train.parquet", ids, texts)
    else:
        lines = sum(1 for _ in open(work / "corpus.txt", "rb"))
        sample, stats = select_corpus(work / "corpus.txt", int(0.8 * lines), 42)
        write_sample(work / "train.parquet", sample)
    return {"seconds": round(time.perf_counter() - t0, 1), "lines": stats.lines, "sampled": stats.sampled,
            "duplicates": stats.dropped["duplicates"], **_peak()}


def phase_annotate(work: Path, n: int) -> dict:
    from sentlab.annotate import annotate_file

    src = work / f"first_{n}.parquet"   # written by the parent: this process's peak is annotate's own
    t0 = time.perf_counter()
    s = annotate_file(src, work / f"ann_{n}", jobs=2, shard_size=5000, progress=False)
    sec = time.perf_counter() - t0
    return {"sentences": s.sentences, "seconds": round(sec, 1), "ms_per_sentence": round(1000 * sec / n, 2),
            **_peak()}


def build_annotations(work: Path, n: int) -> Path:
    """The annotated rows of the first ``n`` sentences repeated over every corpus row (with its ids and texts)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sentlab.annotate import SCHEMA, read_annotations

    ann = read_annotations(work / f"ann_{n}")
    corpus = pq.read_table(work / "train.parquet")
    out = work / "ann_full"
    out.mkdir(exist_ok=True)
    for k, a in enumerate(range(0, corpus.num_rows, 5000)):
        b = min(a + 5000, corpus.num_rows)
        rows = ann.take(pa.array([i % ann.num_rows for i in range(a, b)]))
        cols = [corpus.column("id").slice(a, b - a), corpus.column("text").slice(a, b - a)]
        cols += [rows.column(c) for c in SCHEMA.names[2:]]
        pq.write_table(pa.Table.from_arrays(cols, schema=SCHEMA), out / f"part-{k:05d}.parquet", compression="zstd")
    return out


def phase_loader(work: Path) -> dict:
    from sentlab.train.data import epoch_order, load_corpus

    t0 = time.perf_counter()
    corpus = load_corpus(work / "train.parquet", ["rake", "chunks"], work / "ann_full")
    t_load = time.perf_counter() - t0
    order = epoch_order(len(corpus), 42, 0)
    phrases = 0
    for a in range(0, len(order), 128):
        batch = corpus.batch(order[a:a + 128])
        phrases += sum(len(r) for r in batch.extras["rake"])
    return {"rows": len(corpus), "load_seconds": round(t_load, 1),
            "epoch_seconds": round(time.perf_counter() - t0 - t_load, 1), "rake_phrases": phrases, **_peak()}


def run_phase(args: list[str], src: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src))
    p = subprocess.run([sys.executable, __file__, "--phase", *args], env=env, capture_output=True, text=True,
                       timeout=6 * 3600)
    if p.returncode:
        raise SystemExit(f"phase {args} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--annotate", default="10000,20000,40000", help="corpus sizes to annotate (comma-separated)")
    ap.add_argument("--old-src", type=Path, help="also run prepare and the loader with this src folder")
    ap.add_argument("--no-loader", action="store_true", help="skip the loader phase")
    ap.add_argument("--workdir", type=Path, help="scratch folder (default: a new temporary one, removed at the end)")
    ap.add_argument("--phase", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.phase:
        name, work = args.phase[0], Path(args.phase[1])
        out = {"prepare": lambda: phase_prepare(work), "loader": lambda: phase_loader(work),
               "annotate": lambda: phase_annotate(work, int(args.phase[2]))}[name]()
        print(json.dumps(out))
        return 0
    import shutil

    work = args.workdir or Path(tempfile.mkdtemp(prefix="sentlab-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    src = REPO / "src"
    results: dict = {"lines": args.lines}
    try:
        t0 = time.perf_counter()
        generate(work / "corpus.txt", args.lines)
        results["generate_seconds"] = round(time.perf_counter() - t0, 1)
        results["corpus_mb"] = round((work / "corpus.txt").stat().st_size / 2**20, 1)
        print(json.dumps(results), flush=True)
        if args.old_src:
            results["prepare_old"] = run_phase(["prepare", str(work)], args.old_src)
            print("prepare (old src):", results["prepare_old"], flush=True)
        results["prepare"] = run_phase(["prepare", str(work)], src)
        print("prepare:", results["prepare"], flush=True)
        sizes = sorted(int(x) for x in args.annotate.split(","))
        results["annotate"] = {}
        import pyarrow.parquet as pq

        corpus = pq.read_table(work / "train.parquet")
        sizes = [min(n, corpus.num_rows) for n in sizes]
        for n in sizes:
            pq.write_table(corpus.slice(0, n), work / f"first_{n}.parquet")
        del corpus
        for k, n in enumerate(sizes):
            results["annotate"][n] = run_phase(["annotate", str(work), str(n)], src)
            print(f"annotate {n}:", results["annotate"][n], flush=True)
            if k == 0 and not args.no_loader:   # the loader on the smallest annotated set, repeated over the corpus
                build_annotations(work, n)
                results["loader"] = run_phase(["loader", str(work)], src)
                print("loader:", results["loader"], flush=True)
                if args.old_src:
                    results["loader_old"] = run_phase(["loader", str(work)], args.old_src)
                    print("loader (old src):", results["loader_old"], flush=True)
        big = results["annotate"][max(sizes)]   # the projection from the largest N
        results["annotate_1m_projected_hours"] = round(big["ms_per_sentence"] * 0.8 * args.lines / 1000 / 3600, 2)
        print(json.dumps(results, indent=1))
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
