"""The params of ``methods.l2p``, ``methods.prompt`` and ``methods.prompt_l2p`` (docs/methods.md#l2p-csr).

L2P-CSR's ablations (Table 3) and sweeps (Fig. 2) are settings of these blocks; the variants that train
them are params.yaml ``ablations.variants`` (the one registry: ``l2p_no_feature_mask: {method: l2p, set:
{feature_mask: false}}``, …), and the report's table names them (:mod:`sentlab.report.paper_tables.l2p`).
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, field_validator, model_validator

from ..nn.encoder import PROMPT_TEMPLATE
from .base import ContrastiveParams


# PromptBERT's unsup-bert run (kongds/Prompt-BERT run.sh): TEMPLATE (view 1 and test) and TEMPLATE2 (view 2)
PROMPTBERT_TEMPLATE = 'This sentence of "{sentence}" means {mask} .'
PROMPTBERT_TEMPLATE2 = PROMPT_TEMPLATE


class _TemplateFields(ContrastiveParams):
    template: str = Field(PROMPTBERT_TEMPLATE,
                          description="template of the first view, with {sentence} and {mask}; the test template too "
                                      "(PromptBERT unsup-bert's TEMPLATE)")
    template2: Optional[str] = Field(
        PROMPTBERT_TEMPLATE2, description="template of the second view (PromptBERT unsup-bert's TEMPLATE2); None: "
                                          "the same as `template`")
    denoise: bool = Field(
        True, description="template denoising in training (PromptBERT --mask_embedding_sentence_delta): each view's "
                          "[MASK] vector minus the [MASK] vector of its empty template with the positions of a "
                          "sentence of that length, gradient through both; none at test (the unsup. evaluation)")
    denoise_shift: Literal["own", "template1"] = Field(
        "own", description="the denoising pass of template2: its tokens after the sentence slot shifted from its own "
                           "slot (own) | from template's slot, i.e. by template's prefix length (template1: the "
                           "release's get_delta, len(cls.bs) + 1 for both templates; the paper profile). Equal when "
                           "both prefixes have as many tokens (run.sh's: 4)")
    end_period: bool = Field(
        True, description="test: '.' appended to a sentence not ending in . ? \" ' before the template, as "
                          "PromptBERT's evaluation batcher does (training: never, as its train.py)")

    @field_validator("template", "template2")
    @classmethod
    def _placeholders(cls, v):
        if v is not None and (v.count("{sentence}") != 1 or v.count("{mask}") != 1):
            raise ValueError("a template needs exactly one {sentence} and one {mask}, e.g. " + PROMPT_TEMPLATE)
        return v


class PromptParams(_TemplateFields):
    mlp_train: bool = Field(True, description="MLP over the [MASK] vector in training (PromptBERT --mlp_only_train)")


class L2PParams(ContrastiveParams):
    max_sentences: Optional[int] = Field(
        None, gt=0, description="train on a seeded random subset of this many corpus sentences (paper: 100,000 "
                                "Wikipedia sentences); None: the whole training corpus")
    layers: int = Field(2, ge=0, description="k: the embedding output and the first k transformer layers are masked")
    phi: float = Field(0.05, ge=0, le=1, description="mask threshold: alpha = 1 where p >= phi")
    steps: int = Field(4, ge=0, description="t: gradient-ascent steps on the masks per batch (the code's 4)")
    beta: float = Field(0.5, gt=0, description="ascent step on p (paper 0.5; the released code 0.1)")
    token_mask: bool = Field(True, description="False: alpha_tok = 1 everywhere (Table 3 'w/o token mask')")
    feature_mask: bool = Field(True, description="False: alpha_fea = 1 everywhere (Table 3 'w/o feature mask')")
    learn: bool = Field(True, description="False: random U(0,1) masks, no ascent (Table 3 'w/o learning to perturb')")
    perturbation: Literal["mask", "gradient_noise"] = Field(
        "mask", description="gradient_noise: FreeLB additive noise on the word embeddings (inputs_embeds, before the "
                            "position/type embeddings and the embedding LayerNorm), Table 3 'Emb Noise'")
    continuous: bool = Field(
        False, description="True: M = (p_tok + p_fea)/2, p used directly (Table 3 'Continual Mask')")
    ascent_grad: Literal["binary", "continuous"] = Field(
        "binary", description="binary: dL/d(alpha) at the binary masks applied to p (straight-through, as the code); "
                              "continuous: the ascent passes use M = (p_tok + p_fea)/2 and take dL/dp")
    token_norm: Literal["vector", "element"] = Field(
        "vector", description="token step g/||g||: vector = L2 over the positions of one sentence-view (paper); "
                              "element = g/|g| per entry (the code's norm over a size-1 axis = sign ascent)")
    feature_scope: Literal["batch", "view", "sentence"] = Field(
        "view", description="one feature vector per layer for the whole batch (code: both views share it), "
                            "per layer and view (paper: different masks for the two views), or per sentence-view")
    zero_grad: Literal["keep", "reset"] = Field(
        "keep", description="entries whose gradient norm is 0: keep p, or reset p to 1 (the code's NaN -> 1)")
    ascent_dropout: Literal["fresh", "shared"] = Field(
        "fresh", description="fresh: each ascent pass draws its own (seeded) dropout, as the code; shared: the ascent "
                             "passes and the encoder step use one dropout realisation")
    noise_init: float = Field(
        0.1, ge=0, description="gradient_noise: FreeLB adv-init-mag: delta ~ U(-1,1) * noise_init / sqrt(L_i * d) on "
                               "the real tokens (E||delta_i||^2 = noise_init^2 / 3), in word-embedding units")
    noise_step: float = Field(0.1, gt=0, description="gradient_noise: FreeLB adv-lr: delta += noise_step * g / ||g_i||")
    noise_max_norm: Optional[float] = Field(
        None, gt=0, description="gradient_noise: FreeLB adv-max-norm: rows above this norm are scaled back to it; "
                                "None: no projection (FreeLB's 0)")
    mlp_train: bool = Field(True, description="[CLS]/[MASK] + MLP (Linear+tanh) in training, dropped at test")
    attend_padding: bool = Field(
        False, description="True: as the code (its cl_forward_denoised calls the encoder without the attention "
                           "mask): the training passes attend to [PAD] and padding positions are perturbed like "
                           "tokens; False: the attention mask is passed and padding keeps p = 1. Test: no change")

    def slice_caps(self, *, steps: int, batch_size: int, sentences: int) -> dict:
        """``max_sentences``, a subset of the corpus, at most half the slice's corpus."""
        caps = super().slice_caps(steps=steps, batch_size=batch_size, sentences=sentences)
        if self.max_sentences:
            caps["max_sentences"] = min(self.max_sentences, sentences // 2)
        return caps

    def train_sentences(self, corpus: int) -> int:
        return min(corpus, self.max_sentences) if self.max_sentences else corpus

    @model_validator(mode="after")
    def _something_to_perturb(self):
        if self.perturbation == "mask" and not (self.token_mask or self.feature_mask):
            raise ValueError("token_mask and feature_mask are both false: nothing is perturbed; enable one of them")
        return self


class PromptL2PParams(L2PParams, _TemplateFields):
    pass
