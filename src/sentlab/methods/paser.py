"""PaSeR: phrase reconstruction as the sentence-level objective (docs/methods.md#paser).

The supervised variant is :mod:`sentlab.methods.paser_sup`; the decoder, the decoding signal, phrase choice and
masking are in :mod:`sentlab.methods._paser_decoder`; the held-out reconstruction check (Table 7) is
:mod:`sentlab.methods._paser_reconstruction`.
"""

from __future__ import annotations

import logging
import random
from typing import Optional, Sequence

import torch
import torch.nn.functional as F

from ..augment.eda import EDA
from ..nn.encoder import pool
from ..config.poolings import POOLINGS
from ..errors import SentlabError
from ._paser_reconstruction import export_reconstruction, heldout_split
from . import register
from ._common import full_precision
from ._paser_decoder import (CHUNK_SOURCES, DecodingSignal, Views, build_decoder, choose_phrases, decoder_target,
                             mask_spans, mlm_mask, mlm_special, pad, save_heads)
from ._paser_head import LMHead, init_lm_head, masked_lm_loss
from ._paser_params import PaSeRParams
from .base import Batch, Method, PaperAvg, adamw

log = logging.getLogger(__name__)


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
       a union (``np_verb_group``, Table 5's NP+VP) masks ``chunk_k`` chunks of
       each label (one NP and one VP; ``chunk_union: pooled``: drawn from the union);
    2. EDA (:mod:`sentlab.augment.eda`) on the duplicate leaving the phrase spans
       intact, and on ``s`` with its phrase words editable too
       (``eda_edit_phrases``), then mask the phrases in the duplicate → ``s̃``
       (via the tokenizer's offsets; one [MASK] per word piece, as Table 7, or
       per phrase: ``mask_unit``);
    3. the shared encoder gives ``E_s`` and ``E_s̃`` (``pooling``, [CLS] by default);
    4. decoding signal (Eq. 2) ``[E_s, E_s̃, m·|E_s−E_s̃|, n·|E_s∗E_s̃|]`` as four
       cross-attention memory vectors (:class:`DecodingSignal`; ``signal_abs_diff``
       / ``signal_abs_prod``: absolute as Eq. 2, or signed as the code);
    5. a randomly initialised Transformer decoder (input embeddings = the
       encoder's; ``decoder_impl``: transformers' ``BartDecoder`` as the code, or
       PyTorch's layers) generates ``p_1 [SEP] … p_k [SEP]`` from ``[CLS]`` by teacher
       forcing: ``L_generative`` (Eq. 3, token cross-entropy in fp32; the mean over
       the batch's target tokens as the code, or Eq. 3's per-sentence sum:
       ``gen_reduction``);
    6. ``L = mlm_weight·L_MLM + gen_weight·L_generative`` (Eq. 4), MLM = BERT's
       15% / 80-10-10 corruption of ``s`` in a separate forward (as SimCSE's
       ``do_mlm``).

    Steps 1–2 and the tokenisation run in :meth:`prepare`; the EDA and chunk
    draws of sentence i of micro-batch ``draw`` come from
    ``random.Random(f"paser-{seed}-{draw}-{row}-{i}")`` (resume-safe). The MLM
    corruption draws from torch's RNG in the forward.

    The output head of the decoder and of MLM is one :class:`LMHead`, its output
    matrix the word embeddings (``lm_head_output: tied``) or its own copy trained
    apart (``copy``: the code, whose ``BertForCL.lm_head`` transformers never
    ties; the paper profile): BERT's pretrained ``cls.predictions`` head when the
    checkpoint has it (bert-base-uncased), loaded by transformers'
    ``AutoModelForMaskedLM`` as a hub download is (the original file's
    LayerNorm ``gamma``/``beta`` included); all-MiniLM-L6-v2 ships no MLM head,
    so there it is a fresh head (``export_info()["lm_head"]`` says which, and
    ``sentlab.json``'s ``init``: ``lm_head: checkpoint`` or ``random``). The
    paper profile sets ``lm_head: pretrained``: a checkpoint without a head fails
    there instead of training a fresh one.
    Decoder, signal and head are training-only: the inference encoder is the
    bare encoder with ``pooling``. Paper-vs-code differences are params (see
    :class:`PaSeRParams`).

    ``eda_edit_phrases`` (the EDA operations that may edit the phrase words of
    ``s``; the code is silent, its EDA ran offline): default ``sr``, the paper's
    reading. Sec. 3.1.3 says SR on ``s`` and ``s̃`` "create[s] semantic similar
    phrases with different tokens", i.e. it edits phrases (with every phrase
    protected, most STS sentences have no word SR may replace), while RD and RS
    are about frequent words and word order: with ``all`` RD deleted ~10 % of the
    target phrase's words from ``s``, so E_s no longer held what the decoder
    must rebuild. The edits go to ``s`` only: ``s̃``'s phrases are masked anyway,
    and the target stays the original phrase. EDA counts and edits words only
    (never punctuation; :mod:`sentlab.augment.eda`). The forward returns (and the loop logs as ``train.*``)
    ``eda_edits_s`` / ``eda_edits_masked``, the mean EDA edits per sentence of
    each view (words replaced + deleted + swaps).

    Gradient clipping (``grad_clip``): one global norm over every parameter at
    ``train.max_grad_norm``, as the code's HF Trainer (the default and the paper
    profile); ``per_group`` clips the encoder and the heads' group each on its own
    (the quick profile, whose heads train at ``head_lr``).

    Equivalence with the released code: benchmarks/released/paser.py (loss and every gradient at the paper
    profile's settings; tests/test_released_golden.py); ``gen_skip_long``: the code's collator gives a sentence
    at max length no decoder target (the paper profile).

    Neither in the paper, for short runs of the random decoder: ``head_lr`` (the
    decoder, signal and head at their own rate), ``memory_norm`` and a small
    ``decoder_layers``; such a decoder also needs more steps than a contrastive
    loss before it uses the signal (``max_steps``). After training,
    :meth:`export_artifacts` writes the reconstruction check on held-out rows
    (:meth:`split_heldout`) and the heads paser_sup can start from.

    Inputs: ``Batch.sentences`` + ``Batch.extras["rake"]`` / ``["chunks"]``.

    Example::

        method = PaSeR(bert, tok, PaSeR.Params(eda="rd", max_length=32))
        out = method(Batch(["Work with a tool."], [0],
                           {"rake": [[{"text": "tool", "score": 1.0, "start": 12, "end": 16}]], "chunks": [[]]}))
        out["loss"].backward()
    """

    paper = ("Wu and Zhao: Sentence Representation Learning with Generative Objective rather than Contrastive "
             "Objective (EMNLP 2022)")
    citation = """@inproceedings{wu2022paser,
  title = {Sentence Representation Learning with Generative Objective rather than Contrastive Objective},
  author = {Wu, Bohong and Zhao, Hai},
  booktitle = {Proceedings of the 2022 Conference on Empirical Methods in Natural Language Processing},
  year = {2022}
}"""
    run_name_params = ("phrases", "top_k", "eda", "m", "n", "decoder_layers", "pooling")
    paper_avg = PaperAvg(76.16, "PaSeR Table 1 (PaSeR-BERTbase)")
    summary = "PaSeR: mask RAKE phrases, decode them from [E_s, E_s~, m|diff|, n|prod|] + MLM; [CLS] at test"
    Params = PaSeRParams
    corpus_columns = ("rake", "chunks")
    corpus = "sts_unlabeled"

    def __init__(self, encoder, tokenizer, params: PaSeRParams, seed: int = 0):
        super().__init__(encoder, tokenizer, params, seed)
        hidden = encoder.config.hidden_size
        self.eda = EDA(params.eda, params.eda_alpha_sr, params.eda_alpha_rd, params.eda_alpha_rs)
        self._check(hidden)
        self.signal = DecodingSignal(hidden, params.m, params.n, params.signal_abs_diff, params.signal_abs_prod,
                                     params.project_masked, params.memory_order, params.memory_type_embeddings,
                                     params.memory_norm)
        with torch.random.fork_rng():  # the decoder's init from the seed, without touching the caller's RNG stream
            torch.manual_seed(seed)
            self.decoder = build_decoder(params, encoder)
            self.lm_head = LMHead(hidden, encoder.get_input_embeddings().weight.size(0),
                                  getattr(encoder.config, "layer_norm_eps", 1e-12),
                                  own_output=params.lm_head_output == "copy")
        self.lm_head_source = self._init_lm_head()
        self.recon_sets = None  # the held-out check's rows, set by split_heldout

    def _init_lm_head(self) -> str:
        """The backbone checkpoint's MLM head (``lm_head``: pretrained / auto) or a fresh one; sets ``module_init``."""
        source = init_lm_head(self.lm_head, self.encoder, self.params.lm_head, self.id or "paser")
        self.module_init["lm_head"] = "checkpoint" if source == "pretrained" else "random"
        return source

    def _check(self, hidden: int) -> None:
        p, name = self.params, self.id or "paser"
        if hidden % p.decoder_heads:
            raise SentlabError(f"methods.{name}.decoder_heads = {p.decoder_heads} does not divide the encoder's "
                               f"hidden size {hidden}; pick a divisor (e.g. 12 for 384/768).")
        if not getattr(self.tokenizer, "is_fast", False):
            raise SentlabError("PaSeR needs a fast (Rust) tokenizer for the offset mapping that locates phrase spans.")
        if self.phrase_ops and p.eda_views == "shared":
            raise SentlabError(f"methods.{name}: eda_edit_phrases edits the phrases of s but not of s̃, so the two "
                               f"views cannot share one augmentation (eda_views: shared); set eda_views: independent "
                               f"or eda_edit_phrases: none.")
        if p.memory_norm and (p.m, p.n) != (10.0, 10.0):
            log.warning("methods.%s: memory_norm is on, so m = %s and n = %s change nothing (LayerNorm is "
                        "scale-invariant); set memory_norm: false to compare scales (Table 8).", name, p.m, p.n)

    def corpus_name(self) -> str:
        return self.params.corpus

    @property
    def grad_clip(self) -> str:
        """``params.grad_clip``: the code clips one global norm (HF Trainer), the default."""
        return self.params.grad_clip

    @property
    def phrase_ops(self) -> tuple[str, ...]:
        """The EDA operations of ``eda`` that may edit the phrase words of s (``eda_edit_phrases``)."""
        allowed = {"none": (), "sr": ("sr",), "all": tuple(self.eda.ops)}[self.params.eda_edit_phrases]
        return tuple(op for op in self.eda.ops if op in allowed)

    @property
    def phrase_count(self) -> int:
        """Phrases masked per sentence (at most): ``top_k`` for RAKE, ``chunk_k`` for chunks (of each label of a
        union with ``chunk_union: one_each``)."""
        p = self.params
        if p.phrases == "rake":
            return p.top_k
        return p.chunk_k * (len(CHUNK_SOURCES[p.phrases]) if p.chunk_union == "one_each" else 1)

    # --- steps 1-2: phrases, augmentation, masking (CPU) ---------------------------------
    def prepare_views(self, sentences: Sequence[str], extras: dict, index: Sequence[int] = (),
                      augment: bool = True, draw: int = 0) -> Views:
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
        for i, s in enumerate(sentences):
            rng = random.Random(f"paser-{self.seed}-{draw}-{index[i] if i < len(index) else 'x'}-{i}")
            spans = choose_phrases(s, extras.get("rake", [None] * len(sentences))[i],
                                   extras.get("chunks", [None] * len(sentences))[i], source,
                                   self.params.top_k if source == "rake" else self.params.chunk_k, rng,
                                   one_each=self.params.chunk_union == "one_each")
            s_text, t_text, t_spans, edits = self._augment(s, spans, rng) if augment else (s, s, spans, (0, 0))
            out.edits_s.append(edits[0])
            out.edits_masked.append(edits[1])
            out.s_texts.append(s_text)
            out.t_texts.append(t_text)
            out.spans.append(t_spans)
            out.masked.append(mask_spans(self.tokenizer, t_text, t_spans, self.params.max_length,
                                         self.params.mask_unit))
        return out

    def _augment(self, s: str, spans, rng: random.Random):
        """EDA: ``(s's text, s̃'s text before masking, its phrase spans, (edits of s, edits of s̃))``."""
        if not self.eda.ops:
            return s, s, spans, (0, 0)
        aug_t = self.eda.augment(s, rng, spans)
        aug_s = aug_t if self.params.eda_views == "shared" else self.eda.augment(s, rng, spans, self.phrase_ops)
        return aug_s.text, aug_t.text, aug_t.spans, (aug_s.edits, aug_t.edits)

    def targets(self, views: Views) -> list[list[int]]:
        """Each sentence's decoder target ``p_1 [SEP] … p_k [SEP]`` (empty: no phrase survived)."""
        return [decoder_target(v.phrase_token_ids, self.tokenizer.sep_token_id) for v in views.masked]

    def decoder_batch(self, targets: Sequence[Sequence[int]]) -> Optional[dict[str, torch.Tensor]]:
        """Teacher forcing's inputs ``[CLS] + target[:-1]`` and labels ``target`` of the ``rows`` with a
        non-empty target (CPU; None when there is none), and where the target tokens are in the flattened
        ``(rows, T)`` grid: ``target_index`` (N,), the decoder row of each (``target_row``) and its label
        (``target_labels``): :meth:`target_logits` applies the head there only."""
        rows = [i for i, t in enumerate(targets) if t]
        if not rows:
            return None
        ids, att = pad([[self.tokenizer.cls_token_id] + list(targets[i][:-1]) for i in rows],
                       self.tokenizer.pad_token_id)
        labels, _ = pad([targets[i] for i in rows], -100)
        index = (labels != -100).flatten().nonzero().squeeze(1)
        return {"rows": torch.tensor(rows), "input_ids": ids, "attention_mask": att, "labels": labels,
                "target_index": index, "target_row": index // labels.size(1), "target_labels": labels.flatten()[index]}

    def reconstruction_inputs(self, views: Views, long_rows: Sequence[int] = ()) -> dict:
        """The CPU inputs of steps 3-5 besides ``s``: s̃'s token ids and the decoder batch (the rows
        ``long_rows`` without a target)."""
        ids, att = pad([v.input_ids for v in views.masked], self.tokenizer.pad_token_id)
        targets = [[] if i in set(long_rows) else t for i, t in enumerate(self.targets(views))]
        return {"views": views, "s_masked": {"input_ids": ids, "attention_mask": att},
                "target": self.decoder_batch(targets)}

    def view_features(self, views: Views, skip_long: bool = False) -> dict:
        """The CPU inputs of steps 3-5: ``s`` and :meth:`reconstruction_inputs`; ``skip_long``: no target for a
        sentence whose s or s̃ has ``max_length`` tokens (the code's ``usable_sample``)."""
        s = self.encode_text(views.s_texts)
        long_rows = ()
        if skip_long:
            limit = self.params.max_length or self.tokenizer.model_max_length
            s_len = s["attention_mask"].sum(1).tolist()
            long_rows = [i for i, v in enumerate(views.masked) if s_len[i] >= limit or len(v.input_ids) >= limit]
        return {"s": s, **self.reconstruction_inputs(views, long_rows)}

    def prepare(self, batch: Batch) -> Batch:
        views = self.prepare_views(batch.sentences, batch.extras, batch.index, augment=self.training, draw=batch.draw)
        batch.features = self.view_features(views, skip_long=self.training and self.params.gen_skip_long)
        return batch

    def check_inputs(self, sentences: Sequence[str], views: Views) -> dict:
        """:meth:`view_features` of ``views`` (unaugmented) on the device: the reconstruction check's inputs."""
        return self.prepared(Batch(list(sentences), features=self.view_features(views)))

    # --- steps 3-6 ----------------------------------------------------------------------
    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Pooled sentence vectors with ``params.pooling`` (E_s / E_s̃)."""
        hidden_states = POOLINGS[self.pooling].needs_hidden_states
        out = self.encoder(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=hidden_states,
                           return_dict=True)
        return pool(out, attention_mask, self.pooling)

    def decoding_signal(self, features: dict, e_s: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Eq. 2's memory ``(B, 4, d)`` from ``E_s`` (``features["s"]``, or given) and ``E_s̃``."""
        if e_s is None:
            e_s = self.embed(features["s"]["input_ids"], features["s"]["attention_mask"])
        return self.signal(e_s, self.embed(features["s_masked"]["input_ids"], features["s_masked"]["attention_mask"]))

    def decoder_logits(self, memory: torch.Tensor, dec_in: torch.Tensor, dec_att: torch.Tensor,
                       positions: Optional[torch.Tensor] = None,
                       flat_index: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Vocabulary logits ``(B, T, V)`` of the decoder; with ``positions`` (one index per row) only those
        rows' positions ``(B, V)``: greedy decoding needs the last one; with ``flat_index`` only those positions
        of the flattened ``(B·T)`` grid ``(N, V)``: the loss needs the target tokens. The head over ~30k words
        is most of a decoding step's cost."""
        h = self.decoder(self.encoder, dec_in, dec_att, memory)
        if positions is not None:
            h = h[torch.arange(h.size(0), device=h.device), positions]
        elif flat_index is not None:
            h = h.flatten(0, 1).index_select(0, flat_index)
        return self.lm_head(h, self.encoder.get_input_embeddings().weight)

    def next_token_logits(self, memory: torch.Tensor, seqs: Sequence[Sequence[int]]) -> torch.Tensor:
        """Greedy decoding's step: the logits ``(B, V)`` after the last token of each sequence of ``seqs``."""
        ids, att = (t.to(memory.device) for t in pad(seqs, self.tokenizer.pad_token_id))
        return self.decoder_logits(memory, ids, att, positions=att.sum(1) - 1)

    def teacher_forcing(self, memory: torch.Tensor, dec: dict[str, torch.Tensor]):
        """(logits ``(rows, T, V)``, labels ``(rows, T)``) of teacher-forced decoding of a :meth:`decoder_batch`
        (on the device), padding positions included: the reconstruction check's view."""
        return self.decoder_logits(memory[dec["rows"]], dec["input_ids"], dec["attention_mask"]), dec["labels"]

    def target_logits(self, memory: torch.Tensor, dec: dict[str, torch.Tensor]):
        """(logits ``(N, V)``, labels ``(N,)``) of teacher-forced decoding at the N target tokens of a
        :meth:`decoder_batch` only: the same logits as :meth:`teacher_forcing` there, without the vocabulary
        head (most of a PaSeR step) and the cross-entropy over the padding positions."""
        return (self.decoder_logits(memory[dec["rows"]], dec["input_ids"], dec["attention_mask"],
                                    flat_index=dec["target_index"]), dec["target_labels"])

    def generative_loss(self, memory: torch.Tensor, dec: Optional[dict[str, torch.Tensor]]):
        """Eq. 3: fp32 token cross-entropy of the teacher-forced decoder, reduced by ``gen_reduction``
        (mean: over the batch's target tokens; sum: over each sentence's, then the mean over sentences)."""
        if dec is None:
            return memory.sum() * 0.0, torch.tensor(float("nan"))
        logits, labels = self.target_logits(memory, dec)
        with full_precision(logits.device):
            nll = F.cross_entropy(logits.float(), labels, reduction="none")
        if self.params.gen_reduction == "mean":
            loss = nll.mean()
        else:
            loss = nll.new_zeros(dec["rows"].numel()).index_add(0, dec["target_row"], nll).mean()
        acc = (logits.argmax(-1) == labels).float().mean().detach()
        return loss, acc

    def mlm_loss(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """BERT's MLM on s (15%, 80/10/10), the head shared with the decoder; fp32 cross-entropy, mean over
        the masked tokens. Pass the CPU token ids: the corruption is drawn there (torch's RNG) and nothing
        is read back from the device."""
        inputs, labels = mlm_mask(input_ids, mlm_special(input_ids, attention_mask, self.tokenizer), self.tokenizer,
                                  self.params.mlm_prob)
        sel = (labels != -100).flatten().nonzero().squeeze(1)
        return masked_lm_loss(self.encoder, self.lm_head, self.encoder.get_input_embeddings().weight,
                              self.to_device({"input_ids": inputs, "attention_mask": attention_mask}),
                              sel.to(self.device), labels.flatten()[sel].to(self.device))

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        if not batch.features:  # a direct call: prepare here
            batch = self.prepare(batch)
        f, cpu = self.prepared(batch), batch.features
        memory = self.decoding_signal(f)  # E_s, E_s̃ -> Eq. 2
        loss_gen, acc = self.generative_loss(memory, f["target"])  # Eq. 3
        loss = self.params.gen_weight * loss_gen
        out = {"loss_gen": loss_gen.detach(), "gen_token_acc": acc, **f["views"].eda_stats()}
        if self.params.mlm_weight > 0:  # Eq. 4
            loss_mlm = self.mlm_loss(cpu["s"]["input_ids"], cpu["s"]["attention_mask"])
            loss = loss + self.params.mlm_weight * loss_mlm
            out["loss_mlm"] = loss_mlm.detach()
        out["loss"] = loss
        return out

    def configure_optimizers(self, *, weight_decay: float = 0.0, fused: bool = False) -> torch.optim.Optimizer:
        """The encoder (and the word embeddings the decoder and LM head share) at ``lr``; the randomly
        initialised modules (decoder, signal, head) at ``head_lr`` (None: ``lr``)."""
        encoder_ids = {id(p) for p in self.encoder.parameters()}
        trainable = self.trainable_parameters()
        groups = [{"params": [p for p in trainable if id(p) in encoder_ids]},
                  {"params": [p for p in trainable if id(p) not in encoder_ids],
                   "lr": self.params.head_lr or self.params.lr}]
        return adamw(groups, lr=self.params.lr, weight_decay=weight_decay, fused=fused)

    # --- around the run: the held-out reconstruction check, the heads for paser_sup --------
    def split_heldout(self, corpus):
        """Rows kept out of training for the check (:func:`~sentlab.methods._paser_reconstruction.heldout_split`)."""
        corpus, self.recon_sets = heldout_split(corpus, self.params, self.seed)
        return corpus

    def export_artifacts(self, folder, data_root) -> None:
        """``paser_heads.safetensors`` (decoder, signal, LM head: paser_sup's ``decoder_init: paser``) and
        ``reconstruction.json`` (:func:`~sentlab.methods._paser_reconstruction.export_reconstruction`)."""
        save_heads(self, folder)
        export_reconstruction(self, folder, data_root, self.recon_sets)

    def export_info(self) -> dict:
        return {**super().export_info(), "lm_head": self.lm_head_source,
                "training_only": ["decoder", "signal", "lm_head"]}
