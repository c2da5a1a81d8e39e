"""MoCo-BERT and its discrete-augmentation variants (PT-BERT Table 3), docs/methods.md#moco-bert.

Registered ids: ``moco`` (no augmentation), ``moco_reorder``,
``moco_duplication``, ``moco_deletion``, ``moco_srl``. One class,
:class:`MoCo`, with the key-branch augmentation as a class attribute; the
variants are small subclasses (and carry their own params: the rate).
"""

from __future__ import annotations

import copy
from typing import ClassVar, Literal, Optional

import torch
from pydantic import Field
from torch import nn

from ..augment import span_text, make_augmenter
from ..errors import SentlabError
from ..runtime.distributed import concat_all_gather, rank
from . import register
from ._common import MLPHead, augmentation_info, info_nce
from .base import Batch, ContrastiveParams, Method, MethodParams, PaperAvg


class MoCoParams(ContrastiveParams):
    momentum: float = Field(0.885, ge=0.0, le=1.0, description="λ in θk ← λθk + (1−λ)θq (PT-BERT Sec. 4.2)")
    queue_size: int = Field(
        256, gt=0, description="M: candidates per query, the current (global) batch's keys included")
    optimizer: Literal["adamw", "adamw_transformers"] = Field(
        "adamw", description="adamw: torch's AdamW | adamw_transformers: the HF Trainer's AdamW of the releases "
                             "(transformers 4.2: ε added to √v before the bias correction, sentlab.nn.optim.AdamWLegacy"
                             "(correct_bias=True); smaller steps where √v̂ ~ ε; the paper profile of esimcse/ptbert)")
    key_dropout: bool = Field(True, description="the momentum key encoder (the backbone copy) in train mode, dropout "
                                                "on, while it encodes keys; false: eval mode. That copy only: the key "
                                                "MLP has no dropout, PT-BERT's key attention keeps attn_dropout")


class RateParams(MoCoParams):
    rate: float = Field(0.1, ge=0.0, le=1.0, description="fraction of words duplicated / deleted in the key sentence")


class SRLParams(MoCoParams):
    srl_min_args: int = Field(
        1, ge=0, description="frames with fewer core arguments (ARG0, ARG1) are not used to build the key (0: every "
                             "frame; a frame without arguments would make the key a bare verb)")


def momentum_update(online: nn.Module, key: nn.Module, momentum: float) -> None:
    """θk ← λθk + (1−λ)θq for every parameter pair (in place, no gradient)."""
    with torch.no_grad():
        for p_q, p_k in zip(online.parameters(), key.parameters()):
            p_k.mul_(momentum).add_(p_q.detach(), alpha=1.0 - momentum)


def frozen_copy(module: nn.Module) -> nn.Module:
    """A momentum copy: same weights, no gradients (MoCo initialises θk = θq)."""
    k = copy.deepcopy(module)
    for p in k.parameters():
        p.requires_grad_(False)
    return k


