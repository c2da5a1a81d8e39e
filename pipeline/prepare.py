"""Stage `prepare`: raw data -> data/raw, sampled corpus -> data/corpus, STS/SICK -> data/sts."""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path

from sentlab.assets import resolve_data
from sentlab.config import load_params
from sentlab.data.corpus import sample_corpus, stats_dict, write_corpus
from sentlab.data.sts import language_warnings, parse_all, write_table
from sentlab.io import atomic_path, write_json
from sentlab.pipeline_util import run_stage

log = logging.getLogger("prepare")


def copy_raw(resolved, rel_paths, dest: Path) -> None:
    for rel in rel_paths:
        src = resolved.root / rel
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(out) as tmp:
            shutil.copyfile(src, tmp)


def main() -> None:
    params = load_params()
    p = params.prepare
    raw = Path("data/raw")
    sts = resolve_data("senteval_sts")
    sick = resolve_data("sick")
    corpus = resolve_data(p.corpus)
    from sentlab.assets import ASSETS

    with atomic_path(raw, is_dir=True) as tmp:
        copy_raw(sts, ASSETS["senteval_sts"].paths, tmp)
        copy_raw(sick, ASSETS["sick"].paths, tmp)
        copy_raw(corpus, [corpus.path.relative_to(corpus.root)], tmp)
    corpus_file = raw / corpus.path.relative_to(corpus.root)

    table = parse_all(raw, raw)
    warnings = language_warnings(table)
    for task, w in warnings.items():
        log.warning("%s: %s", task, w)
    write_table(table, Path("data/sts/sts.parquet"))

    ids, texts, stats = sample_corpus(corpus_file, p.size, params.seed, p.min_words, p.max_words, p.dedupe, p.allow_smaller)
    write_corpus(Path("data/corpus/train.parquet"), ids, texts)

    # PaSeR's unsupervised corpus: the distinct sentences of the seven STS sets (no labels);
    # a task whose copy is not English (see language_warnings) is left out, and said so.
    usable = table[~table.task.isin(list(warnings))]
    sts_sents = list(dict.fromkeys(s for s in (*usable.sentence1, *usable.sentence2) if s.strip()))
    write_corpus(Path("data/corpus/sts_unlabeled.parquet"), list(range(len(sts_sents))), sts_sents)

    pairs = table.groupby(["task", "split"]).size()
    write_json(Path("data/prepare_stats.json"), {
        "sources": {"senteval_sts": str(sts.root), "sick": str(sick.root), "corpus": str(corpus.path),
                    "corpus_note": corpus.note, "resolved_from": {"sts": sts.source, "sick": sick.source, "corpus": corpus.source}},
        "corpus": stats_dict(stats),
        "sts_unlabeled_sentences": len(sts_sents),
        "sts_unlabeled_excluded_tasks": sorted(warnings),
        "pairs": {f"{t}/{s}": int(n) for (t, s), n in pairs.items()},
        "language_warnings": warnings,
    })
    print(f"prepare: corpus {stats.sampled} sentences (from {stats.lines} lines: {stats.empty} empty, "
          f"{stats.too_long} too long, {stats.too_short} too short, {stats.duplicates} duplicates); "
          f"STS table {len(table)} pairs; {len(sts_sents)} distinct STS sentences")


if __name__ == "__main__":
    sys.exit(run_stage(main))
