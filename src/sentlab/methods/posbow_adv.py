"""SimCSE with POS and bag-of-words auxiliary tasks and adversarial disentangling (SPEC §3.8).

Paper: "Improving sentence embeddings with POS and bag-of-words auxiliary
tasks and adversarial disentangling" (SimCSE + POS/BOW, see
``shared/papers/simcse_pos_bow_adversarial.md``; builds on Gao et al. 2021,
SimCSE, arXiv:2104.08821; gradient reversal from Ganin & Lempitsky 2015).

The algorithm, per batch of raw sentences ``x``::

    h, h'    = [CLS](E(x)), [CLS](E(x))            # two dropout views, pre-MLP [CLS]
    L_con    = InfoNCE(MLP(h), MLP(h'), τ)          # SimCSE (MLP only in training)
    h_bow    = h[:, 0:bow]     h_pos = h[:, bow:bow+pos]      # the two channels
    L_cls    = w_bow · BCE(C_BOW(h_bow), bag-of-words(x))     # multi-label
             + w_pos · KL(POS-histogram(x) ‖ C_POS(h_pos))    # distribution
    L_adv    = a_bow · BCE(D_BOW(h_pos), bag-of-words(x))     # D_BOW reads the POS channel
             + a_pos · KL(POS-histogram(x) ‖ D_POS(h_bow))    # D_POS reads the BOW channel
    encoder, C_*:  minimise  L_con + L_cls − λ · L_adv
    D_*:           minimise  L_adv

Decisions (all params of :class:`PosBowAdvParams`, defaults below):

* **Channels are cut from the pre-MLP [CLS]**, the vector the exported encoder
  returns at test time (``cls`` pooling, SPEC §2), so the channels evaluated as
  table rows are exactly the ones the auxiliary tasks and the adversaries
  trained. The SimCSE MLP (``use_mlp``) sits only on the contrastive branch.
  Channel layout: BOW = dims ``[0, bow_dim)``, POS = ``[bow_dim, bow_dim+pos_dim)``.
  Default sizes keep the paper's 640/128-of-768 proportions: ``pos = round(d/6)``,
  ``bow = d − pos`` (768 → 640/128, MiniLM's 384 → 320/64).
* **Bag of words over the model's word-piece ids**, not the annotation
  tokens: the target is the set of word pieces the encoder actually sees
  (after truncation to ``train.max_length``), needs no extra annotation column,
  and is identical for any corpus the tokenizer reads. The vocabulary is the
  ``bow_vocab_size`` word pieces with the highest document frequency in the
  training corpus (``bow_vocab_from``; special tokens excluded; ties broken
  by id), built once in the constructor and kept as buffers (``bow_vocab``,
  ``bow_index``) so checkpoints carry it. The loss is multi-label BCE with
  logits, averaged over the labels (``bow_reduction: mean``; ``sum`` is the
  paper's −log-likelihood of the whole bag, ~N times larger).
* **POS target** = the normalised histogram of the sentence's Penn tags (the
  annotation stage's ``pos`` column) over :data:`POS_TAGS`: the 45 Penn tags
  (NLTK's ``(``/``)`` read as ``-LRB-``/``-RRB-``) plus one ``OTHER`` bucket for
  tags outside the Penn set (spaCy's ``HYPH``, ``NFP``, ``ADD``, ``XX``, ``_SP`` …).
  Loss ``pos_loss: kl`` (KL(p ‖ q), 0 at a perfect fit) or ``soft_ce``
  (−Σ p log q; same gradient). A sentence without tags is left out of the POS
  terms.
* **Adversary** (``adversary``): ``grl`` (default) — a gradient reversal layer
  (:mod:`._grad_reverse`) with scale λ before each discriminator; the loop's
  one optimiser then trains the discriminators on +L_adv while the encoder
  receives −λ·∂L_adv. The returned ``loss`` is therefore
  ``L_con + L_cls + L_adv`` (its gradient is the algorithm's); the encoder's
  objective ``L_con + L_cls − λ·L_adv`` is logged as ``objective``.
  ``alternating`` — the encoder step uses ``loss = L_con + L_cls − λ·L_adv`` with
  the discriminators excluded from :meth:`trainable_parameters`; the method
  owns a small AdamW (``disc_lr``, ``disc_weight_decay``) that, in
  :meth:`after_optimizer_step`, takes one step on L_adv over the step's
  micro-batches (channels detached). Its moments and step count are
  registered buffers (``disc_adam.*``, :class:`BufferedAdamW`), so a resumed
  run continues it exactly.
  ``none`` — no discriminators (ablation "no adversary").
* **Ablations**: ``adversary: none`` (no adversary); ``aux_tasks: false`` with
  ``adversary: none`` is plain SimCSE on the same backbone and seed (the loss is
  InfoNCE(MLP(h), MLP(h'), τ) and nothing else; no vocabulary is built).
  The channels are still exported for that variant: the same slices of a
  SimCSE embedding are the control for the channel rows.
* **Head training** (not in the paper): ``bow_prior_bias`` starts the BOW
  heads' output biases at the log-odds of each word piece's document frequency,
  so the BCE starts at the best constant predictor instead of 0.69 per label;
  ``head_lr`` (default None: the heads train in the loop's AdamW at
  ``train.lr``) moves C_BOW, C_POS (and D_* under ``grl``) to the method's own
  constant-lr AdamW (buffers ``head_adam.*``), stepped in
  :meth:`after_optimizer_step` on the gradients of the loop's backward — at
  lr 3e-5 randomly initialised heads learn little in a short run.
* Auxiliary and adversarial heads read both dropout views (``aux_views: both``;
  ``first`` for one). Heads are linear probes by default (``head_hidden: 0``;
  > 0 adds one ReLU hidden layer to all four, so the adversaries are exactly as
  strong as the classifiers). The four task heads are initialised from ``seed``
  alone; the SimCSE MLP from the global RNG first, exactly as ``simcse.py``, so
  the "no auxiliary tasks, no adversary" variant reproduces the simcse run.

Evaluation: one trained model gives three rows — the full [CLS] embedding
(``posbow_adv``), the BOW channel (``posbow_adv_bow``) and the POS channel
(``posbow_adv_pos``): see :meth:`extra_eval_encoders` and the ``channels``
entry of :meth:`export_info` (recorded in ``models/posbow_adv/sentlab.json``).

Example::

    params = PosBowAdv.Params(bow_vocab_size=5000)
    method = PosBowAdv(encoder, tokenizer, params, train_cfg, seed=42)
    out = method(Batch(sentences, extras={"pos": [["DT", "NN", ...], ...]}))
    out["loss"].backward()
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from ..encoder import SentenceEncoder, pool
from ..errors import SentlabError
from . import register
from ._common import MLPHead, info_nce
from ._grad_reverse import grad_reverse
from .base import Batch, Method, MethodParams

PENN_TAGS: tuple[str, ...] = (
    "CC", "CD", "DT", "EX", "FW", "IN", "JJ", "JJR", "JJS", "LS", "MD", "NN", "NNS", "NNP", "NNPS",
    "PDT", "POS", "PRP", "PRP$", "RB", "RBR", "RBS", "RP", "SYM", "TO", "UH", "VB", "VBD", "VBG",
    "VBN", "VBP", "VBZ", "WDT", "WP", "WP$", "WRB",
    "#", "$", "''", "``", ",", ".", ":", "-LRB-", "-RRB-",
)
"""The 45 Penn Treebank tags (36 part-of-speech tags + 9 punctuation tags)."""

OTHER_TAG = "OTHER"
POS_TAGS: tuple[str, ...] = PENN_TAGS + (OTHER_TAG,)
"""Classes of the POS distribution: the Penn tags, then one bucket for any other tag."""

POS_TAG_ALIASES = {"(": "-LRB-", ")": "-RRB-", "[": "-LRB-", "]": "-RRB-", "{": "-LRB-", "}": "-RRB-",
                   "-LCB-": "-LRB-", "-RCB-": "-RRB-"}
_POS_INDEX = {t: i for i, t in enumerate(POS_TAGS)}


def pos_histogram(tags: Sequence[str]) -> np.ndarray:
    """Normalised histogram of Penn ``tags`` over :data:`POS_TAGS` (all zeros for no tags)."""
    h = np.zeros(len(POS_TAGS), dtype=np.float32)
    for t in tags:
        t = POS_TAG_ALIASES.get(t, t)
        h[_POS_INDEX.get(t, _POS_INDEX[OTHER_TAG])] += 1.0
    total = h.sum()
    return h / total if total > 0 else h


def build_bow_vocab(tokenizer, sentences: Sequence[str], size: int, max_length: int,
                    chunk: int = 4096, show_progress: bool = True, return_frequencies: bool = False):
    """The ``size`` word-piece ids with the highest document frequency in ``sentences``.

    Sentences are tokenized as in training (truncated to ``max_length``);
    special tokens are excluded; ties are broken by the smaller id. Raises
    :class:`SentlabError` when the corpus has fewer than ``size`` distinct word pieces.
    With ``return_frequencies``: ``(ids, fraction of sentences containing each id)``.
    """
    from tqdm.auto import tqdm

    n_ids = len(tokenizer)
    counts = np.zeros(n_ids, dtype=np.int64)
    sentences = list(sentences)
    for start in tqdm(range(0, len(sentences), chunk), desc="posbow_adv: bag-of-words vocabulary",
                      unit="chunk", disable=not show_progress or len(sentences) < 50_000):
        ids = tokenizer(sentences[start: start + chunk], truncation=True, max_length=max_length)["input_ids"]
        if ids:
            counts += np.bincount(np.concatenate([np.unique(np.asarray(x, dtype=np.int64)) for x in ids]),
                                  minlength=n_ids)[:n_ids]
    special = [i for i in tokenizer.all_special_ids if 0 <= i < n_ids]
    counts[special] = 0
    distinct = int((counts > 0).sum())
    if distinct < size:
        raise SentlabError(
            f"methods.posbow_adv.bow_vocab_size is {size}, but the training corpus has only {distinct} distinct "
            f"word pieces (special tokens excluded). Lower `bow_vocab_size` in params.yaml to at most {distinct}."
        )
    order = np.lexsort((np.arange(n_ids), -counts))[:size]  # by count desc, then id asc
    if return_frequencies:
        return order.astype(np.int64), counts[order] / max(len(sentences), 1)
    return order.astype(np.int64)


def _read_corpus_texts(path: str) -> list[str]:
    import pyarrow.parquet as pq

    p = Path(path)
    if not p.is_file():
        raise SentlabError(
            f"methods.posbow_adv.bow_vocab_from: the training corpus {p} (its bag-of-words vocabulary is built from "
            f"it) does not exist. Run the prepare stage first (`dvc repro prepare`), or point `bow_vocab_from` at a "
            f"Parquet file with a `text` column."
        )
    try:
        table = pq.read_table(p, columns=["text"])
    except Exception as e:  # noqa: BLE001 - re-raised as a user error naming the file
        raise SentlabError(f"methods.posbow_adv.bow_vocab_from: cannot read a `text` column from {p} ({e}). "
                           f"Point it at the prepare stage's data/corpus/train.parquet.") from None
    texts = [t for t in table.column("text").to_pylist() if t]
    if not texts:
        raise SentlabError(f"methods.posbow_adv.bow_vocab_from: {p} has no sentences. Re-run the prepare stage.")
    return texts


class PosBowAdvParams(MethodParams):
    """``methods.posbow_adv`` in params.yaml."""

    bow_dim: Optional[int] = Field(None, gt=0, description="BOW channel width; None: d − round(d/6) (640 of 768)")
    pos_dim: Optional[int] = Field(None, gt=0, description="POS channel width; None: round(d/6) (128 of 768)")
    bow_vocab_size: int = Field(5000, gt=0, description="N: the BOW classes = the N most frequent word pieces")
    bow_vocab_from: str = Field("data/corpus/train.parquet", description="corpus the BOW vocabulary is counted on")
    bow_reduction: Literal["mean", "sum"] = "mean"
    pos_loss: Literal["kl", "soft_ce"] = "kl"
    use_mlp: bool = Field(True, description="SimCSE's training-time MLP on the contrastive branch")
    aux_tasks: bool = Field(True, description="C_BOW and C_POS (false + adversary none = plain SimCSE)")
    aux_views: Literal["both", "first"] = "both"
    con_weight: float = Field(1.0, ge=0)
    bow_weight: float = Field(1.0, ge=0)
    pos_weight: float = Field(1.0, ge=0)
    adversary: Literal["grl", "alternating", "none"] = "grl"
    adv_lambda: float = Field(1.0, ge=0, description="λ in L_con + L_cls − λ·L_adv")
    adv_bow_weight: float = Field(1.0, ge=0, description="weight of D_BOW's loss inside L_adv")
    adv_pos_weight: float = Field(1.0, ge=0, description="weight of D_POS's loss inside L_adv")
    head_hidden: int = Field(0, ge=0, description="0: linear heads; >0: one ReLU hidden layer of this width")
    disc_lr: float = Field(1e-3, gt=0, description="discriminators' AdamW lr (adversary: alternating)")
    disc_weight_decay: float = Field(0.0, ge=0)
    head_lr: Optional[float] = Field(
        None, gt=0, description="None: the task heads train in the loop's optimiser at train.lr; a value: the method's "
                                "own AdamW at this constant lr for C_BOW, C_POS (and D_* under grl)")
    bow_prior_bias: bool = Field(True, description="start the BOW heads' biases at the log-odds of each word "
                                                   "piece's document frequency (the best constant predictor)")


def _head(d_in: int, d_out: int, hidden: int) -> nn.Module:
    if hidden <= 0:
        return nn.Linear(d_in, d_out)
    return nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, d_out))


def _output_layer(head: nn.Module) -> nn.Linear:
    return head if isinstance(head, nn.Linear) else head[-1]


class BufferedAdamW(nn.Module):
    """AdamW for a module the loop's optimiser does not own, its state kept as registered buffers.

    The moments (``exp_avg__*``, ``exp_avg_sq__*``) and the step count are
    buffers of this module, so they are in the method's ``state_dict()`` and a
    resumed run continues the optimiser exactly. ``torch.optim.AdamW`` is built
    afresh at each :meth:`step` with its state bound to the buffers (it updates
    them in place), so it always holds the current parameter and buffer objects
    whatever ``.to(device)`` or ``load_state_dict`` did in between.
    """

    def __init__(self, target: nn.Module):
        super().__init__()
        self.register_buffer("step_count", torch.zeros((), dtype=torch.long))
        for name, prm in target.named_parameters():
            key = name.replace(".", "__")
            self.register_buffer(f"exp_avg__{key}", torch.zeros_like(prm))
            self.register_buffer(f"exp_avg_sq__{key}", torch.zeros_like(prm))

    def step(self, target: nn.Module, lr: float, weight_decay: float) -> None:
        """One AdamW step on ``target``'s current ``.grad``; the grads are cleared afterwards."""
        opt = torch.optim.AdamW(target.parameters(), lr=lr, weight_decay=weight_decay, foreach=False)
        step = float(self.step_count.item())
        for name, prm in target.named_parameters():
            key = name.replace(".", "__")
            opt.state[prm] = {"step": torch.tensor(step, dtype=torch.float32),  # a CPU scalar, as AdamW keeps it
                              "exp_avg": getattr(self, f"exp_avg__{key}"),
                              "exp_avg_sq": getattr(self, f"exp_avg_sq__{key}")}
        opt.step()
        opt.zero_grad(set_to_none=True)
        self.step_count += 1


