"""SimCSE with POS and bag-of-words auxiliary tasks and adversarial disentangling (SPEC §3.8).

Paper: "Improving sentence embeddings with POS and bag-of-words auxiliary
tasks and adversarial disentangling" (SimCSE + POS/BOW, see
``shared/papers/simcse_pos_bow_adversarial.md``; builds on Gao et al. 2021,
SimCSE, arXiv:2104.08821; gradient reversal from Ganin & Lempitsky 2015).

The algorithm, per batch of raw sentences ``x``::

    h, h'    = [CLS](E(x)), [CLS](E(x))            # two dropout views, pre-MLP [CLS]
    L_con    = InfoNCE(MLP(h), MLP(h'), τ)          # SimCSE (MLP only in training)
    h_bow    = h[:, 0:bow]     h_pos = h[:, bow:bow+pos]      # the two channels
    L_cls    = w_bow · Σ_v BCE(C_BOW(h_bow)_v, bag(x)_v)      # −log-likelihood of the bag
             + w_pos · KL(POS-histogram(x) ‖ C_POS(h_pos))    # distribution
    L_adv    = a_bow · Σ_v BCE(D_BOW(h_pos)_v, bag(x)_v)      # D_BOW reads the POS channel
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
  by id; :mod:`sentlab.data.vocab`, which also holds the tag set), built once
  in the constructor and kept as buffers (``bow_vocab``, ``bow_index``) so
  checkpoints carry it.
  ``bow_exclude_stopwords: true`` (default) leaves NLTK's English stop words
  and pieces without a letter or digit out of the vocabulary, and so out of
  the targets. The paper is silent; BOW is the channel for what a sentence is
  about, its function words are what POS describes, and ranked by document
  frequency the first labels would otherwise be ``.``, ``the``, ``,``, ``a``
  (in nearly every sentence, so nearly free to predict and to leak). The
  content bag of words of style/content disentangling, the setting the paper
  says its model was first designed for (John et al. 2019, ACL; their released
  code), leaves stop words out likewise.
* **BOW loss = the bag's negative log-likelihood**: the paper's
  −E[log C_BOW(E(x))] with one Bernoulli per vocabulary word (multi-label),
  i.e. the BCE with logits *summed* over the N labels, averaged over the batch
  (``bow_reduction: sum``, default; the same for D_BOW). The paper gives only
  the log-likelihood form, not the distribution; a multinomial over the bag
  (John et al.'s normalised counts) would be the other reading. ``mean``
  divides the sum by N (5,000 in the paper profile): BOW's gradient on the
  encoder was then ~4·10³× smaller than L_con's, so BOW and its adversary did
  nothing.
* **POS target** = the normalised histogram of the sentence's Penn tags (the
  annotation stage's ``pos`` column) over :data:`POS_TAGS`: the 45 Penn tags
  (NLTK's ``(``/``)`` read as ``-LRB-``/``-RRB-``) plus one ``OTHER`` bucket for
  tags outside the Penn set (spaCy's ``HYPH``, ``NFP``, ``ADD``, ``XX``, ``_SP`` …),
  counted **only over the words the encoder saw**: a word (annotation
  ``tokens``, aligned to the text) counts when it starts before the end of the
  last word piece inside the ``train.max_length`` window (a word cut in the
  middle counts: its first pieces were seen) — the same window as the BOW target.
  Loss ``pos_loss: kl`` (KL(p ‖ q), 0 at a perfect fit) or ``soft_ce``
  (−Σ p log q; same gradient). A sentence without tags is left out of the POS
  terms. Head logits and every loss reduction run in fp32 with autocast off.
* **Adversary** (``adversary``): ``grl`` (default) — a gradient reversal layer
  (:mod:`._grad_reverse`) with scale λ before each discriminator; one backward
  gives the discriminators +∂L_adv while the encoder receives −λ·∂L_adv. The
  returned ``loss`` is therefore ``L_con + L_cls + L_adv`` (its gradient is the
  algorithm's); the encoder's objective ``L_con + L_cls − λ·L_adv`` is logged as
  ``objective``. ``none`` — no discriminators (ablation "no adversary").
  SPEC §3.8 allows alternating updates as well; the loop has one optimiser
  stepped once per batch, and a discriminator step on the same batch's
  channels at the same discriminator weights has exactly the gradients the
  reversal gives, so there is no separate mode.
* **Learning rates** (:meth:`param_groups`, the loop's one AdamW and its linear
  decay): the encoder and the SimCSE MLP at ``train.lr``; the discriminators
  at ``disc_lr`` (weight decay ``disc_weight_decay``); the classifiers at
  ``head_lr`` (None: ``train.lr``). At the encoder's 3e-5 a randomly
  initialised discriminator learns next to nothing in a short run, and an
  adversary that does not learn gives the encoder nothing to defeat.
  ``disc_lr`` 1e-2 (default) from a measurement on the quick setting (MiniLM
  [CLS] of 3,840 Wikipedia sentences, frozen; 60 steps of 64 with the loop's
  linear decay): D_POS's KL fell from 1.78 to 1.78 / 1.28 / 0.87 / 0.76 at
  3e-5 / 1e-3 / 3e-3 / 1e-2 (constant predictor: 0.67) and D_BOW's
  R-precision rose above the prior's only from 3e-3 up. The encoder's group
  comes first.
* **Ablations**: ``adversary: none`` (no adversary); ``aux_tasks: false`` with
  ``adversary: none`` is plain SimCSE on the same backbone and seed (the loss is
  InfoNCE(MLP(h), MLP(h'), τ) and nothing else; no vocabulary is built).
  The channels are still exported for that variant: the same slices of a
  SimCSE embedding are the control for the channel rows.
* **Head training** (not in the paper): ``bow_prior_bias`` starts the BOW
  heads' output biases at the log-odds of each word piece's document frequency,
  so the BCE starts at the best constant predictor instead of 0.69 per label.
* Auxiliary and adversarial heads read both dropout views (``aux_views: both``;
  ``first`` for one). Heads are linear probes by default (``head_hidden: 0``;
  > 0 adds one ReLU hidden layer to all four, so the adversaries are exactly as
  strong as the classifiers). The four task heads are initialised from ``seed``
  alone; the SimCSE MLP from the global RNG first, exactly as ``simcse.py``, so
  the "no auxiliary tasks, no adversary" variant reproduces the simcse run.

Logged with each step (the loop's ``train.<name>``), to see that every term acts:

* ``grad_con``, ``grad_bow``, ``grad_pos``, ``grad_adv_bow``, ``grad_adv_pos``: the
  L2 norm of each weighted term's gradient with respect to the sentence
  embeddings E(x) of the batch (both views, the point where every term enters
  the encoder), as the encoder receives it (the adversarial terms reversed and
  scaled by λ). Computed with ``torch.autograd.grad`` through the heads and the
  MLP only, every training step.
* ``acc_c_bow``, ``acc_d_bow``: R-precision of C_BOW / D_BOW — of the k
  highest-scored labels, k = the size of the sentence's bag, the fraction in
  the bag; ``acc_c_pos``, ``acc_d_pos``: top-tag accuracy of C_POS / D_POS — the
  predicted most probable tag is (one of) the sentence's most frequent tags.
  ``acc_base_bow``, ``acc_base_pos`` and ``loss_base_bow``, ``loss_base_pos``: the
  scores and losses of a constant predictor — the corpus document frequencies
  for BOW (buffer ``bow_prior_logit``), the batch's mean tag distribution for
  POS: a discriminator above those scores or below those losses reads
  something from the other channel.

Evaluation: one trained model gives three rows — the full [CLS] embedding
(``posbow_adv``), the BOW channel (``posbow_adv_bow``) and the POS channel
(``posbow_adv_pos``): see :meth:`extra_eval_encoders` and the ``channels``
entry of :meth:`export_info` (recorded in ``models/posbow_adv/sentlab.json``).

Example::

    params = PosBowAdv.Params(bow_vocab_size=5000)
    method = PosBowAdv(encoder, tokenizer, params, train_cfg, seed=42)
    out = method(Batch(sentences, extras={"tokens": [["The", "cat", ...], ...], "pos": [["DT", "NN", ...], ...]}))
    out["loss"].backward()
"""

