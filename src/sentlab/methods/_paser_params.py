"""``methods.paser`` in params.yaml: :class:`PaSeRParams` (kept apart from :mod:`sentlab.methods.paser`, which
reads like the algorithm)."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from ..config.poolings import TextPoolingName
from .base import MethodParams


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
        "independent", description="independent: s and s̃ get separate draws; shared: one augmented sentence, "
                                   "duplicated")
    eda_edit_phrases: Literal["none", "sr", "all"] = Field(
        "sr", description="the EDA operations that may edit the phrase words of s (the decoder's target stays the "
                          "original phrase, protected in s̃): sr (the paper's reading: synonyms make 'semantic "
                          "similar phrases with different tokens'; RD/RS never delete or move a phrase word), all "
                          "(SR, RD, RS), none (phrase words never edited in either view)")
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
    decoder_impl: Literal["bart", "torch"] = Field(
        "bart", description="the decoder's layers: transformers' BartDecoder, as the code builds it (its own positions "
                            "and embedding LayerNorm on top of the input embeddings, BART's init, no attention "
                            "dropout), or PyTorch's nn.TransformerDecoder (post-LN, GELU); docs/methods.md#paser")
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
    lm_head_output: Literal["tied", "copy"] = Field(
        "tied", description="the LM head's output matrix: the word embeddings (tied) or its own copy, from the "
                            "checkpoint's output matrix, trained apart (the code: transformers never ties its "
                            "BertForCL.lm_head; the paper profile). The default keeps the quick profile's runs")
    gen_skip_long: bool = Field(
        False, description="no L_generative target for a sentence whose s or s̃ reaches max_length tokens (the "
                           "code's collator: usable_sample needs both views under 32 tokens; the paper profile); "
                           "false: its phrases not cut by truncation stay targets")
    mlm_weight: float = Field(1.0, ge=0, description="weight of L_MLM (Eq. 4: 1)")
    mlm_prob: float = Field(0.15, gt=0, lt=1)
    gen_weight: float = Field(1.0, ge=0, description="weight of L_generative")
    gen_reduction: Literal["mean", "sum"] = Field(
        "mean", description="L_generative over target tokens: mean over the batch's tokens (code) or, as Eq. 3 "
                            "writes it, the sum over each sentence's tokens, averaged over sentences")
    pooling: TextPoolingName = Field(
        "cls", description="pooling of E_s, E_s̃ in training and of the exported encoder (Table 9)")
    grad_clip: Literal["global", "per_group"] = Field(
        "global", description="gradient clipping at train.max_grad_norm: one norm over every parameter (the code: "
                              "HF Trainer's) or each optimiser group's on its own (encoder; decoder, signal, head)")
    chunk_union: Literal["one_each", "pooled"] = Field(
        "one_each", description="a union of chunk labels (np_verb_group…): chunk_k chunks of each label (Table 5's "
                                "NP+VP: one NP and one VP) or chunk_k drawn from the pooled chunks")
    head_lr: Optional[float] = Field(
        None, gt=0, description="learning rate of the randomly initialised modules (decoder, signal, fresh LM head "
                                "bias); None: lr for everything, as the paper (5 epochs at 3e-5)")
    recon_heldout: int = Field(500, ge=0, description="held-out sentences for the reconstruction check (0: skip)")
    recon_heldout_from: Literal["corpus", "other"] = Field(
        "corpus", description="corpus: sentences of the training corpus kept out of training (at most a tenth of "
                              "it); other: the corpus not trained on (Wikipedia for sts_unlabeled: a domain shift)")
    recon_fit: int = Field(2000, gt=0, description="training sentences the frequency baselines are fitted on")

    def slice_caps(self, *, steps: int, batch_size: int, sentences: int) -> dict:
        """The reconstruction check after training at a slice's scale (40 held-out sentences decoded, baselines
        fitted on 200): at 500 / 2,000 it took 3-5 min of each PaSeR stage on a CPU (a random decoder never emits
        [SEP], so every sentence decodes the full 40 tokens)."""
        caps = super().slice_caps(steps=steps, batch_size=batch_size, sentences=sentences)
        if self.recon_heldout:
            caps["recon_heldout"] = min(self.recon_heldout, 40)
        caps["recon_fit"] = min(self.recon_fit, 200)
        return caps

    def nltk_resources(self) -> list[str]:
        """EDA's synonym replacement (``sr``) reads WordNet and NLTK's English stop words
        (:class:`~sentlab.augment.eda.EDA`)."""
        return ["wordnet", "stopwords"] if "sr" in self.eda.split("+") else []

    def standin(self, asset: str) -> dict:
        """Without WordNet, EDA's synonym replacement (``sr``) is left out (``rd`` when nothing else is asked)."""
        if asset != "NLTK wordnet" or "sr" not in self.eda.split("+"):
            return {}
        rest = [op for op in self.eda.split("+") if op != "sr"]
        return {"eda": "+".join(rest) if rest else "rd"}
