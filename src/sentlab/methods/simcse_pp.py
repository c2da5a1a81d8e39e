"""SimCSE++ (Xu et al., EMNLP 2023): off-dropout negatives and dimension-wise contrastive learning,
docs/methods.md#simcse-off-dropout-dcl.

The two terms are functions here (:func:`off_dropout_info_nce`, :func:`dimension_wise_contrastive`) and a mixin
(:class:`SimCSEPlusPlusTerms`) that gives any SimCSE-like method (two dropout views and in-batch negatives) both,
switched by its params (:class:`SimCSEPPParams`); ``simcse_pp`` is SimCSE with it.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from ..runtime.distributed import gather_with_grad
from . import register
from ._common import cosine_logits, full_precision, in_batch_info_nce, two_views
from .base import Batch, PaperAvg
from .simcse import SimCSE, SimCSEParams


class SimCSEPPParams(SimCSEParams):
    """``methods.simcse_pp``: SimCSE's keys plus the two switches of SimCSE++ and their settings."""

    off_dropout: bool = Field(True, description="negatives from a dropout-off pass (SimCSE++ off-dropout); false: "
                                                "SimCSE's dropout-on in-batch negatives")
    pos_ratio: float = Field(1.0, gt=0, description="m: weight of the positive logit in the off-dropout loss (the "
                                                    "SimCSE++ run: 1; the release's off-dropout-only run: 0.9)")
    dcl_weight: float = Field(0.1, ge=0, description="λ of the dimension-wise contrastive term (0: off); the "
                                                     "release's 0.1")
    dcl_temperature: float = Field(5.0, gt=0, description="τ of the dimension-wise term (the release's 5)")


@contextlib.contextmanager
def dropout_off(module: nn.Module) -> Iterator[None]:
    """``module`` in eval mode for the block (every dropout off, gradients kept), then its mode as before."""
    modes = {m: m.training for m in module.modules()}
    module.eval()
    try:
        yield
    finally:
        for m, mode in modes.items():
            m.training = mode


def off_dropout_info_nce(z1: torch.Tensor, z2: torch.Tensor, z0: torch.Tensor, temperature: float,
                         pos_ratio: float = 1.0) -> torch.Tensor:
    """SimCSE++'s instance-wise loss: the positive is the two dropout views, the negatives come without dropout.

    ``ℓ_i = −m·s(z1_i, z2_i)/τ + log(e^{m·s(z1_i, z2_i)/τ} + Σ_{j≠i} e^{s(z0_i, z0_j)/τ})`` with s the cosine,
    z0 the dropout-off embeddings, averaged over i (logits and loss in fp32).
    """
    with full_precision(z1.device):
        pos = pos_ratio * F.cosine_similarity(z1.float(), z2.float(), dim=-1) / temperature
        neg = cosine_logits(z0, z0, temperature)
        eye = torch.eye(neg.size(0), dtype=torch.bool, device=neg.device)
        logits = torch.cat([pos[:, None], neg.masked_fill(eye, float("-inf"))], dim=1)
        return F.cross_entropy(logits, torch.zeros(logits.size(0), dtype=torch.long, device=logits.device))


def dimension_wise_contrastive(z1: torch.Tensor, z2: torch.Tensor, temperature: float,
                               eps: float = 1e-5) -> torch.Tensor:
    """SimCSE++'s dimension-wise contrastive learning (DCL), a Barlow-Twins-like term over the batch.

    Each column (dimension) of the two views is standardised over the batch (``BatchNorm1d(affine=False)`` in
    train mode: batch mean, biased variance, ``eps``); ``C = ẑ1ᵀ ẑ2 / (B·τ)`` is the cross-correlation of the
    dimensions; dimension k of view 1 has dimension k of view 2 as its positive and every other dimension as
    negatives: ``mean_k [−C_kk + log Σ_k' e^{C_kk'}]`` (fp32).
    """
    with full_precision(z1.device):
        a = F.batch_norm(z1.float(), None, None, training=True, eps=eps)
        b = F.batch_norm(z2.float(), None, None, training=True, eps=eps)
        corr = a.T @ b / (z1.size(0) * temperature)
        return F.cross_entropy(corr, torch.arange(corr.size(0), device=corr.device))


