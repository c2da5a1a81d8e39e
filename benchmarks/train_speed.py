"""Training throughput per method, against a plain eager PyTorch SimCSE loop.

CPU (always): MiniLM-L6 (the quick profile's backbone), batch 64, max length 32,
``--steps`` timed optimiser steps per method (a warm-up step before, the final step with its
dev evaluation and export after, both untimed), through
the real :func:`sentlab.train.loop.train_loop` (dev evaluation off). Each
method runs in its own subprocess so its peak RSS is its own. The reference
is a hand-written SimCSE step (tokenise, one forward of the doubled batch,
[CLS]+MLP, InfoNCE, AdamW) in the same run: the ratio shows the loop's overhead.

CUDA (when available): bert-base-uncased from its kept architecture config (random
weights; the tokenizer rebuilt offline), batch 64, length 32, bf16 autocast, fused AdamW,
each method's settings from ``--profile`` when given: tokens/s, share of
the GPU's dense bf16 peak (``--peak-tflops``, 790 for an H200) using
6 · trainable params · tokens FLOPs per step (the momentum key encoder's
extra forward, 2 · N · tokens, is not counted), peak CUDA memory.

fp32 vs bf16 on CPU (``--compare-precision``): per method, fp32 and bf16 autocast runs of the
same seed and the same ``--steps``, steps/s side by side, then the STS-B dev Spearman (fp32
evaluation, ``--dev-pairs`` seeded genre-stratified pairs; 0 = all 1,500) of each trained model:
whether bf16 autocast (fp32 logits, docs/methods.md) pays on a CPU with native bf16 (AVX-512 BF16/AMX).

glibc's malloc vs retained freed memory (``--compare-heap``, ``runtime.heap``: a per-process setting, so
each configuration is its own process): per method, processes alternate system, retain, system,
retain … (``--repeats`` each) on the quick profile's real corpus and annotations when the pipeline
has written them (``data/``; PaSeR needs its phrases), bf16 autocast where the CPU has it; the
median s/step of each and the ratio.

One method param at several values (``--compare-values KEY=V1,V2``, e.g. PaSeR's ``decoder_impl=torch,bart``):
the same, processes alternating over the values, each with params.yaml's method line, ``--set KEY=VALUE``
and the value compared.

Usage::

    python benchmarks/train_speed.py                       # CPU, default methods
    python benchmarks/train_speed.py --compare-precision --methods simcse --steps 20
    python benchmarks/train_speed.py --compare-attention --methods simcse,moco,ptbert,l2p --steps 10
    python benchmarks/train_speed.py --compare-dropout --methods simcse,ptbert,paser --steps 10
    python benchmarks/train_speed.py --compare-heap --methods simcse,ptbert,paser,l2p --steps 8
    python benchmarks/train_speed.py --compare-values decoder_impl=torch,bart --methods paser --steps 6
    python benchmarks/train_speed.py --bf16 --steps 5      # CPU with bf16 autocast
    python benchmarks/train_speed.py --methods simcse,ptbert --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_METHODS = "simcse,ct,moco,moco_deletion,ptbert"


def corpus_sentences(n: int) -> list[str]:
    from sentlab.assets.resolve import resolve_data

    try:
        path = resolve_data("wiki1m_head").path   # the quick profile's corpus (prepare.corpus), the mirror's sample
        lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except Exception:  # noqa: BLE001 - no mirror: synthetic 30-word sentences keep the length at 32 tokens
        lines = [" ".join(f"word{(i * 7 + j) % 997}" for j in range(30)) for i in range(n)]
    return (lines * (n // max(1, len(lines)) + 1))[:n]


def build_backbone(device: str):
    import torch

    if device == "cuda":
        from transformers import AutoModel

        from sentlab.backbones import architecture_config, build_tokenizer, spread_layer_norms

        tok = build_tokenizer("bert-base-uncased")  # offline: MiniLM's uncased vocabulary, bert-base's settings
        torch.manual_seed(0)
        model = AutoModel.from_config(architecture_config("bert-base-uncased"), add_pooling_layer=False)
        spread_layer_norms(model)
        return model, tok, "bert-base-uncased (random, its architecture config)"
    from sentlab.assets.resolve import load_model

    model, tok = load_model("sentence-transformers/all-MiniLM-L6-v2")
    return model, tok, "all-MiniLM-L6-v2"


def profile_block(method_id: str, profile: str | None) -> dict:
    """The method line of ``profile`` (its Params keys only), {} without a profile."""
    if not profile:
        return {}
    from sentlab.methods import get_method
    from sentlab.config.profile_files import profile_values

    block = (profile_values(profile, REPO / "profiles").get("methods") or {}).get(method_id) or {}
    fields = get_method(method_id).Params.model_fields
    return {k: v for k, v in block.items() if k in fields and k not in ("batch_size", "max_length", "lr",
                                                                         "max_steps", "eval_every", "epochs")}


def child(method_id: str, steps: int, device: str, precision: str, threads: int | None,
          dev_pairs: int | None = None, profile: str | None = None) -> dict:
    import numpy as np
    import torch

    from sentlab.config import TrainParams
    from sentlab.train.loop import resolve_attention

    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    model, tok, backbone = build_backbone(device)
    attention = resolve_attention("auto", torch.device(device))  # as train.attention: auto (the loop's optimiser too)
    model.set_attn_implementation(attention)
    cfg = TrainParams(batch_size=64, max_length=32, lr=3e-5, eval_every=10_000, max_steps=steps + 2, device=device,
                      precision=precision)
    # steps + 2 optimiser steps: the first is the warm-up, the last (which the loop follows with its final dev
    # evaluation and model export) is not timed either; timed = ticks after step 1 .. step steps+1
    texts = corpus_sentences(64 * (steps + 2))
    times: list[float] = []
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()

    def tick(step, record):
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter())

    if method_id == "plain":
        n_params, tokens = plain_simcse(model, tok, texts, cfg, device, precision, tick, steps + 2)
    else:
        from sentlab.methods import get_method
        from sentlab.train.data import Corpus
        from sentlab.train.loop import train_loop

        cls = get_method(method_id)
        params = cls.Params(**{**({"negatives": 7} if method_id == "ct" else {}), **profile_block(method_id, profile)})
        method = cls(model, tok, params.resolved(cfg), seed=0)
        corpus = Corpus(ids=np.arange(len(texts)), texts=texts)
        if method.corpus_columns:
            corpus.extras = {c: [[] for _ in texts] for c in method.corpus_columns}
        n_params = sum(p.numel() for p in method.trainable_parameters())
        enc = tok(texts[:64], padding=True, truncation=True, max_length=32)
        tokens = int(sum(sum(m) for m in enc["attention_mask"])) * (2 if method_id == "simcse" else 1)
        with tempfile.TemporaryDirectory() as tmp:
            train_loop(method, corpus, cfg, seed=0, dev_eval=lambda e: {"stsb_dev": 0.0}, ckpt_dir=Path(tmp),
                       callbacks=[tick], progress=False)
        if dev_pairs is not None:
            dev = stsb_dev(method, dev_pairs)
    dt = (times[steps] - times[0]) / steps
    out = {"method": method_id, "backbone": backbone, "device": device, "precision": precision, "steps": steps,
           "attention": attention,
           "s_per_step": dt, "sentences_per_s": 64 / dt, "tokens_per_s": tokens / dt, "trainable_params": n_params,
           "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if dev_pairs is not None and method_id != "plain":
        out["stsb_dev"] = dev
    if device == "cuda":
        out["peak_cuda_mb"] = torch.cuda.max_memory_allocated() / 2**20
        out["model_flops_per_s"] = 6 * n_params * tokens / dt
    return out


def stsb_dev(method, dev_pairs: int) -> float:
    """STS-B dev Spearman x 100 of the trained model, evaluated in fp32 (``dev_pairs`` 0: every pair)."""
    from sentlab.assets.resolve import resolve_data
    from sentlab.data.sts import parse_all
    from sentlab.evaluate.sts.diagnostics import evaluate_dev

    table = parse_all(resolve_data("senteval_sts").root, resolve_data("sick").root)
    enc = method.sentence_encoder(precision="fp32")
    return evaluate_dev(enc, table, max_pairs=dev_pairs or None)["stsb_dev"]


def plain_simcse(model, tok, texts, cfg, device, precision, tick, n_steps):
    """The reference: SimCSE in eager PyTorch, no sentlab code."""
    import contextlib

    import torch
    import torch.nn.functional as F

    dev = torch.device(device)
    model.to(dev).train()
    mlp = torch.nn.Sequential(torch.nn.Linear(model.config.hidden_size, model.config.hidden_size),
                              torch.nn.Tanh()).to(dev)
    params = list(model.parameters()) + list(mlp.parameters())
    opt = torch.optim.AdamW(params, lr=3e-5, **({"fused": True} if device == "cuda" else {}))
    ctx = (lambda: torch.autocast(dev.type, dtype=torch.bfloat16)) if precision == "bf16" else contextlib.nullcontext
    tokens = 0
    for step in range(n_steps):
        batch = texts[step * 64:(step + 1) * 64]
        enc = tok(batch * 2, padding=True, truncation=True, max_length=32, return_tensors="pt").to(dev)
        tokens = int(enc["attention_mask"].sum())
        with ctx():
            z = mlp(model(**enc).last_hidden_state[:, 0])
        z = F.normalize(z.float(), dim=-1)
        logits = z[:64] @ z[64:].T / 0.05
        loss = F.cross_entropy(logits, torch.arange(64, device=dev))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        tick(step + 1, {})
    return sum(p.numel() for p in params), tokens


def child_json(method_id: str, flags: list[str]) -> dict:
    """This script as a child process (``--child method_id`` + ``flags``): the JSON line it prints, or
    ``{"method", "error"}`` with the last line of its stderr."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", method_id, *flags]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO,
                          env=dict(os.environ, TOKENIZERS_PARALLELISM="false"))
    if proc.returncode != 0:
        return {"method": method_id, "error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_child(method_id: str, args, device: str, precision: str) -> dict:
    flags = ["--steps", str(args.steps), "--device", device, "--precision", precision]
    if args.threads:
        flags += ["--threads", str(args.threads)]
    if args.profile:
        flags += ["--profile", args.profile]
    if args.compare_precision and method_id != "plain":
        flags += ["--dev-pairs", str(args.dev_pairs)]
    return child_json(method_id, flags)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--methods", default=DEFAULT_METHODS)
    ap.add_argument("--steps", type=int, default=3, help="timed steps per method (after 1 warm-up step)")
    ap.add_argument("--bf16", action="store_true", help="also run the CPU part with bf16 autocast")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--peak-tflops", type=float, default=790.0, help="dense bf16 peak of the GPU (H200: ~790)")
    ap.add_argument("--no-cuda", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--profile", default=None, choices=["quick", "smoke", "paper"],
                    help="method settings from this profile's method lines (default: each Params' defaults)")
    ap.add_argument("--compare-precision", action="store_true",
                    help="CPU fp32 vs bf16 autocast per method: steps/s and STS-B dev after --steps, same seed")
    ap.add_argument("--dev-pairs", type=int, default=0, help="--compare-precision: STS-B dev pairs (0: all)")
    ap.add_argument("--compare-attention", action="store_true",
                    help="CPU: per method the training step before issue 15 (SDPA attention, multi-tensor AdamW) "
                         "beside the current one (eager attention, fused AdamW), interleaved step by step")
    ap.add_argument("--compare-dropout", action="store_true",
                    help="CPU: per method the training step with PyTorch's dropout kernel beside sentlab's fast one "
                         "(train.dropout_kernel), interleaved step by step")
    ap.add_argument("--compare-heap", action="store_true",
                    help="CPU: per method, processes with glibc's malloc beside ones retaining freed memory "
                         "(runtime.heap), alternating, --repeats each")
    ap.add_argument("--repeats", type=int, default=2, help="--compare-heap: processes per configuration and method")
    ap.add_argument("--compare-values", default=None, metavar="KEY=V1,V2",
                    help="CPU: per method, processes with the method param KEY at each value, alternating, --repeats "
                         "each, on the pipeline's corpus (e.g. decoder_impl=torch,bart --methods paser)")
    ap.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="--compare-values: a method param held at VALUE in every run (repeatable)")
    ap.add_argument("--heap", default="system", choices=["system", "retain"],
                    help="--compare-values: runtime.heap of every run (--compare-heap compares the two)")
    ap.add_argument("--dropout-configs", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--real-corpus", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child-interleaved", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--device", default="cpu", help=argparse.SUPPRESS)
    ap.add_argument("--precision", default="fp32", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.dev_pairs_given = "--dev-pairs" in sys.argv
    if args.child_interleaved:
        print(json.dumps(interleaved_child(args.child_interleaved, args.steps,
                                           DROPOUT_CONFIGS if args.dropout_configs else ATTENTION_CONFIGS)))
        return 0
    if args.child and args.real_corpus:
        from sentlab.train.run import parse_overrides  # the train stage's own --set KEY=VALUE (YAML values)

        print(json.dumps(real_corpus_child(args.child, args.steps, args.heap, parse_overrides(args.set or []))))
        return 0
    if args.child:
        print(json.dumps(child(args.child, args.steps, args.device, args.precision, args.threads,
                               args.dev_pairs if args.dev_pairs_given else None, args.profile)))
        return 0
    if args.compare_heap:
        return compare_heap(args)
    if args.compare_values:
        return compare_values(args)
    if args.compare_precision:
        return compare_precision(args)
    if args.compare_attention:
        return compare_attention(args)
    if args.compare_dropout:
        return compare_attention(args, DROPOUT_CONFIGS)

    import torch

    runs = [("cpu", "fp32")] + ([("cpu", "bf16")] if args.bf16 else [])
    if torch.cuda.is_available() and not args.no_cuda:
        runs.append(("cuda", "bf16"))
    results = []
    print(f"CPU: {os.cpu_count()} logical cores (load average {os.getloadavg()[0]:.1f}; "
          "a shared machine inflates times)")
    for device, precision in runs:
        plain = run_child("plain", args, device, precision)
        rows = [plain] + [run_child(m, args, device, precision) for m in args.methods.split(",")]
        print(f"\n== {device} {precision}: batch 64, max length 32, {args.steps} timed steps, "
              f"backbone {plain.get('backbone', '?')}")
        hdr = f"{'method':<18}{'sent/s':>9}{'s/step':>9}{'vs plain':>10}{'peak RSS MB':>13}"
        if device == "cuda":
            hdr += f"{'tokens/s':>11}{'% peak':>8}{'CUDA MB':>10}"
        print(hdr)
        for r in rows:
            if "error" in r:
                print(f"{r['method']:<18} error: {r['error']}")
                continue
            ratio = r["sentences_per_s"] / plain["sentences_per_s"] if "sentences_per_s" in plain else float("nan")
            line = (f"{r['method']:<18}{r['sentences_per_s']:>9.1f}{r['s_per_step']:>9.3f}{ratio:>10.2f}"
                    f"{r['peak_rss_mb']:>13.0f}")
            if device == "cuda":
                r["share_of_peak"] = r["model_flops_per_s"] / (args.peak_tflops * 1e12)
                line += f"{r['tokens_per_s']:>11.0f}{100 * r['share_of_peak']:>8.1f}{r['peak_cuda_mb']:>10.0f}"
            print(line)
            r["vs_plain"] = ratio
        results += rows
    return write_json(args, results)


def real_corpus_child(method_id: str, steps: int, heap: str, sets: dict | None = None) -> dict:
    """s/step of ``method_id`` through :func:`sentlab.train.run.train_method` (the train stage's own setup:
    quick params, its corpus and annotations under ``data/``, bf16 autocast where native) with ``runtime.heap``
    set to ``heap`` and the method params ``sets`` over params.yaml's; no dev evaluation, no tracking, outputs in
    a scratch folder."""
    import resource

    from sentlab.config import load_params
    from sentlab.train.run import train_method

    times: list[float] = []
    params = load_params(REPO / "params.yaml")
    params = params.model_copy(update={"train": params.train.model_copy(update={"heap": heap})})
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "data").symlink_to(REPO / "data")
        train_method(params, method_id, overrides={**(sets or {}), "max_steps": steps + 2, "eval_every": 10_000},
                     root=root,
                     dev_eval=lambda e: {"stsb_dev": 0.0}, tracking=False, progress=False,
                     callbacks=[lambda step, record: times.append(time.perf_counter())])
    return {"method": method_id, "heap": heap, "set": sets or {},
            "s_per_step": (times[-1] - times[1]) / (len(times) - 2),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def needs_corpus(flag: str) -> bool:
    """False (with the message) when the pipeline's corpus and annotations, which ``flag`` trains on, are missing."""
    if (REPO / "data" / "corpus").is_dir():
        return True
    print(f"benchmarks/train_speed.py {flag} trains on the pipeline's corpus and annotations: run `dvc repro "
          "annotate` first (data/corpus, data/annotations missing).", file=sys.stderr)
    return False


def alternating(method_id: str, configs: dict[str, list[str]], args) -> dict[str, list[dict]] | str:
    """``--repeats`` real-corpus child processes per configuration (label -> extra flags), the configurations in
    turn (A, B, A, B …) so that machine drift hits each alike: label -> the children's rows, or the first error."""
    got: dict[str, list[dict]] = {label: [] for label in configs}
    for _ in range(args.repeats):
        for label, flags in configs.items():
            row = child_json(method_id, ["--real-corpus", "--steps", str(args.steps), *flags])
            if "error" in row:
                return f"{label}: {row['error']}"
            got[label].append(row)
    return got


def compare_heap(args) -> int:
    """glibc's malloc vs retained freed memory (runtime.heap), process by process, alternating."""
    import statistics

    if not needs_corpus("--compare-heap"):
        return 2
    print(f"CPU: {os.cpu_count()} logical cores (load average {os.getloadavg()[0]:.1f}); {args.steps} timed steps "
          f"per process, {args.repeats} processes per configuration, alternating; quick params (batch 64)")
    print(f"{'method':<14}{'system s/step':>15}{'retain s/step':>15}{'speed-up':>10}{'RSS MB system':>15}"
          f"{'retain':>8}")
    rows = []
    for m in args.methods.split(","):
        got = alternating(m, {heap: ["--heap", heap] for heap in ("system", "retain")}, args)
        if isinstance(got, str):
            print(f"{m:<14}  error: {got}")
            continue
        med = {h: statistics.median(r["s_per_step"] for r in got[h]) for h in got}
        rss = {h: max(r["peak_rss_mb"] for r in got[h]) for h in got}
        print(f"{m:<14}{med['system']:>15.3f}{med['retain']:>15.3f}{med['system'] / med['retain']:>10.2f}"
              f"{rss['system']:>15.0f}{rss['retain']:>8.0f}")
        rows.append({"method": m, "median_s_per_step": med, "peak_rss_mb": rss, "runs": got})
    return write_json(args, rows)


def write_json(args, rows: list) -> int:
    """``rows`` to ``--json`` when given; the exit code."""
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


def compare_values(args) -> int:
    """One method param at two or more values (``--compare-values KEY=V1,V2``), process by process, alternating
    V1, V2, V1, V2 … (``--repeats`` each), on the pipeline's corpus as the train stage reads it: the median s/step
    of each value and its ratio to the first."""
    import statistics

    if not needs_corpus("--compare-values"):
        return 2
    key, _, values = args.compare_values.partition("=")
    values = values.split(",")
    if not key or len(values) < 2:
        raise SystemExit("benchmarks/train_speed.py: --compare-values takes KEY=V1,V2[,...] (two values at least), "
                         f"got {args.compare_values!r}")
    held = [flag for pair in args.set or [] for flag in ("--set", pair)]  # parsed in the child, as the train stage
    print(f"CPU: {os.cpu_count()} logical cores (load average {os.getloadavg()[0]:.1f}); {args.steps} timed steps "
          f"per process, {args.repeats} processes per value, alternating; params.yaml's method line"
          + (f" with {' '.join(args.set)}" if args.set else ""))
    print(f"{'method':<14}{key + '=':>22}{'s/step (median)':>17}{'runs':>22}{'vs first':>10}{'peak RSS MB':>13}")
    rows = []
    for m in args.methods.split(","):
        got = alternating(m, {v: ["--heap", args.heap, *held, "--set", f"{key}={v}"] for v in values}, args)
        if isinstance(got, str):
            print(f"{m:<14}  error: {got}")
            return 1
        med = {v: statistics.median(r["s_per_step"] for r in got[v]) for v in values}
        for v in values:
            runs = " ".join(f"{r['s_per_step']:.2f}" for r in got[v])
            print(f"{m:<14}{v:>22}{med[v]:>17.3f}{runs:>22}{med[v] / med[values[0]]:>10.2f}"
                  f"{max(r['peak_rss_mb'] for r in got[v]):>13.0f}")
        rows.append({"method": m, "key": key, "median_s_per_step": med, "runs": got})
    return write_json(args, rows)


def compare_precision(args) -> int:
    """fp32 vs bf16 autocast training on the CPU, side by side, with each model's STS-B dev."""
    rows = []
    print(f"CPU: {os.cpu_count()} logical cores (load average {os.getloadavg()[0]:.1f}; a shared machine inflates "
          f"times); {args.steps} timed steps, batch 64, max length 32, seed 0; STS-B dev in fp32 "
          f"({args.dev_pairs or 'all'} pairs)")
    print(f"{'method':<14}{'precision':>10}{'steps/s':>9}{'s/step':>9}{'speed-up':>10}{'STS-B dev':>11}{'Δ dev':>8}"
          f"{'peak RSS MB':>13}")
    for m in args.methods.split(","):
        pair = {p: run_child(m, args, "cpu", p) for p in ("fp32", "bf16")}
        for p, r in pair.items():
            if "error" in r:
                print(f"{m:<14}{p:>10}  error: {r['error']}")
                continue
            base = pair["fp32"]
            speed = base["s_per_step"] / r["s_per_step"] if "s_per_step" in base else float("nan")
            ddev = r["stsb_dev"] - base["stsb_dev"] if "stsb_dev" in base else float("nan")
            print(f"{m:<14}{p:>10}{1 / r['s_per_step']:>9.3f}{r['s_per_step']:>9.2f}{speed:>10.2f}"
                  f"{r['stsb_dev']:>11.2f}{ddev:>8.2f}{r['peak_rss_mb']:>13.0f}")
            rows.append(r)
    return write_json(args, rows)


# (attention, AdamW, dropout kernel): --compare-attention times the first three, --compare-dropout the last two
ATTENTION_CONFIGS = (("sdpa", "foreach", "torch"), ("eager", "foreach", "torch"), ("eager", "fused", "torch"))
DROPOUT_CONFIGS = (("eager", "fused", "torch"), ("eager", "fused", "fast"))


def interleaved_child(method_id: str, steps: int, configs=ATTENTION_CONFIGS) -> dict:
    """One process, one model: each step's batch is trained once per configuration of ``configs``
    (attention kernel switched in place, each AdamW kind its own state, the dropout kernel of
    :mod:`sentlab.train.dropout`) in turn, so machine drift hits every configuration alike. The median step time
    per configuration, and the median time of the optimiser step alone per AdamW kind."""
    import statistics

    import numpy as np
    import torch

    from sentlab.config import TrainParams, load_params
    from sentlab.methods import get_method
    from sentlab.train.data import load_corpus
    from sentlab.train.dropout import dropout_kernel
    from sentlab.train.loop import cpu_has_native_bf16
    from sentlab.train.run import method_params

    torch.manual_seed(0)
    model, tok, backbone = build_backbone("cpu")
    precision = "bf16" if cpu_has_native_bf16() else "fp32"
    cls = get_method(method_id)
    mparams = method_params(load_params(REPO / "params.yaml", profile="quick"), method_id)  # its quick-profile block
    method = cls(model, tok, mparams.resolved(TrainParams(batch_size=64, max_length=32, precision=precision)), seed=0)
    method.train()
    corpus_name = method.corpus_name()
    if method.corpus_columns:  # the phrase / frame annotations a dvc repro wrote (PaSeR's decoder needs phrases)
        ann = REPO / "data" / "annotations" / corpus_name
        if not ann.is_dir():
            raise SystemExit(f"{method_id} needs {ann} (its {', '.join(method.corpus_columns)} annotations): run "
                             f"`dvc repro annotate` first")
        corpus = load_corpus(REPO / "data" / "corpus" / f"{corpus_name}.parquet", method.corpus_columns, ann)
    else:
        from sentlab.train.data import Corpus

        texts = corpus_sentences(64 * (steps + 1))
        corpus = Corpus(ids=np.arange(len(texts)), texts=texts)
    optimizers = {opt: method.configure_optimizers(fused=opt == "fused") for opt in ("foreach", "fused")}
    times: dict = {c: [] for c in configs}
    opt_times: dict = {o: [] for o in dict.fromkeys(c[1] for c in configs)}
    params = [p for p in method.parameters() if p.requires_grad]
    for step in range(steps + 1):  # step 0 warms every configuration up, untimed
        for attention, opt, kernel in configs:
            for module in method.modules():  # the backbone and any copy of it (MoCo's key encoder)
                if hasattr(module, "set_attn_implementation") and hasattr(module, "config"):
                    module.set_attn_implementation(attention)
            batch = method.prepare(corpus.batch(list(range(step * 64, (step + 1) * 64))))
            t0 = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"), dropout_kernel(kernel):
                out = method(batch)
            out["loss"].backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            t_opt = time.perf_counter()
            optimizers[opt].step()
            t_opt = time.perf_counter() - t_opt
            optimizers[opt].zero_grad(set_to_none=True)
            method.after_optimizer_step()  # MoCo's momentum update, the queue (as the loop does)
            if step:
                times[(attention, opt, kernel)].append(time.perf_counter() - t0)
                opt_times[opt].append(t_opt)
    return {"method": method_id, "backbone": backbone, "precision": precision, "steps": steps,
            "median_s_per_step": {"+".join(c): statistics.median(v) for c, v in times.items()},
            "median_adamw_ms": {o: 1000 * statistics.median(v) for o, v in opt_times.items()}}


def compare_attention(args, configs=ATTENTION_CONFIGS) -> int:
    """The CPU training step before and after issue 15's levers, interleaved in one process per method: SDPA
    attention with multi-tensor AdamW (before), eager attention, eager attention with fused AdamW; with
    ``configs=DROPOUT_CONFIGS`` (``--compare-dropout``) PyTorch's dropout kernel beside the fast one."""
    rows = []
    print(f"CPU: {os.cpu_count()} logical cores (load average {os.getloadavg()[0]:.1f}); {args.steps} timed steps "
          f"per configuration, interleaved step by step; batch 64, max length 32, seed 0, bf16 autocast where "
          f"the CPU has native bf16")
    print(f"{'method':<14}" + "".join(f"{'+'.join(c):>22}" for c in configs) + f"{'speed-up':>10}"
          + f"{'AdamW foreach':>15}{'fused':>8}")
    for m in args.methods.split(","):
        cmd = [sys.executable, __file__, "--child-interleaved", m, "--steps", str(args.steps)]
        if configs is DROPOUT_CONFIGS:
            cmd.append("--dropout-configs")
        proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, TOKENIZERS_PARALLELISM="false"))
        if proc.returncode != 0:
            print(f"{m:<14}  error: {(proc.stderr.strip().splitlines() or ['failed'])[-1]}")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        t = r["median_s_per_step"]
        before, now = t["+".join(configs[0])], t["+".join(configs[-1])]
        adam = r["median_adamw_ms"]
        print(f"{m:<14}" + "".join(f"{t['+'.join(c)]:>21.3f}s" for c in configs) + f"{before / now:>10.2f}"
              + f"{adam.get('foreach', float('nan')):>13.0f}ms{adam['fused']:>6.0f}ms")
        rows.append(r)
    return write_json(args, rows)


if __name__ == "__main__":
    sys.exit(main())
