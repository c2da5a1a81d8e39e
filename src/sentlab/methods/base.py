"""The contract between a method and the method-agnostic training loop.

A method owns everything specific to it: its loss, its extra modules
(MLP heads, momentum copies, queues, decoders …), the extras it needs from the
annotation stage, and its inference pooling. The loop in :mod:`sentlab.train`
owns the data order, the optimiser's schedule, dev evaluation, checkpoints,
resume and MLflow. Per optimiser step (``grad_accum`` micro-batches)::

    batch = method.prepare(batch)   # CPU work (tokenisation, augmentation), in DataLoader workers
    out = method(batch)             # forward: {"loss": tensor, <tensors to log>...}
    out["loss"].backward()
    optimizer.step(); scheduler.step()   # optimizer = method.configure_optimizers(...)
    method.after_optimizer_step()   # e.g. the momentum update of a key encoder

A method receives its own Params, resolved: the train keys it may set for itself
(``epochs``, ``batch_size``, ``lr``, ``eval_every``, ``max_steps``, ``max_length``)
hold the values in force (see :meth:`MethodParams.resolved`). State lives in
``state_dict()`` only (weights, momentum copies, queues as registered buffers);
randomness that must survive a resume is drawn from :meth:`Batch.rng`, a
function of the seed and the micro-batch's position in the run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple, Optional

import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import nn

from ..nn.encoder import SentenceEncoder
from ..config.poolings import get_pooling
from ..nn.encoder_head import HEAD_DIR


# train.<key> a method's params block may set for itself (None there: the train block's value)
TRAIN_OVERRIDES = ("epochs", "batch_size", "lr", "eval_every", "max_steps", "max_length")


class MethodParams(BaseModel):
    """Base of every method's own params block (``methods.<id>`` in params.yaml).

    Every method accepts the train keys of :data:`TRAIN_OVERRIDES`: set in a method's block they
    replace ``train.<key>`` for that method's run (None: the train block's value), e.g. PaSeR's 5
    epochs or PT-BERT's dev interval of 125 steps in the paper profile. The run hands the method
    :meth:`resolved` params, so inside a method they hold the values in force.
    """

    model_config = ConfigDict(extra="forbid", protected_namespaces=(), allow_inf_nan=False)  # floats are finite

    epochs: Optional[int] = Field(None, gt=0, description="train.epochs for this method (None: train.epochs)")
    batch_size: Optional[int] = Field(
        None, gt=0, description="train.batch_size (the global batch) for this method (None: train.batch_size)")
    lr: Optional[float] = Field(None, gt=0, description="train.lr for this method (None: train.lr)")
    eval_every: Optional[int] = Field(
        None, gt=0, description="train.eval_every for this method (None: train.eval_every)")
    max_steps: Optional[int] = Field(None, gt=0, description="train.max_steps for this method (None: train.max_steps)")
    max_length: Optional[int] = Field(None, gt=0, description="training max length in tokens (None: train.max_length)")
    backbone: Optional[str] = Field(None, min_length=1, description="this method's own backbone, a hub id or folder as "
                                    "model.backbone (None: model.backbone); e.g. the POS/BOW paper's roberta-base")

    def resolved(self, train) -> "MethodParams":
        """A copy whose :data:`TRAIN_OVERRIDES` left at None take ``train``'s values (the values in force)."""
        fill = {k: getattr(train, k) for k in TRAIN_OVERRIDES if getattr(self, k) is None}
        return self.model_copy(update=fill)

    def train_overrides(self) -> dict:
        """The train keys this block sets for itself (not None)."""
        return {k: getattr(self, k) for k in TRAIN_OVERRIDES if getattr(self, k) is not None}

    def slice_caps(self, *, steps: int, batch_size: int, sentences: int) -> dict:
        """The keys of this block that a tiny slice of the run sets (``sentlab preflight``): ``steps`` optimiser
        steps of ``batch_size`` sentences on a corpus of ``sentences``, one dev evaluation at the end. Here: the
        step budget, and the batch and epochs where the block sets its own. A method with keys that scale with
        the corpus or the run (a subset size, a check after training) caps them in its override. ``batch_size``
        0 keeps the block's own batch (a preflight that measures memory at the profile's batch sizes)."""
        caps: dict[str, Any] = {"max_steps": steps, "eval_every": steps}
        if self.batch_size is not None and batch_size > 0:
            caps["batch_size"] = batch_size
        if self.epochs is not None:
            caps["epochs"] = 1
        return caps

    def train_sentences(self, corpus: int) -> int:
        """Sentences a run trains on from a corpus of ``corpus`` (all of them here; a subset size caps it)."""
        return corpus

    def hub_models(self) -> list[str]:
        """Hub ids (or folders) of pretrained models this block loads besides ``model.backbone``: its own
        ``backbone``, and a method's extra models (DiffCSE's generator). The preflight gives a kept one that is not
        here its hub-shaped stand-in (:mod:`sentlab.preflight.standins`)."""
        return [self.backbone] if self.backbone else []

    def nltk_resources(self) -> list[str]:
        """NLTK resources this block's training loads (:data:`sentlab.assets.nltk_resources.NLTK_RESOURCES` names), for
        ``sentlab fetch``, which downloads them before a run without network; [] when none."""
        return []

    def model_deps(self) -> list[str]:
        """Repository paths of other pipeline outputs this block's training reads (RankCSE's teachers
        ``models/simcse``): its train stage's DVC deps beside ``init`` (:mod:`sentlab.stages.stage_list`)."""
        return []

    def standin(self, asset: str) -> dict:
        """The keys of this block that let it run without ``asset`` (as ``sentlab preflight`` names a missing
        asset: ``NLTK wordnet``, ``nli``, ``hub model <id>``), for a preflight that goes on; {} when none."""
        return {}


