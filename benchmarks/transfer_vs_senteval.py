"""sentlab's SentEval transfer evaluator vs SentEval's own code (Conneau & Kiela 2018) on the same embeddings.

    PYTHONPATH=src python benchmarks/transfer_vs_senteval.py --senteval /path/to/SentEval [--tasks CR TREC MRPC]

Encodes every sentence of the chosen tasks once with ``--model`` (default sentence-transformers/all-MiniLM-L6-v2,
through the embedding cache), then for each task runs (1) :func:`sentlab.evaluate.suites.transfer.run_task` and (2)
SentEval's task class (``senteval.binary.CREval`` …) with SimCSE's settings (usepytorch, kfold 10, Adam, batch
64, tenacity 5, epoch_size 4) and a batcher that looks the same embeddings up, and prints per-task accuracy,
wall time of each and the speed ratio. SentEval is not a pip package: pass a checkout with ``--senteval`` or
``$SENTEVAL_PATH``; without one only sentlab's numbers and times are printed. SentEval's classifier calls
``.cuda()`` unconditionally; on a machine without CUDA the calls are redirected to the CPU (nothing else of
SentEval is changed). Both run with ``--threads`` torch threads (default 1: a fair, quiet comparison on shared
cores). The shims: Python 3.11 removed ``inspect.getargspec`` (SentEval's ``get_optimizer`` uses it).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import types

import numpy as np
import torch

TASK_CLASS = {"MR": ("binary", "MREval", "MR"), "CR": ("binary", "CREval", "CR"),
              "SUBJ": ("binary", "SUBJEval", "SUBJ"), "MPQA": ("binary", "MPQAEval", "MPQA"),
              "SST2": ("sst", "SSTEval", "SST/binary"), "TREC": ("trec", "TRECEval", "TREC"),
              "MRPC": ("mrpc", "MRPCEval", "MRPC")}


def _cpu_shim() -> None:
    """Let SentEval's classifier (written for CUDA and Python < 3.11) run here, unchanged otherwise."""
    import inspect

    if not hasattr(inspect, "getargspec"):  # removed in Python 3.11; SentEval's utils.get_optimizer reads [0]
        inspect.getargspec = inspect.getfullargspec
    if torch.cuda.is_available():
        return
    torch.nn.Module.cuda = lambda self, *a, **k: self
    torch.Tensor.cuda = lambda self, *a, **k: self
    import senteval.tools.classifier as clf

    proxy = types.SimpleNamespace(**{k: getattr(torch, k) for k in dir(torch) if not k.startswith("__")})
    proxy.device = lambda *a, **k: torch.device("cpu")
    proxy.cuda = types.SimpleNamespace(FloatTensor=torch.Tensor, manual_seed=lambda s: None)
    clf.torch = proxy


def senteval_run(task: str, root: str, lookup: dict) -> dict:
    import importlib

    mod, cls, sub = TASK_CLASS[task]
    evaluator = getattr(importlib.import_module(f"senteval.{mod}"), cls)(os.path.join(root, sub), seed=1111)
    params = types.SimpleNamespace(usepytorch=True, kfold=10, batch_size=128, nhid=0, seed=1111,
                                   classifier={"nhid": 0, "optim": "adam", "batch_size": 64, "tenacity": 5,
                                               "epoch_size": 4})

    def batcher(_params, batch):
        return np.stack([lookup[" ".join(tokens)] for tokens in batch])

    return evaluator.run(params, batcher)


