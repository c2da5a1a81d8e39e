"""Stage `prepare`: raw data -> data/raw, sampled corpus -> data/corpus, STS/SICK -> data/sts.

Also paser_sup's NLI triples -> data/corpus/nli.parquet (``prepare.nli``: SimCSE's CSV or the offline
stand-in from SICK train, :mod:`sentlab.data.nli`), their source and counts in data/prepare_stats.json."""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path

from sentlab.assets import resolve_data
from sentlab.config import load_params
from sentlab.data.corpus import sample_corpus, stats_dict, write_corpus
from sentlab.data.nli import SICK_TRAIN, SOURCES, choose_source, parse_nli, write_nli
from sentlab.data.sts import language_warnings, parse_all, write_table
from sentlab.errors import SentlabError
from sentlab.io import staged_outputs, write_json
from sentlab.pipeline_util import run_stage

log = logging.getLogger("prepare")


def copy_raw(resolved, rel_paths, dest: Path) -> None:
    for rel in rel_paths:
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(resolved.root / rel, out)


def main() -> None:
    """Parse every source where it lies (errors name the mirror/cache file to fix), then write all
    outputs into one temporary folder and rename them into place last: a bad input leaves the
    previous data/raw, data/corpus, data/sts and data/prepare_stats.json as they were."""
    params = load_params()
    p = params.prepare
    sts = resolve_data("senteval_sts")
    sick = resolve_data("sick")
    corpus = resolve_data(p.corpus)
    nli_source, nli = choose_source(p.nli)
    from sentlab.assets import ASSETS

    # 1. parse the sources in place
    table = parse_all(sts.root, sick.root)
    warnings = language_warnings(table)
    for task, w in warnings.items():
        log.warning("%s: %s", task, w)
    if nli_source == "sick_standin" and "SICKRelatedness" in warnings:
        raise SentlabError(f"prepare.nli = {p.nli} would build the NLI stand-in from SICK train, whose copy is not "
                           f"English ({warnings['SICKRelatedness']}). Provide the English SICK files or SimCSE's "
                           f"nli_for_simcse.csv, or set prepare.nli: none (and drop paser_sup from train.methods).")
    ids, texts, stats = sample_corpus(corpus.path, p.size, params.seed, p.min_words, p.max_words, p.dedupe,
                                      p.allow_smaller)
    # PaSeR's unsupervised corpus: the distinct sentences of the seven STS sets (no labels);
    # a task whose copy is not English (see language_warnings) is left out, and said so.
    usable = table[~table.task.isin(list(warnings))]
    sts_sents = list(dict.fromkeys(s for s in (*usable.sentence1, *usable.sentence2) if s.strip()))
    nli_file = None
    if nli_source != "none":
        nli_file = nli.path if nli is not None else sick.root / SICK_TRAIN
        nli_table, nli_counts = parse_nli(nli_source, nli_file)

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
        write_corpus(where("data/corpus") / "train.parquet", ids, texts)
        write_corpus(where("data/corpus") / "sts_unlabeled.parquet", list(range(len(sts_sents))), sts_sents)
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
            "sts_unlabeled_sentences": len(sts_sents),
            "sts_unlabeled_excluded_tasks": sorted(warnings),
            "nli": {"requested": p.nli, **nli_stats},
            "pairs": {f"{t}/{s}": int(n) for (t, s), n in pairs.items()},
            "language_warnings": warnings,
        })
    print(f"prepare: corpus {stats.sampled} sentences (from {stats.lines} lines: {stats.empty} empty, "
          f"{stats.too_long} too long, {stats.too_short} too short, {stats.duplicates} duplicates); "
          f"STS table {len(table)} pairs; {len(sts_sents)} distinct STS sentences; NLI: "
          f"{nli_stats.get('label', 'none')} ({nli_stats.get('triples', 0)} triples)")


if __name__ == "__main__":
    sys.exit(run_stage(main))
