"""How long the statistics of every table add to the report stage (target: under 30 s).

    python benchmarks/report_stats.py                 # on ./reports (after `make repro`)
    python benchmarks/report_stats.py --synthetic     # a quick-profile-shaped tree, real task sizes

Runs the report on the same outputs, side by side in one process (after a warm-up run, two rounds,
the faster of each kept): as the stage does
(seed summaries, bootstrap CIs, paired tests against the reference row, the protocol-sensitivity
table) and once with the statistics switched off (:func:`sentlab.report.significance.annotate`
replaced by a no-op), and prints both times and their difference. The per-model bootstrap CIs
are computed by the evaluate stage (``ci95`` in the metrics JSON); their cost per model is printed
too (one model, the seven tasks at their real sizes).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

SIZES = {"STS12": 3108, "STS13": 1500, "STS14": 3750, "STS15": 3000, "STS16": 1186, "STSBenchmark": 1379,
         "SICKRelatedness": 4927, "STSBenchmark-dev": 1500, "SICK-all": 9927}
QUICK_MODELS = {"simcse": 3, "ptbert": 3, "moco": 1, "moco_srl": 1, "paser": 1, "paser_sup": 1, "l2p": 1,
                "prompt_l2p": 1, "posbow_adv": 1, "base-cls": 1, "base-mean": 1, "base-first_last": 1,
                "base-whitening": 1}


def synthetic_tree(root: Path) -> None:
    """Metrics + cosines shaped like the quick profile's (real pair counts, seeds of simcse/ptbert)."""
    from sentlab.evaluate.sts.cosines import (bootstrap_intervals, bootstrap_path, confidence_intervals,
                                              write_bootstrap,
                                          write_cosines)
    from sentlab.evaluate.sts.stats import spearman_vec
    from sentlab.config.models import seed_name

    rng = np.random.default_rng(0)
    golds = {t: np.round(np.random.default_rng(i).uniform(0, 5, n), 1) for i, (t, n) in enumerate(SIZES.items())}
    seven = list(SIZES)[:7]
    for model, seeds in QUICK_MODELS.items():
        sigma = rng.uniform(1.0, 2.5)
        method = ({"id": model, "pseudo_len": 128, "queue_size": 256, "attend_to": "cls"} if model == "ptbert"
                  else {"id": model})
        for k in range(seeds):
            name = model if k == 0 else seed_name(model, 42 + k)
            frame = pd.concat([pd.DataFrame({"task": t, "subset": "s", "pair": np.arange(len(g), dtype=np.int32),
                                             "cos": g + rng.normal(0, sigma, len(g)), "gold": g,
                                             "cluster": np.arange(len(g), dtype=np.int32) // 2})   # pairs of 2
                               for t, g in golds.items()], ignore_index=True)
            path = root / "reports/cosines" / f"{name}.parquet"
            write_cosines(path, frame)
            vals = {t: float(spearman_vec(frame[frame.task == t].cos.to_numpy(), golds[t])) for t in seven}
            vals["Avg"] = float(np.mean(list(vals.values())))
            t0 = time.perf_counter()
            intervals = bootstrap_intervals(frame, [*seven, "STSBenchmark-dev"], seed=42)
            ci = confidence_intervals(frame, seven, intervals=intervals)
            ci_s = time.perf_counter() - t0
            write_bootstrap(bootstrap_path(path), intervals, 42)
            m = {"model": name, "status": "evaluated", "kind": "trained", "backbone": "b", "profile": "quick", **vals,
                 "method": method, "ci95": ci, "bootstrap_seed": 42}
            (root / "reports/metrics").mkdir(parents=True, exist_ok=True)
            (root / "reports/metrics" / f"{name}.json").write_text(json.dumps(m))
    print(f"evaluate stage, per model: bootstrap CIs of the 7 tasks + STS-B dev + Avg: {ci_s:.2f} s")


def time_report(root: Path, stats: bool) -> float:
    from sentlab.report import build, significance

    original = significance.annotate
    if not stats:
        significance.annotate = lambda rows, ctx, columns: significance.Family(None)
    try:
        t0 = time.perf_counter()
        build.build_report(root, "b", "quick")
        return time.perf_counter() - t0
    finally:
        significance.annotate = original


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--synthetic", action="store_true", help="a quick-profile-shaped tree instead of ./reports")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if args.synthetic:
            synthetic_tree(root)
        else:
            for sub in ("reports/metrics", "reports/cosines", "reports/curves", "models", "data/prepare_stats.json"):
                src = Path(sub)
                if src.is_dir():
                    shutil.copytree(src, root / sub, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
                elif src.is_file():
                    (root / sub).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(src, root / sub)
        time_report(root, stats=False)                   # warm-up: imports, font cache
        rounds = [(time_report(root, stats=False), time_report(root, stats=True)) for _ in range(2)]
        without, with_stats = min(r[0] for r in rounds), min(r[1] for r in rounds)
    print(f"report without statistics: {without:6.1f} s")
    print(f"report with statistics:    {with_stats:6.1f} s")
    print(f"statistics add:            {with_stats - without:6.1f} s (target < 30 s)")


if __name__ == "__main__":
    main()