@register("moco")
class MoCo(Method):
    """MoCo-BERT: a query encoder, a momentum key encoder and a FIFO queue of keys.

    He, Fan, Wu, Xie & Girshick, "Momentum Contrast for Unsupervised Visual
    Representation Learning", CVPR 2020 (structure of facebookresearch/moco
    ``builder.py``), applied to BERT as the MoCo baseline of Tan et al.,
    "A Sentence is Worth 128 Pseudo Tokens" (PT-BERT), ACL 2022, Sec. 3.2 /
    Table 3; docs/methods.md#moco-bert.

    Per batch of B sentences:

    1. ``q = MLP_q([CLS] of encoder_q(s))`` — the query (gradient);
    2. ``k = MLP_k([CLS] of encoder_k(aug(s)))`` — the key, no gradient, from
       the momentum copies of the encoder and the MLP, on the augmented
       sentence (``augmentation``: none | reorder | duplication | deletion | srl,
       see :mod:`sentlab.augment`);
    3. candidates = the current batch's keys (gathered across ranks) followed
       by the queued keys, newest first: ``M = queue_size`` in total once the
       queue is full (batch 64 + the previous 3 batches = 256); the positive of
       query i is candidate i (rank·B + i under DDP) — the diagonal;
    4. InfoNCE over cos/τ (PT-BERT Eq. 4);
    5. the current keys enter the queue, the oldest leave (FIFO of keys: a
       batch's row i counts as older than its row i+1, so a queue that is not a
       whole number of batches keeps the last rows of its oldest batch, as a ring
       buffer and the ESimCSE release do; :meth:`_dequeue_and_enqueue`);
    6. after each optimiser step: θk ← λθk + (1−λ)θq, λ = 0.885 (Eq. 5).

    The queue starts empty (as the authors' released code, whose queue is a
    list of batches): the first steps have fewer candidates. It is a
    registered buffer (``queue``, ``queue_len``), so checkpoints and resume
    carry it; its fill level is also kept as a Python int, so a step reads
    nothing back from the GPU. Tokenisation and the key's augmentation run in
    :meth:`prepare` (DataLoader workers); the augmentation RNG of micro-batch t
    is :meth:`Batch.rng` (``random.Random(f"{seed}:{t}")``), so augmented keys
    are reproducible and resumable.

    Inference: the query encoder's last-layer [CLS] without the MLP.

    Example::

        m = MoCo(bert, tok, MoCo.Params(queue_size=256, batch_size=64, max_length=32))
        out = m(Batch(sentences)); out["loss"].backward(); opt.step(); m.after_optimizer_step()
    """

    # MoCo-BERT and its augmentations are PT-BERT's baselines (its Tables 3, 4); PT-BERT inherits these
    paper = ("Tan et al.: A Sentence is Worth 128 Pseudo Tokens: A Semantic-Aware Contrastive Learning Framework "
             "for Sentence Embeddings (Findings of ACL 2022)")
    citation = """@inproceedings{tan2022ptbert,
  title = {A Sentence is Worth 128 Pseudo Tokens: A Semantic-Aware Contrastive Learning Framework for Sentence \
Embeddings},
  author = {Tan, Haochen and Shao, Wei and Wu, Han and Yang, Ke and Song, Linqi},
  booktitle = {Findings of the Association for Computational Linguistics: ACL 2022},
  year = {2022}
}"""
    run_name_params = ("queue_size", "momentum")
    paper_avg = PaperAvg(75.46, "PT-BERT Table 3 (MoCo)")
    summary = "MoCo-BERT: momentum key encoder (λ=0.885) + FIFO queue, 256 candidates, InfoNCE; no augmentation"
    Params: ClassVar[type[MethodParams]] = MoCoParams
    inference_pooling = "cls"
    augmentation: ClassVar[str] = "none"

    def __init__(self, encoder, tokenizer, params: MoCoParams, seed: int = 0):
        super().__init__(encoder, tokenizer, params, seed)
        hidden = encoder.config.hidden_size
        self.mlp = MLPHead.of(encoder.config)
        self.key_encoder = frozen_copy(self.encoder)
        self.key_mlp = frozen_copy(self.mlp)
        self.register_buffer("queue", torch.zeros(self._queue_capacity(params), hidden))
        self.register_buffer("queue_len", torch.zeros((), dtype=torch.long))
        self._filled: Optional[int] = 0  # queue_len as a Python int (read from the buffer once after a load)
        self._blocks: Optional[list[int]] = []  # rows of each queued batch, newest first (_dequeue_and_enqueue)
        self._augment_fn = make_augmenter(self.augmentation, getattr(params, "rate", 0.0))

    def _queue_capacity(self, params: MoCoParams) -> int:
        """Keys the queue holds: ``queue_size`` candidates less the current (global) batch, which leads them."""
        global_batch = params.batch_size or 0  # the global batch (every rank together)
        queue_len = params.queue_size - global_batch
        if queue_len < 0:
            raise SentlabError(
                f"methods.{self.id}.queue_size = {params.queue_size} is smaller than the global batch "
                f"(train.batch_size {global_batch}); the candidate set includes the current batch, so set "
                f"methods.{self.id}.queue_size >= {global_batch} (paper: 256 for batch 64).")
        return queue_len

    def _load_from_state_dict(self, *args, **kwargs):
        super()._load_from_state_dict(*args, **kwargs)
        self._filled = self._blocks = None

    def configure_optimizers(self, *, weight_decay: float = 0.0, fused: bool = False) -> torch.optim.Optimizer:
        """``optimizer: adamw`` — torch's AdamW (the base class's); ``adamw_transformers`` — the AdamW of the HF
        Trainer the releases ran (transformers 4.2, ``correct_bias=True``, ε 1e-8, the decay after the step)."""
        if self.params.optimizer == "adamw":
            return super().configure_optimizers(weight_decay=weight_decay, fused=fused)
        from ..nn.optim import AdamWLegacy

        return AdamWLegacy(list(self.trainable_parameters()), lr=self.params.lr, eps=1e-8,
                           weight_decay=weight_decay, correct_bias=True)

    # --- the mechanisms --------------------------------------------------------
    def _momentum_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        """(online, momentum copy) module pairs updated after each optimiser step."""
        return [(self.encoder, self.key_encoder), (self.mlp, self.key_mlp)]

    @torch.no_grad()
    def _momentum_update_key_encoder(self) -> None:
        for online, key in self._momentum_pairs():
            momentum_update(online, key, self.params.momentum)

    @torch.no_grad()
    def _dequeue_and_enqueue(self, keys: torch.Tensor) -> None:
        """Put ``keys`` (already gathered across ranks) in front of the queue; the oldest keys leave.

        The queue holds the newest ``queue.size(0)`` keys in the order they were made (a batch's row i before its
        row i+1): whole batches, newest first, each in its own row order; when the oldest batch no longer fits
        whole, its *last* rows stay — the set of a FIFO of single keys (MoCo's ring buffer), and the set of the
        ESimCSE release's ``torch.cat((pre_z1, eval_z))[-neg_size:]`` (issue #66). Python ints only (the batches'
        sizes in :attr:`_blocks`): no read from the device."""
        size = self.queue.size(0)
        if size == 0:
            return
        n = self._queue_filled()
        blocks = [keys.size(0)] + self._queue_blocks(n, keys.size(0))
        merged = torch.cat([keys.detach().float(), self.queue[:n]], dim=0)
        total = merged.size(0)
        while total > size:                        # drop the oldest rows: the first rows of the oldest batch
            excess, last = total - size, blocks[-1]
            start = total - last
            if last <= excess:
                merged, total = merged[:start], start
                blocks.pop()
            else:
                merged = torch.cat([merged[:start], merged[start + excess:]], dim=0)
                blocks[-1], total = last - excess, total - excess
        self.queue[:total] = merged
        self._filled, self._blocks = total, blocks
        self.queue_len.fill_(self._filled)

    def _queue_blocks(self, n: int, batch: int) -> list[int]:
        """Rows of each batch in the queue, newest first (the oldest may hold only its last rows). After a
        ``load_state_dict`` (which keeps the keys, not the batches' sizes) the queue is read as batches of the
        current size, its oldest batch partial: what a run of one batch size leaves."""
        if getattr(self, "_blocks", None) is None or sum(self._blocks) != n:
            whole, rest = divmod(n, batch)
            self._blocks = [batch] * whole + ([rest] if rest else [])
        return self._blocks

    def _queue_filled(self) -> int:
        if self._filled is None:
            self._filled = int(self.queue_len)
        return self._filled

    def _candidates(self, keys: torch.Tensor) -> torch.Tensor:
        """The current batch's keys followed by the queued keys (newest first)."""
        return torch.cat([keys.float(), self.queue[: self._queue_filled()]], dim=0)

    def _augment(self, batch: Batch) -> list[str]:
        if self.augmentation == "none":
            return list(batch.sentences)
        rng = batch.rng()
        frames = batch.extras.get("frames") or [None] * len(batch)
        return [self._augment_fn(s, rng, self._key_frames(f)) for s, f in zip(batch.sentences, frames)]

    def _key_frames(self, frames):
        """The annotation frames a sentence's key is built from (the SRL variant filters them)."""
        return frames

    def _cls(self, encoder: nn.Module, enc) -> torch.Tensor:
        return encoder(**enc, return_dict=True).last_hidden_state[:, 0]

    def _query(self, enc) -> torch.Tensor:
        return self.mlp(self._cls(self.encoder, enc))

    def _key_head(self) -> nn.Module:
        """The head over the key encoder's [CLS]: the momentum copy of the MLP."""
        return self.key_mlp

    @torch.no_grad()
    def _key(self, enc) -> torch.Tensor:
        was_training = self.key_encoder.training
        self.key_encoder.train(was_training and self.params.key_dropout)
        try:
            return self._key_head()(self._cls(self.key_encoder, enc))
        finally:
            self.key_encoder.train(was_training)

    # --- the algorithm ---------------------------------------------------------
    def prepare(self, batch: Batch) -> Batch:
        batch.features = {"query": self.encode_text(batch.sentences), "key": self.encode_text(self._augment(batch))}
        return batch

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        features = self.prepared(batch)
        q = self._query(features["query"])
        k = concat_all_gather(self._key(features["key"]).float())
        candidates = self._candidates(k)
        positives = torch.arange(q.size(0), device=q.device) + rank() * q.size(0)
        loss = info_nce(q, candidates, self.params.temperature, positives)
        self._dequeue_and_enqueue(k)
        return {"loss": loss, "candidates": float(candidates.size(0))}

    def after_optimizer_step(self) -> None:
        self._momentum_update_key_encoder()

    def export_info(self) -> dict:
        return {**super().export_info(), **augmentation_info(self.augmentation, self.params)}