from __future__ import annotations

from typing import Literal, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from ..data.vocab import (POS_TAGS, build_bow_vocab, pos_histogram, read_corpus_texts, stopword_and_punct_ids,
                          words_seen)
from ..encoder import SentenceEncoder, pool
from ..errors import SentlabError
from . import register
from ._common import MLPHead, in_batch_info_nce
from ._grad_reverse import grad_reverse
from .base import Batch, Method, MethodParams

__all__ = ["PosBowAdv", "PosBowAdvParams", "POS_TAGS", "pos_histogram", "bow_r_precision", "top_tag_accuracy"]


def bow_r_precision(scores: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean over rows with a non-empty bag of: the fraction of the k top-scored labels in the bag (k = bag size).

    ``scores`` is ``(B, N)`` or ``(1, N)`` (one ranking for every row); ties go to the smaller index.
    NaN when no row has a bag.
    """
    k = target.sum(-1)
    order = scores.expand_as(target).argsort(dim=-1, descending=True, stable=True)
    hits = target.gather(1, order).cumsum(-1)
    at_k = hits.gather(1, (k.long() - 1).clamp_min(0).unsqueeze(1)).squeeze(1)
    valid = k > 0
    return (at_k[valid] / k[valid]).mean() if bool(valid.any()) else scores.new_tensor(float("nan"))


def top_tag_accuracy(scores: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Fraction of rows with tags whose top-scored tag is one of the row's most frequent tags (NaN: no such row)."""
    pred = scores.expand_as(target).argmax(-1, keepdim=True)
    top = target >= target.max(-1, keepdim=True).values
    valid = target.sum(-1) > 0
    hit = top.gather(1, pred).squeeze(1)
    return hit[valid].float().mean() if bool(valid.any()) else scores.new_tensor(float("nan"))


class PosBowAdvParams(MethodParams):
    """``methods.posbow_adv`` in params.yaml."""

    bow_dim: Optional[int] = Field(None, gt=0, description="BOW channel width; None: d − round(d/6) (640 of 768)")
    pos_dim: Optional[int] = Field(None, gt=0, description="POS channel width; None: round(d/6) (128 of 768)")
    bow_vocab_size: int = Field(5000, gt=0, description="N: the BOW classes = the N most frequent word pieces")
    bow_vocab_from: str = Field("data/corpus/train.parquet", description="corpus the BOW vocabulary is counted on")
    bow_reduction: Literal["sum", "mean"] = Field(
        "sum", description="sum: the bag's −log-likelihood, BCE summed over the N labels (the paper's −log C_BOW); "
                           "mean: divided by N")
    bow_exclude_stopwords: bool = Field(True, description="leave NLTK's English stop words and pieces without a "
                                                          "letter or digit out of the BOW vocabulary and targets")
    pos_loss: Literal["kl", "soft_ce"] = Field("kl", description="KL(p ‖ q) or −Σ p log q (the same gradient)")
    use_mlp: bool = Field(True, description="SimCSE's training-time MLP on the contrastive branch")
    aux_tasks: bool = Field(True, description="C_BOW and C_POS (false + adversary none = plain SimCSE)")
    aux_views: Literal["both", "first"] = Field("both", description="the heads read both dropout views or the first")
    con_weight: float = Field(1.0, ge=0)
    bow_weight: float = Field(1.0, ge=0)
    pos_weight: float = Field(1.0, ge=0)
    adversary: Literal["grl", "none"] = Field("grl", description="grl: gradient reversal; none: no discriminators")
    adv_lambda: float = Field(1.0, ge=0, description="λ in L_con + L_cls − λ·L_adv")
    adv_bow_weight: float = Field(1.0, ge=0, description="weight of D_BOW's loss inside L_adv")
    adv_pos_weight: float = Field(1.0, ge=0, description="weight of D_POS's loss inside L_adv")
    head_hidden: int = Field(0, ge=0, description="0: linear heads; >0: one ReLU hidden layer of this width")
    disc_lr: float = Field(1e-2, gt=0, description="the discriminators' learning rate (their own param group)")
    disc_weight_decay: float = Field(0.0, ge=0, description="the discriminators' weight decay")
    head_lr: Optional[float] = Field(None, gt=0, description="the classifiers' learning rate (their own param "
                                                             "group); None: train.lr")
    bow_prior_bias: bool = Field(True, description="start the BOW heads' biases at the log-odds of each word "
                                                   "piece's document frequency (the best constant predictor)")


def _head(d_in: int, d_out: int, hidden: int) -> nn.Module:
    if hidden <= 0:
        return nn.Linear(d_in, d_out)
    return nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, d_out))


