"""PaSeR: phrase reconstruction as the sentence-level objective (SPEC §3.6); the supervised variant is in
:mod:`sentlab.methods.paser_sup`."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import Field

from ..augment.eda import EDA
from ..encoder import SentenceEncoder, pool
from ..errors import SentlabError
from . import register
from ._paser_decoder import (DecodingSignal, LMHead, MaskedView, PhraseDecoder, choose_phrases, decoder_target,
                             mask_spans, mlm_mask)
from .base import Batch, Method, MethodParams

log = logging.getLogger(__name__)

HEADS_FILE = "paser_heads.safetensors"
PASER_POOLINGS = ("cls", "mean", "top2_mean", "first_last")


class PaSeRParams(MethodParams):
    """``methods.paser`` in params.yaml. Defaults follow the paper where it speaks, the code where it is silent."""

    corpus: Literal["sts_unlabeled", "train"] = Field(
        "sts_unlabeled", description="training sentences: the unlabelled STS sentences (paper) or the Wikipedia corpus")
    phrases: Literal["rake", "np", "verb_group", "sbar", "np_verb_group", "np_verb_group_sbar"] = Field(
        "rake", description="phrase source: RAKE ranking, or chunks of the annotation (Sec. 3.1.1): NP, verb groups "
                            "(the chunkers' VP label: verbs + adverbs/modal/particle, no object), SBAR, or a union "
                            "(Table 5's NP / VP / NP+VP rows: np / verb_group / np_verb_group)")
    top_k: int = Field(5, ge=1, description="RAKE phrases masked per sentence (Table 5's main row is top-5)")
    chunk_k: int = Field(1, ge=1, description="chunk phrases masked per sentence, drawn at random (Sec. 3.1.1: "
                                              "\"a random sub-tree\", i.e. 1)")
    mask_unit: Literal["wordpiece", "phrase"] = Field(
        "wordpiece", description="[MASK]s in s̃: one per word piece (Table 7 shows one blank per token) or one per "
                                 "phrase")
    eda: Literal["none", "sr", "rd", "rs", "sr+rd", "sr+rs"] = Field(
        "sr", description="EDA strategy on s and s̃ (Table 4; SR is the paper's best and needs WordNet)")
    eda_views: Literal["independent", "shared"] = Field(
        "independent", description="independent: s and s̃ get separate draws; shared: one augmented sentence, duplicated")
    eda_edit_phrases: bool = Field(
        True, description="EDA may edit the phrase words of s (the decoder's target stays the original phrase, "
                          "protected in s̃); false: phrase words are never replaced, deleted or moved in either view")
    eda_alpha_sr: float = Field(0.5, ge=0, le=1, description="SR ratio (the PaSeR code: 0.5)")
    eda_alpha_rd: float = Field(0.1, ge=0, le=1, description="RD deletion probability (EDA default 0.1)")
    eda_alpha_rs: float = Field(0.1, ge=0, le=1, description="RS swap ratio (EDA default 0.1)")
    m: float = Field(10.0, ge=0, description="scale of the difference term (paper: 10; code default 1)")
    n: float = Field(10.0, ge=0, description="scale of the product term (paper: 10; code default 1)")
    signal_abs_diff: bool = Field(True, description="m·|E_s − E_s̃| (paper Eq. 2); false: signed (code)")
    signal_abs_prod: bool = Field(True, description="n·|E_s ∗ E_s̃| (paper Eq. 2); false: signed (code, and "
                                                    "Sec. 3.2.2's prose)")
    project_masked: bool = Field(False, description="learned linear map on E_s̃ before the signal (code)")
    memory_order: Literal["paper", "code"] = Field(
        "paper", description="[E_s, E_s̃, diff, prod] (paper) or [prod, diff, E_s, E_s̃] (code)")
    memory_type_embeddings: bool = Field(False, description="learned slot embeddings on the 4 memory vectors "
                                                            "(without them the order is immaterial)")
    memory_norm: bool = Field(
        False, description="a learned LayerNorm on each of the 4 memory vectors (neither paper nor code): lets a "
                           "random decoder use the signal within a short run; makes m and n immaterial")
    decoder_layers: int = Field(6, ge=1, description="decoder depth (Fig. 4 ablation 1..8)")
    decoder_heads: int = Field(16, ge=1, description="attention heads (code: 16); must divide the hidden size")
    decoder_ffn: Optional[int] = Field(None, gt=0, description="FFN width (None: the hidden size, as the code's 768)")
    decoder_dropout: float = Field(0.1, ge=0, lt=1)
    decoder_embeddings: Literal["encoder", "word"] = Field(
        "encoder", description="decoder input embeddings: the encoder's whole embedding module (code) or only its "
                               "word embeddings + own positions")
    lm_head: Literal["auto", "pretrained", "fresh"] = Field(
        "auto", description="output head shared by decoder and MLM: BERT's pretrained MLM head (code) or a fresh one "
                            "tied to the word embeddings; auto: pretrained when the checkpoint has one")
    mlm_weight: float = Field(1.0, ge=0, description="weight of L_MLM (Eq. 4: 1)")
    mlm_prob: float = Field(0.15, gt=0, lt=1)
    gen_weight: float = Field(1.0, ge=0, description="weight of L_generative")
    gen_reduction: Literal["mean", "sum"] = Field(
        "mean", description="L_generative over target tokens: mean over the batch's tokens (code) or, as Eq. 3 "
                            "writes it, the sum over each sentence's tokens, averaged over sentences")
    pooling: Literal["cls", "mean", "top2_mean", "first_last"] = Field(
        "cls", description="pooling of E_s, E_s̃ in training and of the exported encoder (Table 9)")
    max_length: Optional[int] = Field(None, gt=0, description="None: train.max_length (32)")
    max_steps: Optional[int] = Field(
        None, gt=0, description="this method's step budget (None: train.max_steps); the random decoder needs more "
                                "steps than a contrastive loss before it uses the signal")
    head_lr: Optional[float] = Field(
        None, gt=0, description="learning rate of the randomly initialised modules (decoder, signal, fresh LM head "
                                "bias); None: train.lr for everything, as the paper (5 epochs at 3e-5)")
    recon_heldout: int = Field(500, ge=0, description="held-out sentences for the reconstruction check (0: skip)")
    recon_heldout_from: Literal["corpus", "other"] = Field(
        "corpus", description="corpus: sentences of the training corpus kept out of training (at most a tenth of "
                              "it); other: the corpus not trained on (Wikipedia for sts_unlabeled: a domain shift)")
    recon_fit: int = Field(2000, gt=0, description="training sentences the frequency baselines are fitted on")


@dataclass
class Views:
    """A batch's inputs for PaSeR: the (augmented) s, the masked (augmented) s̃, the decoder targets,
    and the number of EDA edits each view of each sentence got."""

    s_texts: list[str]
    masked: list[MaskedView]
    spans: list[list[tuple[int, int]]]
    t_texts: list[str]
    edits_s: list[int] = field(default_factory=list)
    edits_masked: list[int] = field(default_factory=list)

    def eda_stats(self) -> dict[str, torch.Tensor]:
        """``eda_edits_s`` / ``eda_edits_masked``: mean EDA edits per sentence of each view (logged as train.*)."""
        return {f"eda_edits_{k}": torch.tensor(float(np.mean(v)) if v else 0.0)
                for k, v in (("s", self.edits_s), ("masked", self.edits_masked))}


@register("paser")
class PaSeR(Method):
    """PaSeR: a sentence embedding must let a decoder rebuild the sentence's most important phrases.

    Wu & Zhao, "Sentence Representation Learning with Generative Objective
    rather than Contrastive Objective", EMNLP 2022 (code: chengzhipanpan/PaSeR).

    Per sentence ``s`` (Sec. 3.1–3.2):

    1. choose phrases (RAKE ``top_k`` in rank order, or ``chunk_k`` random chunks:
       NP, ``verb_group``, SBAR) from the annotation stage's ``rake`` /
       ``chunks`` columns (char spans). The paper draws "a random sub-tree" of
       an NLTK parse (``chunk_k`` = 1); the chunkers' ``VP`` label is a verb
       group (no object, unlike a parse-tree VP), hence ``phrases: verb_group``;
    2. EDA on the duplicate leaving the phrase spans intact, and on ``s`` with
       its phrase words editable too (``eda_edit_phrases``, see below)
       (:mod:`sentlab.augment.eda`), then mask the phrases in the duplicate →
       ``s̃`` (via the tokenizer's offsets; one [MASK] per word piece, as Table 7,
       or per phrase: ``mask_unit``);
    3. the shared encoder gives ``E_s`` and ``E_s̃`` (``pooling``, [CLS] by default);
    4. decoding signal (Eq. 2) ``[E_s, E_s̃, m·|E_s−E_s̃|, n·|E_s∗E_s̃|]`` as four
       cross-attention memory vectors (:class:`DecodingSignal`; ``signal_abs_diff``
       / ``signal_abs_prod``: absolute as Eq. 2, or signed as the code);
    5. a randomly initialised Transformer decoder (input embeddings = the
       encoder's) generates ``p_1 [SEP] … p_k [SEP]`` from ``[CLS]`` by teacher
       forcing: ``L_generative`` (Eq. 3, token cross-entropy in fp32; the mean over
       the batch's target tokens as the code, or Eq. 3's per-sentence sum:
       ``gen_reduction``);
    6. ``L = mlm_weight·L_MLM + gen_weight·L_generative`` (Eq. 4), MLM = BERT's
       15% / 80-10-10 corruption of ``s`` in a separate forward (as SimCSE's
       ``do_mlm``).

    The output head of the decoder and of MLM is one :class:`LMHead` tied to the
    word embeddings: BERT's pretrained ``cls.predictions`` head when the
    checkpoint has it (bert-base-uncased); all-MiniLM-L6-v2 ships no MLM head,
    so there it is a fresh head (``export_info()["lm_head"]`` says which).
    Decoder, signal and head are training-only: :meth:`sentence_encoder` is the
    bare encoder with ``pooling``. Paper-vs-code differences are params (see
    :class:`PaSeRParams`). After training, :meth:`reconstruction_report` measures
    how well the decoder rebuilds held-out phrases (rows of the training corpus
    kept out of training, :meth:`split_heldout`).

    ``eda_edit_phrases`` (default true; the paper and the code are silent, the
    EDA ran offline): Sec. 3.1.3 says SR on ``s`` and ``s̃`` "create[s] semantic
    similar phrases with different tokens", i.e. it edits phrases; and with the
    RAKE top-5 protected, 78.6% of the STS sentences have no word SR may
    replace, so SR would barely act. The edits go to ``s`` only: ``s̃``'s phrases
    are masked anyway, and the target stays the original phrase. The forward
    returns (and the loop logs as ``train.*``) ``eda_edits_s`` /
    ``eda_edits_masked``, the mean EDA edits per sentence of each view (words
    replaced + deleted + swaps).

    Choices of the quick profile (MiniLM, 150 CPU steps), reset by the paper
    profile: ``head_lr`` 1e-3 for the random modules, ``memory_norm`` (a
    LayerNorm on each memory vector; it makes m and n immaterial),
    ``decoder_layers`` 2 and ``max_steps`` 150. Measured on MiniLM (frozen
    encoder, 60 steps, held-out teacher-forced token accuracy): without the norm
    every decoder tried (1–6 layers, 3e-4–3e-3) stays at or near the unigram
    plateau (0.000–0.009; it emits mostly [SEP]); with it, 6 layers at 1e-3
    still do (0.000), 6 layers at 3e-4 reach 0.020, 2 layers at 1e-3 0.043
    (0.102 after 150 steps).

    Inputs: ``Batch.sentences`` + ``Batch.extras["rake"]`` / ``["chunks"]``.

    Example::

        method = PaSeR(bert, tok, PaSeR.Params(eda="rd"), train_cfg)
        out = method(Batch(["Work with a tool."], [0],
                           {"rake": [[{"text": "tool", "score": 1.0, "start": 12, "end": 16}]], "chunks": [[]]}))
        out["loss"].backward()
    """

    summary = "PaSeR: mask RAKE phrases, decode them from [E_s, E_s~, m|diff|, n|prod|] + MLM; [CLS] at test"
    Params = PaSeRParams
    corpus_columns = ("rake", "chunks")
    corpus = "sts_unlabeled"
    inference_pooling = "cls"

    def __init__(self, encoder, tokenizer, params: PaSeRParams, train_cfg, seed: int = 0):
        super().__init__(encoder, tokenizer, params, train_cfg, seed)
        hidden = encoder.config.hidden_size
        if hidden % params.decoder_heads:
            raise SentlabError(
                f"methods.{self.id or 'paser'}.decoder_heads = {params.decoder_heads} does not divide the encoder's hidden "
                f"size {hidden}; pick a divisor (e.g. 12 for 384/768).")
        if not getattr(tokenizer, "is_fast", False):
            raise SentlabError("PaSeR needs a fast (Rust) tokenizer for the offset mapping that locates phrase spans.")
        if params.eda_edit_phrases and params.eda_views == "shared" and params.eda != "none":
            raise SentlabError(
                f"methods.{self.id or 'paser'}: eda_edit_phrases edits the phrases of s but not of s̃, so the two views "
                f"cannot share one augmentation (eda_views: shared); set eda_views: independent or "
                f"eda_edit_phrases: false.")
        self.eda = EDA(params.eda, params.eda_alpha_sr, params.eda_alpha_rd, params.eda_alpha_rs)
        self._recon_sets = None  # {'heldout', 'fit'} corpora, set by split_heldout
        if params.memory_norm and (params.m, params.n) != (10.0, 10.0):
            log.warning("methods.%s: memory_norm is on, so m = %s and n = %s change nothing (LayerNorm is "
                        "scale-invariant); set memory_norm: false to compare scales (Table 8).",
                        self.id or "paser", params.m, params.n)
        self.signal = DecodingSignal(hidden, params.m, params.n, params.signal_abs_diff, params.signal_abs_prod,
                                     params.project_masked, params.memory_order, params.memory_type_embeddings,
                                     params.memory_norm)
        g = torch.random.fork_rng()  # seeded init of the decoder without touching the caller's RNG stream
        with g:
            torch.manual_seed(seed)
            self.decoder = PhraseDecoder(hidden, params.decoder_layers, params.decoder_heads,
                                         params.decoder_ffn or hidden, params.decoder_dropout,
                                         params.decoder_embeddings,
                                         getattr(encoder.config, "max_position_embeddings", 512))
            self.lm_head = LMHead(hidden, encoder.get_input_embeddings().weight.size(0),
                                  getattr(encoder.config, "layer_norm_eps", 1e-12))
        self.lm_head_source = self._init_lm_head(params.lm_head)
        self.register_buffer("_calls", torch.zeros((), dtype=torch.long))

    # --- set-up -----------------------------------------------------------------------
    def _init_lm_head(self, mode: str) -> str:
        src = getattr(self.encoder, "name_or_path", None) or getattr(self.encoder.config, "_name_or_path", None)
        if mode == "fresh":
            return "fresh"
        if self.lm_head.load_pretrained(src):
            return "pretrained"
        if mode == "pretrained":
            raise SentlabError(
                f"methods.{self.id}.lm_head = pretrained, but the backbone checkpoint ({src}) has no MLM head weights "
                f"(cls.predictions.* / lm_head.*). Use lm_head: fresh (or auto) for this backbone.")
        log.warning("PaSeR: backbone %s has no MLM head weights; using a fresh head tied to the word embeddings", src)
        return "fresh"

    def corpus_name(self) -> str:
        return self.params.corpus

    def split_heldout(self, corpus):
        """Keep ``recon_heldout`` seeded random rows of the training corpus (at most a tenth), and every
        row with the same text, out of training for the reconstruction check; draw the baselines'
        ``recon_fit`` rows from the rest."""
        self._recon_sets = None
        if self.params.recon_heldout == 0 or self.params.recon_heldout_from != "corpus":
            return corpus
        n = len(corpus)
        k = min(self.params.recon_heldout, n // 10)
        if k == 0:
            return corpus
        rng = np.random.default_rng([self.seed, 0x9A5E])
        held = np.sort(rng.choice(n, k, replace=False))
        held_texts = {corpus.texts[i] for i in held}  # a duplicate of a held-out sentence is not trained on either
        keep = np.array([i for i in np.setdiff1d(np.arange(n), held) if corpus.texts[i] not in held_texts], dtype=int)
        fit = np.sort(rng.choice(keep, min(self.params.recon_fit, len(keep)), replace=False))
        self._recon_sets = {"heldout": corpus.subset(held), "fit": corpus.subset(fit)}
        log.info("PaSeR: %d of %d %s sentences held out of training for the reconstruction check", k, n,
                 self.corpus_name())
        return corpus.subset(keep)

    @property
    def max_len(self) -> int:
        return self.params.max_length or self.train_cfg.max_length

    @property
    def phrase_count(self) -> int:
        """Phrases masked per sentence (at most): ``top_k`` for RAKE, ``chunk_k`` for chunks."""
        return self.params.top_k if self.params.phrases == "rake" else self.params.chunk_k

    # --- data: phrases, augmentation, masking ------------------------------------------
    def _rng(self, calls: int, row: Any, i: int) -> random.Random:
        """One reproducible stream per (seed, training call, corpus row, batch slot): resume-safe (``_calls`` is a buffer)."""
        return random.Random(f"paser-{self.seed}-{calls}-{row}-{i}")

    def prepare_views(self, sentences: Sequence[str], extras: dict, index: Sequence[int] = (),
                      augment: bool = True) -> Views:
        """Choose phrases, augment (if ``augment``), mask; one :class:`Views` for the batch.

        s̃ is augmented with its phrases protected, so the target is the original phrase; s with its
        phrase words editable too when ``eda_edit_phrases``.
        """
        source = self.params.phrases
        column = "rake" if source == "rake" else "chunks"
        if column not in extras:
            raise SentlabError(
                f"PaSeR (phrases: {source}) needs the annotation column `{column}` in Batch.extras; run the annotate "
                f"stage for corpus `{self.corpus_name()}` and list `{column}` in the method's corpus_columns.")
        out = Views([], [], [], [])
        calls = int(self._calls)
        for i, s in enumerate(sentences):
            rng = self._rng(calls, index[i] if i < len(index) else "x", i)
            spans = choose_phrases(s, extras.get("rake", [None] * len(sentences))[i],
                                   extras.get("chunks", [None] * len(sentences))[i], source, self.phrase_count, rng)
            if augment and self.eda.ops:
                aug_t = self.eda.augment(s, rng, spans)
                aug_s = aug_t if self.params.eda_views == "shared" else \
                    self.eda.augment(s, rng, () if self.params.eda_edit_phrases else spans)
                s_text, t_text, t_spans, edits = aug_s.text, aug_t.text, aug_t.spans, (aug_s.edits, aug_t.edits)
            else:
                s_text, t_text, t_spans, edits = s, s, spans, (0, 0)
            out.edits_s.append(edits[0])
            out.edits_masked.append(edits[1])
            out.s_texts.append(s_text)
            out.t_texts.append(t_text)
            out.spans.append(t_spans)
            out.masked.append(mask_spans(self.tokenizer, t_text, t_spans, self.max_len, self.params.mask_unit))
        return out

    def _pad(self, seqs: Sequence[Sequence[int]], value: int) -> tuple[torch.Tensor, torch.Tensor]:
        n = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), n), value, dtype=torch.long)
        att = torch.zeros((len(seqs), n), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = torch.tensor(list(s), dtype=torch.long)
            att[i, : len(s)] = 1
        return ids.to(self.device), att.to(self.device)

    # --- the model ---------------------------------------------------------------------
    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Pooled sentence vectors with ``params.pooling`` (E_s / E_s̃)."""
        hidden_states = self.params.pooling in ("first_last", "top2_mean")
        out = self.encoder(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=hidden_states,
                           return_dict=True)
        return pool(out, attention_mask, self.params.pooling)

    def encode_views(self, views: Views, e_s: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The decoding-signal memory ``(B, 4, d)`` of a batch of views."""
        if e_s is None:
            enc = self.tokenize(views.s_texts, max_length=self.max_len)
            e_s = self.embed(enc["input_ids"], enc["attention_mask"])
        t_ids, t_att = self._pad([v.input_ids for v in views.masked], self.tokenizer.pad_token_id)
        e_t = self.embed(t_ids, t_att)
        return self.signal(e_s, e_t)

    def targets(self, views: Views) -> list[list[int]]:
        return [decoder_target(v.phrase_token_ids, self.tokenizer.sep_token_id) for v in views.masked]

    def decoder_logits(self, memory: torch.Tensor, dec_in: torch.Tensor, dec_att: torch.Tensor) -> torch.Tensor:
        h = self.decoder(self.encoder, dec_in, dec_att, memory)
        return self.lm_head(h, self.encoder.get_input_embeddings().weight)

    def teacher_forcing(self, memory: torch.Tensor, targets: Sequence[Sequence[int]]):
        """(logits, labels) of teacher-forced decoding, rows with an empty target dropped."""
        rows = [i for i, t in enumerate(targets) if t]
        if not rows:
            return None, None
        cls = self.tokenizer.cls_token_id
        dec_in, dec_att = self._pad([[cls] + list(targets[i][:-1]) for i in rows], self.tokenizer.pad_token_id)
        labels, _ = self._pad([targets[i] for i in rows], -100)
        logits = self.decoder_logits(memory[rows], dec_in, dec_att)
        return logits, labels

    def generative_loss(self, memory: torch.Tensor, targets: Sequence[Sequence[int]]):
        """Eq. 3: fp32 token cross-entropy of the teacher-forced decoder, reduced by ``gen_reduction``
        (mean: over the batch's target tokens; sum: over each sentence's, then the mean over sentences)."""
        logits, labels = self.teacher_forcing(memory, targets)
        if logits is None:
            return memory.sum() * 0.0, torch.tensor(float("nan"))
        with torch.autocast(device_type=logits.device.type, enabled=False):
            nll = F.cross_entropy(logits.float().transpose(1, 2), labels, ignore_index=-100, reduction="none")
        valid = labels != -100
        loss = nll.sum() / valid.sum() if self.params.gen_reduction == "mean" else nll.sum(1).mean()
        acc = (logits.argmax(-1)[valid] == labels[valid]).float().mean().detach()
        return loss, acc

    def mlm_loss(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """BERT's MLM on s (15%, 80/10/10), the head shared with the decoder; fp32 cross-entropy, mean over
        the masked tokens."""
        special = torch.isin(input_ids, torch.tensor(self.tokenizer.all_special_ids, device=input_ids.device))
        inputs, labels = mlm_mask(input_ids, special | (attention_mask == 0), self.tokenizer, self.params.mlm_prob)
        if not (labels != -100).any():
            return input_ids.new_zeros((), dtype=torch.float) * 0.0
        hidden = self.encoder(input_ids=inputs, attention_mask=attention_mask, return_dict=True).last_hidden_state
        sel = labels != -100
        logits = self.lm_head(hidden[sel], self.encoder.get_input_embeddings().weight)
        with torch.autocast(device_type=logits.device.type, enabled=False):
            return F.cross_entropy(logits.float(), labels[sel])

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        views = self.prepare_views(batch.sentences, batch.extras, batch.index, augment=self.training)
        if self.training:
            self._calls += 1
        enc_s = self.tokenize(views.s_texts, max_length=self.max_len)
        e_s = self.embed(enc_s["input_ids"], enc_s["attention_mask"])
        memory = self.encode_views(views, e_s)
        loss_gen, acc = self.generative_loss(memory, self.targets(views))
        loss = self.params.gen_weight * loss_gen
        out = {"loss_gen": loss_gen.detach(), "gen_token_acc": acc, **views.eda_stats()}
        if self.params.mlm_weight > 0:
            loss_mlm = self.mlm_loss(enc_s["input_ids"], enc_s["attention_mask"])
            loss = loss + self.params.mlm_weight * loss_mlm
            out["loss_mlm"] = loss_mlm.detach()
        out["loss"] = loss
        return out

    # --- generation / reconstruction check ------------------------------------------------
    @torch.no_grad()
    def generate(self, memory: torch.Tensor, n_phrases: Sequence[int], max_new_tokens: int = 40) -> list[list[int]]:
        """Greedy decoding from [CLS] until as many [SEP] as phrases were masked (or ``max_new_tokens``)."""
        sep = self.tokenizer.sep_token_id
        seqs = [[self.tokenizer.cls_token_id] for _ in range(memory.size(0))]
        done = [k == 0 for k in n_phrases]
        for _ in range(max_new_tokens):
            if all(done):
                break
            ids, att = self._pad(seqs, self.tokenizer.pad_token_id)
            logits = self.decoder_logits(memory, ids, att)
            last = att.sum(1) - 1
            nxt = logits[torch.arange(len(seqs), device=logits.device), last].argmax(-1).tolist()
            for i, t in enumerate(nxt):
                if done[i]:
                    continue
                seqs[i].append(int(t))
                if seqs[i][1:].count(sep) >= n_phrases[i]:
                    done[i] = True
        return [s[1:] for s in seqs]

    def reconstruction_report(self, sentences: Sequence[str], extras: dict, fit_sentences: Sequence[str],
                              fit_extras: dict, n_examples: int = 8, batch_size: int = 32) -> dict:
        """Exact match / token accuracy of the decoder on held-out phrases vs a frequency baseline.

        See :func:`sentlab.evaluate.reconstruction.reconstruction_report`.
        """
        from ..evaluate.reconstruction import reconstruction_report

        return reconstruction_report(self, sentences, extras, fit_sentences, fit_extras, n_examples, batch_size)

    def param_groups(self, lr: float) -> list[dict]:
        """The encoder (and the word embeddings the decoder and LM head share) at ``lr``; the randomly
        initialised decoder, signal and head at ``head_lr`` (a choice for short CPU runs: at 3e-5 the
        decoder needs the paper's 5 epochs before it generates anything but [SEP])."""
        encoder_ids = {id(p) for p in self.encoder.parameters()}
        trainable = self.trainable_parameters()
        own = [p for p in trainable if id(p) in encoder_ids]
        new = [p for p in trainable if id(p) not in encoder_ids]
        return [{"params": own, "lr": lr}, {"params": new, "lr": self.params.head_lr or lr}]

    def export_artifacts(self, folder, data_root) -> None:
        """``reconstruction.json`` (decoder exact match / token accuracy on held-out phrases vs the
        frequency baseline, a few Table 7 examples) and ``paser_heads.safetensors`` (for paser_sup).

        Held-out sentences (``recon_heldout_from``): rows of the training corpus kept out of training
        (:meth:`split_heldout`), or the corpus this run did not train on (the Wikipedia sample when
        training on the STS sentences, and the reverse). The baselines are fitted on training sentences.
        The check uses the final decoder and encoder (one consistent pair), not the best dev checkpoint.
        """
        from ..annotate import read_annotations
        from ..io import write_json

        self.save_heads(folder)
        if self.params.recon_heldout == 0:
            return
        root = Path(data_root) / "data" / "annotations"
        trained_on = self.corpus_name()
        other = "train" if trained_on != "train" else "sts_unlabeled"
        cols = ["rake", "chunks"]

        def sample(corpus: str, n: int):
            table = read_annotations(str(root / corpus), columns=cols)
            rows = random.Random(self.seed).sample(range(table.num_rows), min(n, table.num_rows))
            t = table.take(sorted(rows)).to_pydict()
            return t["text"], {c: t[c] for c in cols}

        if self._recon_sets is not None:
            (held, held_x), (fit, fit_x) = ((c.texts, {k: c.extras[k] for k in cols})
                                            for c in (self._recon_sets["heldout"], self._recon_sets["fit"]))
            other = f"{trained_on} (held out of training)"
        else:
            held, held_x = sample(other, self.params.recon_heldout)
            fit, fit_x = sample(trained_on, self.params.recon_fit)
        was_training = self.training
        self.eval()
        try:
            rep = self.reconstruction_report(held, held_x, fit, fit_x)
        finally:
            self.train(was_training)
        rep["heldout_corpus"], rep["fit_corpus"] = other, trained_on
        write_json(Path(folder) / "reconstruction.json", rep)

    # --- training heads on disk (for paser_sup's decoder_init: paser) ----------------------
    def heads_state(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().cpu().contiguous() for k, v in self.state_dict().items()
                if not k.startswith("encoder.") and k != "_calls"}

    def save_heads(self, folder) -> Path:
        """Write decoder + signal + LM head (not the encoder) to ``folder/paser_heads.safetensors``."""
        from safetensors.torch import save_file

        from ..io import atomic_path

        path = Path(folder) / HEADS_FILE
        with atomic_path(path) as tmp:
            save_file(self.heads_state(), str(tmp))
        return path

    def load_heads(self, folder) -> None:
        from safetensors.torch import load_file

        path = Path(folder) / HEADS_FILE
        if not path.is_file():
            raise SentlabError(f"{path} not found: the paser training stage writes it next to the exported model "
                               f"(method.save_heads). Train paser first, or set decoder_init: random.")
        missing, unexpected = self.load_state_dict(load_file(str(path)), strict=False)
        own = ("decoder.", "signal.", "lm_head.")
        bad = [k for k in missing if k.startswith(own)] + list(unexpected)
        if bad:
            raise SentlabError(f"{path} does not match this PaSeR configuration (keys {bad[:5]}); the decoder params "
                               f"(decoder_layers, decoder_heads, project_masked …) must equal paser's.")

    # --- inference -------------------------------------------------------------------------
    def export_info(self) -> dict:
        return {"method": self.id, "pooling": self.params.pooling, "lm_head": self.lm_head_source,
                "training_only": ["decoder", "signal", "lm_head"]}

    def _encoder_with(self, pooling: str, precision: str, max_length: Optional[int]) -> SentenceEncoder:
        return SentenceEncoder(self.encoder, self.tokenizer, pooling=pooling, max_length=max_length, precision=precision,
                   name=f"{self.id}" if pooling == self.params.pooling else f"{self.id}-{pooling}", device=self.device)

    def sentence_encoder(self, precision: str = "fp32", max_length: Optional[int] = None) -> SentenceEncoder:
        return self._encoder_with(self.params.pooling, precision, max_length)