@register("moco_reorder")
class MoCoReorder(MoCo):
    """MoCo-BERT, key sentence = its words in a random order (:func:`sentlab.augment.reorder`)."""

    run_name_params = ("queue_size", "momentum")
    paper_avg = PaperAvg(73.78, "PT-BERT Table 3 (MoCo+reorder)")
    summary = "MoCo-BERT + reorder: the key sees the sentence's words shuffled"
    augmentation = "reorder"


@register("moco_duplication")
class MoCoDuplication(MoCo):
    """MoCo-BERT, key sentence with ``rate`` of its words repeated (:func:`sentlab.augment.duplicate`)."""

    run_name_params = ("queue_size", "momentum", "rate")
    paper_avg = PaperAvg(75.08, "PT-BERT Table 3 (MoCo+duplication)")
    summary = "MoCo-BERT + duplication: the key repeats `rate` (10%) of the words"
    Params = RateParams
    augmentation = "duplication"


@register("moco_deletion")
class MoCoDeletion(MoCo):
    """MoCo-BERT, key sentence with ``rate`` of its words deleted (:func:`sentlab.augment.delete`)."""

    run_name_params = ("queue_size", "momentum", "rate")
    paper_avg = PaperAvg(75.40, "PT-BERT Table 3 (MoCo+deletion)")
    summary = "MoCo-BERT + deletion: the key drops `rate` (10%) of the words"
    Params = RateParams
    augmentation = "deletion"