def _output_layer(head: nn.Module) -> nn.Linear:
    return head if isinstance(head, nn.Linear) else head[-1]


@register("posbow_adv")
class PosBowAdv(Method):
    summary = "SimCSE + POS / bag-of-words auxiliary tasks on two embedding channels, adversarially disentangled"
    Params = PosBowAdvParams
    corpus_columns = ("tokens", "pos")
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
            self._build_bow_vocab(tokenizer, n_bow, train_cfg.max_length)

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
            self._init_bow_prior()

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

    def _build_bow_vocab(self, tokenizer, size: int, max_length: int) -> None:
        """Buffers ``bow_vocab`` (ids, class order), ``bow_index`` (id → class) and ``bow_prior_logit`` (the
        log-odds of each class's document frequency: the best constant predictor), so checkpoints carry them."""
        self.register_buffer("bow_vocab", torch.full((size,), -1, dtype=torch.long))
        self.register_buffer("bow_index", torch.full((len(tokenizer),), -1, dtype=torch.long))
        exclude = stopword_and_punct_ids(tokenizer) if self.params.bow_exclude_stopwords else None
        vocab, doc_freq = build_bow_vocab(tokenizer, read_corpus_texts(self.params.bow_vocab_from), size, max_length,
                                          exclude=exclude, return_frequencies=True)
        self.set_bow_vocab(vocab)
        self.register_buffer("bow_prior_logit", torch.logit(torch.as_tensor(np.clip(doc_freq, 1e-6, 1 - 1e-6),
                                                                            dtype=torch.float32)))

    @torch.no_grad()
    def _init_bow_prior(self) -> None:
        """BOW output biases = log-odds of each word piece's document frequency (the prior init of Lin et al. 2017, RetinaNet)."""
        for heads in (getattr(self, "classifiers", None), getattr(self, "discriminators", None)):
            if heads is not None:
                _output_layer(heads["bow"]).bias.copy_(self.bow_prior_logit)

    @torch.no_grad()
    def set_bow_vocab(self, vocab_ids) -> None:
        """Install the BOW vocabulary (word-piece ids, class order)."""
        ids = torch.as_tensor(np.asarray(vocab_ids), dtype=torch.long, device=self.bow_vocab.device)
        if ids.shape != self.bow_vocab.shape:
            raise ValueError(f"expected {self.bow_vocab.numel()} vocabulary ids, got {ids.numel()}")
        self.bow_vocab.copy_(ids)
        self.bow_index.fill_(-1)
        self.bow_index[ids] = torch.arange(ids.numel(), device=ids.device)

    def param_groups(self, lr: float) -> list[dict]:
        """The loop's AdamW groups: encoder + MLP at ``lr`` (first), the classifiers at ``head_lr`` (None:
        ``lr``), the discriminators at ``disc_lr`` with ``disc_weight_decay``."""
        p = self.params
        heads = {"classifiers": {"lr": p.head_lr or lr}, "discriminators": {"lr": p.disc_lr, "weight_decay":
                                                                            p.disc_weight_decay}}
        groups, in_heads = [], set()
        for name, options in heads.items():
            if hasattr(self, name):
                params = [q for q in getattr(self, name).parameters() if q.requires_grad]
                in_heads |= {id(q) for q in params}
                groups.append({"params": params, **options})
        rest = [q for q in self.trainable_parameters() if id(q) not in in_heads]
        return [{"params": rest, "lr": lr}] + groups

    # --- targets ---------------------------------------------------------------
    def bow_targets(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Multi-hot ``(B, N)``: which vocabulary word pieces occur in each (tokenized) sentence."""
        cls_idx = self.bow_index[input_ids]
        present = ((cls_idx >= 0) & attention_mask.bool()).float()
        target = torch.zeros(input_ids.size(0), self.bow_vocab.numel(), device=input_ids.device)
        return target.scatter_add_(1, cls_idx.clamp_min(0), present).clamp_(max=1.0)

    def pos_targets(self, batch: Batch) -> torch.Tensor:
        """``(B, |POS_TAGS|)`` normalised histograms of the tags of the words the encoder saw (zero row: none)."""
        tokens, tags = self._annotation_column(batch, "tokens"), self._annotation_column(batch, "pos")
        rows = []
        for sent_tokens, sent_tags, n_seen in zip(tokens, tags, self.words_seen(batch.sentences, tokens)):
            if len(sent_tokens) != len(sent_tags):
                raise SentlabError(f"posbow_adv: a sentence has {len(sent_tokens)} annotation tokens but "
                                   f"{len(sent_tags)} POS tags; the annotations are corrupt. Re-run the annotate "
                                   f"stage.")
            rows.append(pos_histogram(list(sent_tags)[:n_seen]))
        return torch.from_numpy(np.stack(rows)).to(self.device)

    def words_seen(self, sentences: Sequence[str], token_lists: Sequence[Sequence[str]]) -> list[int]:
        """How many leading annotation tokens of each sentence lie in the ``train.max_length`` window."""
        return words_seen(self.tokenizer, sentences, token_lists, self.train_cfg.max_length)

    def _annotation_column(self, batch: Batch, name: str):
        if name not in batch.extras:
            raise SentlabError(
                f"posbow_adv needs the annotation stage's `{name}` column in Batch.extras (corpus_columns = "
                f"{self.corpus_columns}). Run the annotate stage for the training corpus and train again."
            )
        col = batch.extras[name]
        if len(col) != len(batch):
            raise SentlabError(f"posbow_adv: Batch.extras['{name}'] has {len(col)} rows for {len(batch)} sentences; "
                               f"the annotations do not match the corpus. Re-run the annotate stage.")
        return col

    # --- mechanisms ------------------------------------------------------------
    def split_channels(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(BOW channel, POS channel) of embeddings ``h``."""
        return h[:, : self.bow_dim], h[:, self.bow_dim: self.bow_dim + self.pos_dim]

    @staticmethod
    def _logits(head: nn.Module, x: torch.Tensor) -> torch.Tensor:
        """A head's logits in fp32 with autocast off (bf16 logits of ±10 have a resolution of 0.06)."""
        with torch.autocast(device_type=x.device.type, enabled=False):
            return head(x.float())

    def _bow_loss(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """−log-likelihood of the bag: BCE summed over the labels (``bow_reduction: mean``: ÷N), mean over rows."""
        with torch.autocast(device_type=logits.device.type, enabled=False):
            loss = F.binary_cross_entropy_with_logits(logits.float(), target.float(), reduction="none").sum(-1).mean()
        return loss / logits.size(-1) if self.params.bow_reduction == "mean" else loss

    def _pos_loss(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """KL(p ‖ q) (``soft_ce``: −Σ p log q) averaged over the rows that have tags."""
        with torch.autocast(device_type=logits.device.type, enabled=False):
            logq = F.log_softmax(logits.float(), dim=-1)
            per_row = -(target * logq).sum(-1)
            if self.params.pos_loss == "kl":
                per_row = per_row + torch.special.xlogy(target, target).sum(-1)
            valid = target.sum(-1) > 0
            return per_row[valid].mean() if bool(valid.any()) else logq.sum() * 0.0

    def _head_losses(self, heads: nn.ModuleDict, bow_in, pos_in, bow_t, pos_t, who: str, out: dict):
        """(BOW loss, POS loss) of ``heads["bow"](bow_in)``, ``heads["pos"](pos_in)``; logs their accuracies."""
        bow_logits, pos_logits = self._logits(heads["bow"], bow_in), self._logits(heads["pos"], pos_in)
        out.update(self._accuracies(who, bow_logits, pos_logits, bow_t, pos_t))
        return self._bow_loss(bow_logits, bow_t), self._pos_loss(pos_logits, pos_t)

    # --- diagnostics -------------------------------------------------------------
    @staticmethod
    def _accuracies(who: str, bow_logits, pos_logits, bow_t, pos_t) -> dict[str, torch.Tensor]:
        """``acc_<who>_bow`` (R-precision) and ``acc_<who>_pos`` (top-tag accuracy) of a pair of heads."""
        with torch.no_grad():
            return {f"acc_{who}_bow": bow_r_precision(bow_logits, bow_t),
                    f"acc_{who}_pos": top_tag_accuracy(pos_logits, pos_t)}

    def _baselines(self, bow_t, pos_t) -> dict[str, torch.Tensor]:
        """Scores and losses of a constant predictor (``acc_base_*``, ``loss_base_*``): for BOW the corpus
        document frequencies, for POS the batch's mean tag distribution (the best constant on the batch)."""
        with torch.no_grad():
            bow_logits = self.bow_prior_logit.unsqueeze(0)
            pos_logits = pos_t.mean(0, keepdim=True).clamp_min(1e-12).log()
            return {"loss_base_bow": self._bow_loss(bow_logits.expand_as(bow_t), bow_t),
                    "loss_base_pos": self._pos_loss(pos_logits.expand_as(pos_t), pos_t),
                    **self._accuracies("base", bow_logits, pos_logits, bow_t, pos_t)}

    @staticmethod
    def _encoder_grad_norms(terms: dict[str, torch.Tensor], views: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
        """``grad_<term>``: the L2 norm of each term's gradient on the sentence embeddings ``views`` as the
        encoder receives it (not on the parameters; the backward runs through the heads and the MLP only)."""
        if not (torch.is_grad_enabled() and all(v.requires_grad for v in views)):
            return {}
        norms = {}
        for name, term in terms.items():
            grads = torch.autograd.grad(term, views, retain_graph=True, allow_unused=True)
            norms[f"grad_{name}"] = torch.sqrt(sum((g.float() ** 2).sum() for g in grads if g is not None))
        return norms

    # --- the algorithm -----------------------------------------------------------
    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        p = self.params
        enc = self.tokenize(batch.sentences)
        h1, h2 = self._two_views(enc)
        out: dict[str, torch.Tensor] = {}
        terms = {"con": p.con_weight * self._contrastive(h1, h2, out)}  # each weighted term the encoder receives
        if self.needs_targets:
            h, bow_t, pos_t = self._aux_inputs(batch, enc, h1, h2, out)
            bow_ch, pos_ch = self.split_channels(h)
            if p.aux_tasks:
                terms.update(self._auxiliary(bow_ch, pos_ch, bow_t, pos_t, out))
            if p.adversary == "grl":
                terms.update(self._adversarial(bow_ch, pos_ch, bow_t, pos_t, out))
        out.update(self._encoder_grad_norms(terms, (h1, h2)))
        loss = sum(terms.values())
        adv = out.get("loss_adv")
        out["objective"] = (loss - (1 + p.adv_lambda) * adv if adv is not None else loss).detach()
        out["loss"] = loss
        return out

    def _two_views(self, enc: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Pre-MLP [CLS] of each sentence under two dropout masks (one forward over the doubled batch)."""
        doubled = {k: torch.cat([v, v]) for k, v in enc.items()}
        out = self.encoder(**doubled, return_dict=True)
        return pool(out, doubled["attention_mask"], "cls").chunk(2)

    def _contrastive(self, h1: torch.Tensor, h2: torch.Tensor, out: dict) -> torch.Tensor:
        """L_con = InfoNCE(MLP(h), MLP(h'), τ)."""
        if self.mlp is not None:
            h1, h2 = self.mlp(h1), self.mlp(h2)
        loss = in_batch_info_nce(h1, h2, self.train_cfg.temperature)
        out["loss_con"] = loss.detach()
        return loss

    def _aux_inputs(self, batch: Batch, enc, h1, h2, out: dict):
        """(embeddings the heads read, BOW targets, POS targets) under ``aux_views``; logs the baselines."""
        bow_t = self.bow_targets(enc["input_ids"], enc["attention_mask"])
        pos_t = self.pos_targets(batch)
        if self.params.aux_views == "both":
            h1, bow_t, pos_t = torch.cat([h1, h2]), bow_t.repeat(2, 1), pos_t.repeat(2, 1)
        out.update(self._baselines(bow_t, pos_t))
        return h1, bow_t, pos_t

    def _auxiliary(self, bow_ch, pos_ch, bow_t, pos_t, out: dict) -> dict[str, torch.Tensor]:
        """L_cls: C_BOW on the BOW channel, C_POS on the POS channel (weighted terms ``bow``, ``pos``)."""
        p = self.params
        l_bow, l_pos = self._head_losses(self.classifiers, bow_ch, pos_ch, bow_t, pos_t, "c", out)
        out.update(loss_bow=l_bow.detach(), loss_pos=l_pos.detach())
        return {"bow": p.bow_weight * l_bow, "pos": p.pos_weight * l_pos}

    def _adversarial(self, bow_ch, pos_ch, bow_t, pos_t, out: dict) -> dict[str, torch.Tensor]:
        """L_adv: D_BOW on the POS channel, D_POS on the BOW channel, behind gradient reversal (terms
        ``adv_bow``, ``adv_pos``): the discriminators receive +∂L_adv, the encoder −λ·∂L_adv."""
        p = self.params
        l_dbow, l_dpos = self._adversarial_losses(grad_reverse(bow_ch, p.adv_lambda),
                                                  grad_reverse(pos_ch, p.adv_lambda), bow_t, pos_t, out)
        terms = {"adv_bow": p.adv_bow_weight * l_dbow, "adv_pos": p.adv_pos_weight * l_dpos}
        out.update(loss_adv=sum(terms.values()).detach(), loss_adv_bow=l_dbow.detach(), loss_adv_pos=l_dpos.detach())
        return terms

    def _adversarial_losses(self, bow_ch, pos_ch, bow_t, pos_t, out: Optional[dict] = None):
        """(L_D_BOW, L_D_POS): each discriminator tries the other channel's task."""
        return self._head_losses(self.discriminators, pos_ch, bow_ch, bow_t, pos_t, "d", {} if out is None else out)

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
