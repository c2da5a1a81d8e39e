"""ConSERT, unsupervised (Yan et al., ACL 2021), PaSeR Table 1's "ConSERTbase"; docs/methods.md#consert."""

from __future__ import annotations

import math
import random
from contextlib import contextmanager
from dataclasses import replace
from typing import Literal

import torch
from pydantic import Field

from ..nn.encoder import NEEDS_HIDDEN_STATES, pool
from ..errors import SentlabError
from ..config.poolings import TextPoolingName
from . import register
from ._common import doubled, nt_xent, paired_views
from ..nn.optim import AdamWLegacy
from .base import Batch, ContrastiveParams, Method, PaperAvg, adamw

VIEWS = ("none", "shuffle", "token_cutoff", "feature_cutoff")
View = Literal["none", "shuffle", "token_cutoff", "feature_cutoff"]
Pooling = TextPoolingName   # any declared pooling of the text itself (no template)


class ConSERTParams(ContrastiveParams):
    """``methods.consert``. Defaults: the released unsupervised script (``scripts/unsup-consert-base.sh``); the
    paper profile sets its batch 96, max length 64, lr 5e-7, 10 epochs and dev every 200 steps."""

    temperature: float = Field(0.1, gt=0, description="τ of NT-Xent (ConSERT: 0.1)")
    corpus: Literal["sts_all_sides", "sts_unlabeled", "train"] = Field(
        "sts_all_sides", description="training sentences: sts_all_sides (the code's --train_data stssick --no_pair: "
        "both sides of every pair in the seven STS/SICK files, unscored STS15/16 pairs included, repeats kept), "
        "sts_unlabeled (their distinct sentences of scored pairs) or the Wikipedia corpus")
    warmup: float = Field(0.1, ge=0, lt=1, description="share of the optimiser steps with a linear warm-up, rounded "
                                                       "up (main.py: 10 %), then the linear decay")
    optimizer: Literal["adamw_legacy", "adamw"] = Field(
        "adamw_legacy", description="adamw_legacy: main.py's transformers AdamW (correct_bias=False, the decay "
        "after the step; sentlab.nn.optim.AdamWLegacy); adamw: torch's AdamW (bias-corrected)")
    adam_eps: float = Field(1e-6, gt=0, description="Adam's ε (main.py: 1e-6)")
    weight_decay: float = Field(0.01, ge=0, description="decoupled weight decay of every tensor but biases and "
                                                        "LayerNorm (sentence-transformers' fit: 0.01; replaces "
                                                        "train.weight_decay)")
    view1: View = Field("feature_cutoff", description="augmentation of the first view (the script's da_final_1)")
    view2: View = Field("shuffle", description="augmentation of the second view (da_final_2); token shuffle + "
                                               "feature cutoff is the best pair of the paper's augmentation study")
    cutoff_rate: float = Field(0.2, gt=0, lt=1, description="share of the feature columns (feature_cutoff) or of "
                                                            "the tokens (token_cutoff) zeroed (cutoff_rate_final_1)")
    loss_weight: float = Field(0.15, gt=0, description="factor on the NT-Xent loss (the script's --cl_rate 0.15)")
    dropout: bool = Field(False, description="dropout in training (the script passes --no_dropout: off)")
    train_pooling: Pooling = Field("mean", description="pooling of the training views (the code: last-layer mean)")
    pooling: Pooling = Field("top2_mean", description="pooling of the exported encoder: the mean of the last two "
                                                      "layers' token averages (the README's reported setting)")


def _permuted(n: int, length: int, rng: random.Random) -> list[int]:
    """The first ``n`` of ``range(length)`` in a random order, the rest (padding) in place."""
    head = list(range(n))
    rng.shuffle(head)
    return head + list(range(n, length))


def _chosen(n: int, k: int, rng: random.Random) -> list[int]:
    """``k`` distinct indexes of ``range(n)``."""
    return rng.sample(range(n), k)


