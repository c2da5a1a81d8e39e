"""The perturbations of L2P-CSR (docs/methods.md#l2p-csr): weakening masks, FreeLB noise, layer-output hooks.

Small, separately testable pieces of Zhou et al., "Learning to Perturb for
Contrastive Learning of Unsupervised Sentence Representations" (L2P-CSR):

* :func:`threshold` — Eq. 1, ``α = 1 if p ≥ φ else 0``;
* :func:`weakening_mask` — Eq. 2, ``M[i, j] = (α_tok[i] + α_fea[j]) / 2``
  (a weakened token or feature is halved, a weakened token-and-feature zeroed);
* :func:`ascend` — Eqs. 5–6, ``p ← clip[0,1](p + β g / ||g||₂)``;
* :func:`perturbable_modules` / :func:`transform_outputs` — forward hooks
  that rewrite the output of the embedding layer and of the first k
  transformer layers (Eq. 3), removed when the ``with`` block ends;
* :func:`word_embedding_module`, :func:`freelb_init`, :func:`freelb_step` —
  the Table 3 "Emb Noise" variant: FreeLB's additive noise δ on the word
  embeddings (Zhu et al., "FreeLB", ICLR 2020), its init and its ascent step;
* :func:`isolated_rng` — run a forward pass under its own seed without
  advancing the global RNG stream (dropout of the ascent passes).

The two perturbation strategies :class:`~sentlab.methods.l2p.L2PCSR` learns, built from these pieces, are in
:mod:`sentlab.methods._perturb_strategies`.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Optional, Sequence

import torch
from torch import nn

from ..errors import SentlabError


def threshold(p: torch.Tensor, phi: float) -> torch.Tensor:
    """Eq. 1: the binary mask ``α = 1 where p ≥ φ, else 0`` (float, same shape as ``p``)."""
    return (p >= phi).to(p.dtype)


def weakening_mask(alpha_tok: torch.Tensor, alpha_fea: torch.Tensor) -> torch.Tensor:
    """Eq. 2: ``M[n, i, j] = (α_tok[n, i] + α_fea[n, j]) / 2``.

    ``alpha_tok``: ``(N, L)`` (one value per sentence-view row and position);
    ``alpha_fea``: ``(N, D)`` or ``(1, D)`` (broadcast over rows). Returns ``(N, L, D)``.
    With binary α a weakened token (or feature) gives 0.5, both weakened give 0.
    """
    return (alpha_tok.unsqueeze(-1) + alpha_fea.unsqueeze(-2)) / 2


def ascend(p: torch.Tensor, g: torch.Tensor, beta: float, norm: str = "vector",
           zero_grad: str = "keep") -> torch.Tensor:
    """Eqs. 5–6: one normalised gradient-ascent step on the probabilities, clipped to [0, 1].

    ``norm="vector"``: ``g / ||g||₂`` over the last axis (one probability
    vector: the positions of one sentence-view, or the d features), as the
    paper writes it. ``norm="element"``: ``g / |g|`` element by element (= sign
    of g): what the released code effectively does for the token vector, whose
    norm it takes over a size-1 axis.

    A zero gradient (norm 0) cannot be normalised: ``zero_grad="keep"`` leaves
    those entries unchanged (no information, no move); ``"reset"`` sets them to
    1 (never weakened), which is what the released code's NaN → 1 replacement does.
    """
    if norm == "vector":
        n = g.norm(dim=-1, keepdim=True)
    elif norm == "element":
        n = g.abs()
    else:  # pragma: no cover - validated by the params model
        raise ValueError(f"norm must be 'vector' or 'element', got {norm!r}")
    nonzero = n > 0
    step = torch.where(nonzero, g / n.clamp_min(torch.finfo(g.dtype).tiny), torch.zeros_like(g))
    new = (p + beta * step).clamp(0.0, 1.0)
    if zero_grad == "reset":
        new = torch.where(nonzero, new, torch.ones_like(new))
    return new


def perturbable_modules(model: nn.Module, k: int) -> list[nn.Module]:
    """The embedding layer and the first ``k`` transformer layers of a BERT-like model.

    Works for BERT, RoBERTa and MiniLM (``model.embeddings``, ``model.encoder.layer``).
    """
    emb = getattr(model, "embeddings", None)
    layers = getattr(getattr(model, "encoder", None), "layer", None)
    if emb is None or layers is None:
        raise SentlabError(
            f"L2P-CSR needs a BERT-like encoder with `.embeddings` and `.encoder.layer`; got {type(model).__name__}. "
            "Use a BERT/RoBERTa backbone (model.backbone in params.yaml)."
        )
    if k > len(layers):
        raise SentlabError(
            f"methods.l2p.layers = {k} exceeds the encoder's {len(layers)} transformer layers; "
            f"set it to at most {len(layers)} in params.yaml."
        )
    return [emb] + list(layers[:k])


def word_embedding_module(model: nn.Module) -> nn.Module:
    """The word-embedding table of a BERT-like model: FreeLB adds its noise to this output
    (``inputs_embeds``), before the position/type embeddings and the embedding LayerNorm."""
    emb = getattr(getattr(model, "embeddings", None), "word_embeddings", None)
    if emb is None:
        raise SentlabError(
            f"The gradient_noise perturbation needs a BERT-like encoder with `.embeddings.word_embeddings`; got "
            f"{type(model).__name__}. Use a BERT/RoBERTa backbone (model.backbone in params.yaml) "
            f"or perturbation: mask.")
    return emb


def freelb_init(real: torch.Tensor, dim: int, init_mag: float, generator: torch.Generator) -> torch.Tensor:
    """FreeLB's initial noise (L2 variant): ``δ ~ U(-1, 1)`` on the real tokens, times
    ``init_mag / sqrt(L_i · d)`` with ``L_i`` the real length of row i, so
    ``E||δ_i||₂² = init_mag² / 3`` whatever the length. ``real``: ``(N, L)`` bool. Returns ``(N, L, d)``."""
    n, length = real.shape
    u = (torch.rand(n, length, dim, generator=generator) * 2 - 1).to(real.device) * real.unsqueeze(-1)
    mag = init_mag / (real.sum(1).clamp_min(1) * dim).to(u.dtype).sqrt()
    return u * mag.view(-1, 1, 1)


def freelb_step(delta: torch.Tensor, grad: torch.Tensor, real: torch.Tensor, step: float,
                max_norm: Optional[float]) -> torch.Tensor:
    """FreeLB's ascent step (L2): ``δ ← δ + step · g / ||g_i||₂`` per row (a zero gradient: no move),
    then rows whose norm exceeds ``max_norm`` are scaled back onto that sphere (None: no projection)."""
    g = grad * real.unsqueeze(-1)
    norm = g.flatten(1).norm(dim=1).view(-1, 1, 1)
    delta = delta + step * torch.where(norm > 0, g / norm.clamp_min(torch.finfo(g.dtype).tiny), torch.zeros_like(g))
    if max_norm is not None:
        dn = delta.flatten(1).norm(dim=1).view(-1, 1, 1)
        delta = delta * (max_norm / dn.clamp_min(torch.finfo(dn.dtype).tiny)).clamp(max=1.0)
    return delta


@contextlib.contextmanager
def transform_outputs(modules: Sequence[nn.Module],
                      transforms: Sequence[Optional[Callable[[torch.Tensor], torch.Tensor]]]):
    """Inside the block, module i's output hidden states are replaced by ``transforms[i](output)``.

    Handles modules returning a tensor (transformers ≥ 5) or a tuple whose
    first element is the hidden states (older versions). The hooks are removed
    on exit, also on error, so inference never sees a perturbation.
    """
    handles = []

    def make_hook(fn):
        def hook(module, args, output):
            if isinstance(output, tuple):
                return (fn(output[0]),) + tuple(output[1:])
            if hasattr(output, "last_hidden_state"):  # pragma: no cover - not used by BERT layers
                output.last_hidden_state = fn(output.last_hidden_state)
                return output
            return fn(output)

        return hook

    try:
        for module, fn in zip(modules, transforms):
            if fn is not None:
                handles.append(module.register_forward_hook(make_hook(fn)))
        yield
    finally:
        for h in handles:
            h.remove()


@contextlib.contextmanager
def isolated_rng(seed: int, device: torch.device):
    """Run the block with the RNG seeded by ``seed``; restore the global RNG state afterwards.

    Used for the ascent passes: their dropout is deterministic (seed derived
    from the run seed and the batch counter) and they do not advance the
    global stream, so the encoder step's dropout is the same whatever the
    number of ascent steps.
    """
    devices = []
    if device.type == "cuda":
        devices = [device.index if device.index is not None else torch.cuda.current_device()]
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield
