"""Evaluation speed: sentlab's evaluator vs a SentEval-style loop, measured side by side.

    python benchmarks/eval_speed.py [--model HUB_ID] [--pooling mean] [--bf16] [--diagnostics]
                                    [--no-reference] [--max-pairs N]

sentlab: every distinct sentence of the seven tasks encoded once, in length-sorted
batches. SentEval-style: each task's pairs encoded batch by batch in file order,
duplicates encoded again. Prints both times, the ratio and the largest Spearman
difference (targets: >= 1.5x in exact fp32 with Spearman identical to 4 decimals;
bf16 mode, approximate, >= 2.5x). With --diagnostics it also times evaluation with
diagnostics against evaluation alone (target <= 1.1x): evaluation alone (7 tasks + STS-B
dev), then evaluation + alignment/uniformity + hard subset + density table + density PNG
from the same embeddings; the diagnostics share is also timed on its own. --max-pairs
evaluates a seeded sample of each task (for a shared CPU; say so when quoting numbers);
--no-reference skips the SentEval-style loop.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from sentlab.assets import load_model, resolve_data  # noqa: E402
from sentlab.data.sts import TASKS, parse_all  # noqa: E402
from sentlab.encoder import SentenceEncoder  # noqa: E402
from sentlab.evaluate.protocol import evaluate_table, senteval_style  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    ap.add_argument("--pooling", default="mean")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--bf16", action="store_true", help="also time sentlab in bf16 autocast (approximate)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--diagnostics", action="store_true", help="time evaluation + diagnostics vs evaluation alone")
    ap.add_argument("--no-reference", action="store_true", help="skip the SentEval-style loop")
    ap.add_argument("--max-pairs", type=int, default=None, help="seeded sample of pairs per task (shared CPU)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sts = resolve_data("senteval_sts")
    sick = resolve_data("sick")
    table = parse_all(sts.root, sick.root)
    model, tok = load_model(args.model)
    model.eval()
    enc = SentenceEncoder(model, tok, pooling=args.pooling, name="bench")

    print(f"torch threads: {torch.get_num_threads()}; model {args.model}, pooling {args.pooling}, batch {args.batch_size}")
    if not args.no_reference:
        reference(args, enc, model, tok, table)
    if args.diagnostics:
        diagnostics_cost(args, enc, table)


def reference(args, enc, model, tok, table) -> None:
    t0 = time.perf_counter()
    ref = senteval_style(enc, table, batch_size=args.batch_size)
    t_ref = time.perf_counter() - t0
    t0 = time.perf_counter()
    ours = evaluate_table(enc, table, batch_size=args.batch_size, with_dev=False)
    t_ours = time.perf_counter() - t0
    diff = max(abs(ours[t] - ref[t]) for t in TASKS)
    print(f"SentEval-style loop (fp32):   {t_ref:8.1f} s")
    print(f"sentlab evaluator   (fp32):   {t_ours:8.1f} s   speed-up {t_ref / t_ours:5.2f}x   "
          f"max |Δ Spearman| {diff:.6f} (identical to 4 decimals: {diff < 5e-5})")
    if args.bf16:
        enc16 = SentenceEncoder(model, tok, pooling=args.pooling, name="bench-bf16", precision="bf16")
        t0 = time.perf_counter()
        b16 = evaluate_table(enc16, table, batch_size=args.batch_size, with_dev=False)
        t16 = time.perf_counter() - t0
        d16 = max(abs(b16[t] - ref[t]) for t in TASKS)
        print(f"sentlab evaluator   (bf16):   {t16:8.1f} s   speed-up {t_ref / t16:5.2f}x   "
              f"max |Δ Spearman| {d16:.4f} (approximate)")
    print("per task (sentlab fp32 / SentEval-style):")
    for t in TASKS:
        print(f"  {t:16s} {ours[t]:8.4f} {ref[t]:8.4f}")


def diagnostics_cost(args, enc, table) -> None:
    """Evaluation alone vs evaluation + every SPEC §2 diagnostic (same embeddings, no second pass)."""
    import tempfile

    from sentlab.config import EvaluateParams
    from sentlab.evaluate.diagnostics import run_diagnostics
    from sentlab.evaluate.figures import density_figure

    ep = EvaluateParams(max_pairs=args.max_pairs)
    t0 = time.perf_counter()
    evaluate_table(enc, table, batch_size=args.batch_size, max_pairs=args.max_pairs)
    t_eval = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        res, lookup = evaluate_table(enc, table, batch_size=args.batch_size, max_pairs=args.max_pairs,
                                     return_embeddings=True)
        t1 = time.perf_counter()
        diag, dens = run_diagnostics(table, lookup, ep, max_pairs=args.max_pairs)
        density_figure(dens["gold"], dens["cos"], Path(tmp) / "bench_density.png", "bench")
        t_full = time.perf_counter() - t0
        t_diag = time.perf_counter() - t1
    scope = f"a seeded sample of {args.max_pairs} pairs per task" if args.max_pairs else "every pair"
    print(f"diagnostics cost ({scope}; {res['distinct_sentences']} distinct sentences encoded):")
    print(f"  evaluation alone:              {t_eval:8.2f} s")
    print(f"  evaluation + diagnostics:      {t_full:8.2f} s   ratio {t_full / t_eval:5.3f}x (target <= 1.1x)")
    print(f"  of which diagnostics + figure: {t_diag:8.2f} s   (eval alone + diagnostics: "
          f"{(t_eval + t_diag) / t_eval:5.3f}x; second run's encoding {t1 - t0:.2f} s)")
    au = diag["alignment_uniformity"]["STSBenchmark-test"]
    print(f"  STS-B test alignment {au['alignment']:.4f} uniformity {au['uniformity']:.4f}; "
          f"hard subset Avg {diag['hard_subset']['Avg_subset']:.2f} vs full {diag['hard_subset']['Avg_full']:.2f}")


if __name__ == "__main__":
    main()
