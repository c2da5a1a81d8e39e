"""Stage `prepare`: raw data -> data/raw, sampled corpus -> data/corpus, STS/SICK -> data/sts.

data/corpus holds train (the sampled Wikipedia sentences), sts_unlabeled (the distinct sentences of the scored
STS/SICK pairs) and sts_all_sides (ConSERT's corpus: both sides of every pair, unscored ones too, repeats kept).

Also paser_sup's NLI triples -> data/corpus/nli.parquet (``prepare.nli``: SimCSE's CSV or the offline
stand-in from SICK train, :mod:`sentlab.data.nli`), their source and counts in data/prepare_stats.json."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from sentlab.assets.resolve import ASSETS
from sentlab.data.corpus import stats_dict, write_corpus, write_sample
from sentlab.data.nli import SOURCES, write_nli
from sentlab.data.sts import all_sides, write_table
from sentlab.runtime.io import staged_outputs, write_json
from sentlab.stages.entry import run_stage
from sentlab.stages.sources import parse_sources, sha256_file
from sentlab.config.stage_params import stage_params

def copy_raw(resolved, rel_paths, dest: Path) -> None:
    for rel in rel_paths:
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(resolved.root / rel, out)


def main() -> None:
    """Parse every source where it lies (errors name the mirror/cache file to fix), then write all
    outputs into one temporary folder and rename them into place last: a bad input leaves the
    previous data/raw, data/corpus, data/sts and data/prepare_stats.json as they were. (Under
    ``dvc repro`` the ``sources`` stage has already parsed a changed source the same way, before
    DVC removed these outputs to run this stage.)"""
    params = stage_params("prepare")
    p = params.prepare
    # 1. parse the sources in place
    src = parse_sources(params)
    sts, sick, corpus, nli, nli_source = src.sts, src.sick, src.corpus, src.nli, src.nli_source
    table, warnings, stats, sample = src.table, src.warnings, src.corpus_stats, src.sample

    usable = table[~table.task.isin(list(warnings))]
    sts_sents = list(dict.fromkeys(s for s in (*usable.sentence1, *usable.sentence2) if s.strip()))
    sides = all_sides(sts.root, sick.root, skip=tuple(warnings))   # ConSERT's corpus (docs/methods.md#consert)
    nli_file, nli_table, nli_counts = src.nli_file, src.nli_table, src.nli_counts

    # 2. write everything to one temporary folder; 3. rename into place
    outputs = ("data/raw", "data/corpus", "data/sts", "data/prepare_stats.json")
    with staged_outputs(*outputs) as where:
        raw = where("data/raw")
        copy_raw(sts, ASSETS["senteval_sts"].paths, raw)
        copy_raw(sick, ASSETS["sick"].paths, raw)
        copy_raw(corpus, [corpus.path.relative_to(corpus.root)], raw)
        if nli is not None:
            copy_raw(nli, [nli.path.relative_to(nli.root)], raw)
        write_table(table, where("data/sts") / "sts.parquet")
        write_sample(where("data/corpus") / "train.parquet", sample)   # a second pass over the corpus file
        write_corpus(where("data/corpus") / "sts_unlabeled.parquet", list(range(len(sts_sents))), sts_sents)
        write_corpus(where("data/corpus") / "sts_all_sides.parquet", list(range(len(sides))), sides)
        nli_stats = {"source": "none"}
        if nli_file is not None:
            write_nli(nli_table, where("data/corpus") / "nli.parquet", nli_source)
            nli_stats = {"source": nli_source, "label": SOURCES[nli_source], "file": str(nli_file), **nli_counts,
                         "resolved_from": (nli or sick).source}
        pairs = table.groupby(["task", "split"]).size()
        write_json(where("data/prepare_stats.json"), {
            "sources": {"senteval_sts": str(sts.root), "sick": str(sick.root), "corpus": str(corpus.path),
                        "corpus_note": corpus.note,
                        "resolved_from": {"sts": sts.source, "sick": sick.source, "corpus": corpus.source}},
            "corpus": stats_dict(stats),
            # what every model of the corpus trained on (the report's first lines): the asset, its file, lines, bytes
            "corpus_file": {"asset": p.corpus, "path": corpus.path.relative_to(corpus.root).as_posix(),
                            "lines": stats.lines, "sha256": sha256_file(corpus.path), "sampled": stats.sampled},
            "sts_unlabeled_sentences": len(sts_sents),
            "sts_unlabeled_excluded_tasks": sorted(warnings),
            "sts_all_sides_sentences": len(sides),
            "nli": {"requested": p.nli, **nli_stats},
            "pairs": {f"{t}/{s}": int(n) for (t, s), n in pairs.items()},
            "language_warnings": warnings,
        })
    drop = stats.dropped
    print(f"prepare: corpus {stats.sampled} sentences (from {stats.lines} lines: {drop['empty']} empty, "
          f"{drop['too_long']} too long, {drop['too_short']} too short, {drop['duplicates']} duplicates); "
          f"STS table {len(table)} pairs; {len(sts_sents)} distinct STS sentences; NLI: "
          f"{nli_stats.get('label', 'none')} ({nli_stats.get('triples', 0)} triples)")


if __name__ == "__main__":
    sys.exit(run_stage(main))