@register("consert")
class ConSERT(Method):
    """ConSERT: contrast two views made by augmenting the embedding layer, NT-Xent over cos/τ.

    Yan, Li, Wang, Zhang, Wu & Xu, "ConSERT: A Contrastive Framework for Self-Supervised Sentence Representation
    Transfer", ACL 2021 (code: yym6472/ConSERT, ``AdvCLSoftmaxLoss`` and its modified ``BertModel``).

    Per batch of N sentences (each view one setting of :data:`VIEWS`, drawn in :meth:`prepare` from
    :meth:`Batch.rng`, both views in one forward pass of the ``2N``-row batch):

    * ``shuffle`` (token shuffle): the position ids of the sentence's tokens ([CLS] and [SEP] included, padding
      not) are permuted; the token ids stay where they are (:meth:`shuffled_positions`);
    * ``feature_cutoff``: ``int(d · cutoff_rate)`` random feature columns of the embedding layer's output are
      zeroed at every position (:meth:`cutoff_features`);
    * ``token_cutoff``: ``int(#tokens · cutoff_rate)`` random token rows of it are zeroed;
    * ``none``: the sentence as it is.

    The views pass the encoder with dropout off (``dropout``: false, the script's ``--no_dropout``) and are pooled
    by ``train_pooling`` (last-layer mean); the loss is NT-Xent (:func:`~sentlab.methods._common.nt_xent`: 2N−2
    negatives, the two directions summed) times ``loss_weight``. No projection head. Inference: the bare encoder
    with ``pooling`` (mean of the last two layers).

    Training as the code's ``main.py`` and sentence-transformers' ``fit`` (the defaults): ``corpus``
    ``sts_all_sides`` (both sides of every STS/SICK pair, unscored pairs and repeats included: 89,192 sentences
    on the SentEval files), the linear schedule after a ``warmup`` of 10 % of the steps, transformers' old AdamW
    without bias correction (``optimizer: adamw_legacy``, ε 1e-6), weight decay 0.01 on every tensor but biases
    and LayerNorm, one gradient norm over all of them clipped at ``train.max_grad_norm`` (1).
    ``benchmarks/released/consert.py`` checks the loss and gradients against the released code.
    """

    paper = ("Yan et al.: ConSERT: A Contrastive Framework for Self-Supervised Sentence Representation Transfer "
             "(ACL 2021)")
    citation = """@inproceedings{yan2021consert,
  title = {{ConSERT}: A Contrastive Framework for Self-Supervised Sentence Representation Transfer},
  author = {Yan, Yuanmeng and Li, Rumei and Wang, Sirui and Zhang, Fuzheng and Wu, Wei and Xu, Weiran},
  booktitle = {Proceedings of the 59th Annual Meeting of the Association for Computational Linguistics and the 11th \
International Joint Conference on Natural Language Processing (Volume 1: Long Papers)},
  year = {2021}
}"""
    run_name_params = ("view1", "view2", "cutoff_rate")
    paper_avg = PaperAvg(72.74, "ConSERT as PaSeR Table 1 prints it")
    summary = "ConSERT (unsup.): feature-cutoff and token-shuffle views of the embeddings, NT-Xent τ=0.1; last-2 mean"
    Params = ConSERTParams

    def __init__(self, encoder, tokenizer, params: ConSERTParams, seed: int = 0):
        super().__init__(encoder, tokenizer, params, seed)
        if getattr(encoder, "embeddings", None) is None:
            raise SentlabError(f"ConSERT augments the output of the encoder's embedding layer; "
                               f"{type(encoder).__name__} has no `embeddings` module.")
        kind = getattr(encoder.config, "position_embedding_type", "absolute")
        if "shuffle" in (params.view1, params.view2) and kind != "absolute":
            raise SentlabError(f"methods.{self.id or 'consert'}: token shuffle permutes absolute position ids; this "
                               f"backbone's positions are {kind!r}. Choose other views (view1/view2).")
        self.hidden = encoder.config.hidden_size
        padding_idx = getattr(encoder.embeddings, "padding_idx", None)  # RoBERTa counts positions from pad + 1
        self.position_offset = 0 if padding_idx is None else padding_idx + 1

    def corpus_name(self) -> str:
        return self.params.corpus

    def warmup_steps(self, total_steps: int) -> int:
        return math.ceil(total_steps * self.params.warmup)

    @property
    def grad_clip(self) -> str:
        return "global"   # fit's clip_grad_norm_(loss_model.parameters(), 1): one norm over both groups

    def configure_optimizers(self, *, weight_decay: float = 0.0, fused: bool = False) -> torch.optim.Optimizer:
        """sentence-transformers' ``fit`` (the code's trainer): two groups, ``weight_decay`` on every tensor but
        biases and LayerNorm (``no_decay = ['bias', 'LayerNorm.bias', 'LayerNorm.weight']``), 0 on those; the
        loop's ``train.weight_decay`` is not used (the block's own ``weight_decay`` is)."""
        p = self.params
        named = [(n, t) for n, t in self.named_parameters() if t.requires_grad]
        plain = [t for n, t in named if not any(k in n for k in ("bias", "LayerNorm.weight"))]
        exempt = [t for n, t in named if any(k in n for k in ("bias", "LayerNorm.weight"))]
        groups = [{"params": plain, "weight_decay": p.weight_decay}, {"params": exempt, "weight_decay": 0.0}]
        if p.optimizer == "adamw":
            opt = adamw(groups, lr=p.lr, fused=fused)
            for g in opt.param_groups:
                g["eps"] = p.adam_eps
            return opt
        return AdamWLegacy([g for g in groups if g["params"]], lr=p.lr, eps=p.adam_eps, correct_bias=False,
                           decay="after")

    # --- the augmentations (CPU, in prepare) -------------------------------------------
    def shuffled_positions(self, attention_mask: torch.Tensor, rng: random.Random) -> torch.Tensor:
        """Position ids ``(N, L)``: each row's real tokens' positions permuted, the padding's in place."""
        n, length = attention_mask.shape
        rows = [_permuted(int(k), length, rng) for k in attention_mask.sum(1)]
        return torch.tensor(rows, dtype=torch.long).reshape(n, length) + self.position_offset

    def cutoff_features(self, n: int, rng: random.Random) -> torch.Tensor:
        """Keep-masks ``(N, d)``: 0 on ``int(d · cutoff_rate)`` random columns per row."""
        keep = torch.ones(n, self.hidden)
        for i in range(n):
            keep[i, _chosen(self.hidden, int(self.hidden * self.params.cutoff_rate), rng)] = 0.0
        return keep

    def cutoff_tokens(self, attention_mask: torch.Tensor, rng: random.Random) -> torch.Tensor:
        """Keep-masks ``(N, L)``: 0 on ``int(#tokens · cutoff_rate)`` random real tokens per row."""
        keep = torch.ones(attention_mask.shape)
        for i, k in enumerate(attention_mask.sum(1).tolist()):
            keep[i, _chosen(int(k), int(k * self.params.cutoff_rate), rng)] = 0.0
        return keep

    def view(self, kind: str, attention_mask: torch.Tensor, rng: random.Random) -> dict[str, torch.Tensor]:
        """One view's position ids ``(N, L)`` and keep-masks of the embedding output, tokens ``(N, L)`` and
        features ``(N, d)``."""
        n, length = attention_mask.shape
        out = {"position_ids": torch.arange(length).repeat(n, 1) + self.position_offset,
               "keep_tokens": torch.ones(n, length), "keep_features": torch.ones(n, self.hidden)}
        if kind == "shuffle":
            out["position_ids"] = self.shuffled_positions(attention_mask, rng)
        elif kind == "feature_cutoff":
            out["keep_features"] = self.cutoff_features(n, rng)
        elif kind == "token_cutoff":
            out["keep_tokens"] = self.cutoff_tokens(attention_mask, rng)
        elif kind != "none":
            raise SentlabError(f"ConSERT view {kind!r}; allowed: {', '.join(VIEWS)}")
        return out

    # --- the encoder with an augmented embedding layer --------------------------------
    @contextmanager
    def embedding_masks(self, keep_tokens: torch.Tensor, keep_features: torch.Tensor):
        """Within the block the embedding layer's output is multiplied by ``keep_tokens[:, :, None] ·
        keep_features[:, None, :]`` (the cutoffs; ones leave it as it is)."""
        def hook(_module, _inputs, output):
            return output * (keep_tokens[:, :, None] * keep_features[:, None, :]).to(output.dtype)

        handle = self.encoder.embeddings.register_forward_hook(hook)
        try:
            yield
        finally:
            handle.remove()

    @contextmanager
    def training_dropout(self):
        """The encoder without dropout in the block when ``dropout`` is false (eval mode: BERT's only
        train/eval difference is dropout); the gradient flows as usual."""
        was = self.encoder.training
        self.encoder.train(was and self.params.dropout)
        try:
            yield
        finally:
            self.encoder.train(was)

    def _embed(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        enc = features["enc"]
        with self.embedding_masks(features["keep_tokens"], features["keep_features"]), self.training_dropout():
            out = self.encoder(**enc, position_ids=features["position_ids"], return_dict=True,
                               output_hidden_states=self.params.train_pooling in NEEDS_HIDDEN_STATES)
        return pool(out, enc["attention_mask"], self.params.train_pooling)

    # --- the algorithm -----------------------------------------------------------------
    def prepare(self, batch: Batch) -> Batch:
        enc = self.encode_text(batch.sentences)
        rng = batch.rng("consert")
        v1, v2 = (self.view(kind, enc["attention_mask"], rng) for kind in (self.params.view1, self.params.view2))
        both = {k: torch.cat([v1[k], v2[k]], dim=0) for k in v1}
        return replace(batch, features={"enc": doubled(enc), **both})

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        z1, z2 = paired_views(self._embed, self.prepared(batch))
        return {"loss": self.params.loss_weight * nt_xent(z1, z2, self.params.temperature)}

    def export_info(self) -> dict:
        p = self.params
        return {**super().export_info(), "views": [p.view1, p.view2], "cutoff_rate": p.cutoff_rate}
