"""Supervised PaSeR (docs/methods.md): SimCSE's supervised NLI loss + α·phrase reconstruction, from models/paser."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator

from ..errors import SentlabError
from . import register
from ._common import MLPHead, cosine_logits
from ._paser_decoder import load_heads
from ._paser_head import init_lm_head
from .base import Batch, ContrastiveParams
from .paser import PaSeR, PaSeRParams


class PaSeRSupParams(PaSeRParams, ContrastiveParams):
    """``methods.paser_sup``: SimCSE's supervised loss on NLI (τ: ``temperature``) + α·L_generative (Eq. 5)."""

    corpus: Literal["nli"] = Field("nli", description="the NLI triples of data/corpus/nli.parquet (prepare.nli: "
                                                     "SimCSE's SNLI + MNLI, or the offline SICK-train stand-in)")
    alpha: float = Field(1.0, ge=0, description="weight of L_generative (Eq. 5; searched in the paper)")
    gen_weight: float = Field(1.0, ge=0, description="unused in paser_sup (alpha is the weight)")
    mlm_weight: float = Field(0.0, ge=0, description="Eq. 5 has no MLM term")
    eda: Literal["none", "sr", "rd", "rs", "sr+rd", "sr+rs"] = Field("none", description="EDA on the anchors")
    mlp_head: bool = Field(True, description="SimCSE-sup's MLP over [CLS] in training "
                                             "(dropped at test unless test_mlp, docs/evaluation.md#pooling)")
    test_mlp: bool = Field(False, description="the trained MLP at test too, exported with the model, as SimCSE "
                                              "tests its supervised model (simcse_sup's test_mlp); false: the pooled "
                                              "vector without it, as PaSeR's only released evaluation "
                                              "(eval.sh: cls_before_pooler); PaSeR's supervised code is unreleased")

    @model_validator(mode="after")
    def _mlp_at_test_needs_one(self):
        if self.test_mlp and not self.mlp_head:
            raise ValueError("methods.paser_sup: test_mlp true needs the MLP trained (mlp_head true)")
        return self
    hard_negative_weight: float = Field(0.0, description="SimCSE's log-weight added to hard-negative logits")
    lm_head: Literal["paser", "fresh"] = Field(
        "paser", description="the output head shared by decoder and MLM: the one the unsupervised PaSeR trained "
                             "(models/paser/paser_heads.safetensors; it started from BERT's MLM head), or a fresh one")
    decoder_init: Literal["random", "paser"] = Field(
        "random", description="decoder and signal: random (the paper: the decoder's weights are randomly initialised, "
                              "Sec. 3.3 starts the encoder from the unsupervised checkpoint) or paser's trained ones")


