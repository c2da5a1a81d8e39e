"""Pieces several methods share: the SimCSE MLP head and InfoNCE.

Kept here once so every method's module reads like its algorithm.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class MLPHead(nn.Module):
    """SimCSE's training-time pooler: Linear + tanh over the [CLS] vector (dropped at test)."""

    def __init__(self, hidden: int):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)
        self.activation = nn.Tanh()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.dense(x))


def cosine_logits(q: torch.Tensor, k: torch.Tensor, temperature: float) -> torch.Tensor:
    """``cos(q_i, k_j) / τ`` for every pair: an ``(len(q), len(k))`` matrix."""
    return F.normalize(q.float(), dim=-1) @ F.normalize(k.float(), dim=-1).T / temperature


def info_nce(q: torch.Tensor, k: torch.Tensor, temperature: float, positives: torch.Tensor | None = None) -> torch.Tensor:
    """InfoNCE over cosine/τ: row i of ``q`` against every row of ``k``.

    The positive of query i is key ``positives[i]`` (default: key i, the diagonal);
    every other key is a negative. ``k`` may hold more rows than ``q``
    (queued keys appended after the current batch).
    """
    logits = cosine_logits(q, k, temperature)
    if positives is None:
        positives = torch.arange(q.size(0), device=q.device)
    return F.cross_entropy(logits, positives)
