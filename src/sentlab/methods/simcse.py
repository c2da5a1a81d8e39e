"""Unsupervised SimCSE (Gao et al., EMNLP 2021), docs/methods.md#simcse."""

from __future__ import annotations

from dataclasses import replace

import torch

from . import register
from ._common import MLPHead, in_batch_info_nce, two_views
from .base import Batch, ContrastiveParams, Method, PaperAvg

SIMCSE_PAPER = "Gao, Yao and Chen: SimCSE: Simple Contrastive Learning of Sentence Embeddings (EMNLP 2021)"
SIMCSE_CITATION = """@inproceedings{gao2021simcse,
  title = {{SimCSE}: Simple Contrastive Learning of Sentence Embeddings},
  author = {Gao, Tianyu and Yao, Xingcheng and Chen, Danqi},
  booktitle = {Proceedings of the 2021 Conference on Empirical Methods in Natural Language Processing},
  year = {2021}
}"""


class SimCSEParams(ContrastiveParams):
    """``methods.simcse`` in params.yaml: τ and the train keys a method may set for itself (the paper's
    dev interval of 250 steps, PT-BERT Table 2's max lengths 32/64/128)."""


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

        method = SimCSE(bert, tok, SimCSE.Params(max_length=32, temperature=0.05))
        out = method(Batch(["a cat sat", "dogs bark"]))
        out["loss"].backward()
    """

    paper, citation = SIMCSE_PAPER, SIMCSE_CITATION
    run_name_params = ("max_length",)
    paper_avg = PaperAvg(76.25, "SimCSE Table 5 (SimCSE-BERTbase), as the papers quote it")
    summary = "SimCSE (unsup.): two dropout views, in-batch InfoNCE, [CLS]+MLP in training, [CLS] at test"
    Params = SimCSEParams
    inference_pooling = "cls"
    pad_buckets_ok = True   # [CLS] of a masked encoder: padding-neutral (tests/test_compiled_step.py)

    def __init__(self, encoder, tokenizer, params: SimCSEParams, seed: int = 0):
        super().__init__(encoder, tokenizer, params, seed)
        self.mlp = MLPHead.of(encoder.config)

    def prepare(self, batch: Batch) -> Batch:
        return replace(batch, features={"enc": self.encode_text(batch.sentences)})

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        z1, z2 = self.views(self.prepared(batch))
        return {"loss": in_batch_info_nce(z1, z2, self.params.temperature)}

    def views(self, features: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """The two views ``(z1, z2)``: the doubled batch, two dropout masks (the variants change this only)."""
        return two_views(self._embed, features["enc"])

    def _embed(self, enc: dict[str, torch.Tensor]) -> torch.Tensor:
        """z = MLP([CLS]) of the last layer."""
        return self.mlp(self.encoder(**enc, return_dict=True).last_hidden_state[:, 0])
