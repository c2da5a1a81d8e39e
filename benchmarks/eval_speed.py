"""Evaluation speed: sentlab's evaluator vs a SentEval-style loop, measured side by side.

    python benchmarks/eval_speed.py [--model HUB_ID] [--pooling mean] [--bf16] [--diagnostics]
                                    [--no-reference] [--max-pairs N] [--levers N] [--threads T]

sentlab: every distinct sentence of the seven tasks encoded once, in length-sorted
batches, with ``evaluate.workers: auto`` (on CPU one single-threaded worker per core). SentEval-style:
each task's pairs encoded batch by batch in file order, duplicates encoded again. Prints both times,
the ratio and the largest Spearman difference (targets: >= 1.5x in exact fp32 with Spearman identical to 4 decimals;
bf16 mode, approximate, >= 2.5x). With --diagnostics it also times evaluation with
diagnostics against evaluation alone (target <= 1.1x): evaluation alone (7 tasks + STS-B
dev), then evaluation + alignment/uniformity + hard subset + density table + density PNG
from the same embeddings; the diagnostics share is also timed on its own. --max-pairs
evaluates a seeded sample of each task (for a shared CPU; say so when quoting numbers);
--no-reference skips the SentEval-style loop.

--levers N times each encoding lever side by side on a seeded sample of N distinct evaluation
sentences (rounds interleaved, the fastest of --rounds kept, so a shared CPU's noise hits every
lever alike): the previous encoder (character-length sort, fixed batches of --batch-size,
``torch.no_grad``), then ``torch.inference_mode``, token-count sort with one tokenisation,
token budgets per batch, batches on single-threaded workers (``evaluate.workers``), and, not kept,
eager attention instead of SDPA; each lever's max |Δ| against the previous encoder's embeddings.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from sentlab.assets.resolve import load_model, resolve_data  # noqa: E402
from sentlab.data.sts import TASKS, eval_split, parse_all  # noqa: E402
from sentlab.nn.encoder import NEEDS_HIDDEN_STATES, SentenceEncoder, pool, resolve_workers  # noqa: E402
from sentlab.evaluate.sts.protocol import (evaluate_table, pool_sentences, sample_pairs, select_splits,  # noqa: E402
                                       senteval_style)


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
    ap.add_argument("--levers", type=int, default=None, metavar="N",
                    help="time each encoding lever on a seeded sample of N evaluation sentences")
    ap.add_argument("--rounds", type=int, default=3, help="--levers: interleaved rounds (fastest kept)")
    ap.add_argument("--budgets", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192],
                    help="--levers: token budgets to time")
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

    print(f"torch threads: {torch.get_num_threads()}; model {args.model}, pooling {args.pooling}, "
          f"batch {args.batch_size}")
    if args.levers:
        levers(args, enc, table)
    if not args.no_reference:
        reference(args, enc, model, tok, table)
    if args.diagnostics:
        diagnostics_cost(args, enc, table)


def sampled_table(table, n):
    """The STS table cut to the seeded sample of ``n`` pairs of each task (what --max-pairs evaluates)."""
    import pandas as pd

    return pd.concat([sample_pairs(eval_split(table, t), n) for t in TASKS])


def reference(args, enc, model, tok, table) -> None:
    if args.max_pairs:
        table = sampled_table(table, args.max_pairs)
        print(f"(a seeded sample of {args.max_pairs} pairs per task, both sides)")
    t0, c0 = time.perf_counter(), time.process_time()
    ref = senteval_style(enc, table, batch_size=args.batch_size)
    t_ref, c_ref = time.perf_counter() - t0, time.process_time() - c0
    # as evaluate.workers: auto
    ours_enc = dataclasses.replace(enc, workers=resolve_workers("auto", torch.device("cpu")))
    t0, c0 = time.perf_counter(), time.process_time()
    ours = evaluate_table(ours_enc, table, batch_size=args.batch_size, with_dev=False)
    t_ours, c_ours = time.perf_counter() - t0, time.process_time() - c0
    diff = max(abs(ours[t] - ref[t]) for t in TASKS)
    print(f"SentEval-style loop (fp32):   {t_ref:8.1f} s   (CPU {c_ref:8.1f} s)")
    print(f"sentlab evaluator   (fp32):   {t_ours:8.1f} s   (CPU {c_ours:8.1f} s)   speed-up {t_ref / t_ours:5.2f}x "
          f"(CPU {c_ref / c_ours:5.2f}x)   max |Δ Spearman| {diff:.6f} (identical to 4 decimals: {diff < 5e-5}; "
          f"within 0.01: {diff < 0.01})")
    if args.bf16:
        enc16 = SentenceEncoder(model, tok, pooling=args.pooling, name="bench-bf16", precision="bf16")
        t0, c0 = time.perf_counter(), time.process_time()
        b16 = evaluate_table(enc16, table, batch_size=args.batch_size, with_dev=False)
        t16, c16 = time.perf_counter() - t0, time.process_time() - c0
        d16 = max(abs(b16[t] - ref[t]) for t in TASKS)
        print(f"sentlab evaluator   (bf16):   {t16:8.1f} s   (CPU {c16:8.1f} s)   speed-up {t_ref / t16:5.2f}x "
              f"(CPU {c_ref / c16:5.2f}x)   "
              f"max |Δ Spearman| {d16:.4f} (approximate)")
    print("per task (sentlab fp32 / SentEval-style):")
    for t in TASKS:
        print(f"  {t:16s} {ours[t]:8.4f} {ref[t]:8.4f}")


def previous_encode(enc: SentenceEncoder, sentences: list[str], batch_size: int, inference_mode: bool = False):
    """The encoder before token-count batching: character-length sort, fixed batches, each batch
    tokenised on its own, under ``torch.no_grad`` (or ``torch.inference_mode``)."""
    order = np.argsort([-len(s) for s in sentences], kind="stable")
    ctx = torch.inference_mode if inference_mode else torch.no_grad
    out = np.empty((len(sentences), enc.model.config.hidden_size), dtype=np.float32)
    with ctx():
        for start in range(0, len(order), batch_size):
            idx = order[start: start + batch_size]
            batch = enc.tokenizer([sentences[i] for i in idx], padding=True, truncation=True,
                                  max_length=enc.effective_max_length, return_tensors="pt")
            hidden = enc.model(**batch, output_hidden_states=enc.pooling in NEEDS_HIDDEN_STATES, return_dict=True)
            out[idx] = pool(hidden, batch["attention_mask"], enc.pooling).float().numpy()
    return out


def with_attention(enc: SentenceEncoder, attention: str, fn):
    """``fn()`` with the encoder's model on ``attention`` (eager / sdpa), the model's setting restored after."""
    before = enc.model.config._attn_implementation
    enc.model.set_attn_implementation(attention)
    try:
        return fn()
    finally:
        enc.model.set_attn_implementation(before)


def levers(args, enc: SentenceEncoder, table) -> None:
    """Each encoding lever timed side by side on the same sentences (see the module docstring)."""
    pool_all = pool_sentences(select_splits(table, list(TASKS)))
    rng = np.random.default_rng(0)
    sample = [pool_all[i] for i in np.sort(rng.choice(len(pool_all), min(args.levers, len(pool_all)), replace=False))]
    bs = args.batch_size
    variants = {
        "previous (char sort, no_grad)": lambda: previous_encode(enc, sample, bs),
        "+ inference_mode": lambda: previous_encode(enc, sample, bs, inference_mode=True),
        "+ token sort, tokenise once": lambda: dataclasses.replace(enc, token_budget=10**9).encode(
            sample, bs, show_progress_bar=False),
    }
    for budget in args.budgets:
        variants[f"+ token budget {budget} (no batch cap)"] = (
            lambda b=budget: dataclasses.replace(enc, token_budget=b).encode(sample, batch_size=10**6,
                                                                             show_progress_bar=False))
    variants[f"budget {enc.token_budget}, batch {bs}"] = lambda: enc.encode(sample, batch_size=bs,
                                                                            show_progress_bar=False)
    nw = max(2, torch.get_num_threads())
    variants[f"+ {nw} single-threaded workers (default)"] = lambda: dataclasses.replace(enc, workers=nw).encode(
        sample, batch_size=bs, show_progress_bar=False)
    variants["  eager attention instead of SDPA (not kept)"] = lambda: with_attention(
        enc, "eager", lambda: enc.encode(sample, batch_size=bs, show_progress_bar=False))
    times = {k: [] for k in variants}
    cpu = {k: [] for k in variants}
    ref = None
    diffs = {}
    for _ in range(args.rounds):
        for name, fn in variants.items():
            t0, c0 = time.perf_counter(), time.process_time()
            emb = fn()
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
            ref = emb if ref is None else ref
            diffs[name] = float(np.abs(emb - ref).max())
    print(f"encoding levers: {len(sample)} sentences, {torch.get_num_threads()} thread(s), {args.rounds} interleaved "
          f"round(s), fastest kept; CPU time (process) is the fairer figure on a shared machine")
    base, base_cpu = min(times["previous (char sort, no_grad)"]), min(cpu["previous (char sort, no_grad)"])
    for name in variants:
        t, c = min(times[name]), min(cpu[name])
        print(f"  {name:38s} wall {t:7.2f} s {base / t:5.2f}x   CPU {c:7.2f} s {base_cpu / c:5.2f}x   "
              f"max |Δ emb| {diffs[name]:.2e}")


def diagnostics_cost(args, enc, table) -> None:
    """Evaluation alone vs evaluation + every diagnostic (docs/evaluation.md) (same embeddings, no second pass)."""
    import tempfile

    from sentlab.config import EvaluateParams
    from sentlab.evaluate.sts.diagnostics import run_diagnostics
    from sentlab.evaluate.sts.figures import density_figure

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
