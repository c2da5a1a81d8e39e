"""Supervised SimCSE (Gao et al., EMNLP 2021, Sec. 4): NLI entailment positives, contradiction hard negatives.

The reference row of PaSeR Table 2 (SimCSE-BERT-base supervised, avg 81.57; docs/methods.md): ``paser_sup`` is
this loss + α·phrase reconstruction, started from unsupervised PaSeR; this method is the loss alone, started
from the backbone, as SimCSE trains it.
"""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator

from ..errors import SentlabError
from ..runtime.distributed import gather_with_grad
from . import register
from ._common import MLPHead, cosine_logits
from .base import Batch, ContrastiveParams, Method
from .simcse import SIMCSE_CITATION, SIMCSE_PAPER


class SimCSESupParams(ContrastiveParams):
    """``methods.simcse_sup``; the paper profile sets SimCSE's supervised run (run_sup_example.sh): batch 512,
    lr 5e-5, 3 epochs, max length 32, dev every 125 steps."""

    hard_negative_weight: float = Field(0.0, description="log-weight added to each anchor's own hard-negative logit "
                                                         "(SimCSE's --hard_negative_weight; its default 0)")
    mlp_train: bool = Field(True, description="[CLS] + MLP (Linear+tanh) in training (SimCSE's --pooler_type cls)")
    test_mlp: bool = Field(True, description="the trained MLP at test too, exported with the model: [CLS] + MLP, as "
                                             "SimCSE evaluates its supervised model (run_sup_example.sh has no "
                                             "--mlp_only_train; evaluation.py --pooler cls); false: [CLS] without "
                                             "it (cls_before_pooler, the unsupervised models' test pooling)")

    @model_validator(mode="after")
    def _mlp_at_test_needs_one(self):
        if self.test_mlp and not self.mlp_train:
            raise ValueError("methods.simcse_sup: test_mlp true needs the MLP trained (mlp_train true); set "
                             "test_mlp: false to test [CLS] of a model trained without the MLP")
        return self


def supervised_info_nce(z1: torch.Tensor, z2: torch.Tensor, z3: torch.Tensor, temperature: float,
                        hard_negative_weight: float = 0.0) -> torch.Tensor:
    """SimCSE-sup's loss (Eq. 5) over the global batch: anchor i against every positive and every hard negative,
    ``[cos(z1, z2) | cos(z1, z3) + w·I] / τ``, target i; rows of other ranks are constants, as in SimCSE."""
    z1, z2, z3 = gather_with_grad(z1), gather_with_grad(z2), gather_with_grad(z3)
    n = z1.size(0)
    neg = cosine_logits(z1, z3, temperature)
    if hard_negative_weight:
        neg = neg + torch.eye(n, device=neg.device) * hard_negative_weight
    logits = torch.cat([cosine_logits(z1, z2, temperature), neg], dim=1)
    return F.cross_entropy(logits, torch.arange(n, device=logits.device))


@register("simcse_sup")
class SimCSESup(Method):
    """Supervised SimCSE: each NLI premise (``Batch.sentences``) with its entailment hypothesis
    (``extras["positive"]``) as the positive and its contradiction (``extras["hard_negative"]``) plus every other
    positive and hard negative of the batch as negatives; the three sentences of a triple are encoded in one
    forward; ``z = MLP([CLS])`` in training and, with ``test_mlp`` (the default, as SimCSE evaluates its
    supervised model), at test too: the MLP is exported with the encoder (:meth:`inference_head`).

    Data: ``data/corpus/nli.parquet`` (``prepare.nli``, :mod:`sentlab.data.nli`): SimCSE's SNLI + MNLI triples
    (275k) in the paper profile, the SICK-train stand-in (123 triples) offline; ``sentlab.json`` records which
    (``nli_source``, ``nli_label``).
    """

    paper, citation = SIMCSE_PAPER, SIMCSE_CITATION
    summary = ("SimCSE (sup.): NLI entailment positives + contradiction hard negatives, InfoNCE, [CLS]+MLP, "
               "also at test")
    Params = SimCSESupParams
    corpus = "nli"
    corpus_columns = ("positive", "hard_negative")
    inference_pooling = "cls"

    def __init__(self, encoder, tokenizer, params: SimCSESupParams, seed: int = 0):
        super().__init__(encoder, tokenizer, params, seed)
        self.mlp = MLPHead.of(encoder.config) if params.mlp_train else None
        self.nli_meta: dict[str, str] = {}

    def split_heldout(self, corpus):
        """All of it; remembers which NLI source the corpus came from (for :meth:`export_info`)."""
        self.nli_meta = {k: corpus.meta.get(f"sentlab.nli_{k}", "unknown") for k in ("source", "label")}
        return corpus

    def inference_head(self):
        """The trained MLP with ``test_mlp`` (SimCSE's test pooling of its supervised model), else None ([CLS])."""
        return self.mlp if self.params.test_mlp else None

    def export_info(self) -> dict:
        return {**super().export_info(), **{f"nli_{k}": v for k, v in self.nli_meta.items()}}

    def prepare(self, batch: Batch) -> Batch:
        for col in self.corpus_columns:
            if col not in batch.extras:
                raise SentlabError(f"simcse_sup needs Batch.extras[{col!r}], a column of the NLI corpus data/corpus/"
                                   f"nli.parquet; the prepare stage writes it (prepare.nli in params.yaml).")
        triples = list(batch.sentences) + list(batch.extras["positive"]) + list(batch.extras["hard_negative"])
        return replace(batch, features={"triples": self.encode_text(triples)})

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        enc = self.prepared(batch)["triples"]
        h = self.encoder(**enc, return_dict=True).last_hidden_state[:, 0]
        z = self.mlp(h) if self.mlp is not None else h
        n = len(batch)
        return {"loss": supervised_info_nce(z[:n], z[n:2 * n], z[2 * n:], self.params.temperature,
                                            self.params.hard_negative_weight)}