def main(argv=None) -> int:
    from sentlab.evaluate.suites.transfer import ClassifierConfig, run_task
    from sentlab.evaluate.suites.transfer_data import TASKS, load_task

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    ap.add_argument("--pooling", default="mean", help="default mean: all-MiniLM-L6-v2's own pooling")
    ap.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    ap.add_argument("--senteval", default=os.environ.get("SENTEVAL_PATH"),
                    help="a SentEval checkout (or $SENTEVAL_PATH)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=128)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    from sentlab.assets.resolve import resolve_data
    from sentlab.evaluate.sts.cache import embedding_cache
    from sentlab.evaluate.sts.protocol import embed_unique
    from sentlab.evaluate.sts.runner import build_encoders

    enc = next(iter(build_encoders(args.model, pooling=args.pooling, precision="fp32", device="cpu").values()))
    loaded = {t: load_task(t) for t in args.tasks}
    sentences = sorted({s for task in loaded.values() for s in task.sentences()})
    t0 = time.perf_counter()
    with embedding_cache():
        lookup = embed_unique(enc, sentences, batch_size=args.batch_size)
    print(f"embeddings: {len(sentences)} sentences, {enc.name} ({enc.pooling} pooling), "
          f"{time.perf_counter() - t0:.1f} s "
          f"(cached after the first run)")

    have_senteval = False
    if args.senteval:
        sys.path.insert(0, args.senteval)
        try:
            import senteval.tools.classifier  # noqa: F401

            _cpu_shim()
            have_senteval = True
        except ImportError as e:
            print(f"SentEval could not be imported from {args.senteval} ({e}); printing sentlab's numbers only.")
    else:
        print("SentEval's code was not given (--senteval PATH or $SENTEVAL_PATH, a checkout of "
              "github.com/facebookresearch/SentEval): printing sentlab's numbers and times only.")

    cfg = ClassifierConfig()
    # wall and CPU time of each side: both run in this process on --threads threads, so on a shared machine the CPU
    # time (time.process_time) is the fair measure and the wall time the one a user sees on an idle one
    rows, tot_s, tot_e, cpu_s, cpu_e = [], 0.0, 0.0, 0.0, 0.0
    for t in args.tasks:
        t0, c0 = time.perf_counter(), time.process_time()
        ours = run_task(loaded[t], lambda s: np.stack([lookup[x] for x in s]), cfg)
        ts, cs = time.perf_counter() - t0, time.process_time() - c0
        tot_s, cpu_s = tot_s + ts, cpu_s + cs
        theirs, te, ce = None, float("nan"), float("nan")
        if have_senteval:
            root = str(resolve_data(f"senteval_{t.lower()}").root)
            t0, c0 = time.perf_counter(), time.process_time()
            theirs = senteval_run(t, root, lookup)
            te, ce = time.perf_counter() - t0, time.process_time() - c0
            tot_e, cpu_e = tot_e + te, cpu_e + ce
        rows.append((t, ours, theirs, ts, te))
        line = f"{t:5s} sentlab acc {ours['acc']:6.2f}" + (f" F1 {ours['f1']:6.2f}" if "f1" in ours else "")
        line += f" ({ts:7.1f} s, CPU {cs:7.1f} s)"
        if theirs is not None:
            line += (f" | SentEval acc {theirs['acc']:6.2f}" + (f" F1 {theirs['f1']:6.2f}" if "f1" in theirs else "")
                     + f" ({te:7.1f} s, CPU {ce:7.1f} s) | diff {ours['acc'] - theirs['acc']:+.2f} | speed-up "
                     f"{te / ts:5.1f}x (CPU {ce / cs:5.1f}x)")
        print(line, flush=True)
    avg = np.mean([r[1]["acc"] for r in rows])
    summary = f"avg over {len(rows)} tasks: sentlab {avg:.2f} in {tot_s:.1f} s"
    if have_senteval:
        summary += (f"; SentEval {np.mean([r[2]['acc'] for r in rows]):.2f} in {tot_e:.1f} s; "
                    f"max |diff| {max(abs(r[1]['acc'] - r[2]['acc']) for r in rows):.2f}; "
                    f"speed-up {tot_e / tot_s:.1f}x (CPU time {cpu_s:.1f} s vs {cpu_e:.1f} s: {cpu_e / cpu_s:.1f}x)")
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
