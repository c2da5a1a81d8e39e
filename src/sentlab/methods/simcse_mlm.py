"""SimCSE with its auxiliary MLM objective (Gao et al. 2021, ``--do_mlm``), PaSeR Table 1's "SimCSE-BERTbase + MLM";
docs/methods.md#simcse-with-mlm."""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

import torch
from pydantic import Field
from torch import nn

from . import register
from ._common import doubled, in_batch_info_nce
from ._paser_decoder import mlm_mask, mlm_special
from ._paser_head import LMHead, init_lm_head, masked_lm_loss
from .base import Batch, PaperAvg
from .simcse import SimCSE, SimCSEParams


class SimCSEMLMParams(SimCSEParams):
    """``methods.simcse_mlm``: SimCSE's params and its ``do_mlm`` options (train.py's ``mlm_weight``,
    ``mlm_probability``)."""

    mlm_weight: float = Field(0.1, ge=0, description="λ in L = L_InfoNCE + λ·L_MLM (SimCSE's mlm_weight default 0.1)")
    mlm_prob: float = Field(0.15, gt=0, lt=1, description="share of the non-special tokens that are MLM targets "
                                                          "(SimCSE's mlm_probability 0.15; 80/10/10 as BERT)")
    lm_head: Literal["auto", "pretrained", "fresh"] = Field(
        "pretrained", description="the MLM head: BERT's pretrained cls.predictions (SimCSE loads it from "
                                  "BertForPreTraining; a checkpoint without one fails), fresh (random, for a backbone "
                                  "without a head, e.g. all-MiniLM-L6-v2), auto: pretrained when there is one")
    decoder: Literal["copy", "tied"] = Field(
        "copy", description="the head's output matrix: a trainable copy of the word embeddings (SimCSE's code: its "
                            "lm_head is not tied, it loads cls.predictions.decoder.weight) or tied to them")


@register("simcse_mlm")
class SimCSEMLM(SimCSE):
    """Unsupervised SimCSE + λ·MLM (Gao et al., EMNLP 2021: the optional MLM auxiliary objective of its released
    code, ``--do_mlm``, ``BertForCL.lm_head``, ``cl_forward``).

    Per batch of N sentences:

    1. SimCSE: the doubled batch ``[s_1..s_N, s_1..s_N]``, ``z = MLP([CLS])``, InfoNCE over cos/τ (L_InfoNCE);
    2. MLM: the same doubled batch, each row corrupted on its own (BERT's 15 % of the non-special, non-padding
       tokens as targets; of those 80 % [MASK], 10 % a random token, 10 % kept), through the encoder in a second
       forward pass; BERT's MLM head at the target positions; cross-entropy, the mean over the targets (L_MLM);
    3. ``L = L_InfoNCE + λ·L_MLM``, λ = ``mlm_weight`` = 0.1.

    The corruption is drawn in :meth:`prepare` from :meth:`Batch.rng` (resume-safe; SimCSE draws it from torch's
    RNG in its collator). The head is BERT's pretrained ``cls.predictions`` (SimCSE's code copies
    ``BertForPreTraining``'s into its ``lm_head``), loaded by :func:`~sentlab.methods._paser_head.init_lm_head` as
    PaSeR's; its output matrix starts as the word embeddings and, as in SimCSE's code, trains as a separate copy
    (``decoder: copy``). Head and copy are training-only: the inference encoder is SimCSE's ([CLS], no MLP).
    """

    run_name_params = ("mlm_weight", "decoder")
    paper_avg = PaperAvg(58.57, "SimCSE + MLM as PaSeR Table 1 prints it")
    summary = "SimCSE + MLM: InfoNCE over two dropout views + 0.1·MLM (15%, 80/10/10, BERT's MLM head)"
    Params = SimCSEMLMParams

    def __init__(self, encoder, tokenizer, params: SimCSEMLMParams, seed: int = 0):
        super().__init__(encoder, tokenizer, params, seed)
        words = encoder.get_input_embeddings().weight
        self.lm_head = LMHead(words.size(1), words.size(0), getattr(encoder.config, "layer_norm_eps", 1e-12))
        self.lm_head_source = init_lm_head(self.lm_head, encoder, params.lm_head, self.id or "simcse_mlm")
        self.module_init["lm_head"] = "checkpoint" if self.lm_head_source == "pretrained" else "random"
        self.lm_decoder = None
        if params.decoder == "copy":
            self.lm_decoder = nn.Linear(words.size(1), words.size(0), bias=False)
            with torch.no_grad():
                self.lm_decoder.weight.copy_(words)
            self.module_init["lm_decoder"] = "checkpoint (word embeddings)"

    # --- the mechanisms --------------------------------------------------------
    def corrupt(self, enc: dict[str, torch.Tensor], batch: Batch) -> dict[str, object]:
        """MLM's inputs for the doubled batch ``enc``, drawn from ``batch.rng("mlm")``: ``mlm`` (the token inputs,
        ids corrupted), ``mlm_index`` (the target positions in the flattened grid) and ``mlm_targets`` (their
        original tokens)."""
        g = torch.Generator().manual_seed(batch.rng("mlm").getrandbits(63))
        ids, att = enc["input_ids"], enc["attention_mask"]
        inputs, labels = mlm_mask(ids, mlm_special(ids, att, self.tokenizer), self.tokenizer, self.params.mlm_prob,
                                  generator=g)
        index = (labels != -100).flatten().nonzero().squeeze(1)
        return {"mlm": {**enc, "input_ids": inputs}, "mlm_index": index, "mlm_targets": labels.flatten()[index]}

    def output_weight(self) -> torch.Tensor:
        """The MLM head's output matrix: the trainable copy, or the word embeddings (``decoder: tied``)."""
        return self.lm_decoder.weight if self.lm_decoder is not None else self.encoder.get_input_embeddings().weight

    def mlm_loss(self, features: dict) -> torch.Tensor:
        """L_MLM of the prepared (device) features of :meth:`corrupt`."""
        return masked_lm_loss(self.encoder, self.lm_head, self.output_weight(), features["mlm"],
                              features["mlm_index"], features["mlm_targets"])

    # --- the algorithm ---------------------------------------------------------
    def prepare(self, batch: Batch) -> Batch:
        enc = self.encode_text(batch.sentences)
        return replace(batch, features={"enc": enc, **self.corrupt(doubled(enc), batch)})

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        features = self.prepared(batch)
        z1, z2 = self.views(features)
        loss_cl = in_batch_info_nce(z1, z2, self.params.temperature)
        loss_mlm = self.mlm_loss(features)
        return {"loss": loss_cl + self.params.mlm_weight * loss_mlm, "loss_cl": loss_cl.detach(),
                "loss_mlm": loss_mlm.detach()}

    def export_info(self) -> dict:
        return {**super().export_info(), "lm_head": self.lm_head_source, "mlm_weight": self.params.mlm_weight,
                "training_only": ["mlp", "lm_head", *(["lm_decoder"] if self.lm_decoder is not None else [])]}
