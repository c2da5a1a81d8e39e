"""Unsupervised SimCSE (Gao et al., EMNLP 2021), SPEC §3.2."""

from __future__ import annotations

from typing import Optional

import torch
from pydantic import Field

from . import register
from ._common import MLPHead, in_batch_info_nce
from .base import Batch, Method, MethodParams


class SimCSEParams(MethodParams):
    max_length: Optional[int] = Field(
        None, gt=0, description="training max length in tokens (None: train.max_length); PT-BERT Table 2 ablation 32/64/128")
    eval_every: Optional[int] = Field(None, gt=0, description="dev evaluation interval for this method (None: train.eval_every; SimCSE: 250)")


@register("simcse")
class SimCSE(Method):
    """Unsupervised SimCSE: dropout is the augmentation.

    Gao, Yao & Chen, "SimCSE: Simple Contrastive Learning of Sentence
    Embeddings", EMNLP 2021, Sec. 3 / Eq. 4. Each batch of N sentences is
    encoded *once* as a doubled batch ``[s_1..s_N, s_1..s_N]``, so the two
    copies of a sentence get different dropout masks; ``z = MLP([CLS])``; the
    loss is InfoNCE over cos/τ with the two views of sentence i as positives
    and the other N−1 second views as negatives.

    Inputs: ``Batch.sentences`` (raw text). Inference: last-layer [CLS]
    without the MLP (``cls_before_pooler``).

    Example::

        method = SimCSE(bert, tok, SimCSE.Params(), train_cfg)
        out = method(Batch(["a cat sat", "dogs bark"]))
        out["loss"].backward()
    """

    summary = "SimCSE (unsup.): two dropout views, in-batch InfoNCE, [CLS]+MLP in training, [CLS] at test"
    Params = SimCSEParams
    inference_pooling = "cls"

    def __init__(self, encoder, tokenizer, params: SimCSEParams, train_cfg, seed: int = 0):
        super().__init__(encoder, tokenizer, params, train_cfg, seed)
        self.mlp = MLPHead(encoder.config.hidden_size)

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        n = len(batch)
        enc = self.tokenize(list(batch.sentences) * 2, max_length=self.params.max_length)
        cls = self.encoder(**enc, return_dict=True).last_hidden_state[:, 0]
        z = self.mlp(cls)
        z1, z2 = z[:n], z[n:]
        loss = in_batch_info_nce(z1, z2, self.train_cfg.temperature)
        return {"loss": loss}
