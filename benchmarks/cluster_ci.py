"""The bootstrap's resampling unit: pairs, or clusters of pairs that share a sentence (issue #35).

For each of the seven STS test sets (the prepare stage's ``data/sts/sts.parquet``, every pair), prints the
pairs, the clusters (:func:`sentlab.evaluate.sts.cosines.sentence_clusters`: connected components of the
sentence–pair graph), the share of pairs that share a sentence with another pair, the largest cluster, and
the width of the 95 % bootstrap CI of one model's Spearman with pairs as the unit (``scipy.stats.bootstrap``)
and with clusters as the unit (:func:`sentlab.evaluate.sts.stats.spearman_ci` with ``clusters``), same seed,
1,000 resamples each. The model is ``--model`` (a trained model folder or hub id; default: the quick
profile's backbone with mean pooling), encoded in fp32 on CPU.

    python benchmarks/cluster_ci.py --sts data/sts/sts.parquet [--model models/simcse] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

STS7 = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sts", default="data/sts/sts.parquet")
    ap.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    ap.add_argument("--pooling", default=None, help="default: the model's own (mean for a hub id)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    from sentlab.data.sts import eval_split, read_sts_table
    from sentlab.evaluate.sts.cosines import sentence_clusters
    from sentlab.evaluate.sts.protocol import embed_unique, pair_cosines
    from sentlab.evaluate.sts.runner import build_encoders
    from sentlab.evaluate.sts.stats import spearman_ci

    table = read_sts_table(args.sts)
    pooling = args.pooling or (None if Path(args.model).is_dir() else "mean")
    enc = next(iter(build_encoders(args.model, pooling=pooling, precision="fp32", device="cpu",
                                   name="m").values()))
    rows = []
    print(f"model {args.model}; 95 % CI widths, 1,000 resamples, seed {args.seed}")
    print("| task | pairs | clusters | pairs sharing a sentence | largest cluster | Spearman | width, pairs | "
          "width, clusters | ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i, task in enumerate(STS7):
        df = eval_split(table, task)
        lookup = embed_unique(enc, list(dict.fromkeys((*df.sentence1, *df.sentence2))), batch_size=128)
        cos, gold = pair_cosines(df, lookup), df.score.to_numpy(dtype=np.float64)
        cl = sentence_clusters(df.sentence1, df.sentence2)
        sizes = np.bincount(cl)
        shared = float(np.mean(sizes[cl] > 1))
        by_pair = spearman_ci(cos, gold, seed=args.seed + i)
        by_cluster = spearman_ci(cos, gold, seed=args.seed + i, clusters=cl)
        r = {"task": task, "pairs": len(df), "clusters": int(len(sizes)), "shared": round(shared, 4),
             "largest": int(sizes.max()), "spearman": round(by_pair.value, 2),
             "width_pairs": round(by_pair.high - by_pair.low, 3),
             "width_clusters": round(by_cluster.high - by_cluster.low, 3)}
        rows.append(r)
        print(f"| {task} | {r['pairs']} | {r['clusters']} | {100 * shared:.0f} % | {r['largest']} | "
              f"{r['spearman']:.2f} | "
              f"{r['width_pairs']:.2f} | {r['width_clusters']:.2f} | {r['width_clusters'] / r['width_pairs']:.2f} |",
              flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
