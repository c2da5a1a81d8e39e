"""Gradient reversal layer (Ganin & Lempitsky 2015, "Unsupervised Domain Adaptation by Backpropagation").

The identity in the forward pass; in the backward pass the incoming gradient is
multiplied by ``-λ``. Put it between a feature extractor and an adversary: the
adversary's parameters are trained to *minimise* its loss, while everything
before the layer receives ``-λ ·`` that loss's gradient, i.e. it is trained to
*maximise* it — one optimiser, one backward pass.

Example::

    >>> x = torch.ones(2, requires_grad=True)
    >>> grad_reverse(x, 0.5).sum().backward()
    >>> x.grad
    tensor([-0.5000, -0.5000])
"""

from __future__ import annotations

import torch


class GradReverse(torch.autograd.Function):
    """``y = x``; ``dL/dx = -λ · dL/dy``."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, lambd: float) -> torch.Tensor:
        ctx.lambd = float(lambd)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        return grad_output.neg() * ctx.lambd, None


def grad_reverse(x: torch.Tensor, lambd: float = 1.0) -> torch.Tensor:
    """Apply :class:`GradReverse` with scale ``lambd`` (λ ≥ 0)."""
    return GradReverse.apply(x, lambd)
