"""The machine's own limit (issue #69 §3): fp32 matrix-multiply throughput at MiniLM's shapes, the share of it that
the STS encoding and a SimCSE training step reach, and, in the same process, the two peer ratios.

    python benchmarks/machine_limit.py [--steps 4] [--repeats 5] [--no-peers] [--json OUT]

1. **The limit.** ``F.linear`` in fp32 at all-MiniLM-L6-v2's shapes (hidden 384, intermediate 1536: Q, K, V, O, up,
   down), the best of ``--repeats``, at the rows a batch has (encoding: the encoder's token budget, 2,048 padded
   tokens; training: 2 × 64 sentences × 32 tokens). Two ways of using the cores, the faster one is the limit: one
   product on every intra-op thread, and one single-threaded product per core at once (how ``evaluate.workers:
   auto`` encodes). A training step's limit adds each backward's two products (dX = dY·W, dW = dYᵀ·X).
2. **The model's FLOPs**, counted per sentence from its own token count n (padding is waste: not counted, so it
   lowers the share): per layer 2·n·(4·d² + 2·d·ff) in the linear layers and 4·n²·d in attention (QKᵀ and the
   weighted sum); embeddings, norms, softmax and pooling are not counted. A training step is 3× the forward of
   both views (the backward is 2×) plus SimCSE's MLP (2·d² a sentence).
3. **The STS encoding**: every distinct sentence of the seven tasks through sentlab's encoder (mean pooling,
   ``evaluate.workers: auto``, batch 128), useful GFLOP/s and share of the encoding limit.
4. **A SimCSE fp32 step**: sentlab's real training loop (``benchmarks/train_speed.py``'s child: batch 64, max length
   32, lr 3e-5, eager attention and fused AdamW as ``train.attention: auto``), s/step (the mean of ``--steps`` after
   a warm-up step), useful GFLOP/s and share of the training limit.
5. **Peers**: the seven tasks through sentence-transformers' ``EmbeddingSimilarityEvaluator`` (one per task, batch
   128, Spearman of cosines) against sentlab's ``evaluate_table``; and sentence-transformers' trainer with
   ``MultipleNegativesRankingLoss`` on (s, s) pairs (batch 64, max length 32, fp32, lr 3e-5, the same sentences)
   against the SimCSE step of (4). The trainer needs ``accelerate`` (in the lock: ``make env`` installs it).

Issue #69's goals: both shares ≥ 50 %, the evaluation ≥ 3× the evaluator, the step ≥ 1.5× the trainer.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

from sentlab.assets.resolve import load_model, resolve_data, resolve_model  # noqa: E402
from sentlab.data.sts import TASKS, eval_split, parse_all  # noqa: E402
from sentlab.runtime.device import cpu_summary  # noqa: E402
from sentlab.nn.encoder import DEFAULT_TOKEN_BUDGET, SentenceEncoder, resolve_workers  # noqa: E402
from sentlab.evaluate.sts.protocol import evaluate_table, pool_sentences, select_splits  # noqa: E402

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
BATCH, MAX_LEN, LR = 64, 32, 3e-5   # the quick profile's train settings


def best_time(fn, repeats: int, min_s: float = 0.3) -> float:
    """Seconds of one call of ``fn``: the best of ``repeats`` rounds, each looping until ``min_s`` has passed."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        n, t0 = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            dt = time.perf_counter() - t0
            if dt >= min_s:
                break
        best = min(best, dt / n)
    return best


def linear_shapes(d: int, ff: int) -> list[tuple[int, int]]:
    """(in, out) of one encoder layer's linear maps: Q, K, V, O, up, down."""
    return [(d, d)] * 4 + [(d, ff), (ff, d)]


def layer_products(rows: int, d: int, ff: int, backward: bool) -> list:
    """The matrix products of one layer's linear maps at ``rows`` token rows, as (flops, callable)."""
    g = torch.Generator().manual_seed(0)
    out = []
    for k, n in linear_shapes(d, ff):
        x, w = torch.randn(rows, k, generator=g), torch.randn(n, k, generator=g)
        dy = torch.randn(rows, n, generator=g)
        out.append((2 * rows * k * n, lambda x=x, w=w: F.linear(x, w)))
        if backward:
            out.append((2 * rows * k * n, lambda dy=dy, w=w: dy @ w))      # dX
            out.append((2 * rows * k * n, lambda dy=dy, x=x: dy.T @ x))    # dW
    return out