@register("moco_srl")
class MoCoSRL(MoCo):
    """MoCo-BERT, key sentence rebuilt from its predicate-argument frames (:func:`sentlab.augment.srl_rebuild`).

    Needs the annotation stage's ``frames`` column (heuristic frames; the
    paper used a neural SRL model, see docs/annotation.md#what-the-frames-are).

    Choice (param ``srl_min_args``, default 1): a frame with fewer than that many core
    arguments (non-empty ARG0 / ARG1; ARGM-NEG is a modifier and does not count) is left out
    of the key; a sentence with no frame left keeps its own text as the key, as one without
    frames does. Without it a frame with no argument turns the key into a bare verb.
    """

    run_name_params = ("queue_size", "momentum")
    paper_avg = PaperAvg(76.26, "PT-BERT Table 3 (MoCo+SRL)")
    summary = "MoCo-BERT + SRL-guided: the key is [ARG0 PRED ARGM-NEG ARG1] of every frame (annotation stage)"
    Params = SRLParams
    corpus_columns = ("frames",)
    augmentation = "srl"
    core_args: ClassVar[tuple[str, ...]] = ("arg0", "arg1")

    def _n_args(self, frame) -> int:
        return sum(span_text(frame.get(a)) is not None for a in self.core_args)

    def _key_frames(self, frames):
        return [f for f in frames or () if self._n_args(f) >= self.params.srl_min_args]

    def export_info(self) -> dict:
        return dict(super().export_info(), srl_min_args=self.params.srl_min_args)
