"""A trained model's evaluate stage run again: encoding (empty embedding cache) vs loading (warm cache), side by side.

    python benchmarks/eval_cache.py --workdir DIR [--model simcse] [--rounds 2]

DIR is a repository where `dvc repro` has run (``models/<model>/`` trained, ``data/sts/`` prepared), e.g.
the ``--workdir`` that ``benchmarks/stage_times.py --keep`` leaves. Nothing in it is written: the stage runs
in a temporary folder holding a copy of its ``params.yaml`` and links to ``data/sts`` and the model, with its
own MLflow store. What DVC re-runs after an evaluate param or evaluation-code change is this command,
``python pipeline/evaluate.py trained <model>``; it is timed with ``SENTLAB_EMBEDDING_CACHE`` pointing at an
empty folder (the model is encoded and its embeddings stored: the first run) and at a folder that run filled
(the embeddings are loaded), the two alternated for ``--rounds`` rounds so that a shared CPU's noise hits
both alike. Prints each time, the ratio of the means, and whether the seven scores agree exactly.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from sentlab.data.sts import TASKS  # noqa: E402

SCORES = (*TASKS, "Avg")


def stage_dir(workdir: Path, model: str, dest: Path) -> None:
    """The files the evaluate stage of ``model`` reads, without touching ``workdir``."""
    for need in ("params.yaml", "data/sts/sts.parquet", f"models/{model}/sentlab.json"):
        if not (workdir / need).is_file():
            raise SystemExit(f"{workdir / need} is missing: --workdir must be a repository where `dvc repro` trained "
                             f"{model} (e.g. the folder `python benchmarks/stage_times.py --keep` leaves).")
    shutil.copy2(workdir / "params.yaml", dest / "params.yaml")
    (dest / "data").mkdir()
    (dest / "data/sts").symlink_to(workdir / "data/sts")
    (dest / "models").mkdir()
    (dest / f"models/{model}").symlink_to(workdir / f"models/{model}")


def run_stage(dest: Path, model: str, cache: Path) -> tuple[float, dict]:
    env = {**os.environ, "SENTLAB_EMBEDDING_CACHE": str(cache),
           "MLFLOW_TRACKING_URI": f"sqlite:///{dest / 'mlflow.db'}"}
    t = time.perf_counter()
    run = subprocess.run([sys.executable, str(REPO / "pipeline/evaluate.py"), "trained", model], cwd=dest, env=env,
                         capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if run.returncode != 0:
        raise SystemExit(f"the evaluate stage failed:\n{run.stderr[-3000:]}")
    metrics = json.loads((dest / f"reports/metrics/{model}.json").read_text())
    return seconds, {k: metrics[k] for k in SCORES}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", required=True, type=Path)
    ap.add_argument("--model", default="simcse")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sentlab-eval-cache-") as tmp:
        dest = Path(tmp) / "stage"
        dest.mkdir()
        stage_dir(args.workdir.resolve(), args.model, dest)
        warm = Path(tmp) / "warm"
        run_stage(dest, args.model, warm)  # fills the warm cache (untimed: imports and files warm up too)
        cold_s, warm_s, scores = [], [], []
        for r in range(args.rounds):
            s, m = run_stage(dest, args.model, Path(tmp) / f"cold-{r}")
            cold_s.append(s)
            scores.append(m)
            s, m = run_stage(dest, args.model, warm)
            warm_s.append(s)
            scores.append(m)
        size = sum(f.stat().st_size for f in warm.glob("*.npy"))
    cold, hot = sum(cold_s) / len(cold_s), sum(warm_s) / len(warm_s)
    print(f"evaluate@{args.model}, {args.rounds} rounds alternated ({os.cpu_count()} CPUs):")
    print(f"  encoding (empty cache): {', '.join(f'{s:.1f}' for s in cold_s)} s  mean {cold:.1f} s")
    print(f"  loading (warm cache):   {', '.join(f'{s:.1f}' for s in warm_s)} s  mean {hot:.1f} s")
    print(f"  ratio {cold / hot:.2f}x; cache entry {size / 1e6:.1f} MB; "
          "the seven scores and Avg identical in every run: "
          f"{all(m == scores[0] for m in scores)}")


if __name__ == "__main__":
    main()
