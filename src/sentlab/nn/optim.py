"""Adam with decoupled weight decay and no bias correction: the optimisers behind BERT-era released code.

``torch.optim.AdamW`` always divides the moments by (1 − βᵗ); two optimisers that released code ran did not:

* transformers' old ``AdamW(correct_bias=False)`` (removed from transformers 4.x; ConSERT's ``main.py`` passes
  ``{'eps': 1e-6, 'correct_bias': False}`` to sentence-transformers' ``fit``). Per step t, for a parameter p
  with gradient g::

      m ← β₁ m + (1 − β₁) g
      v ← β₂ v + (1 − β₂) g²
      p ← p − lr · m / (√v + ε)
      p ← p − lr · wd · p          (the decay after the Adam step: ``decay: after``)

* BERT's TensorFlow ``AdamWeightDecayOptimizer`` (BERT-flow's flow fit): the same moments, and
  ``p ← p − lr · (m / (√v + ε) + wd · p)`` with p the value before the step (``decay: before``).

With ``correct_bias=True`` the step is lr · m̂ / (√v̂ + ε) with m̂ = m / (1 − β₁ᵗ), v̂ = v / (1 − β₂ᵗ) (Adam's
bias correction written as transformers did: the step size lr · √(1 − β₂ᵗ) / (1 − β₁ᵗ) and ε added to √v).
Without correction the first steps are small (m starts at zero: the first step is lr · 0.1 · g / (0.0316 |g| + ε)
≈ 3.16 · lr · sign(g)), which is what the authors' numbers were trained with.
"""

from __future__ import annotations

import math
from typing import Iterable, Literal

import torch


class AdamWLegacy(torch.optim.Optimizer):
    """Adam with decoupled weight decay, bias correction optional (off by default), the decay applied ``after``
    the Adam step (transformers' old AdamW) or ``before`` it (BERT's AdamWeightDecayOptimizer); see the module
    docstring for the update rule."""

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-6, weight_decay: float = 0.0, correct_bias: bool = False,
                 decay: Literal["after", "before"] = "after"):
        if lr < 0 or eps < 0 or weight_decay < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"AdamWLegacy: lr {lr}, betas {betas}, eps {eps}, weight_decay {weight_decay}: "
                             f"lr, eps, weight_decay must be ≥ 0 and each beta in [0, 1)")
        if decay not in ("after", "before"):
            raise ValueError(f"AdamWLegacy: decay {decay!r}; allowed: after, before")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      correct_bias=correct_bias, decay=decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, wd = group["lr"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("AdamWLegacy does not support sparse gradients")
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                t = float(state["step"])
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(beta1).add_(p.grad, alpha=1.0 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1.0 - beta2)
                step_size = lr
                if group["correct_bias"]:
                    step_size = lr * math.sqrt(1.0 - beta2 ** t) / (1.0 - beta1 ** t)
                if wd and group["decay"] == "before":
                    p.mul_(1.0 - lr * wd)   # p − lr·wd·p with p before the step: the same as TF BERT's update
                p.addcdiv_(m, v.sqrt().add_(group["eps"]), value=-step_size)
                if wd and group["decay"] == "after":
                    p.add_(p, alpha=-lr * wd)
        return loss
