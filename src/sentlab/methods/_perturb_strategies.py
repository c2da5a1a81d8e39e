"""The two perturbation strategies :class:`~sentlab.methods.l2p.L2PCSR` learns (``methods.l2p.perturbation``,
docs/methods.md#l2p-csr), both a :class:`Perturbation` built from the pieces of :mod:`sentlab.methods._perturb`:
:class:`MaskPerturbation` (the method, state :class:`Masks`) and :class:`NoisePerturbation` (Table 3 "Emb Noise",
state :class:`Noise`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch
from torch import nn

from ._perturb import (ascend, freelb_init, freelb_step, perturbable_modules, threshold, transform_outputs,
                       weakening_mask, word_embedding_module)

Transform = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Masks:
    """The weakening-mask probabilities of one doubled batch (rows: view 1 of every sentence, then view 2)."""

    real: torch.Tensor                    # (N, L) bool: the real tokens of the N sentence-view rows
    p_tok: Optional[torch.Tensor] = None  # (k+1, N, L), 1 on padding; None: no token mask
    p_fea: Optional[torch.Tensor] = None  # (k+1, S, D), S = 1 | 2 | N (feature_scope); None: no feature mask

    @property
    def rows_view(self) -> torch.Tensor:
        """``(N,)`` long: 0 for the rows of view 1, 1 for those of view 2."""
        n = self.real.size(0)
        return (torch.arange(n, device=self.real.device) >= n // 2).long()

    def to(self, device) -> "Masks":
        return Masks(*(t.to(device) if t is not None else None for t in (self.real, self.p_tok, self.p_fea)))


@dataclass(frozen=True)
class Noise:
    """FreeLB's additive noise of one doubled batch."""

    real: torch.Tensor   # (N, L) bool
    delta: torch.Tensor  # (N, L, D) on the word embeddings, 0 on padding

    def to(self, device) -> "Noise":
        return Noise(self.real.to(device), self.delta.to(device))


