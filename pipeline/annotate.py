"""Stage `annotate`: data/corpus/<corpus>.parquet -> data/annotations/<corpus>/part-*.parquet.

Every corpus the prepare stage wrote: train, sts_unlabeled and (unless ``prepare.nli: none``) nli,
whose ``text`` column holds the NLI anchors (premises) that paser_sup reconstructs phrases from; not
sts_all_sides (ConSERT's corpus, :data:`UNANNOTATED`: no method reads annotations of it).

POS tags, RAKE phrases, chunks and predicate-argument frames per sentence (schema:
``sentlab.annotate``), sharded, parallel (params ``annotate.jobs``) and resumable
(shards with the same params hash are reused). Counts per corpus, wall-clock seconds and shard reuse
go to data/annotate_stats.json (a metrics file of this stage), not into data/annotations: every train
stage depends on that folder, so a timing or a reuse count there re-ran every training when only
``annotate.jobs`` changed. The shards themselves do not depend on ``jobs``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sentlab.annotate import annotate_file, options_from_params
from sentlab.runtime.io import write_json
from sentlab.stages.entry import run_stage
from sentlab.config.stage_params import stage_params

CORPUS_DIR = Path("data/corpus")
OUT = Path("data/annotations")
STATS = Path("data/annotate_stats.json")
UNANNOTATED = ("sts_all_sides",)   # corpora no method annotates (ConSERT's repeats of the STS sentences)


def corpora(folder: Path = CORPUS_DIR) -> dict[str, Path]:
    """name -> file of every corpus in ``folder`` (the annotation folder of each is ``OUT / name``)."""
    return {f.stem: f for f in sorted(folder.glob("*.parquet")) if f.stem not in UNANNOTATED}


def main() -> None:
    p = stage_params("annotate").annotate
    options = options_from_params(p)
    stats = {"backend": p.backend, "jobs": p.jobs, "shard_size": p.shard_size}
    for name, src in corpora().items():
        s = annotate_file(src, OUT / name, backend=p.backend, options=options, jobs=p.jobs,   # one shard at a time
                          shard_size=p.shard_size, desc=f"annotate {name}")
        stats[name] = s.as_dict()
        print(f"annotate {name}: {s.sentences} sentences ({s.skipped} skipped, {s.with_frames} with frames), "
              f"{s.shards_reused}/{s.shards} shards reused, {s.seconds:.1f} s")
    (OUT / "stats.json").unlink(missing_ok=True)  # where earlier versions wrote it (the folder persists)
    write_json(STATS, stats)


if __name__ == "__main__":
    sys.exit(run_stage(main))
