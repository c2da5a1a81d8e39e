"""``sentlab annotate``: the annotation stage's code outside the pipeline.

    sentlab annotate INPUT.txt --out OUT.parquet --backend nltk --jobs 2

INPUT: a text file (one sentence per line; id = line number from 0) or a Parquet
file with ``id`` and ``text`` columns. OUT ending in ``.parquet``: one Parquet
file, written at the end. Any other OUT (e.g. ``out/``): a folder of shards
``part-00000.parquet`` ..., resumable exactly like the pipeline stage.
"""

from __future__ import annotations

import argparse
import json


def register_cli(subparsers) -> argparse.ArgumentParser:
    """Add the ``annotate`` subcommand to an argparse ``subparsers`` object."""
    from ..config import AnnotateParams

    d = AnnotateParams()
    p = subparsers.add_parser(
        "annotate", help="POS tags, RAKE phrases, chunks and predicate-argument frames of a text file, as Parquet",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", metavar="INPUT", help="a .txt file (one sentence per line) or a .parquet file (id, text)")
    p.add_argument("--out", required=True, help="OUT.parquet (one file) or a folder (shards, resumable)")
    p.add_argument("--backend", default=d.backend, choices=["nltk", "spacy"], help=f"default: {d.backend}")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (default: 1)")
    p.add_argument("--shard-size", type=int, default=d.shard_size,
                   help=f"sentences per shard (default: {d.shard_size})")
    p.add_argument("--rake-max-words", type=int, default=d.rake_max_words, help=f"default: {d.rake_max_words}")
    p.add_argument("--spacy-model", default=d.spacy_model, help=f"spacy backend pipeline (default: {d.spacy_model})")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_cli)
    return p


def run_cli(args) -> int:
    from ..annotate import BackendOptions, annotate_corpus, read_texts

    ids, texts = read_texts(args.input)
    stats = annotate_corpus(ids, texts, args.out, backend=args.backend, jobs=args.jobs, shard_size=args.shard_size,
                            options=BackendOptions(rake_max_words=args.rake_max_words, spacy_model=args.spacy_model),
                            progress=not args.no_progress, desc=f"annotate {args.input}")
    print(json.dumps(stats.as_dict()))
    return 0