class ContrastiveParams(MethodParams):
    """A method with an InfoNCE loss over cos/τ."""

    temperature: float = Field(
        0.05, gt=0, description="τ of the InfoNCE loss over cosine similarities (SimCSE, PT-BERT: 0.05)")


@dataclass
class Batch:
    """One training micro-batch.

    ``sentences`` are raw corpus sentences. ``extras`` holds per-sentence
    columns a method asked for through ``Method.corpus_columns`` (e.g. the
    annotation stage's ``frames``, ``pos``, ``rake_phrases``), each a list aligned
    with ``sentences``. ``index`` are the corpus row ids. ``draw`` is the
    micro-batch's position in the run (``step · grad_accum + a``, the same on
    every rank) and ``seed`` the run's seed: :meth:`rng` is a function of both, so
    augmentations drawn in :meth:`Method.prepare` are the same in a DataLoader
    worker, after a resume and on every run. ``features`` holds what
    :meth:`Method.prepare` computed (CPU tensors, token ids …) for ``forward``.
    """

    sentences: list[str]
    index: list[int] = field(default_factory=list)
    extras: dict[str, list[Any]] = field(default_factory=dict)
    draw: int = 0
    seed: int = 0
    features: dict[str, Any] = field(default_factory=dict)
    epoch: int = 0   # the pass over the corpus this micro-batch belongs to (the loop's MicroBatches sets it)

    def __len__(self) -> int:
        return len(self.sentences)

    def pin_memory(self) -> "Batch":
        """Pinned copies of the prepared tensors (the DataLoader calls this on CUDA): non-blocking host->device
        copies."""
        def pin(v):
            if isinstance(v, torch.Tensor):
                return v.pin_memory()
            return {k: pin(x) for k, x in v.items()} if isinstance(v, dict) else v
        self.features = {k: pin(v) for k, v in self.features.items()}
        return self

    def rng(self, stream: str = "") -> random.Random:
        """A ``random.Random`` for this micro-batch (``stream`` separates independent draws)."""
        return random.Random(f"{self.seed}:{self.draw}{':' + stream if stream else ''}")


