"""Pieces several methods share: SimCSE's two dropout views, its MLP head and InfoNCE.

Kept here once so every method's module reads like its algorithm.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from typing import Callable

from torch import nn


class MLPHead(nn.Module):
    """SimCSE's training-time pooler: Linear + tanh over the [CLS] vector (dropped at test), initialised as SimCSE's
    released code does: its MLPLayer goes through BERT's ``_init_weights`` (``cl_init`` calls ``init_weights``),
    so the weight is N(0, ``std``) with ``std`` = ``initializer_range`` (0.02 in bert-base and roberta-base) and the
    bias zero, not nn.Linear's Kaiming-uniform default."""

    def __init__(self, hidden: int, std: float = 0.02):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)
        nn.init.normal_(self.dense.weight, mean=0.0, std=std)
        nn.init.zeros_(self.dense.bias)
        self.activation = nn.Tanh()

    @classmethod
    def of(cls, config) -> "MLPHead":
        """The head for an encoder's ``config``: its width, N(0, its ``initializer_range``) as BERT's _init_weights."""
        return cls(config.hidden_size, getattr(config, "initializer_range", 0.02))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.dense(x))


class FrozenSubmodules(nn.Module):
    """Mixin of a method with frozen, pretrained submodules (DiffCSE's generator, RankCSE's teachers), named in
    ``frozen``: they stay out of its checkpoints (reloaded from their own folders, never trained) and come back
    from the live modules on ``load_state_dict`` (a resume). Out of the optimiser: ``requires_grad_(False)``,
    set by the method; train/eval mode: its ``train``."""

    frozen: tuple[str, ...] = ()

    def state_dict(self, *args, **kwargs):
        """Every tensor but the frozen submodules'."""
        sd = super().state_dict(*args, **kwargs)
        prefixes = tuple(kwargs.get("prefix", "") + f"{name}." for name in self.frozen)
        for k in [k for k in sd if k.startswith(prefixes)]:
            del sd[k]
        return sd

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        live = {f"{name}.{k}": v for name in self.frozen for k, v in getattr(self, name).state_dict().items()}
        return super().load_state_dict({**live, **state_dict}, strict=strict, assign=assign)


def full_precision(device: torch.device):
    """A block run in fp32 whatever autocast is around it (similarity logits and loss reductions:
    in bf16 a logit near 1/τ = 20 has a resolution of 0.125)."""
    return torch.autocast(device_type=device.type, enabled=False)


def cosine_logits(q: torch.Tensor, k: torch.Tensor, temperature: float) -> torch.Tensor:
    """``cos(q_i, k_j) / τ`` for every pair: an ``(len(q), len(k))`` fp32 matrix, autocast off."""
    with full_precision(q.device):
        return F.normalize(q.float(), dim=-1) @ F.normalize(k.float(), dim=-1).T / temperature


def info_nce(q: torch.Tensor, k: torch.Tensor, temperature: float,
             positives: torch.Tensor | None = None) -> torch.Tensor:
    """InfoNCE over cosine/τ: row i of ``q`` against every row of ``k`` (logits and loss in fp32).

    The positive of query i is key ``positives[i]`` (default: key i, the diagonal);
    every other key is a negative. ``k`` may hold more rows than ``q``
    (queued keys appended after the current batch).
    """
    logits = cosine_logits(q, k, temperature)
    if positives is None:
        positives = torch.arange(q.size(0), device=q.device)
    with full_precision(q.device):
        return F.cross_entropy(logits, positives)


def in_batch_info_nce(z1: torch.Tensor, z2: torch.Tensor, temperature: float) -> torch.Tensor:
    """SimCSE's loss over the **global** batch: under torchrun both views are gathered from every
    rank (this rank's rows keep their gradient, the others' are constants, as in SimCSE's
    ``cl_forward``), so each sentence has ``train.batch_size - 1`` in-batch negatives whatever the
    number of ranks; row i's positive is row i. In one process it is :func:`info_nce`."""
    from ..runtime.distributed import gather_with_grad

    return info_nce(gather_with_grad(z1), gather_with_grad(z2), temperature)


def nt_xent(z1: torch.Tensor, z2: torch.Tensor, temperature: float) -> torch.Tensor:
    """SimCLR's NT-Xent over cosine/τ, as ConSERT's code computes it (``_contrastive_loss_forward``): row i of
    each view against the other view's N rows (positive: row i) and its own view's other N−1 rows, so 2N−2
    negatives; the two directions' mean cross-entropies **summed** (``loss_a + loss_b``). Logits and loss in
    fp32. Under torchrun both views are gathered as in :func:`in_batch_info_nce`."""
    from ..runtime.distributed import gather_with_grad

    z1, z2 = gather_with_grad(z1), gather_with_grad(z2)
    n = z1.size(0)
    target = torch.arange(n, device=z1.device)
    self_pair = torch.eye(n, device=z1.device, dtype=torch.bool)
    with full_precision(z1.device):
        loss = 0.0
        for a, b in ((z1, z2), (z2, z1)):
            own = cosine_logits(a, a, temperature).masked_fill(self_pair, float("-inf"))
            loss = loss + F.cross_entropy(torch.cat([cosine_logits(a, b, temperature), own], dim=1), target)
        return loss


def doubled(features: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """SimCSE's doubled batch ``[s_1..s_N, s_1..s_N]`` of tokenised inputs (one forward pass, two dropout masks)."""
    return {k: torch.cat([v, v], dim=0) for k, v in features.items()}


def two_views(encode: Callable[[dict], torch.Tensor],
              features: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """SimCSE's two views (Gao et al. 2021, Sec. 3): ``encode`` (token inputs -> one vector per row) run
    once on the :func:`doubled` batch, so the two copies of sentence i differ by their dropout masks;
    returns ``(z1, z2)``, each ``(N, d)``."""
    return paired_views(encode, doubled(features))


def paired_views(encode: Callable[[dict], torch.Tensor],
                 features: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """``encode`` run once on a ``2N``-row batch whose row ``N + i`` is the second view of row ``i`` (the
    :func:`doubled` batch, or sentences followed by their augmented copies); returns ``(z1, z2)``, each ``(N, d)``."""
    z = encode(features)
    n = z.size(0) // 2
    return z[:n], z[n:]


def augmentation_info(augmentation: str, params) -> dict:
    """What a discrete-augmentation method records in its export (sentlab.json): the augmentation, and the
    ``rate``, ``augment_views`` and ``words`` its params have (MoCo's keys, SimCSE's second views)."""
    info = {"augmentation": augmentation}
    for key, name in (("rate", "augmentation_rate"), ("augment_views", "augment_views"),
                      ("words", "augmentation_words")):
        if getattr(params, key, None) is not None:
            info[name] = getattr(params, key)
    return info
