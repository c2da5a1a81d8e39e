"""A cheaper dropout mask for CPU training (``train.dropout_kernel``).

PyTorch's CPU dropout draws one 32-bit Mersenne-Twister number per element, serially on one core,
then builds the mask: at the quick profile's sizes (MiniLM-L6, 2 × 64 sentences of ≤ 32 tokens)
the 19 dropouts of a forward pass (embeddings; per layer the attention probabilities, the attention
output and the feed-forward output) take about a sixth of a SimCSE step on two cores.

:func:`fast_dropout` keeps PyTorch's inverted dropout — each element zeroed with probability ``p``,
the kept ones scaled by ``1/(1-p)``, the mask a constant for autograd — and draws the mask from
three 16-bit lanes of each 64-bit number of the same seeded generator (``Tensor.random_`` on int64
gives 63 random bits; the low 48 are used): an element is dropped when its lane is below
``round(p·2^16)``, so with probability ``round(p·65536)/65536`` (p = 0.1: 0.1000061, within 8e-6 of
any p). Same distribution, fewer random numbers; not the same random stream, so a run differs from
a ``torch``-kernel run of the same seed by seed noise, not systematically.

:func:`dropout_kernel` swaps it in for ``torch.nn.functional.dropout`` — which ``nn.Dropout`` and
the Hugging Face eager attention both call — around the training forward pass only (the training
loop is single-threaded Python; the original is restored on exit). It applies to CPU tensors;
anything else (CUDA, whose dropout is a fused kernel already; ``p`` of 0 or 1; integer tensors)
goes to PyTorch's function unchanged.

Example::

    with dropout_kernel("fast"):
        loss = method(batch)["loss"]
    loss.backward()
"""

from __future__ import annotations

import contextlib
import sys
from typing import Iterator

import torch

KERNELS = ("auto", "torch", "fast")
_LANES = slice(0, 3) if sys.byteorder == "little" else slice(1, 4)  # the low 48 bits of each int64


def keep_mask(shape: torch.Size, p: float, device: torch.device,
              generator: torch.Generator | None = None) -> torch.Tensor:
    """Boolean mask of ``shape``, each element False (dropped) with probability ``round(p·65536)/65536``."""
    n = 1
    for s in shape:
        n *= int(s)
    k = -(-n // 3)
    bits = torch.empty(k, dtype=torch.int64, device=device).random_(generator=generator)
    lanes = bits.view(torch.int16).view(k, 4)[:, _LANES].reshape(-1)[:n]
    return lanes.view(shape) >= (round(p * 65536) - 32768)  # int16 lanes are uniform on [-32768, 32767]


def fast_dropout(x: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> torch.Tensor:
    """``torch.nn.functional.dropout`` with the mask of :func:`keep_mask` (CPU floating tensors)."""
    if not training or p == 0.0:
        return x
    scale = torch.tensor(1.0 / (1.0 - p), dtype=x.dtype)
    mask = keep_mask(x.shape, p, x.device).to(x.dtype).mul_(scale)
    return x.mul_(mask) if inplace else x * mask


def resolve_kernel(setting: str, device: torch.device, compile: str = "off") -> str:
    """``train.dropout_kernel``: ``auto`` = ``fast`` on CPU in an eager step, ``torch`` elsewhere and in a compiled
    step (``train.compile``, :mod:`sentlab.train.compiled`); an explicit value is kept."""
    if setting == "auto":
        return "fast" if device.type == "cpu" and compile == "off" else "torch"
    return setting


@contextlib.contextmanager
def dropout_kernel(kernel: str) -> Iterator[None]:
    """``torch.nn.functional.dropout`` is :func:`fast_dropout` for CPU floating tensors inside the block when
    ``kernel`` is ``fast`` (``torch``: nothing changes)."""
    if kernel != "fast":
        yield
        return
    F = torch.nn.functional
    original = F.dropout

    def dropout(input, p=0.5, training=True, inplace=False):
        if (training and 0.0 < p < 1.0 and input.device.type == "cpu" and input.is_floating_point()
                and not torch.jit.is_scripting()):
            return fast_dropout(input, p, training, inplace)
        return original(input, p, training, inplace)

    F.dropout = dropout
    try:
        yield
    finally:
        F.dropout = original
