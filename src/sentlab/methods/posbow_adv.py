"""SimCSE with POS and bag-of-words auxiliary tasks and adversarial disentangling (docs/methods.md#posbow-adversarial).

"Improving sentence embeddings with POS and bag-of-words auxiliary tasks and adversarial disentangling"
(``shared/papers/simcse_pos_bow_adversarial.md``), built on SimCSE (Gao et al. 2021, arXiv:2104.08821) with
a gradient reversal layer (Ganin & Lempitsky 2015). The [CLS] embedding E(x) is cut into a BOW channel and a
POS channel; classifiers predict the sentence's bag of words from the first and its POS-tag distribution
from the second, discriminators try each task from the *other* channel, and the encoder is trained to
defeat them, so each channel holds its own task's information::

    h, h' = [CLS](E(x)) under two dropout masks;  h_bow = h[:, :bow_dim],  h_pos = h[:, bow_dim:bow_dim+pos_dim]
    L_con = InfoNCE(MLP(h), MLP(h'), τ)
    L_cls = w_bow · NLL(bag(x) | C_BOW(h_bow)) + w_pos · KL(tags(x) ‖ C_POS(h_pos))   (pos_reduction words: ·n(x))
    L_adv = a_bow · NLL(bag(x) | D_BOW(h_pos)) + a_pos · KL(tags(x) ‖ D_POS(h_bow))
    encoder, C: minimise L_con + L_cls − λ·L_adv;      D: minimise L_adv

What the paper leaves open is a param of :class:`PosBowAdvParams` (see each Field): the channels are slices
of the pre-MLP [CLS], the vector the exported encoder returns, in the paper's 640/128-of-768 proportion;
the bag is over the model's word pieces in the training window (the corpus's most frequent, stop words and
punctuation out, as in the content bag of John et al. 2019, the style/content setting the paper names; every
piece of a word, WordPiece or byte-level BPE), its loss −E log C_BOW as a softmax classifier's, the cross-entropy
against the bag as a distribution (John et al.'s BoW loss, the POS task's form and scale: one Bernoulli per word
summed over the vocabulary gave the encoder ~20x C_POS's gradient); the POS target is the tag histogram of the
words the encoder saw (a word counts when its first piece is in the window); the adversary is a gradient
reversal layer; −E log C_POS per word or over the sentence's words (``pos_reduction``); the heads train at their own
rates, the classifiers at ``head_lr`` = the discriminators' 1e-2 (at the encoder's 3e-5 C_POS's loss rose while
D_POS's fell: the adversary learned and the auxiliaries did not), the POS heads from the first batch's tag
distribution with one uniform pseudo-row, every head from zero output weights (``head_init: constant``: it starts as
the constant predictor, so what it learns shows as a loss below the baseline's from the first step). Each head's
accuracy is logged beside the constant predictor's, scored by the same function (``acc_{c,d,base}_{bow,pos}``): for
the POS *distribution* the tag overlap Σ min(p, q) (a head that lowers the KL raises it), the top-tag accuracy
beside it (``acc_*_pos_top``: the majority tag is the top tag of ~55 % of the quick corpus's sentences; MiniLM's
64-dim POS channel starts with almost none of it, so the quick line runs ``pos_reduction: words`` with λ 0.1:
docs/methods.md). The trained model is evaluated as three rows: the full embedding and each channel
(``channels`` in :meth:`export_info`).

Example::

    method = PosBowAdv(encoder, tokenizer, PosBowAdv.Params(bow_vocab_size=5000, max_length=32, lr=3e-5))
    out = method(Batch(sentences, extras={"tokens": [["The", "cat", ...], ...], "pos": [["DT", "NN", ...], ...]}))
    out["loss"].backward()
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal, Optional, Sequence

import numpy as np
import torch
from pydantic import Field
from torch import nn

from ..data.tags import POS_TAGS, pos_targets, words_seen
from ..data.vocab import corpus_bow_vocab
from ..nn.encoder import pool
from ..errors import SentlabError
from . import register
from ._common import MLPHead, in_batch_info_nce, two_views
from ._posbow_tasks import (GradientReversal, HeadInputs, NoAdversary, TaskHeads, accuracies, bow_nll,
                            bow_r_precision, pos_divergence, tag_overlap, top_tag_accuracy)
from .base import Batch, ContrastiveParams, Method, PaperAvg, adamw
from .simcse import SIMCSE_CITATION

__all__ = ["PosBowAdv", "PosBowAdvParams", "TaskHeads", "GradientReversal", "NoAdversary", "bow_nll", "pos_divergence",
           "bow_r_precision", "tag_overlap", "top_tag_accuracy"]


class PosBowAdvParams(ContrastiveParams):
    """``methods.posbow_adv`` in params.yaml."""

    bow_dim: Optional[int] = Field(None, gt=0, description="BOW channel width, dims [0, bow_dim) of the pre-MLP [CLS]; "
                                                           "None: d − round(d/6) (the paper's 640 of 768)")
    pos_dim: Optional[int] = Field(None, gt=0, description="POS channel width, the dims after the BOW channel; None: "
                                                           "round(d/6) (the paper's 128 of 768)")
    bow_vocab_size: int = Field(5000, gt=0, description="N: the BOW classes, the N word pieces of highest document "
                                                        "frequency in bow_vocab_from (special tokens out, ties by id)")
    bow_vocab_from: str = Field("data/corpus/train.parquet", description="corpus the BOW vocabulary is counted on")
    bow_loss: Literal["multinomial", "bernoulli"] = Field(
        "multinomial", description="multinomial: C_BOW/D_BOW are softmax classifiers over the N words and −E log C_BOW "
                                 "is the cross-entropy against the bag as a distribution (KL, as the POS task; John et "
                                 "al. 2019's BoW loss): the paper's L_cls, two classifiers' −E log C on one scale; "
                                 "bernoulli: one Bernoulli per word, reduced by bow_reduction (summed, its reversed "
                                 "D_BOW and its C_BOW gradients on the embedding were ~20x C_POS's in the quick run)")
    bow_reduction: Literal["sum", "mean"] = Field(
        "sum", description="bow_loss bernoulli: sum: BCE summed over the N labels (the bag's −log-likelihood as N "
                           "Bernoullis); mean: ÷N (then the BOW terms give the encoder ~1/5000 of their gradient)")
    bow_exclude_stopwords: bool = Field(
        True, description="leave NLTK's English stop words and pieces without a letter or digit out of the BOW "
                          "vocabulary and targets (paper silent; the content bag of John et al. 2019 leaves them out)")
    pos_loss: Literal["kl", "soft_ce"] = Field(
        "kl", description="KL(p ‖ q) or −Σ p log q (the same gradient) against the tag histogram of the words the "
                          "encoder saw")
    pos_reduction: Literal["words", "mean"] = Field(
        "mean", description="mean: per word, the tag distribution's pos_loss; words: −E log C_POS as the likelihood of "
                            "the sentence's tags, −Σ_w log C_POS(tag_w) over the words seen (pos_loss x its words; "
                            "D_POS and the logged baseline alike; the quick line's, with adv_lambda 0.1)")
    mlp_train: bool = Field(True, description="SimCSE's Linear+tanh MLP on the contrastive branch in training "
                                              "(never on the channels, dropped at test)")
    aux_tasks: bool = Field(True, description="C_BOW and C_POS (false with adversary none: plain SimCSE)")
    aux_views: Literal["both", "first"] = Field("both", description="the heads read both dropout views or the first")
    con_weight: float = Field(1.0, ge=0, description="weight of L_con")
    bow_weight: float = Field(1.0, ge=0, description="w_bow: weight of C_BOW's loss in L_cls")
    pos_weight: float = Field(1.0, ge=0, description="w_pos: weight of C_POS's loss in L_cls")
    adversary: Literal["grl", "none"] = Field("grl", description="grl: discriminators behind a gradient reversal layer "
                                                                 "(one backward; an alternating discriminator step at "
                                                                 "the same weights has the same gradients); none: no "
                                                                 "discriminators (the ablation)")
    adv_lambda: float = Field(1.0, ge=0, description="λ in L_con + L_cls − λ·L_adv")
    adv_bow_weight: float = Field(1.0, ge=0, description="a_bow: weight of D_BOW's loss inside L_adv")
    adv_pos_weight: float = Field(1.0, ge=0, description="a_pos: weight of D_POS's loss inside L_adv")
    head_hidden: int = Field(0, ge=0, description="0: linear heads; >0: one ReLU hidden layer of this width in all "
                                                  "four (the adversaries as strong as the classifiers)")
    disc_lr: float = Field(1e-2, gt=0, description="the discriminators' learning rate (their own AdamW group): a "
                                                   "random head learns next to nothing at the encoder's rate")
    disc_weight_decay: float = Field(0.0, ge=0, description="the discriminators' weight decay")
    head_lr: Optional[float] = Field(1e-2, gt=0, description="C_BOW/C_POS's rate (own AdamW group; paper silent): "
                                                             "disc_lr's, so they learn as the adversary does; None: lr")
    bow_prior_bias: bool = Field(True, description="start the BOW heads' output biases at the log-odds of each word "
                                                   "piece's document frequency, the best constant predictor (not in "
                                                   "the paper)")
    pos_prior_bias: bool = Field(True, description="start the POS heads' output biases at the log tag distribution "
                                                   "of the first training batch, the constant predictor (not in the "
                                                   "paper)")
    head_init: Literal["constant", "random"] = Field(
        "constant", description="constant: the four heads' output weights start at zero, so with the prior biases "
                                "each head starts as the constant predictor and its loss falls from the baseline's "
                                "(a random linear head starts ~0.04 nat above it on MiniLM's POS channel, and C_POS "
                                "stayed above it for the quick run's 30 steps); random: nn.Linear's init (paper "
                                "silent)")


def add_one_row(tag_sum: torch.Tensor, rows) -> torch.Tensor:
    """The mean tag distribution of ``rows`` rows whose distributions sum to ``tag_sum``, with one uniform pseudo-row
    added (Laplace's add-one on rows): no tag at probability 0, ~1/(T·rows) for a tag not yet seen."""
    rows = torch.as_tensor(rows, dtype=tag_sum.dtype, device=tag_sum.device)
    return (tag_sum + 1.0 / tag_sum.numel()) / (rows + 1.0)


@register("posbow_adv")
class PosBowAdv(Method):
    paper = ("Improving sentence embeddings with POS and bag-of-words auxiliary tasks and adversarial "
             "disentangling (manuscript, shared/papers/simcse_pos_bow_adversarial.md), built on SimCSE")
    citation = SIMCSE_CITATION        # the manuscript has no published entry: the method it builds on
    run_name_params = ("adversary", "adv_lambda", "aux_tasks")
    paper_avg = PaperAvg(77.21, "POS/BOW Table 1 (Our sentence, RoBERTa-base)", backbone='roberta-base')
    summary = "SimCSE + POS / bag-of-words auxiliary tasks on two embedding channels, adversarially disentangled"
    Params = PosBowAdvParams
    corpus_columns = ("tokens", "pos")
    corpus = "train"
    inference_pooling = "cls"

    def __init__(self, encoder: nn.Module, tokenizer, params: PosBowAdvParams, seed: int = 0):
        super().__init__(encoder, tokenizer, params, seed)
        p = params
        d = int(encoder.config.hidden_size)
        self.bow_dim, self.pos_dim = self._channel_sizes(d, p.bow_dim, p.pos_dim)
        self.needs_targets = p.aux_tasks or p.adversary != "none"
        if self.needs_targets:
            self._register_bow_vocab(*corpus_bow_vocab(tokenizer, p.bow_vocab_from, p.bow_vocab_size, p.max_length,
                                                       p.bow_exclude_stopwords))
        # The MLP comes first from the global RNG, exactly as in simcse.py; the task heads come from the seed alone.
        self.mlp = MLPHead.of(encoder.config) if p.mlp_train else None
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.classifiers = self._heads(self.bow_dim, self.pos_dim) if p.aux_tasks else None
            self.adversary = (GradientReversal(self._heads(self.pos_dim, self.bow_dim), p.adv_lambda, p.adv_bow_weight,
                                               p.adv_pos_weight) if p.adversary == "grl" else NoAdversary())
        if p.head_init == "constant":
            for heads in self._all_heads():
                heads.zero_output_weights()
        if self.needs_targets and p.bow_prior_bias:
            for heads in self._all_heads():
                heads.init_bias("bow", self.bow_prior_logit)
        # pos_prior_bias: set from the first training batch (a buffer: a resumed run does not set it again)
        self.register_buffer("pos_prior_set", torch.tensor(not (self.needs_targets and p.pos_prior_bias)))
        # the POS baseline: the mean tag distribution of the training rows before this batch (its sum and count)
        self.register_buffer("pos_tag_sum", torch.zeros(len(POS_TAGS)))
        self.register_buffer("pos_rows", torch.zeros(()))
        self._pos_prior_done: Optional[bool] = bool(self.pos_prior_set)

    def _load_from_state_dict(self, *args, **kwargs):
        super()._load_from_state_dict(*args, **kwargs)
        self._pos_prior_done = None  # read from the loaded buffer once

    def _all_heads(self) -> list:
        return [h for h in (self.classifiers, getattr(self.adversary, "discriminators", None)) if h is not None]

    @torch.no_grad()
    def _init_pos_bias(self, pos_t: torch.Tensor) -> None:
        """``pos_prior_bias``: the POS heads' biases = the log of the first training batch's mean tag distribution
        (the constant predictor's logits), once; a random head otherwise starts ~1 nat above that predictor and
        spends a quick run's steps learning the prior (issue #34). With one uniform pseudo-row (:func:`add_one_row`):
        a tag absent from the first batch started at log 1e-6, ~10 nat under its share, which a head at 1e-2 does not
        climb in a run; each later sentence with that tag put C_POS's KL above the constant predictor's."""
        if self._pos_prior_done is None:
            self._pos_prior_done = bool(self.pos_prior_set)
        if self._pos_prior_done or not self.training:
            return
        for heads in self._all_heads():
            heads.init_bias("pos", add_one_row(pos_t.float().sum(0), (pos_t.sum(-1) > 0).sum()).log())
        self.pos_prior_set.fill_(True)
        self._pos_prior_done = True

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
                f"width {d}. Set them so that bow_dim + pos_dim <= {d}, or leave both null for "
                f"{d - round(d / 6)}/{round(d / 6)}."
            )
        return int(bow), int(pos)

    def _heads(self, bow_in: int, pos_in: int) -> TaskHeads:
        p = self.params
        return TaskHeads(bow_in, pos_in, p.bow_vocab_size, p.head_hidden, self.bow_mode, p.pos_loss)

    @property
    def bow_mode(self) -> str:
        """:func:`bow_nll`'s mode: ``multinomial``, or the Bernoulli loss's ``bow_reduction``."""
        return "multinomial" if self.params.bow_loss == "multinomial" else self.params.bow_reduction

    def _register_bow_vocab(self, vocab_ids, doc_freq) -> None:
        """Buffers ``bow_vocab`` (ids, class order), ``bow_index`` (id → class, −1: none) and ``bow_prior_logit``
        (the constant predictor's logits: each class's document frequency as log-odds for the Bernoulli loss, as a
        log for the softmax's, whose softmax is the frequencies normalised), so checkpoints carry them."""
        ids = torch.as_tensor(np.asarray(vocab_ids), dtype=torch.long)
        index = torch.full((len(self.tokenizer),), -1, dtype=torch.long)
        index[ids] = torch.arange(ids.numel())
        self.register_buffer("bow_vocab", ids)
        self.register_buffer("bow_index", index)
        freq = torch.as_tensor(np.clip(doc_freq, 1e-6, 1 - 1e-6), dtype=torch.float32)
        self.register_buffer("bow_prior_logit", freq.log() if self.params.bow_loss == "multinomial" else freq.logit())

    def configure_optimizers(self, *, weight_decay: float = 0.0, fused: bool = False) -> torch.optim.Optimizer:
        """AdamW groups: the encoder and the MLP at ``lr`` (first), the classifiers at ``head_lr`` (None: ``lr``),
        the discriminators at ``disc_lr`` with ``disc_weight_decay``."""
        p = self.params
        classifiers = list(self.classifiers.parameters()) if self.classifiers is not None else []
        heads = [{"params": classifiers, "lr": p.head_lr or p.lr},
                 {"params": list(self.adversary.parameters()), "lr": p.disc_lr, "weight_decay": p.disc_weight_decay}]
        in_heads = {id(q) for g in heads for q in g["params"]}
        rest = [q for q in self.trainable_parameters() if id(q) not in in_heads]
        return adamw([{"params": rest}] + heads, lr=p.lr, weight_decay=weight_decay, fused=fused)

    # --- targets ---------------------------------------------------------------
    def prepare(self, batch: Batch) -> Batch:
        """Token ids (``enc``) and, when a head needs them, the POS targets (``pos``) of the words the encoder sees."""
        features = {"enc": self.encode_text(batch.sentences)}
        if self.needs_targets:
            tokens, tags = self._annotation_column(batch, "tokens"), self._annotation_column(batch, "pos")
            counts = pos_targets(self.tokenizer, batch.sentences, tokens, tags, self.params.max_length, False)
            words = counts.sum(-1, keepdims=True)
            features["pos"] = torch.from_numpy(np.divide(counts, words, out=counts.copy(), where=words > 0))
            features["pos_words"] = torch.from_numpy(words[:, 0])
        return replace(batch, features=features)

    def bow_targets(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Multi-hot ``(B, N)``: which vocabulary word pieces occur in each (tokenized) sentence."""
        cls_idx = self.bow_index[input_ids]
        present = ((cls_idx >= 0) & attention_mask.bool()).float()
        target = torch.zeros(input_ids.size(0), self.bow_vocab.numel(), device=input_ids.device)
        return target.scatter_add_(1, cls_idx.clamp_min(0), present).clamp_(max=1.0)

    def words_seen(self, sentences: Sequence[str], token_lists: Sequence[Sequence[str]]) -> list[int]:
        """How many leading annotation tokens of each sentence lie in the ``max_length`` window."""
        return words_seen(self.tokenizer, sentences, token_lists, self.params.max_length)

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

    # --- the algorithm -----------------------------------------------------------
    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One step of the algorithm::

            h, h' = [CLS] under two dropout masks              (_two_views)
            L_con = InfoNCE(MLP(h), MLP(h'), τ)                (_contrastive)
            L_cls = C_BOW, C_POS on their own channels         (_auxiliary)
            L_adv = D_BOW, D_POS on the other channels         (the adversary)
            loss  = the weighted sum, with the logged terms    (_total)
        """
        features, log = self.prepared(batch), {}
        h1, h2 = self._two_views(features["enc"])
        terms = {"con": self._contrastive(h1, h2, log)}
        x = self._head_inputs(features, h1, h2, log)
        terms.update(self._auxiliary(x, log))
        terms.update(self.adversary(x, log))
        return self._total(terms, (h1, h2), log)

    def _two_views(self, enc: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Pre-MLP [CLS] of each sentence under two dropout masks (SimCSE's doubled batch)."""
        return two_views(lambda f: pool(self.encoder(**f, return_dict=True), f["attention_mask"], "cls"), enc)

    def _contrastive(self, h1: torch.Tensor, h2: torch.Tensor, log: dict) -> torch.Tensor:
        """``con_weight`` · L_con; L_con = InfoNCE(MLP(h), MLP(h'), τ) over the global batch (``loss_con``)."""
        if self.mlp is not None:
            h1, h2 = self.mlp(h1), self.mlp(h2)
        loss = in_batch_info_nce(h1, h2, self.params.temperature)
        log["loss_con"] = loss.detach()
        return self.params.con_weight * loss

    def _head_inputs(self, features: dict, h1, h2, log: dict) -> Optional[HeadInputs]:
        """The channels and targets the heads read under ``aux_views`` (None: no heads); logs the constant
        predictor's scores and losses (``acc_base_*``, ``loss_base_*``)."""
        if not self.needs_targets:
            return None
        bow_t = self.bow_targets(features["enc"]["input_ids"], features["enc"]["attention_mask"])
        pos_t = features["pos"]
        words = features["pos_words"] if self.params.pos_reduction == "words" else None
        if self.params.aux_views == "both":
            h1, bow_t, pos_t = torch.cat([h1, h2]), bow_t.repeat(2, 1), pos_t.repeat(2, 1)
            words = None if words is None else words.repeat(2)
        log.update(self._baselines(bow_t, pos_t, words))
        self._init_pos_bias(pos_t)
        return HeadInputs(*self.split_channels(h1), bow_t, pos_t, words)

    def _auxiliary(self, x: Optional[HeadInputs], log: dict) -> dict[str, torch.Tensor]:
        """L_cls: C_BOW on the BOW channel, C_POS on the POS channel (weighted terms ``bow``, ``pos``)."""
        if self.classifiers is None:
            return {}
        l_bow, l_pos = self.classifiers.losses(x.bow, x.pos, x.bow_target, x.pos_target, "c", log, x.pos_words)
        log.update(loss_bow=l_bow.detach(), loss_pos=l_pos.detach())
        return {"bow": self.params.bow_weight * l_bow, "pos": self.params.pos_weight * l_pos}

    def _total(self, terms: dict[str, torch.Tensor], views, log: dict) -> dict[str, torch.Tensor]:
        """``loss`` = the sum of the weighted terms; logs the encoder's ``objective`` and ``grad_<term>``."""
        log.update(self._encoder_grad_norms(terms, views))
        loss = sum(terms.values())
        log["objective"] = self.adversary.objective(loss, log).detach()
        log["loss"] = loss
        return log

    # --- mechanisms and diagnostics ------------------------------------------------
    def split_channels(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(BOW channel, POS channel) of embeddings ``h``."""
        return h[:, : self.bow_dim], h[:, self.bow_dim: self.bow_dim + self.pos_dim]

    def _baselines(self, bow_t, pos_t, pos_words=None) -> dict[str, torch.Tensor]:
        """Scores and losses of a constant predictor, the baselines ``acc_c_*``/``acc_d_*`` are logged beside, scored
        by the same functions as the heads: for BOW the corpus document frequencies, for POS the mean tag
        distribution of the training rows *before* this batch with one uniform pseudo-row, as the heads' prior
        (:func:`add_one_row`; the first batch: its own, the heads' prior bias;
        ``acc_base_pos``: its tag overlap; ``acc_base_pos_top``: its top tag's, the majority tag's, top-tag
        accuracy). The batch's own mean would see the targets it is scored on: on the quick corpus its KL is
        ~0.03 nat below any constant predictor's, more than C_POS gains in 30 steps. A head above the baselines
        reads its task from its channel."""
        p = self.params
        with torch.no_grad():
            bow_logits = self.bow_prior_logit.unsqueeze(0)
            first = self.pos_rows == 0
            prior = add_one_row(torch.where(first, pos_t.float().sum(0), self.pos_tag_sum),
                                torch.where(first, (pos_t.sum(-1) > 0).sum().float(), self.pos_rows))
            pos_logits = prior.unsqueeze(0).log()
            if self.training:
                self.pos_tag_sum += pos_t.float().sum(0)
                self.pos_rows += (pos_t.sum(-1) > 0).sum()
            return {"loss_base_bow": bow_nll(bow_logits.expand_as(bow_t), bow_t, self.bow_mode),
                    "loss_base_pos": pos_divergence(pos_logits.expand_as(pos_t), pos_t, p.pos_loss, pos_words),
                    **accuracies("base", bow_logits, pos_logits, bow_t, pos_t)}

    @staticmethod
    def _encoder_grad_norms(terms: dict[str, torch.Tensor], views: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
        """``grad_<term>``: the L2 norm of each weighted term's gradient on the sentence embeddings ``views`` as
        the encoder receives it (the adversarial terms reversed and scaled by λ), through the heads and the MLP
        only."""
        if not (torch.is_grad_enabled() and all(v.requires_grad for v in views)):
            return {}
        norms = {}
        for name, term in terms.items():
            grads = torch.autograd.grad(term, views, retain_graph=True, allow_unused=True)
            norms[f"grad_{name}"] = torch.sqrt(sum((g.float() ** 2).sum() for g in grads if g is not None))
        return norms

    # --- inference -----------------------------------------------------------------
    @property
    def channels(self) -> dict[str, list[int]]:
        return {"bow": [0, self.bow_dim], "pos": [self.bow_dim, self.bow_dim + self.pos_dim]}

    def export_info(self) -> dict:
        """Pooling plus the ``channels``: evaluation scores each slice of the exported [CLS] as its own row."""
        info = super().export_info()
        info["channels"] = self.channels
        return info