@register("posbow_adv")
class PosBowAdv(Method):
    summary = "SimCSE + POS / bag-of-words auxiliary tasks on two embedding channels, adversarially disentangled"
    Params = PosBowAdvParams
    corpus_columns = ("pos",)
    corpus = "train"
    inference_pooling = "cls"

    def __init__(self, encoder: nn.Module, tokenizer, params: PosBowAdvParams, train_cfg, seed: int = 0):
        super().__init__(encoder, tokenizer, params, train_cfg, seed)
        p = params
        d = int(encoder.config.hidden_size)
        self.bow_dim, self.pos_dim = self._channel_sizes(d, p.bow_dim, p.pos_dim)
        self.needs_targets = p.aux_tasks or p.adversary != "none"
        n_bow, n_pos = p.bow_vocab_size, len(POS_TAGS)
        if self.needs_targets:
            self.register_buffer("bow_vocab", torch.full((n_bow,), -1, dtype=torch.long))
            self.register_buffer("bow_index", torch.full((len(tokenizer),), -1, dtype=torch.long))
            vocab, doc_freq = build_bow_vocab(tokenizer, _read_corpus_texts(p.bow_vocab_from), n_bow,
                                              train_cfg.max_length, return_frequencies=True)
            self.set_bow_vocab(vocab)

        # The MLP comes first from the global RNG, exactly as in simcse.py, so the "no auxiliary tasks,
        # no adversary" ablation is SimCSE number for number; the task heads come from the seed alone.
        self.mlp = MLPHead(d) if p.use_mlp else None
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            if p.aux_tasks:
                self.classifiers = nn.ModuleDict({"bow": _head(self.bow_dim, n_bow, p.head_hidden),
                                                  "pos": _head(self.pos_dim, n_pos, p.head_hidden)})
            if p.adversary != "none":
                # Each discriminator reads the OTHER task's channel.
                self.discriminators = nn.ModuleDict({"bow": _head(self.pos_dim, n_bow, p.head_hidden),
                                                     "pos": _head(self.bow_dim, n_pos, p.head_hidden)})
        if self.needs_targets and p.bow_prior_bias:
            self._init_bow_prior(doc_freq)

        if p.adversary == "alternating":  # the discriminators step on their own (resumable) AdamW
            self.disc_adam = BufferedAdamW(self.discriminators)
            self._pending: list[tuple[torch.Tensor, ...]] = []
            self.last_disc_loss: Optional[float] = None
        own_heads = self._heads_on_own_optimizer()
        if own_heads is not None:  # head_lr: C_* (and D_* under grl) step on the method's own AdamW
            self.head_adam = BufferedAdamW(own_heads)

    # --- set-up ----------------------------------------------------------------
    @staticmethod
    def _channel_sizes(d: int, bow: Optional[int], pos: Optional[int]) -> tuple[int, int]:
        if bow is None and pos is None:
            pos = max(1, round(d / 6))
            bow = d - pos
        elif bow is None:
            bow = d - pos
        elif pos is None:
            pos = d - bow
        if bow <= 0 or pos <= 0 or bow + pos > d:
            raise SentlabError(
                f"methods.posbow_adv: bow_dim ({bow}) + pos_dim ({pos}) must be positive and fit in the encoder's "
                f"width {d}. Set them so that bow_dim + pos_dim <= {d}, or leave both null for {d - round(d / 6)}/{round(d / 6)}."
            )
        return int(bow), int(pos)

    @torch.no_grad()
    def _init_bow_prior(self, doc_freq: np.ndarray) -> None:
        """BOW output biases = log-odds of each word piece's document frequency (the prior init of Lin et al. 2017, RetinaNet)."""
        prior = torch.as_tensor(np.clip(doc_freq, 1e-6, 1 - 1e-6), dtype=torch.float32)
        for heads in (getattr(self, "classifiers", None), getattr(self, "discriminators", None)):
            if heads is not None:
                _output_layer(heads["bow"]).bias.copy_(torch.logit(prior))

    def _heads_on_own_optimizer(self) -> Optional[nn.ModuleDict]:
        """The heads ``head_lr`` puts on the method's own AdamW (None: all in the loop's optimiser)."""
        if self.params.head_lr is None or not (self.params.aux_tasks or self.params.adversary == "grl"):
            return None
        heads = nn.ModuleDict()  # a view on the existing heads (same parameters, no copies)
        if self.params.aux_tasks:
            heads["classifiers"] = self.classifiers
        if self.params.adversary == "grl":
            heads["discriminators"] = self.discriminators
        return heads

    @torch.no_grad()
    def set_bow_vocab(self, vocab_ids) -> None:
        """Install the BOW vocabulary (word-piece ids, class order)."""
        ids = torch.as_tensor(np.asarray(vocab_ids), dtype=torch.long, device=self.bow_vocab.device)
        if ids.shape != self.bow_vocab.shape:
            raise ValueError(f"expected {self.bow_vocab.numel()} vocabulary ids, got {ids.numel()}")
        self.bow_vocab.copy_(ids)
        self.bow_index.fill_(-1)
        self.bow_index[ids] = torch.arange(ids.numel(), device=ids.device)

    # --- targets ---------------------------------------------------------------
    def bow_targets(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Multi-hot ``(B, N)``: which vocabulary word pieces occur in each (tokenized) sentence."""
        cls_idx = self.bow_index[input_ids]
        present = ((cls_idx >= 0) & attention_mask.bool()).float()
        target = torch.zeros(input_ids.size(0), self.bow_vocab.numel(), device=input_ids.device)
        return target.scatter_add_(1, cls_idx.clamp_min(0), present).clamp_(max=1.0)

    def pos_targets(self, pos_column: Sequence[Sequence[str]]) -> torch.Tensor:
        """``(B, |POS_TAGS|)`` normalised tag histograms (a zero row for a sentence without tags)."""
        return torch.from_numpy(np.stack([pos_histogram(list(t)) for t in pos_column])).to(self.device)

    def _pos_column(self, batch: Batch):
        if "pos" not in batch.extras:
            raise SentlabError(
                "posbow_adv needs the annotation stage's `pos` column (Penn tags per sentence) in Batch.extras "
                "(corpus_columns = ('pos',)). Run the annotate stage for the training corpus and train again."
            )
        col = batch.extras["pos"]
        if len(col) != len(batch):
            raise SentlabError(f"posbow_adv: Batch.extras['pos'] has {len(col)} rows for {len(batch)} sentences; "
                               f"the annotations do not match the corpus. Re-run the annotate stage.")
        return col

    # --- mechanisms ------------------------------------------------------------
    def _encode_two_views(self, enc: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Pre-MLP [CLS] of each sentence under two dropout masks (one forward over the doubled batch)."""
        doubled = {k: torch.cat([v, v]) for k, v in enc.items()}
        out = self.encoder(**doubled, return_dict=True)
        h = pool(out, doubled["attention_mask"], "cls")
        return h.chunk(2)

    def _contrastive_loss(self, h1: torch.Tensor, h2: torch.Tensor) -> torch.Tensor:
        if self.mlp is not None:
            h1, h2 = self.mlp(h1), self.mlp(h2)
        return info_nce(h1, h2, self.train_cfg.temperature)

    def split_channels(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(BOW channel, POS channel) of embeddings ``h``."""
        return h[:, : self.bow_dim], h[:, self.bow_dim: self.bow_dim + self.pos_dim]

    def _bow_loss(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        loss = F.binary_cross_entropy_with_logits(logits.float(), target, reduction="none")
        return loss.mean() if self.params.bow_reduction == "mean" else loss.sum(-1).mean()

    def _pos_loss(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logq = F.log_softmax(logits.float(), dim=-1)
        per_row = -(target * logq).sum(-1)
        if self.params.pos_loss == "kl":
            per_row = per_row + torch.special.xlogy(target, target).sum(-1)
        valid = target.sum(-1) > 0
        if not bool(valid.any()):
            return logq.sum() * 0.0
        return per_row[valid].mean()

    def _auxiliary_losses(self, bow_ch, pos_ch, bow_t, pos_t) -> tuple[torch.Tensor, torch.Tensor]:
        """C_BOW on the BOW channel, C_POS on the POS channel."""
        return (self._bow_loss(self.classifiers["bow"](bow_ch), bow_t),
                self._pos_loss(self.classifiers["pos"](pos_ch), pos_t))

    def _adversarial_losses(self, bow_ch, pos_ch, bow_t, pos_t) -> tuple[torch.Tensor, torch.Tensor]:
        """D_BOW on the POS channel, D_POS on the BOW channel (each tries the other channel's task)."""
        return (self._bow_loss(self.discriminators["bow"](pos_ch), bow_t),
                self._pos_loss(self.discriminators["pos"](bow_ch), pos_t))

    def _weighted_adv(self, l_dbow: torch.Tensor, l_dpos: torch.Tensor) -> torch.Tensor:
        return self.params.adv_bow_weight * l_dbow + self.params.adv_pos_weight * l_dpos

    # --- the algorithm -----------------------------------------------------------
    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        p = self.params
        enc = self.tokenize(batch.sentences)
        h1, h2 = self._encode_two_views(enc)
        loss_con = self._contrastive_loss(h1, h2)
        loss = p.con_weight * loss_con
        out = {"loss_con": loss_con.detach()}
        if not self.needs_targets:
            out["objective"] = loss.detach()
            out["loss"] = loss
            return out

        bow_t = self.bow_targets(enc["input_ids"], enc["attention_mask"])
        pos_t = self.pos_targets(self._pos_column(batch))
        if p.aux_views == "both":
            h, bow_t, pos_t = torch.cat([h1, h2]), bow_t.repeat(2, 1), pos_t.repeat(2, 1)
        else:
            h = h1
        bow_ch, pos_ch = self.split_channels(h)
        objective = loss

        if p.aux_tasks:
            l_bow, l_pos = self._auxiliary_losses(bow_ch, pos_ch, bow_t, pos_t)
            loss = loss + p.bow_weight * l_bow + p.pos_weight * l_pos
            objective = loss
            out.update(loss_bow=l_bow.detach(), loss_pos=l_pos.detach())

        if p.adversary == "grl":
            # Discriminators minimise L_adv; the reversal hands the encoder −λ·∂L_adv.
            l_dbow, l_dpos = self._adversarial_losses(grad_reverse(bow_ch, p.adv_lambda),
                                                      grad_reverse(pos_ch, p.adv_lambda), bow_t, pos_t)
            l_adv = self._weighted_adv(l_dbow, l_dpos)
            loss = loss + l_adv
            objective = objective - p.adv_lambda * l_adv
        elif p.adversary == "alternating":
            # Encoder step against frozen discriminators; they step on their own in after_optimizer_step().
            l_dbow, l_dpos = self._adversarial_losses(bow_ch, pos_ch, bow_t, pos_t)
            l_adv = self._weighted_adv(l_dbow, l_dpos)
            loss = loss - p.adv_lambda * l_adv
            objective = loss
            if self.training and torch.is_grad_enabled():
                self._pending.append((bow_ch.detach(), pos_ch.detach(), bow_t, pos_t))
        if p.adversary != "none":
            out.update(loss_adv=l_adv.detach(), loss_adv_bow=l_dbow.detach(), loss_adv_pos=l_dpos.detach())

        out["objective"] = objective.detach()
        out["loss"] = loss
        return out

    # --- heads and discriminators on the method's own optimisers ------------------------
    def _own_optimised_parameters(self) -> set[int]:
        own: set[int] = set()
        if self.params.adversary == "alternating":
            own |= {id(q) for q in self.discriminators.parameters()}
        heads = self._heads_on_own_optimizer()
        if heads is not None:
            own |= {id(q) for q in heads.parameters()}
        return own

    def trainable_parameters(self):
        """What the loop's optimiser updates: everything but the discriminators under
        ``adversary: alternating`` and the heads under ``head_lr`` (the method steps those itself)."""
        own = self._own_optimised_parameters()
        return [q for q in self.parameters() if q.requires_grad and id(q) not in own]

    def after_optimizer_step(self) -> None:
        heads = self._heads_on_own_optimizer()
        if heads is not None:  # the heads' gradients come from the loop's backward of this step
            self.head_adam.step(heads, self.params.head_lr, 0.0)
        if self.params.adversary == "alternating" and self._pending:
            self._discriminator_step()

    def _discriminator_step(self) -> None:
        """One AdamW step of D_BOW and D_POS on L_adv over this step's micro-batches (encoder frozen)."""
        for prm in self.discriminators.parameters():  # drop what the encoder's backward left there
            prm.grad = None
        total = 0.0
        n = len(self._pending)
        with torch.enable_grad():
            for bow_ch, pos_ch, bow_t, pos_t in self._pending:
                l_adv = self._weighted_adv(*self._adversarial_losses(bow_ch, pos_ch, bow_t, pos_t)) / n
                l_adv.backward()
                total += float(l_adv.detach())
        if torch.distributed.is_available() and torch.distributed.is_initialized():  # keep the ranks' D in step
            world = torch.distributed.get_world_size()
            for prm in self.discriminators.parameters():
                if prm.grad is not None:
                    torch.distributed.all_reduce(prm.grad)
                    prm.grad /= world
        self.disc_adam.step(self.discriminators, self.params.disc_lr, self.params.disc_weight_decay)
        self._pending.clear()
        self.last_disc_loss = total

    # --- inference -----------------------------------------------------------------
    @property
    def channels(self) -> dict[str, list[int]]:
        return {"bow": [0, self.bow_dim], "pos": [self.bow_dim, self.bow_dim + self.pos_dim]}

    def export_info(self) -> dict:
        info = super().export_info()
        info["channels"] = self.channels
        return info

    def extra_eval_encoders(self, precision: str = "fp32") -> dict[str, SentenceEncoder]:
        """The BOW and POS channels of the exported [CLS] embedding, each evaluated as its own row."""
        return {
            f"{self.id}_{name}": SentenceEncoder(self.encoder, self.tokenizer, pooling=self.inference_pooling,
                                                 precision=precision, dims=(lo, hi), name=f"{self.id}_{name}",
                                                 device=self.device)
            for name, (lo, hi) in self.channels.items()
        }
