"""A compiled training step and fixed-shape batches (``train.compile``, ``train.pad_buckets``; issue #58).

``train.compile``: ``off`` (default) runs the method's forward eagerly, as always. ``default`` runs it through
``torch.compile`` (TorchInductor: fused kernels, on CPU through a C++ compiler); ``reduce-overhead`` adds CUDA
graphs on a GPU (one launch per graph instead of one per kernel: the step is launch-bound at the paper's batch 64 /
length 32). The forward and the loss are compiled together (the method's ``forward``: encoder, heads, loss); AOT
autograd compiles the backward with them. The optimiser, clipping and the schedule stay eager (AdamW is one fused
kernel already).

What it computes: the same maths; round-off differs (fused kernels sum in another order), and Inductor draws
dropout masks from its own random stream (a different draw of the same distribution, as ``train.dropout_kernel``),
so a compiled run's numbers differ from an eager run's by seed noise, not systematically — hence a ``train`` key
that the training stages declare, not a ``runtime`` one. ``tests/test_compiled_step.py`` checks compiled against
eager losses and gradients with dropout off. Under compilation ``train.dropout_kernel: auto`` is PyTorch's kernel
(sentlab's CPU mask is an eager-mode saving; Inductor generates its own); ``fast`` is refused.

``train.pad_buckets``: every tokenised batch of :meth:`~sentlab.methods.base.Method.encode_text` is padded to the
smallest listed length that holds its longest sentence (to ``max_length`` when none does), so a compiled step sees
a few shapes instead of one per batch length (each new shape is a recompilation, each a CUDA graph of its own).
Padded positions are masked out of attention and pooling, so with dropout off the loss equals the dynamically
padded batch's within float round-off (the test); with dropout on the masks are drawn over a larger tensor, so
which random numbers land on which token changes: again seed noise. Only methods whose loss provably ignores
padding accept it (:func:`supports_pad_buckets`): where padding enters a loss — DiffCSE's replaced-token loss
averaged over the padded grid, masked-language-model heads, PaSeR's decoder over its token positions — a longer
grid would change the numbers, and the run stops naming the key instead.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

import torch

from ..errors import SentlabError

MODES = ("off", "default", "reduce-overhead")


def supports_pad_buckets(method) -> bool:
    """Whether ``method``'s class itself (not a base class: a subclass that adds a loss over tokens must state it
    again) sets ``pad_buckets_ok``: its loss reads token states only through the attention mask and [CLS]."""
    return bool(type(method).__dict__.get("pad_buckets_ok", False))


def check_step_options(method, train_cfg) -> None:
    """Refuse, before anything runs, a ``train.pad_buckets`` the method cannot take, a bucket over the method's
    max length, and ``train.compile`` with ``train.dropout_kernel: fast``; then set the method's buckets."""
    buckets = tuple(train_cfg.pad_buckets or ())
    mode = getattr(train_cfg, "compile", "off")
    if mode != "off" and train_cfg.dropout_kernel == "fast":
        raise SentlabError(
            f"params.yaml train.compile is {mode!r} with train.dropout_kernel: fast. sentlab's CPU dropout mask is an "
            f"eager-mode saving that a compiled step cannot keep (Inductor draws its own masks); set "
            f"train.dropout_kernel: auto (or torch), or train.compile: off.")
    if buckets and not supports_pad_buckets(method):
        raise SentlabError(
            f"params.yaml train.pad_buckets {list(buckets)} cannot be used with method `{method.id}`: padding a batch "
            f"to a fixed length changes this method's numbers, because padded positions enter its loss (a loss "
            f"averaged over the token grid, a masked-language-model or decoder head over token positions), or its "
            f"loss has not been checked against dynamic padding (tests/test_compiled_step.py). Set "
            f"train.pad_buckets: [] (dynamic padding) for this method's run.")
    max_length = getattr(method.params, "max_length", None) or train_cfg.max_length
    over = [b for b in buckets if b > max_length]
    if over:
        raise SentlabError(
            f"params.yaml train.pad_buckets {list(buckets)} has length(s) {over} above method `{method.id}`'s "
            f"max length {max_length}: no batch is longer than that (it is the last bucket already); remove them.")
    method.pad_buckets = buckets


def step_forward(model, mode: str, device: torch.device) -> Callable[[Any], dict]:
    """The callable the loop runs a micro-batch through: ``model`` itself (``off``), or ``torch.compile(model)``.
    Under CUDA graphs (``reduce-overhead`` on a GPU) each call starts a new graph step and the logged parts are
    copied out (the next replay overwrites a graph's outputs; the loop reads them at the next evaluation)."""
    if mode not in MODES:
        raise SentlabError(f"train.compile {mode!r}; allowed: {', '.join(MODES)}")
    if mode == "off":
        return model
    compiled = torch.compile(model, mode=mode)
    graphs = mode == "reduce-overhead" and device.type == "cuda"

    def forward(batch):
        # the host->device copies before the graph: a CUDA graph with CPU inputs is skipped
        batch = replace(batch, features=on_device(batch.features, device))
        if not graphs:
            return compiled(batch)
        torch.compiler.cudagraph_mark_step_begin()
        out = compiled(batch)
        return {k: v if k == "loss" or not isinstance(v, torch.Tensor) else v.clone() for k, v in out.items()}

    return forward


def on_device(features: dict, device: torch.device) -> dict:
    """``features`` (tensors, dicts of tensors, other values kept) with every tensor on ``device``."""
    def move(v):
        if isinstance(v, torch.Tensor):
            return v.to(device, non_blocking=True)
        return {k: move(x) for k, x in v.items()} if isinstance(v, dict) else v
    return {k: move(v) for k, v in features.items()}
