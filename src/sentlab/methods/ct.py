"""Contrastive Tension (Carlsson et al., ICLR 2021), docs/methods.md#contrastive-tension."""

from __future__ import annotations

import copy
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field

from ..nn.encoder import pool
from ..errors import SentlabError
from . import register
from ._common import full_precision
from .base import Batch, Method, MethodParams, PaperAvg


class CTParams(MethodParams):
    negatives: int = Field(7, gt=0, description="K random negatives per positive (other sentences of the batch)")
    pooling: Literal["mean", "cls"] = Field("mean", description="pooling of both copies in training and at test")
    export: Literal["second", "first"] = Field("second", description="which copy is the trained model")

    def slice_caps(self, *, steps: int, batch_size: int, sentences: int) -> dict:
        """A batch holds the positive and ``negatives`` other sentences: at least 1 + negatives."""
        caps = super().slice_caps(steps=steps, batch_size=batch_size, sentences=sentences)
        if batch_size > 0 and self.negatives + 1 > caps.get("batch_size", batch_size):
            caps["batch_size"] = self.negatives + 1
        return caps


@register("ct")
class ContrastiveTension(Method):
    """CT-BERT: two independent encoder copies pulled together on identical sentences.

    Carlsson, Gogoulou, Ylipää, Cuba Gyllensten & Sahlgren, "Semantic
    Re-tuning with Contrastive Tension", ICLR 2021. Both copies start from the
    same pretrained weights and are trained with separate parameters. For each
    sentence ``s_i`` of the batch the positive is ``(f1(s_i), f2(s_i))`` and the
    K negatives are ``(f1(s_i), f2(s_j))`` for K distinct other sentences
    ``j ≠ i`` of the batch, drawn at random (torch's global RNG, so seeded and
    restored on resume). The loss is binary cross-entropy on the dot product
    ``f1(s)·f2(s')`` with label 1 for the positive and 0 for the negatives,
    averaged over the ``B·(1+K)`` pairs. The dot products and the loss are computed in fp32 with
    autocast off (under bf16 a dot product near 20 would have a resolution of 0.125).

    Choices (params): pooling ``mean`` (the CT paper and sentence-transformers'
    ``ContrastiveTensionLoss`` use mean pooling; ``cls`` available), K = 7
    (CT's 1 positive : 7 negatives, as sentence-transformers' ``pos_neg_ratio=8``);
    negatives come from the batch (sentence-transformers draws them from the
    whole corpus). Exported copy: ``second`` — CT reports the second model, and
    sentence-transformers' ``ContrastiveTensionLoss`` keeps ``model2`` as "the
    final model used during the inference time"; ``first`` is available.
    ``self.encoder`` is always the exported copy, ``self.other`` the copy
    thrown away after training.

    Example::

        method = ContrastiveTension(bert, tok, ContrastiveTension.Params(negatives=3, max_length=32))
        method(Batch(["a", "b", "c", "d"]))["loss"].backward()
    """

    paper = "Carlsson et al.: Semantic Re-tuning with Contrastive Tension (ICLR 2021)"
    citation = """@inproceedings{carlsson2021ct,
  title = {Semantic Re-tuning with Contrastive Tension},
  author = {Carlsson, Fredrik and Gyllensten, Amaru Cuba and Gogoulou, Evangelia and Hellqvist, Erik \
Yl{\\"i}p{\\"a}{\\"a} and Sahlgren, Magnus},
  booktitle = {International Conference on Learning Representations},
  year = {2021}
}"""
    run_name_params = ("negatives", "pooling")
    paper_avg = PaperAvg(72.05, "CT-BERT as PT-BERT Table 3 prints it")
    summary = ("CT-BERT: two independent encoder copies, same-sentence positives, K random negatives, "
               "BCE on dot products")
    Params = CTParams

    def __init__(self, encoder, tokenizer, params: CTParams, seed: int = 0):
        super().__init__(encoder, tokenizer, params, seed)
        self.other = copy.deepcopy(encoder)

    @property
    def model1(self):
        return self.other if self.params.export == "second" else self.encoder

    @property
    def model2(self):
        return self.encoder if self.params.export == "second" else self.other

    def _embed(self, model, enc) -> torch.Tensor:
        out = model(**enc, return_dict=True)
        return pool(out, enc["attention_mask"], self.params.pooling)

    def _sample_negatives(self, n: int, device) -> torch.Tensor:
        """``(n, K)`` indices of K distinct other sentences for each sentence."""
        k = self.params.negatives
        if k > n - 1:
            raise SentlabError(
                f"methods.{self.id}.negatives = {k} needs batches of at least {k + 1} sentences, got {n}; "
                f"lower methods.{self.id}.negatives or raise train.batch_size.")
        scores = torch.rand(n, n, device=device)
        scores.fill_diagonal_(-1.0)
        return scores.topk(k, dim=1).indices

    def _pair_logits(self, e1: torch.Tensor, e2: torch.Tensor) -> torch.Tensor:
        """``(B, 1+K)``: the positive ``f1(s_i)·f2(s_i)``, then K negatives ``f1(s_i)·f2(s_j)`` (fp32)."""
        with full_precision(e1.device):
            dots = e1.float() @ e2.float().T  # (B, B): f1(s_i) · f2(s_j)
        neg = self._sample_negatives(dots.size(0), dots.device)
        return torch.cat([dots.diagonal().unsqueeze(1), dots.gather(1, neg)], dim=1)

    def prepare(self, batch: Batch) -> Batch:
        batch.features = {"enc": self.encode_text(batch.sentences)}
        return batch

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        enc = self.prepared(batch)["enc"]
        logits = self._pair_logits(self._embed(self.model1, enc), self._embed(self.model2, enc))
        labels = torch.zeros_like(logits)
        labels[:, 0] = 1.0
        with full_precision(logits.device):
            loss = F.binary_cross_entropy_with_logits(logits, labels)
        return {"loss": loss, "pos_dot": logits[:, 0].mean().detach(), "neg_dot": logits[:, 1:].mean().detach()}

    def export_info(self) -> dict:
        return {**super().export_info(), "exported_copy": self.params.export}