@register("paser_sup")
class PaSeRSup(PaSeR):
    """Supervised PaSeR (Wu & Zhao 2022, Sec. 3.3, Eq. 5): ``L = L_contrastive + α·L_generative``.

    ``L_contrastive`` is SimCSE's supervised loss (Gao et al. 2021, Eq. 5): for
    anchor i, its entailment ``positive`` is the target among every positive and
    every contradiction ``hard_negative`` in the batch (cos/τ). The generative
    term is unsupervised PaSeR's phrase reconstruction on the anchors, with
    ``E_s`` = the anchor's pooled vector from the contrastive forward (before the MLP).
    The encoder starts from the trained unsupervised PaSeR (``init_from``), and so does
    the output head (``lm_head: paser``, default): the head PaSeR trained (from BERT's
    MLM head) on the MLM and phrase losses, read from models/paser's
    ``paser_heads.safetensors``; a fresh head would start the generative term from
    scratch. The decoder and signal are random by default, as the paper says of the
    decoder (``decoder_init: paser`` carries PaSeR's). ``sentlab.json``'s ``init``
    records each (``encoder: paser, lm_head: paser, decoder: random``).

    Inputs: ``Batch.sentences`` (anchors = sent0), ``Batch.extras["positive"]``,
    ``["hard_negative"]`` (columns of ``data/corpus/nli.parquet``) and ``["rake"]`` /
    ``["chunks"]`` of the anchors (the annotation stage's ``data/annotations/nli``).

    Data (``prepare.nli``, :mod:`sentlab.data.nli`): the paper's SNLI + MNLI
    (SimCSE's ``nli_for_simcse.csv``), or offline a stand-in from SICK train
    (premise's entailment as positive, its contradiction as hard negative, pairs
    that SICK test repeats left out; 123 triples), far smaller than the paper's
    275k. ``sentlab.json`` records which (``nli_source``, ``nli_label``: "NLI
    stand-in (SICK train)").
    """

    run_name_params = ("alpha", "phrases", "top_k")
    summary = "PaSeR (sup.): SimCSE supervised NLI contrastive loss + alpha * phrase reconstruction; init from paser"
    Params = PaSeRSupParams
    corpus_columns = ("positive", "hard_negative", "rake", "chunks")
    corpus = "nli"
    init_from = "paser"

    def __init__(self, encoder, tokenizer, params: PaSeRSupParams, seed: int = 0):
        super().__init__(encoder, tokenizer, params, seed)
        self.mlp = MLPHead(encoder.config.hidden_size) if params.mlp_head else None
        self.nli_meta: dict[str, str] = {}  # the corpus's source / label, set by split_heldout
        if params.decoder_init == "paser":
            load_heads(self, self._paser_dir(), ("decoder.", "signal."))
            self.module_init.update(decoder="paser", signal="paser")

    def _paser_dir(self) -> str:
        """The folder the encoder was loaded from (models/paser), where paser wrote its heads."""
        return getattr(self.encoder, "name_or_path", None) or getattr(self.encoder.config, "_name_or_path", "")

    def _init_lm_head(self) -> str:
        """The head the unsupervised PaSeR trained (``lm_head: paser``; models/paser keeps the encoder only, its
        head is in paser_heads.safetensors), or a fresh one (``fresh``); sets ``module_init``."""
        if self.params.lm_head == "fresh":
            self.module_init["lm_head"] = "random"
            # lm_head_output: copy: the fresh head's own matrix starts as the word embeddings
            return init_lm_head(self.lm_head, self.encoder, "fresh", self.id or "paser_sup")
        load_heads(self, self._paser_dir(), ("lm_head.",))
        self.module_init["lm_head"] = "paser"
        return "paser"

    def split_heldout(self, corpus):
        """PaSeR's held-out split; also remembers which NLI source the corpus came from (for :meth:`export_info`)."""
        self.nli_meta = {k: corpus.meta.get(f"sentlab.nli_{k}", "unknown") for k in ("source", "label")}
        return super().split_heldout(corpus)

    def inference_head(self):
        """The trained MLP with ``test_mlp`` (as SimCSE tests its supervised model), else None."""
        return self.mlp if self.params.test_mlp else None

    def export_info(self) -> dict:
        return {**super().export_info(), **{f"nli_{k}": v for k, v in self.nli_meta.items()}}   # head: the base's

    def contrastive_loss(self, h: torch.Tensor, n: int) -> torch.Tensor:
        z = self.mlp(h) if self.mlp is not None else h
        z1, z2, z3 = z[:n], z[n:2 * n], z[2 * n:]
        logits = torch.cat([cosine_logits(z1, z2, self.params.temperature),
                            cosine_logits(z1, z3, self.params.temperature)], dim=1)
        if self.params.hard_negative_weight:
            w = torch.zeros_like(logits)
            w[:, n:] = torch.eye(n, device=logits.device) * self.params.hard_negative_weight
            logits = logits + w
        return F.cross_entropy(logits, torch.arange(n, device=logits.device))

    def prepare(self, batch: Batch) -> Batch:
        for col in ("positive", "hard_negative"):
            if col not in batch.extras:
                raise SentlabError(f"paser_sup needs Batch.extras[{col!r}], a column of the NLI corpus "
                                   f"data/corpus/nli.parquet; the prepare stage writes it "
                                   f"(prepare.nli in params.yaml).")
        views = self.prepare_views(batch.sentences, batch.extras, batch.index, augment=self.training, draw=batch.draw)
        triples = list(views.s_texts) + list(batch.extras["positive"]) + list(batch.extras["hard_negative"])
        batch.features = {"triples": self.encode_text(triples), **self.reconstruction_inputs(views)}
        return batch

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        if not batch.features:  # a direct call: prepare here
            batch = self.prepare(batch)
        f, cpu, n = self.prepared(batch), batch.features, len(batch)
        h = self.embed(f["triples"]["input_ids"], f["triples"]["attention_mask"])  # anchors, positives, hard neg.
        loss_con = self.contrastive_loss(h, n)  # SimCSE-sup
        memory = self.decoding_signal(f, e_s=h[:n])  # Eq. 2, E_s: the anchors' vectors of the contrastive forward
        loss_gen, acc = self.generative_loss(memory, f["target"])  # Eq. 3
        loss = loss_con + self.params.alpha * loss_gen  # Eq. 5
        out = {"loss_con": loss_con.detach(), "loss_gen": loss_gen.detach(), "gen_token_acc": acc,
               **f["views"].eda_stats()}
        if self.params.mlm_weight > 0:
            loss_mlm = self.mlm_loss(cpu["triples"]["input_ids"][:n], cpu["triples"]["attention_mask"][:n])
            loss = loss + self.params.mlm_weight * loss_mlm
            out["loss_mlm"] = loss_mlm.detach()
        out["loss"] = loss
        return out