def limit(rows: int, d: int, ff: int, backward: bool, repeats: int, cores: int) -> dict:
    """GFLOP/s of a layer's products (FLOP-weighted: total FLOPs over total time), on every thread at once and as
    ``cores`` single-threaded products running side by side; ``limit`` is the faster."""
    prods = layer_products(rows, d, ff, backward)
    flops = sum(f for f, _ in prods)
    all_threads = flops / sum(best_time(fn, repeats) for _, fn in prods) / 1e9

    def side_by_side(fn):
        def each():
            torch.set_num_threads(1)
            fn()
        def run():
            ts = [threading.Thread(target=each) for _ in range(cores)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
        return run

    n_threads = torch.get_num_threads()
    try:
        per_core = cores * flops / sum(best_time(side_by_side(fn), repeats) for _, fn in prods) / 1e9
    finally:
        torch.set_num_threads(n_threads)
    return {"rows": rows, "all_threads_gflops": all_threads, "per_core_side_by_side_gflops": per_core,
            "limit_gflops": max(all_threads, per_core)}


def forward_flops(n_tokens: np.ndarray, layers: int, d: int, ff: int) -> float:
    """Useful forward FLOPs of sentences of these token counts (see the module docstring)."""
    n = n_tokens.astype(np.float64)
    return float(layers * (2 * n * (4 * d * d + 2 * d * ff) + 4 * n * n * d).sum())


def token_counts(tok, texts, max_length) -> np.ndarray:
    enc = tok(list(texts), truncation=True, max_length=max_length, padding=False)
    return np.fromiter((len(ids) for ids in enc["input_ids"]), dtype=np.int64)


def st_evaluation(model_dir: Path, table, batch_size: int) -> tuple[float, dict]:
    """sentence-transformers' EmbeddingSimilarityEvaluator on the seven tasks: (seconds, {task: Spearman × 100})."""
    from sentence_transformers import SentenceTransformer
    try:   # sentence-transformers >= 6 moved it; the old path warns
        from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator
    except ImportError:
        from sentence_transformers.evaluation import EmbeddingSimilarityEvaluator

    st = SentenceTransformer(str(model_dir), device="cpu")
    out = {}
    t0 = time.perf_counter()
    for t in TASKS:
        df = eval_split(table, t)
        ev = EmbeddingSimilarityEvaluator(list(df.sentence1), list(df.sentence2), df.score.tolist(),
                                          batch_size=batch_size, name=t, similarity_fn_names=["cosine"],
                                          write_csv=False)
        out[t] = 100 * ev(st)[f"{t}_spearman_cosine"]
    return time.perf_counter() - t0, out


def st_trainer_step(model_dir: Path, texts: list[str], steps: int) -> float:
    """sentence-transformers' trainer, MultipleNegativesRankingLoss on (s, s): mean s/step of ``steps`` steps after
    a warm-up step (the last step, followed by the trainer's wrap-up, not timed)."""
    from datasets import Dataset
    from sentence_transformers import (SentenceTransformer, SentenceTransformerTrainer,
                                       SentenceTransformerTrainingArguments, losses)
    from transformers import TrainerCallback

    st = SentenceTransformer(str(model_dir), device="cpu")
    st.max_seq_length = MAX_LEN
    ticks: list[float] = []

    class Tick(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            ticks.append(time.perf_counter())

    with tempfile.TemporaryDirectory() as tmp:
        args = SentenceTransformerTrainingArguments(
            output_dir=tmp, per_device_train_batch_size=BATCH, learning_rate=LR, max_steps=steps + 2,
            warmup_steps=0, logging_steps=10**6, save_strategy="no", report_to=[], seed=0, use_cpu=True,
            dataloader_drop_last=True, disable_tqdm=True)
        ds = Dataset.from_dict({"anchor": texts, "positive": texts})
        trainer = SentenceTransformerTrainer(model=st, args=args, train_dataset=ds,
                                             loss=losses.MultipleNegativesRankingLoss(st), callbacks=[Tick()])
        trainer.train()
    return (ticks[steps] - ticks[0]) / steps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=4, help="timed training steps (after one warm-up step)")
    ap.add_argument("--repeats", type=int, default=5, help="rounds of each matrix product (the best kept)")
    ap.add_argument("--batch-size", type=int, default=128, help="evaluation batch size (both evaluators)")
    ap.add_argument("--no-peers", action="store_true", help="skip sentence-transformers' evaluator and trainer")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    cores = torch.get_num_threads()
    model, tok = load_model(MODEL)
    model.eval()
    cfg = model.config
    d, ff, layers = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    out: dict = {"cpu": cpu_summary(), "torch": torch.__version__, "threads": cores, "model": MODEL}
    print(f"{out['cpu']}; torch {torch.__version__}, {cores} threads; {MODEL} (d {d}, ff {ff}, {layers} layers)")

    enc_lim = limit(DEFAULT_TOKEN_BUDGET, d, ff, backward=False, repeats=args.repeats, cores=cores)
    trn_lim = limit(2 * BATCH * MAX_LEN, d, ff, backward=True, repeats=args.repeats, cores=cores)
    out["limit"] = {"encoding": enc_lim, "training": trn_lim}
    for name, lim in out["limit"].items():
        print(f"limit ({name}: {lim['rows']} rows{', forward + backward' if name == 'training' else ''}): "
              f"{lim['all_threads_gflops']:.1f} GFLOP/s on {cores} threads, {lim['per_core_side_by_side_gflops']:.1f} "
              f"as {cores} single-threaded products side by side -> {lim['limit_gflops']:.1f}")

    # 3. the STS encoding
    table = parse_all(resolve_data("senteval_sts").root, resolve_data("sick").root)
    sentences = pool_sentences(select_splits(table, list(TASKS)))
    workers = resolve_workers("auto", torch.device("cpu"))
    enc = SentenceEncoder(model, tok, pooling="mean", name="bench", workers=workers)
    n_tok = token_counts(tok, sentences, enc.effective_max_length)
    flops = forward_flops(n_tok, layers, d, ff)
    t0 = time.perf_counter()
    enc.encode(sentences, batch_size=args.batch_size, show_progress_bar=False)
    t_enc = time.perf_counter() - t0
    g = flops / t_enc / 1e9
    out["encoding"] = {"sentences": len(sentences), "tokens": int(n_tok.sum()), "seconds": t_enc, "gflops": g,
                       "share": g / enc_lim["limit_gflops"]}
    print(f"STS encoding: {len(sentences):,} distinct sentences, {int(n_tok.sum()):,} tokens, {flops / 1e12:.2f} "
          f"TFLOP in {t_enc:.1f} s = {g:.1f} GFLOP/s, {100 * out['encoding']['share']:.0f} % of the limit")

    # 4. a SimCSE fp32 step through sentlab's loop
    import train_speed

    step = train_speed.child("simcse", args.steps, "cpu", "fp32", None)
    texts = train_speed.corpus_sentences(BATCH * (args.steps + 2))
    per_sentence = forward_flops(token_counts(tok, texts, MAX_LEN), layers, d, ff) / len(texts)
    step_flops = 3 * (2 * BATCH * per_sentence + 2 * BATCH * 2 * d * d)
    g = step_flops / step["s_per_step"] / 1e9
    out["training"] = {"s_per_step": step["s_per_step"], "gflops": g, "share": g / trn_lim["limit_gflops"],
                       "attention": step["attention"]}
    print(f"SimCSE fp32 step (sentlab, batch {BATCH}, max length {MAX_LEN}, {step['attention']} attention): "
          f"{step['s_per_step']:.3f} s, {step_flops / 1e9:.1f} GFLOP = {g:.1f} GFLOP/s, "
          f"{100 * out['training']['share']:.0f} % of the limit")

    if not args.no_peers:
        model_dir = resolve_model(MODEL)
        t_st, st_scores = st_evaluation(model_dir, table, args.batch_size)
        t0 = time.perf_counter()
        ours = evaluate_table(enc, table, batch_size=args.batch_size, with_dev=False)
        t_ours = time.perf_counter() - t0
        diff = max(abs(ours[t] - st_scores[t]) for t in TASKS)
        out["evaluation_peer"] = {"sentlab_s": t_ours, "st_evaluator_s": t_st, "ratio": t_st / t_ours,
                                  "max_abs_spearman_diff": diff}
        print(f"7-task STS evaluation: sentlab {t_ours:.1f} s, sentence-transformers' EmbeddingSimilarityEvaluator "
              f"{t_st:.1f} s: {t_st / t_ours:.2f}x (goal >= 3x); max |Δ Spearman x 100| {diff:.4f}")
        try:
            import accelerate  # noqa: F401
        except ImportError:
            print("sentence-transformers' trainer: skipped, it needs `accelerate` (not installed: `make env` "
                  "installs the lock, which has it)")
        else:
            t_tr = st_trainer_step(model_dir, texts, args.steps)
            out["training_peer"] = {"sentlab_s_per_step": step["s_per_step"], "st_trainer_s_per_step": t_tr,
                                    "ratio": t_tr / step["s_per_step"]}
            print(f"SimCSE step: sentlab {step['s_per_step']:.3f} s, sentence-transformers' trainer "
                  f"(MultipleNegativesRankingLoss on (s, s)) {t_tr:.3f} s: {t_tr / step['s_per_step']:.2f}x "
                  f"(goal >= 1.5x)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
