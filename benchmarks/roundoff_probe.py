"""Where does round-off grow in a quick training? (issue #69 §2: prompt_l2p's spread across CPUs and precisions)

Two fp32 trainings of one method from the same weights, seed and batches that differ only in round-off: PyTorch's
intra-op threads, 2 (the quick profile's ``train.num_threads``) against 1, so the matrix products and reductions
split their sums differently — the size of difference another CPU's kernels make. Step by step (sentlab's real
training loop, the quick profile's method params, batch 64, max length 32, lr 3e-5) it prints the relative distance
of the trainable weights ``||θ_2 − θ_1|| / ||θ_2||``, the loss difference and, for the mask methods (L2P-CSR), the
share of the binary masks ``[p ≥ φ]`` that differ after the ascent (a mask entry near φ flips with the last bit of p:
a discontinuity). Before training, for the template methods, it measures the template denoising on one batch in
eval mode: the relative round-off of the [MASK] vector h, of the empty template's vector b, and of ``h − b``
(cancellation: h and b nearly equal makes their difference carry the round-off of both, relative to a small vector).

    python benchmarks/roundoff_probe.py --methods simcse,l2p,prompt_l2p --steps 6
    python benchmarks/roundoff_probe.py --against gemm32 --threads 1 --steps 10 --methods simcse,prompt_l2p \
        --variant 'prompt_l2p:{"learn": false}' --variant 'prompt_l2p:{"denoise": false}'

``--against gemm32``: the second training is bf16 autocast with its products summed by the fp32 kernels
(benchmarks/precision_isa.py's gemm32 cells: another CPU's bf16), the first fp32, both on ``--threads``: how far
bf16's round-off carries a method's weights, step by step. ``--variant METHOD:JSON`` adds a method with some of its
Params changed (an ablation: which part of a method amplifies).

The relative distances are what to compare across methods: a method whose distance grows by orders of magnitude in
a step has a step that amplifies round-off; one that stays near 1e-7 does not.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

import train_speed  # noqa: E402

from sentlab.assets.resolve import load_model  # noqa: E402
from sentlab.config import TrainParams  # noqa: E402
from sentlab.nn.encoder import pool  # noqa: E402
from sentlab.methods import get_method  # noqa: E402
from sentlab.methods.base import Batch  # noqa: E402
from sentlab.train.data import Corpus  # noqa: E402
from sentlab.train.loop import resolve_attention, train_loop  # noqa: E402

MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def build(method_id: str, steps: int, overrides: dict | None = None):
    torch.manual_seed(0)
    model, tok = load_model(MODEL)
    model.set_attn_implementation(resolve_attention("auto", torch.device("cpu")))
    cfg = TrainParams(batch_size=64, max_length=32, lr=3e-5, eval_every=10_000, max_steps=steps, precision="fp32",
                      device="cpu")
    cls = get_method(method_id)
    params = cls.Params(**{**train_speed.profile_block(method_id, "quick"), **(overrides or {})})
    return cls(model, tok, params.resolved(cfg), seed=0), cfg


def binary_masks(method) -> torch.Tensor | None:
    state = getattr(method, "last_perturbation", None)
    if state is None or not hasattr(state, "p_tok"):
        return None
    phi = method.params.phi
    parts = [(t >= phi).flatten() for t in (state.p_tok, state.p_fea) if t is not None]
    return torch.cat(parts) if parts else None


def trajectory(method_id: str, steps: int, threads: int, texts: list[str], overrides: dict | None = None,
               gemm32: bool = False, precision: str | None = None) -> list[dict]:
    """One training on ``threads`` intra-op threads: per step the weights (flattened), loss and binary masks.
    ``gemm32``: in bf16 autocast with the products summed by the fp32 kernels (precision_isa.bf16_gemms_in_fp32);
    ``precision``: ``train.precision`` (default fp32, bf16 with ``gemm32``)."""
    import contextlib

    import precision_isa

    torch.set_num_threads(threads)
    method, cfg = build(method_id, steps, overrides)
    cfg = cfg.model_copy(update={"precision": precision or ("bf16" if gemm32 else "fp32")})
    out: list[dict] = []

    def tick(step, record):
        w = torch.cat([p.detach().flatten() for p in method.trainable_parameters()]).clone()
        out.append({"step": step, "w": w, "loss": float(record.get("loss", float("nan"))),
                    "masks": binary_masks(method)})

    corpus = Corpus(ids=np.arange(len(texts)), texts=texts)
    mode = precision_isa.bf16_gemms_in_fp32() if gemm32 else contextlib.nullcontext()
    with tempfile.TemporaryDirectory() as tmp, mode:
        train_loop(method, corpus, cfg, seed=0, dev_eval=lambda e: {"stsb_dev": 0.0}, ckpt_dir=Path(tmp),
                   callbacks=[tick], progress=False)
    return out


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def denoising(method_id: str, texts: list[str]) -> None:
    """The template denoising's round-off on one batch (eval mode, so no dropout): threads 2 against 1."""
    method, _ = build(method_id, 1)
    if getattr(method, "templates", None) is None or not getattr(method.params, "denoise", False):
        return
    method.eval()
    views = method.prepare(Batch(texts[:64], draw=0, seed=0)).features["views"]
    got = {}
    for threads in (2, 1):
        torch.set_num_threads(threads)
        with torch.no_grad(), method.unperturbed():
            out = method.encoder(**method.encoder_inputs(views), return_dict=True)
            h = pool(out, views["attention_mask"], "mask", views["input_ids"], method.tokenizer.mask_token_id)
            b = method.template_bias(views)
        got[threads] = (h, b, h - b)
    h2, b2, d2 = got[2]
    h1, b1, d1 = got[1]
    print(f"{method_id}: template denoising, one batch, eval mode: ||h - b|| / ||h|| = "
          f"{float(d2.norm() / h2.norm()):.3f}; "
          f"round-off (2 vs 1 threads) of h {rel(h1, h2):.2e}, of b {rel(b1, b2):.2e}, of h - b {rel(d1, d2):.2e} "
          f"({rel(d1, d2) / max(rel(h1, h2), 1e-30):.1f}x that of h)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="simcse,l2p,prompt_l2p")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--against", choices=["threads", "gemm32"], default="threads",
                    help="threads: fp32 on 2 against 1 threads; gemm32: fp32 against bf16 (products in fp32 kernels)")
    ap.add_argument("--threads", type=int, default=2, help="--against gemm32: the threads of both trainings")
    ap.add_argument("--variant", action="append", default=[], metavar="METHOD:JSON",
                    help='a method with Params changed, e.g. prompt_l2p:{"learn": false} (repeatable)')
    args = ap.parse_args()
    texts = train_speed.corpus_sentences(64 * args.steps)
    runs = [(m, {}) for m in args.methods.split(",") if m]
    for v in args.variant:
        m, _, js = v.partition(":")
        runs.append((m, json.loads(js or "{}")))
    for method_id, over in runs:
        label = method_id + (json.dumps(over) if over else "")
        if args.against == "threads":
            denoising(method_id, texts)
            a = trajectory(method_id, args.steps, 2, texts, over)
            b = trajectory(method_id, args.steps, 1, texts, over)
        else:
            a = trajectory(method_id, args.steps, args.threads, texts, over)
            b = trajectory(method_id, args.steps, args.threads, texts, over, gemm32=True)
        for ra, rb in zip(a, b):
            line = (f"{label} step {ra['step']:3d}: ||Δθ||/||θ|| {rel(rb['w'], ra['w']):.2e}  loss "
                    f"{ra['loss']:.6f} vs {rb['loss']:.6f}")
            if ra["masks"] is not None and rb["masks"] is not None and ra["masks"].shape == rb["masks"].shape:
                line += f"  masks differing {float((ra['masks'] != rb['masks']).float().mean()):.2e}"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