class SimCSEPlusPlusTerms:
    """Mixin for a SimCSE-like method (``self.params`` a :class:`SimCSEPPParams`): its loss from the two dropout
    views ``z1, z2`` and the encoder function, with SimCSE++'s switches applied.

    Usage in a method's ``forward``: ``z1, z2 = two_views(embed, enc)``, then ``return self._simcse_pp_loss(embed,
    enc, z1, z2)``.
    """

    def _off_dropout_view(self, embed: Callable[[dict], torch.Tensor], enc: dict) -> torch.Tensor:
        """z0: ``embed(enc)`` with every dropout of the method off (a third pass, with gradient)."""
        with dropout_off(self):
            return embed(enc)

    def _instance_loss(self, embed, enc, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        """Off-dropout InfoNCE over the global batch, or SimCSE's where ``off_dropout`` is false."""
        p = self.params
        if not p.off_dropout:
            return in_batch_info_nce(z1, z2, p.temperature)
        z0 = self._off_dropout_view(embed, enc)
        return off_dropout_info_nce(gather_with_grad(z1), gather_with_grad(z2), gather_with_grad(z0),
                                    p.temperature, p.pos_ratio)

    def _simcse_pp_loss(self, embed, enc, z1: torch.Tensor, z2: torch.Tensor) -> dict[str, torch.Tensor]:
        """``{"loss": instance + λ·DCL, "instance": …, "dcl": …}`` (DCL over this rank's batch, as released)."""
        instance = self._instance_loss(embed, enc, z1, z2)
        out = {"instance": instance.detach()}
        loss = instance
        if self.params.dcl_weight > 0:
            dcl = dimension_wise_contrastive(z1, z2, self.params.dcl_temperature)
            loss = loss + self.params.dcl_weight * dcl
            out["dcl"] = dcl.detach()
        return {"loss": loss, **out}


@register("simcse_pp")
class SimCSEPP(SimCSEPlusPlusTerms, SimCSE):
    """SimCSE++: SimCSE with dropout-free negatives and a dimension-wise contrastive term.

    Xu, Shao, Chen & Liu, "SimCSE++: Improving Contrastive Learning for
    Sentence Embeddings from Two Perspectives", EMNLP 2023; released code
    Jiahao004/SimCSE-plus-plus at its first release, commit
    899e49b7be62b1b841a06ef4100ed84736795c34 (2022-09-21; ``run_re_vicreg.sh``,
    ``train_re_vicreg.py``, ``simcse/models_re_vicreg.py``): later commits rewrite
    that model (c171daa) and at HEAD its DCL term is commented out;
    docs/methods.md#simcse-off-dropout-dcl. Equal to that commit's loss and
    gradients: ``benchmarks/released/simcse_pp.py``.

    Per batch of B sentences:

    1. SimCSE's two dropout views ``z1, z2 = MLP([CLS])`` (one doubled pass);
    2. off-dropout (perspective 1, dropout noise in negative pairs): a third
       pass with dropout off gives ``z0`` (with gradient); the negatives of
       sentence i are ``s(z0_i, z0_j)``, j ≠ i, the positive stays
       ``m·s(z1_i, z2_i)``: :func:`off_dropout_info_nce` (τ = 0.05);
    3. DCL (perspective 2, feature corruption): ``λ ·``
       :func:`dimension_wise_contrastive` of the batch-normalised views,
       λ = 0.1, τ_DCL = 5;
    4. loss = (2) + (3). Inference: [CLS] without the MLP (``mlp_only_train``).

    Settings (the released ``run_re_vicreg.sh``, the SimCSE++ run): batch 64,
    lr 3e-5, max length 32, τ 0.05, m (``pos_ratio``) 1, dev every 125 steps,
    fp16 there (here fp32 on CPU, bf16 autocast on GPU, losses in fp32).
    λ = 0.1 and τ_DCL = 5 are the release's defaults (its run name
    ``vicreg_t5_w0.1``). Choices where the paper text was not at hand, each
    from the release and each a param or stated:

    * DCL's negatives are the other dimensions of the dropout-on second view
      (the version of ``models_re_vicreg.py`` the script was written for; a
      later revision adds an off-dropout variant of DCL, not offered here);
    * DCL normalises each view over this rank's batch (BatchNorm1d without
      affine, batch statistics), the off-dropout term gathers every rank's rows;
      the released run is one process (``run_re_vicreg.sh``'s DDP line is
      commented out), where the two agree (under DDP the release would gather
      both views first and still divide by the local batch);
    * the own-pair negative s(z0_i, z0_i) is masked with −inf; the release adds
      log 1e-45 (a weight of e^(1/τ − 103.6) ≈ 10⁻³⁶ of a logit: no difference
      in fp32);
    * "dropout off" is the whole method in eval mode for the z0 pass
      (:func:`dropout_off`): the release turns off every ``nn.Dropout``, which
      in current transformers would leave SDPA's attention dropout on;
    * ``off_dropout: false`` with ``dcl_weight > 0`` is the paper's "DCL"
      row, ``dcl_weight: 0`` its "off-dropout" row.

    Stacking: the contract has no hook that adds a term to another method's
    loss, so SimCSE++ is this method, and its terms are a mixin
    (:class:`SimCSEPlusPlusTerms`) plus :class:`SimCSEPPParams`' keys that
    another two-view method can take in two lines.
    """

    paper = ("Xu et al.: SimCSE++: Improving Contrastive Learning for Sentence Embeddings from Two Perspectives "
             "(EMNLP 2023)")
    citation = """@inproceedings{xu2023simcsepp,
  title = {{SimCSE}++: Improving Contrastive Learning for Sentence Embeddings from Two Perspectives},
  author = {Xu, Jiahao and Shao, Wei and Chen, Lihui and Liu, Lemao},
  booktitle = {Proceedings of the 2023 Conference on Empirical Methods in Natural Language Processing},
  year = {2023}
}"""
    paper_avg = PaperAvg(78.05, "SimCSE++ (Xu et al., EMNLP 2023), BERT-base: SimCSE-BERTbase's 76.25 + the "
                                "abstract's 1.8")
    summary = "SimCSE++: SimCSE with off-dropout negatives + dimension-wise contrastive term (λ=0.1); [CLS] at test"
    Params = SimCSEPPParams

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        enc = self.prepared(batch)["enc"]
        z1, z2 = two_views(self._embed, enc)
        return self._simcse_pp_loss(self._embed, enc, z1, z2)

    def export_info(self) -> dict:
        p = self.params
        return {**super().export_info(), "off_dropout": p.off_dropout,
                "pos_ratio": p.pos_ratio, "dcl_weight": p.dcl_weight, "dcl_temperature": p.dcl_temperature}
