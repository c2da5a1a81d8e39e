"""The contract between a method and the method-agnostic training loop.

A method owns everything specific to it: its loss, its extra modules
(MLP heads, momentum copies, queues, decoders …), the extras it needs from the
annotation stage, and its inference pooling. The loop in :mod:`sentlab.train`
owns the optimiser, schedule, dev evaluation, checkpoints, resume and MLflow.

Lifecycle, per optimiser step (``grad_accum`` micro-batches)::

    out = method(batch)            # forward: {"loss": tensor, <scalars to log>...}
    out["loss"].backward()
    optimizer.step(); scheduler.step()
    method.after_optimizer_step()  # e.g. the momentum update of a key encoder

Everything a resumed run needs (weights, momentum copies, queues as
registered buffers) must live in ``state_dict()``; plain Python state must be
returned by ``extra_state()`` / restored by ``load_extra_state()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional

import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import nn

from ..encoder import SentenceEncoder


class MethodParams(BaseModel):
    """Base of every method's own params block (``methods.<id>`` in params.yaml).

    Every method accepts the train keys of :data:`sentlab.train.run.METHOD_TRAIN_OVERRIDES`: set in
    a method's block they replace ``train.<key>`` for that method's run (None: the train block's
    value), e.g. PaSeR's 5 epochs or PT-BERT's dev interval of 125 steps in the paper profile.
    """

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    epochs: Optional[int] = Field(None, gt=0, description="train.epochs for this method (None: train.epochs)")
    batch_size: Optional[int] = Field(None, gt=0, description="train.batch_size for this method (None: train.batch_size)")
    lr: Optional[float] = Field(None, gt=0, description="train.lr for this method (None: train.lr)")
    eval_every: Optional[int] = Field(None, gt=0, description="train.eval_every for this method (None: train.eval_every)")
    max_steps: Optional[int] = Field(None, gt=0, description="train.max_steps for this method (None: train.max_steps)")


@dataclass
class Batch:
    """One training batch.

    ``sentences`` are raw corpus sentences. ``extras`` holds per-sentence
    columns a method asked for through ``Method.corpus_columns`` (e.g. the
    annotation stage's ``frames``, ``pos``, ``rake_phrases``), each a list aligned
    with ``sentences``. ``index`` are the corpus row ids.
    """

    sentences: list[str]
    index: list[int] = field(default_factory=list)
    extras: dict[str, list[Any]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.sentences)


class Method(nn.Module):
    """Base class: subclass, set the class attributes, implement ``forward``.

    Class attributes:
        id: registry id (set by ``@register``).
        summary: one line for ``sentlab methods``.
        Params: the method's pydantic params model.
        corpus_columns: annotation columns the method needs in ``Batch.extras``
            (non-empty means the train stage depends on the annotation stage).
        corpus: default corpus name: "train" (the sampled training corpus,
            ``data/corpus/train.parquet``), "sts_unlabeled" (the distinct
            sentences of the seven STS sets) or "nli" (triples). A method whose
            corpus is a param overrides :meth:`corpus_name`.
        init_from: id of a method whose trained model (``models/<id>``)
            initialises the encoder (e.g. supervised PaSeR from unsupervised PaSeR).
        inference_pooling: pooling of the exported encoder (SPEC §2).
    """

    id: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    Params: ClassVar[type[MethodParams]] = MethodParams
    corpus_columns: ClassVar[tuple[str, ...]] = ()
    corpus: ClassVar[str] = "train"
    inference_pooling: ClassVar[str] = "cls"
    init_from: ClassVar[Optional[str]] = None

    def __init__(self, encoder: nn.Module, tokenizer, params: MethodParams, train_cfg, seed: int = 0):
        super().__init__()
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.params = params
        self.train_cfg = train_cfg
        self.seed = seed

    # --- what the loop calls -------------------------------------------------
    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:  # pragma: no cover - abstract
        raise NotImplementedError

    def after_optimizer_step(self) -> None:
        """Hook after each optimiser step (momentum updates, queue bookkeeping)."""

    def extra_state(self) -> dict:
        """Plain (non-tensor) state a resumed run needs; JSON-serialisable."""
        return {}

    def load_extra_state(self, state: dict) -> None:
        pass

    def corpus_name(self) -> str:
        return self.corpus

    def split_heldout(self, corpus):
        """The part of the training corpus (a :class:`sentlab.train.data.Corpus`) to train on. A method
        may keep rows out of training for a check after it (PaSeR's reconstruction check); by default
        it trains on all of them. Must be a function of the seed and the corpus only (resume-safe)."""
        return corpus

    def export_artifacts(self, folder, data_root) -> None:
        """Write training-time checks next to the exported model (``folder``), with the final
        weights still in memory; ``data_root`` holds ``data/`` (e.g. PaSeR's reconstruction check)."""

    def param_groups(self, lr: float) -> list[dict]:
        """The optimiser's parameter groups: by default one group at ``lr`` (train.lr). A method
        whose newly initialised modules train at their own rate overrides this."""
        return [{"params": self.trainable_parameters(), "lr": lr}]

    def trainable_parameters(self):
        """Parameters the optimiser updates (momentum copies excluded)."""
        return [p for p in self.parameters() if p.requires_grad]

    def tokenize(self, sentences, max_length: Optional[int] = None) -> dict[str, torch.Tensor]:
        enc = self.tokenizer(list(sentences), padding=True, truncation=True,
                             max_length=max_length or self.train_cfg.max_length, return_tensors="pt")
        return {k: v.to(self.device) for k, v in enc.items()}

    @property
    def device(self) -> torch.device:
        return next(self.encoder.parameters()).device

    # --- inference -----------------------------------------------------------
    def export_info(self) -> dict:
        """What ``sentlab.json`` records about the exported model (pooling, template, channels)."""
        return {"method": self.id, "pooling": self.inference_pooling}

    def sentence_encoder(self, precision: str = "fp32", max_length: Optional[int] = None) -> SentenceEncoder:
        """The inference encoder: the bare encoder with the method's pooling, no training extras."""
        info = self.export_info()
        return SentenceEncoder(self.encoder, self.tokenizer, pooling=info.get("pooling", "cls"),
                               template=info.get("template"), max_length=max_length, precision=precision,
                               name=self.id, device=self.device)

    def extra_eval_encoders(self, precision: str = "fp32") -> dict[str, SentenceEncoder]:
        """Further embeddings of one trained model to evaluate as rows (e.g. POS/BOW channels)."""
        return {}