def adamw(groups: list[dict], *, lr: float, weight_decay: float = 0.0, fused: bool = False) -> torch.optim.Optimizer:
    """AdamW over ``groups`` (frozen parameters and empty groups left out; a group without ``lr`` takes ``lr``)."""
    groups = [dict(g, params=[p for p in g["params"] if p.requires_grad]) for g in groups]
    kwargs = {"lr": lr, "weight_decay": weight_decay}
    if fused:
        kwargs["fused"] = True
    return torch.optim.AdamW([g for g in groups if g["params"]], **kwargs)


class PaperAvg(NamedTuple):
    """A method's own paper's Avg of the seven STS tasks (Spearman × 100), as that paper reports it: the paper column
    of the report's "Unsupervised methods under one protocol" table (:mod:`sentlab.report.paper_tables.unsupervised`).
    ``source``: where the number is printed (the table's note); ``backbone``: the backbone of that number, "" for
    BERT-base (a Δ is shown only on the row's own backbone)."""

    avg: float
    source: str
    backbone: str = ""


# Class attributes each registered class declares for itself (never inherited: a subclass registered under its own
# id is another method, with its own ablation axes and its own paper's number), with their defaults.
OWN_ATTRIBUTES = {"run_name_params": (), "paper_avg": None}


class Method(nn.Module):
    """Base class: subclass, set the class attributes, implement ``forward``.

    Class attributes:
        id: registry id (set by ``@register``).
        summary: one line for ``sentlab methods``.
        paper: the method's paper, one line (the model card's "Paper:").
        citation: its BibTeX entry (the model card's "Citation"; None: no published
            entry), as sentence-transformers' losses carry one: the card reads both
            from the class, so a new method brings its own.
        Params: the method's pydantic params model.
        corpus_columns: annotation columns the method needs in ``Batch.extras``
            (non-empty means the train stage depends on the annotation stage).
        corpus: default corpus name: "train" (the sampled training corpus,
            ``data/corpus/train.parquet``), "sts_unlabeled" (the distinct
            sentences of the seven STS sets) or "nli" (triples). A method whose
            corpus is a param overrides :meth:`corpus_name`.
        init_from: id of a method whose trained model (``models/<id>``)
            initialises the encoder (e.g. supervised PaSeR from unsupervised PaSeR).
        inference_pooling: pooling of the exported encoder, a declared pooling (:mod:`sentlab.config.poolings`,
            docs/evaluation.md#pooling); a method whose Params have a ``pooling`` param (a choice its paper
            ablates: PaSeR, CT, ConSERT) exports that instead and must not set this too. Read it as
            :attr:`pooling`, the one place (``evaluate.pooling`` evaluates a trained model another way).
        run_name_params: the keys of its Params that tell its runs apart (ablation axes), in the order the MLflow
            run name shows them (:func:`sentlab.tracking.run_name`), e.g. ``("queue_size", "momentum")``.
        paper_avg: its own paper's STS Avg (:class:`PaperAvg`), the report's paper column; None: none reported.
        ``run_name_params`` and ``paper_avg`` are read from the class itself, never inherited
        (:data:`OWN_ATTRIBUTES`).
    """

    id: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    paper: ClassVar[str] = ""
    citation: ClassVar[Optional[str]] = None
    Params: ClassVar[type[MethodParams]] = MethodParams
    corpus_columns: ClassVar[tuple[str, ...]] = ()
    corpus: ClassVar[str] = "train"
    inference_pooling: ClassVar[str] = "cls"
    init_from: ClassVar[Optional[str]] = None
    # train.pad_buckets: set True on a class whose loss ignores padded positions (not inherited; sentlab.train.compiled)
    pad_buckets_ok: ClassVar[bool] = False
    pad_buckets: tuple[int, ...] = ()   # the loop's train.pad_buckets (sentlab.train.compiled.check_step_options)
    run_name_params: ClassVar[tuple[str, ...]] = ()
    paper_avg: ClassVar[Optional[PaperAvg]] = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for attr, default in OWN_ATTRIBUTES.items():   # not declared in the class body: the default, not the parent's
            if attr not in cls.__dict__:
                setattr(cls, attr, default)
        if "inference_pooling" in cls.__dict__ and "pooling" in cls.Params.model_fields:
            raise TypeError(f"{cls.__name__}: its Params have a `pooling` param, which is the pooling it exports; "
                            f"drop its `inference_pooling = {cls.inference_pooling!r}` (one way to set a pooling).")
        get_pooling(cls.inference_pooling)   # a declared pooling (sentlab.config.poolings), else ValueError at import

    def __init__(self, encoder: nn.Module, tokenizer, params: MethodParams, seed: int = 0):
        super().__init__()
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.params = params
        self.seed = seed
        self.module_init: dict[str, str] = {}  # sub-module -> where its weights came from (see init_sources)

    # --- what the loop calls -------------------------------------------------
    def prepare(self, batch: Batch) -> Batch:
        """CPU work for one micro-batch, run in the loop's DataLoader (in worker processes when
        ``runtime.loader_workers`` > 0): tokenisation and augmentation, results in ``batch.features``.
        Must not touch the device or the global RNGs (draw from ``batch.rng()``). Default: nothing."""
        return batch

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:  # pragma: no cover - abstract
        raise NotImplementedError

    def after_optimizer_step(self) -> None:
        """Hook after each optimiser step (momentum updates, queue bookkeeping)."""

    def configure_optimizers(self, *, weight_decay: float = 0.0, fused: bool = False) -> torch.optim.Optimizer:
        """The optimiser (Lightning's hook): AdamW over the trainable parameters at ``params.lr``. A
        method whose new modules train at their own rate returns :func:`adamw` over its own groups;
        the loop clips every group on its own and steps it."""
        return adamw([{"params": self.trainable_parameters()}], lr=self.params.lr, weight_decay=weight_decay,
                     fused=fused)

    def corpus_name(self) -> str:
        return self.corpus

    def warmup_steps(self, total_steps: int) -> int:
        """Optimiser steps of linear learning-rate warm-up before the linear decay of a run of ``total_steps``
        (:func:`sentlab.train.loop.linear_schedule`); none by default (docs/methods.md#shared-conventions)."""
        return 0

    def split_heldout(self, corpus):
        """The part of the training corpus (a :class:`sentlab.train.data.Corpus`) to train on. A method
        may keep rows out of training for a check after it (PaSeR's reconstruction check); by default
        it trains on all of them. Must be a function of the seed and the corpus only (resume-safe)."""
        return corpus

    def export_artifacts(self, folder, data_root) -> None:
        """Write training-time checks next to the exported model (``folder``), with the final
        weights still in memory; ``data_root`` holds ``data/`` (e.g. PaSeR's reconstruction check)."""

    @property
    def grad_clip(self) -> str:
        """How the loop clips at ``train.max_grad_norm``: ``per_group`` (each optimiser group's norm on its own)
        or ``global`` (one norm over every parameter); :func:`sentlab.train.loop.clip_gradients`."""
        return "per_group"

    def trainable_parameters(self):
        """Parameters the optimiser updates (momentum copies excluded)."""
        return [p for p in self.parameters() if p.requires_grad]

    def encode_text(self, sentences, max_length: Optional[int] = None) -> dict[str, torch.Tensor]:
        """Token ids of ``sentences`` (CPU tensors, padded, cut at ``max_length`` or ``params.max_length``); padded
        to a fixed length of ``train.pad_buckets`` where the loop set them (:mod:`sentlab.train.compiled`)."""
        max_length = max_length or self.params.max_length
        enc = dict(self.tokenizer(list(sentences), padding=True, truncation=True, max_length=max_length,
                                  return_tensors="pt"))
        if self.pad_buckets:
            from ..data.padding import bucket_length, pad_features

            length = bucket_length(enc["input_ids"].size(1), self.pad_buckets, max_length)
            enc = pad_features(enc, length, self.tokenizer.pad_token_id)
        return enc

    def tokenize(self, sentences, max_length: Optional[int] = None) -> dict[str, torch.Tensor]:
        """:meth:`encode_text` on the method's device."""
        return self.to_device(self.encode_text(sentences, max_length))

    def to_device(self, features: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {k: v.to(self.device, non_blocking=True) for k, v in features.items()}

    def prepared(self, batch: Batch) -> dict[str, Any]:
        """``batch.features`` on the device; runs :meth:`prepare` first when the loop did not (direct calls)."""
        if not batch.features:
            batch = self.prepare(batch)
        return {k: self.to_device(v) if isinstance(v, dict) else v.to(self.device, non_blocking=True)
                if isinstance(v, torch.Tensor) else v for k, v in batch.features.items()}

    @property
    def device(self) -> torch.device:
        return next(self.encoder.parameters()).device

    def init_sources(self) -> dict[str, str]:
        """Where each module's weights came from, before training (``sentlab.json``'s ``init``).

        ``encoder``: the loader's record (:func:`sentlab.assets.resolve.load_model`: ``checkpoint``, or which tensors
        the checkpoint lacked), or the id of the trained method it starts from (``init_from``); ``given``
        when the caller built it. Every other direct sub-module with parameters (and the method's own
        parameters, ``params``): what the method set in ``module_init`` (``checkpoint``, ``random``, a
        method id), else ``copy of <module>`` when its tensors equal an earlier module's (MoCo's key
        encoder), else ``random``. Call it before the first optimiser step.
        """
        out = {"encoder": getattr(self.encoder, "sentlab_init", None) or "given"}
        seen = {"encoder": self.encoder.state_dict()}
        for name, mod in self.named_children():
            if name == "encoder" or not any(True for _ in mod.parameters()):
                continue
            sd = mod.state_dict()
            twin = next((n for n, o in seen.items() if o.keys() == sd.keys() and all(
                o[k].shape == v.shape and torch.equal(o[k], v) for k, v in sd.items())), None)
            out[name] = self.module_init.get(name) or (f"copy of {twin}" if twin else "random")
            seen[name] = sd
        if any(True for _ in self.parameters(recurse=False)):
            out["params"] = self.module_init.get("params", "random")
        return out

    # --- inference -----------------------------------------------------------
    def inference_head(self) -> Optional[nn.Module]:
        """A trained module applied to the pooled vector at test (a Linear + tanh with a ``dense`` layer: SimCSE's
        MLP, which supervised SimCSE keeps at test), or None (the pooled vector is the embedding). The export
        writes it beside the encoder (:func:`sentlab.nn.encoder_head.write_head`, ``sentlab.json``'s ``head``) and every
        encoder of the exported model applies it."""
        return None

    @property
    def pooling(self) -> str:
        """The pooling of the exported encoder (``sentlab.json``'s ``pooling``): the ``pooling`` param where the
        method's Params declare one, else the class's ``inference_pooling``."""
        return getattr(self.params, "pooling", None) or type(self).inference_pooling

    def export_info(self) -> dict:
        """What ``sentlab.json`` records about the exported model (pooling, template, channels, ``head``: the
        folder of the test-time head when :meth:`inference_head` has one)."""
        info = {"method": self.id, "pooling": self.pooling}
        if self.inference_head() is not None:
            info["head"] = HEAD_DIR
        return info

    def sentence_encoder(self, precision: str = "fp32", max_length: Optional[int] = None) -> SentenceEncoder:
        """The inference encoder: the bare encoder with the method's pooling and test-time head, no training
        extras."""
        info = self.export_info()
        return SentenceEncoder(self.encoder, self.tokenizer, pooling=info.get("pooling", "cls"),
                               template=info.get("template"), end_period=bool(info.get("end_period")),
                               max_length=max_length, precision=precision,
                               name=self.id, device=self.device, head=self.inference_head())