class Perturbation:
    """What L2P-CSR perturbs and how it learns it; a per-batch state (:class:`Masks`, :class:`Noise`) is
    drawn at random, differentiated through forward hooks on :attr:`modules` and ascended.

    * :meth:`draw` — the random start of a batch (CPU, from ``generator`` only);
    * :meth:`transforms` — one output transform per module, the perturbation the encoder trains on;
    * :meth:`ascent_leaves` — the tensors an ascent pass differentiates and the transforms built from them;
    * :meth:`step` — one ascent step from their gradients, a new state;
    * :meth:`stats` — what is logged about the final state.
    """

    modules: list[nn.Module]

    def __init__(self, encoder: nn.Module, params):
        self.params = params
        self.hidden = encoder.config.hidden_size
        self._paused = False

    def applied(self, transforms: Sequence[Optional[Transform]]):
        """A ``with`` block inside which module i's output goes through ``transforms[i]`` (not while
        :meth:`paused`)."""
        def pausable(fn):
            return None if fn is None else (lambda out: out if self._paused else fn(out))

        return transform_outputs(self.modules, [pausable(fn) for fn in transforms])

    @contextlib.contextmanager
    def paused(self):
        """A block inside :meth:`applied` whose forward passes are not perturbed (PromptBERT's empty-template
        pass of ``prompt_l2p``: another batch, not the views the perturbation belongs to)."""
        before, self._paused = self._paused, True
        try:
            yield
        finally:
            self._paused = before

    def draw(self, real: torch.Tensor, generator: torch.Generator):  # pragma: no cover - abstract
        raise NotImplementedError

    def transforms(self, state) -> list[Transform]:  # pragma: no cover - abstract
        raise NotImplementedError

    def ascent_leaves(self, state) -> tuple[dict[str, torch.Tensor], list[Transform]]:  # pragma: no cover
        raise NotImplementedError

    def step(self, state, grads: dict[str, torch.Tensor]):  # pragma: no cover - abstract
        raise NotImplementedError

    def stats(self, state, views: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:  # pragma: no cover
        raise NotImplementedError


class MaskPerturbation(Perturbation):
    """L2P-CSR's weakening masks (Eqs. 1–8) on the embedding output and the first k layers.

    Per masked output, a token probability vector per sentence-view row and
    a feature probability vector per ``feature_scope`` (batch, view or
    sentence-view); the output is multiplied by ``M = (α_tok + α_fea) / 2``
    with ``α = [p ≥ φ]`` (or ``M`` from p directly with ``continuous``).
    Padding positions keep p_tok = 1 (never weakened).
    """

    def __init__(self, encoder: nn.Module, params):
        super().__init__(encoder, params)
        self.modules = perturbable_modules(encoder, params.layers)

    @property
    def n_masked(self) -> int:
        """Number of masked outputs: the embedding output + the first k layers."""
        return len(self.modules)

    def draw(self, real: torch.Tensor, generator: torch.Generator) -> Masks:
        """Eq. 4: p_tok, p_fea ~ U(0, 1)."""
        p = self.params
        n, length = real.shape
        p_tok = p_fea = None
        if p.token_mask:
            p_tok = torch.rand(self.n_masked, n, length, generator=generator).to(real.device)
            p_tok = torch.where(real.unsqueeze(0), p_tok, torch.ones_like(p_tok))
        if p.feature_mask:
            scope = {"batch": 1, "view": 2, "sentence": n}[p.feature_scope]
            p_fea = torch.rand(self.n_masked, scope, self.hidden, generator=generator).to(real.device)
        return Masks(real, p_tok, p_fea)

    def alphas(self, masks: Masks, continuous: bool):
        """Per-layer token / feature mask values: Eq. 1's ``[p ≥ φ]``, or p itself (continuous); None: all ones."""
        f = (lambda t: t) if continuous else (lambda t: threshold(t, self.params.phi))
        return tuple(f(t) if t is not None else None for t in (masks.p_tok, masks.p_fea))

    def multipliers(self, masks: Masks, a_tok, a_fea) -> list[Transform]:
        """Eqs. 2–3: output ℓ times ``M_ℓ[n, i, j] = (α_tok[ℓ, n, i] + α_fea[ℓ, row n's scope, j]) / 2``."""
        n, length = masks.real.shape
        device = masks.real.device
        transforms = []
        for layer in range(self.n_masked):
            tok = a_tok[layer] if a_tok is not None else torch.ones(n, length, device=device)
            fea = (self._feature_rows(a_fea[layer], masks) if a_fea is not None
                   else torch.ones(1, self.hidden, device=device))
            transforms.append(lambda out, m=weakening_mask(tok, fea): out * m.to(out.dtype))
        return transforms

    @staticmethod
    def _feature_rows(a_fea: torch.Tensor, masks: Masks) -> torch.Tensor:
        """``(S, D)`` feature values of one layer: one row per sentence-view (``view`` scope) or as they are."""
        return a_fea[masks.rows_view] if a_fea.size(0) == 2 else a_fea

    def transforms(self, masks: Masks) -> list[Transform]:
        return self.multipliers(masks, *self.alphas(masks, self.params.continuous))

    def ascent_leaves(self, masks: Masks):
        """Binary (``ascent_grad: binary``, straight-through): the leaves are the 0/1 masks α and their
        gradient is applied to p; continuous (``ascent_grad: continuous`` or ``continuous``): p itself."""
        continuous = self.params.continuous or self.params.ascent_grad == "continuous"
        a_tok, a_fea = self.alphas(masks, continuous)
        leaves = {}
        if a_tok is not None:
            a_tok = leaves["tok"] = a_tok.detach().clone().requires_grad_(True)
        if a_fea is not None:
            a_fea = leaves["fea"] = a_fea.detach().clone().requires_grad_(True)
        return leaves, self.multipliers(masks, a_tok, a_fea)

    def step(self, masks: Masks, grads: dict[str, torch.Tensor]) -> Masks:
        """Eqs. 5–6: ``p ← clip[0,1](p + β g/||g||₂)``; the masks are recomputed from p at the next pass."""
        p = self.params
        p_tok, p_fea = masks.p_tok, masks.p_fea
        if "tok" in grads:
            new = ascend(p_tok, grads["tok"], p.beta, p.token_norm, p.zero_grad)
            p_tok = torch.where(masks.real.unsqueeze(0), new, torch.ones_like(new)).detach()
        if "fea" in grads:
            p_fea = ascend(p_fea, grads["fea"], p.beta, "vector", p.zero_grad).detach()
        return Masks(masks.real, p_tok, p_fea)

    @torch.no_grad()
    def stats(self, masks: Masks, views) -> dict[str, torch.Tensor]:
        """Fractions of the binary masks: weakened real tokens, weakened features, zeroed entries."""
        a_tok, a_fea = self.alphas(masks, continuous=False)
        real = masks.real.float()
        n, k, device = real.size(0), self.n_masked, real.device
        # (layers, N): fraction of weakened real tokens per row, and of weakened features per row
        if a_tok is not None:
            weak_tok = ((1 - a_tok) * real).sum((1, 2)) / real.sum()
            tok_row = ((1 - a_tok) * real).sum(2) / real.sum(1).clamp_min(1)
        else:
            weak_tok, tok_row = torch.zeros(k, device=device), torch.zeros(k, n, device=device)
        if a_fea is not None:
            fea_row = (1 - a_fea).mean(-1)
            fea_row = fea_row[:, masks.rows_view] if fea_row.size(1) == 2 else fea_row.expand(k, n)
        else:
            fea_row = torch.zeros(k, n, device=device)
        return {
            "weakened_tokens": weak_tok.mean(),
            "weakened_features": fea_row.mean(),
            "zeroed_entries": (tok_row * fea_row).mean(),
        }


class NoisePerturbation(Perturbation):
    """Table 3 "Emb Noise": FreeLB's additive noise δ on the word embeddings (``inputs_embeds``,
    before the position/type embeddings and the embedding LayerNorm; Zhu et al., ICLR 2020):
    :func:`freelb_init` start, :func:`freelb_step` ascent (L2, projection to ``noise_max_norm``)."""

    def __init__(self, encoder: nn.Module, params):
        super().__init__(encoder, params)
        self.modules = [word_embedding_module(encoder)]

    def draw(self, real: torch.Tensor, generator: torch.Generator) -> Noise:
        return Noise(real, freelb_init(real, self.hidden, self.params.noise_init, generator))

    @staticmethod
    def _added(delta: torch.Tensor) -> list[Transform]:
        return [lambda out: out + delta.to(out.dtype)]

    def transforms(self, noise: Noise) -> list[Transform]:
        return self._added(noise.delta)

    def ascent_leaves(self, noise: Noise):
        delta = noise.delta.detach().clone().requires_grad_(True)
        return {"delta": delta}, self._added(delta)

    def step(self, noise: Noise, grads: dict[str, torch.Tensor]) -> Noise:
        p = self.params
        delta = freelb_step(noise.delta, grads["delta"], noise.real, p.noise_step, p.noise_max_norm)
        return Noise(noise.real, delta.detach())

    @torch.no_grad()
    def stats(self, noise: Noise, views) -> dict[str, torch.Tensor]:
        """Mean ||δ_i|| and its mean ratio to the norm of row i's word embeddings."""
        norm = noise.delta.flatten(1).norm(dim=1)
        words = self.modules[0](views["input_ids"]) * noise.real.unsqueeze(-1)
        return {"noise_norm": norm.mean(), "noise_relative": (norm / words.flatten(1).norm(dim=1)).mean()}


PERTURBATIONS: dict[str, type[Perturbation]] = {"mask": MaskPerturbation, "gradient_noise": NoisePerturbation}
