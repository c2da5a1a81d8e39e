"""Where PaSeR's training step spends its time, on CPU (torch.profiler; issue #58).

The quick profile's PaSeR line (``profiles/quick.yaml``) on its backbone (all-MiniLM-L6-v2), ``--batch`` sentences of
the mirror's wiki sample (length 32), their RAKE phrases and chunks from the annotate stage's NLTK backend run here.
One warm-up step, then ``--steps`` profiled optimiser steps (prepare on the CPU, forward, backward, AdamW), each part
of the step under its own label:

- ``prepare``: phrase choice, EDA, masking, tokenisation (a DataLoader worker's work on a GPU machine);
- ``encoder``: every forward of the encoder (s, s̃ and the MLM pass), ``signal``: Eq. 2's memory;
- ``decoder``: the phrase decoder's layers; ``lm_head``: the vocabulary head (at the target tokens only);
- ``backward``, ``optimizer``.

Printed: each label's wall seconds per step and share, then the top operators by self CPU time.

    python benchmarks/paser_profile.py --batch 32 --steps 3 --threads 2
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))


def build(batch: int, rows: int):
    import numpy as np

    from sentlab.annotate.base import BackendOptions
    from sentlab.annotate.nltk_backend import NltkBackend
    from sentlab.assets.resolve import load_model
    from sentlab.config import TrainParams
    from sentlab.methods import get_method
    from sentlab.train.data import Corpus
    from train_speed import corpus_sentences, profile_block

    model, tok = load_model("sentence-transformers/all-MiniLM-L6-v2")
    model.set_attn_implementation("eager")   # train.attention: auto on CPU
    cfg = TrainParams(batch_size=batch, max_length=32, lr=3e-5, precision="bf16")
    cls = get_method("paser")
    method = cls(model, tok, cls.Params(**profile_block("paser", "quick")).resolved(cfg), seed=0)
    texts = corpus_sentences(rows)
    ann = NltkBackend(BackendOptions()).annotate(texts)
    corpus = Corpus(ids=np.arange(len(texts)), texts=texts,
                    extras={c: [(r or {}).get(c) or [] for r in ann] for c in cls.corpus_columns})
    return method, corpus


def labelled(method, times: dict):
    """Wrap the step's modules so each call is timed under its label (and named in the profiler's trace)."""
    import torch

    def wrap(label, module):
        forward = module.forward

        def timed_forward(*a, **kw):
            t = time.perf_counter()
            with torch.profiler.record_function(label):
                out = forward(*a, **kw)
            times[label] += time.perf_counter() - t
            return out
        module.forward = timed_forward

    for label in ("encoder", "signal", "decoder", "lm_head"):
        wrap(label, getattr(method, label))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from sentlab.nn.encoder import autocast
    from sentlab.train.dropout import dropout_kernel

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    method, corpus = build(args.batch, args.batch * (args.steps + 1))
    method.train()
    opt = method.configure_optimizers(fused=True)
    times: dict = defaultdict(float)
    labelled(method, times)
    cpu = torch.device("cpu")

    def step(i, prof_ctx):
        with prof_ctx:
            t = time.perf_counter()
            with record_function("prepare"):
                b = corpus.batch(range(i * args.batch, (i + 1) * args.batch))
                b.draw = i
                b = method.prepare(b)
            times["prepare"] += time.perf_counter() - t
            with autocast(cpu, "bf16"), dropout_kernel("fast"):
                loss = method(b)["loss"]
            t = time.perf_counter()
            with record_function("backward"):
                loss.backward()
            times["backward"] += time.perf_counter() - t
            t = time.perf_counter()
            with record_function("optimizer"):
                torch.nn.utils.clip_grad_norm_(list(method.parameters()), 1.0)
                opt.step()
                opt.zero_grad(set_to_none=True)
            times["optimizer"] += time.perf_counter() - t

    step(0, contextlib.nullcontext())
    times.clear()
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(1, args.steps + 1):
            step(i, contextlib.nullcontext())
    wall = (time.perf_counter() - t0) / args.steps
    per_step = {k: v / args.steps for k, v in times.items()}
    forward = wall - per_step["prepare"] - per_step["backward"] - per_step["optimizer"]
    rows = {"step_s": wall, "forward_s": forward, **{f"{k}_s": v for k, v in per_step.items()}}
    print(f"PaSeR (quick line, MiniLM-L6, batch {args.batch}, length 32, bf16, {args.threads} threads): "
          f"{wall:.3f} s/step")
    for k in ("prepare", "encoder", "signal", "decoder", "lm_head", "backward", "optimizer"):
        print(f"  {k:10s} {per_step.get(k, 0.0):7.3f} s  {100 * per_step.get(k, 0.0) / wall:5.1f} %")
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.top)
    print(table)
    if args.json:
        top = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:args.top]
        rows["top_ops"] = [{"op": e.key, "self_cpu_s_per_step": e.self_cpu_time_total / 1e6 / args.steps,
                            "calls_per_step": e.count / args.steps} for e in top]
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
