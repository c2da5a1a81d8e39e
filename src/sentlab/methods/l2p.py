"""L2P-CSR (learned weakening perturbations), PromptBERT and both together — SPEC §3.7.

Three registered methods share one two-view contrastive core
(:class:`_TwoViewContrastive`: SimCSE's doubled batch ``[s_1..s_N, s_1..s_N]``
in one forward pass, in-batch InfoNCE over cos/τ between the two halves):

* ``l2p`` — :class:`L2PCSR`, [CLS] + MLP in training, [CLS] at test;
* ``prompt`` — :class:`PromptBERT`, the sentence inside a template, the
  [MASK] vector as the representation (training and test);
* ``prompt_l2p`` — :class:`PromptL2P`, the template and the learned masks.

The perturbations themselves (masks, FreeLB noise, hooks) are in
:mod:`sentlab.methods._perturb`. The paper's ablations (Table 3) and
hyper-parameter sweeps (Fig. 2) are params of ``methods.l2p``;
:data:`ABLATIONS` lists them with the paper's numbers so the DVC matrix stage
and the report read one definition.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Literal, Optional

import numpy as np
import torch
from pydantic import Field, field_validator, model_validator

from ..encoder import PROMPT_TEMPLATE, pool
from ..errors import SentlabError
from . import register
from ._common import MLPHead, doubled, in_batch_info_nce
from ._perturb import PERTURBATIONS, isolated_rng
from .base import Batch, ContrastiveParams, Method

# L2P-CSR Table 3 (BERT-base, STS-B / SICK-R test Spearman x100), Fig. 2 sweeps and sentlab's own
# rows. Each variant = overrides on top of ``methods.l2p``; ``section`` = where the report puts it.
# The Fig. 2 curves are plots without printed values, so the sweep rows carry no paper number.
TABLE3, FIG2 = "Table 3", "Fig. 2 sweeps (plotted, no printed values)"
BETA = "sentlab: ascent step beta (paper 0.5, released code 0.1; not in the paper)"
ABLATIONS: dict[str, dict] = {
    "full": {"label": "BERT-base + L2P-CSR", "overrides": {}, "section": TABLE3,
             "paper": {"STSBenchmark": 77.80, "SICKRelatedness": 72.65}},
    "no_feature_mask": {"label": "w/o feature mask", "overrides": {"feature_mask": False}, "section": TABLE3,
                        "paper": {"STSBenchmark": 70.91, "SICKRelatedness": 73.01}},
    "no_token_mask": {"label": "w/o token mask", "overrides": {"token_mask": False}, "section": TABLE3,
                      "paper": {"STSBenchmark": 74.05, "SICKRelatedness": 70.71}},
    "no_learning": {"label": "w/o learning to perturb", "overrides": {"learn": False}, "section": TABLE3,
                    "paper": {"STSBenchmark": 75.09, "SICKRelatedness": 70.34}},
    "gradient_noise": {"label": "BERT-base + Emb Noise", "overrides": {"perturbation": "gradient_noise"},
                       "section": TABLE3, "paper": {"STSBenchmark": 75.95, "SICKRelatedness": 70.73}},
    "continuous": {"label": "BERT-base + Continual Mask", "overrides": {"continuous": True}, "section": TABLE3,
                   "paper": {"STSBenchmark": 75.05, "SICKRelatedness": 70.54}},
    # names carry no "." (a DVC params key path): phi_0p01 is phi = 0.01
    **{f"phi_{v:g}".replace(".", "p"): {"label": f"phi = {v:g}", "overrides": {"phi": v}, "section": FIG2,
                                          "paper": None}
       for v in (0.01, 0.1, 0.2, 0.3)},
    **{f"layers_{k}": {"label": f"k = {k}", "overrides": {"layers": k}, "section": FIG2, "paper": None}
       for k in (0, 1, 4, 6)},
    # the released code's ascent step
    "beta_0p1": {"label": "beta = 0.1 (released code)", "overrides": {"beta": 0.1}, "section": BETA, "paper": None},
}
log = logging.getLogger(__name__)

# the stream of the seeded max_sentences subset (apart from the batch order's [seed, epoch] streams)
_SUBSET_STREAM = 0x4C3250


def paper_lr(config) -> float:
    """The encoder's learning rate of the paper (§B): 1e-5 for RoBERTa-base, 3e-5 for the other backbones."""
    return 1e-5 if config.model_type == "roberta" and config.num_hidden_layers == 12 else 3e-5


def ablation_params(base: dict, variant: str) -> "L2PParams":
    """``methods.l2p`` with the overrides of one :data:`ABLATIONS` variant, validated."""
    if variant not in ABLATIONS:
        raise SentlabError(f"Unknown L2P-CSR ablation {variant!r}; allowed: {', '.join(ABLATIONS)} (ablations.l2p in params.yaml).")
    return L2PParams(**{**(base or {}), **ABLATIONS[variant]["overrides"]})


# --------------------------------------------------------------------------- params
class _TemplateFields(ContrastiveParams):
    template: str = Field(PROMPT_TEMPLATE, description="PromptBERT template with {sentence} and {mask}; used at test too")
    template2: Optional[str] = Field(
        None, description="template of the second view (PromptBERT's unsup. runs use a different one); None: same as `template`")

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
    continuous: bool = Field(False, description="True: M = (p_tok + p_fea)/2, p used directly (Table 3 'Continual Mask')")
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


# --------------------------------------------------------------------------- shared core
class _TwoViewContrastive(Method):
    """Two views of each sentence in one doubled batch, pooled ([CLS] or [MASK]) + MLP, in-batch InfoNCE."""

    inference_pooling = "cls"

    def __init__(self, encoder, tokenizer, params, seed: int = 0):
        super().__init__(encoder, tokenizer, params, seed)
        self.mlp = MLPHead.of(encoder.config) if params.mlp_train else None
        self._template_cache: dict[str, tuple[list[int], list[int]]] = {}

    # --- input --------------------------------------------------------------
    @property
    def templates(self) -> Optional[tuple[str, str]]:
        t = getattr(self.params, "template", None)
        if t is None:
            return None
        return t, (getattr(self.params, "template2", None) or t)

    def prepare(self, batch: Batch) -> Batch:
        batch.features = {"views": self.encode_views(batch.sentences)}
        return batch

    def encode_views(self, sentences) -> dict[str, torch.Tensor]:
        """CPU token ids of the doubled batch ``[view 1 of s_1..s_N, view 2 of s_1..s_N]``: SimCSE's
        :func:`~sentlab.methods._common.doubled` batch, or the sentences in ``template`` then ``template2``."""
        sentences = list(sentences)
        if self.templates is None:
            return doubled(self.encode_text(sentences))
        t1, t2 = self.templates
        ids = self.templated_ids(sentences, t1) + self.templated_ids(sentences, t2)
        return dict(self.tokenizer.pad({"input_ids": ids}, padding=True, return_tensors="pt"))

    def templated_ids(self, sentences, template: str) -> list[list[int]]:
        """Token ids of ``template`` around each sentence, special tokens added.

        The sentence is truncated to ``max_length`` minus the special tokens (the
        budget it has without a template) *before* it is wrapped, as PromptBERT's
        training code does, so the [MASK] token is never cut off.
        """
        before, after = self._template_pieces(template)
        head, tail = self._special_tokens()
        budget = max(1, self.params.max_length - len(head) - len(tail))
        sent = self.tokenizer(list(sentences), add_special_tokens=False, truncation=True, max_length=budget)["input_ids"]
        return [head + before + s + after + tail for s in sent]

    def _template_pieces(self, template: str) -> tuple[list[int], list[int]]:
        if template not in self._template_cache:
            before, after = template.split("{sentence}")
            mask = self.tokenizer.mask_token
            ids = [self.tokenizer(part.format(mask=mask), add_special_tokens=False)["input_ids"] for part in (before, after)]
            self._template_cache[template] = (ids[0], ids[1])
        return self._template_cache[template]

    def _special_tokens(self) -> tuple[list[int], list[int]]:
        """The ids the tokenizer puts before / after a single sequence ([CLS] … [SEP] for BERT)."""
        if "__special__" not in self._template_cache:
            with_sp = self.tokenizer("x", add_special_tokens=True)["input_ids"]
            bare = self.tokenizer("x", add_special_tokens=False)["input_ids"]
            i = next(i for i in range(len(with_sp)) if with_sp[i: i + len(bare)] == bare)
            self._template_cache["__special__"] = (with_sp[:i], with_sp[i + len(bare):])
        return self._template_cache["__special__"]

    # --- representation and loss ----------------------------------------------
    def represent(self, views: dict[str, torch.Tensor]) -> torch.Tensor:
        """Training representation: [CLS] (or [MASK] with a template) of the last layer, then the MLP."""
        out = self.encoder(**views, return_dict=True)
        if self.templates is not None:
            h = pool(out, views["attention_mask"], "mask", views["input_ids"], self.tokenizer.mask_token_id)
        else:
            h = out.last_hidden_state[:, 0]
        return self.mlp(h) if self.mlp is not None else h

    def contrastive_loss(self, views: dict[str, torch.Tensor]) -> torch.Tensor:
        """In-batch InfoNCE (L2P-CSR Eq. 9) between the two halves of the doubled batch."""
        z1, z2 = self.represent(views).chunk(2)
        return in_batch_info_nce(z1, z2, self.params.temperature)

    def export_info(self) -> dict:
        if self.templates is not None:
            return {"method": self.id, "pooling": "mask", "template": self.templates[0]}
        return {"method": self.id, "pooling": "cls"}


# --------------------------------------------------------------------------- PromptBERT
@register("prompt")
class PromptBERT(_TwoViewContrastive):
    """PromptBERT, unsupervised (Jiang et al., "PromptBERT: Improving BERT
    Sentence Embeddings with Prompts", 2022), as used by L2P-CSR Table 1 "+Prompt".

    Each sentence is put in the template ``This sentence : "[X]" means [MASK] .``
    (``template``) and the last-layer [MASK] vector is its representation, in
    training (then the MLP, PromptBERT's ``--mlp_only_train``) and at test
    (``export_info`` → pooling ``mask`` + the template; no MLP). Two dropout
    views per sentence, in-batch InfoNCE over cos/τ. ``template2`` gives the
    second view a different template, as PromptBERT's own unsupervised runs
    do. PromptBERT's *template denoising* (subtracting the [MASK] vector of the
    empty template) is **not implemented**.

    Example::

        m = PromptBERT(bert, tok, PromptBERT.Params(max_length=32))
        m(Batch(["a cat sat", "dogs bark"]))["loss"].backward()
        m.sentence_encoder().encode(["a cat sat"])   # [MASK] pooling, same template
    """

    summary = "PromptBERT (unsup.): template 'This sentence : \"[X]\" means [MASK] .', [MASK] vector, two dropout views, InfoNCE"
    Params = PromptParams
    inference_pooling = "mask"

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        return {"loss": self.contrastive_loss(self.prepared(batch)["views"])}


# --------------------------------------------------------------------------- L2P-CSR
@register("l2p")
class L2PCSR(_TwoViewContrastive):
    """L2P-CSR: learning to perturb for contrastive sentence representations
    (Zhou et al., "Learning to Perturb for Contrastive Learning of Unsupervised
    Sentence Representations"; RUCAIBox/L2P-CSR), SPEC §3.7.

    Per batch (Algorithm 1): for the embedding output and the first k
    transformer layers (``layers``), draw a token probability vector and a
    feature probability vector from U(0, 1) (Eq. 4); the masks are
    ``α = [p ≥ φ]`` (Eq. 1) and the layer output is multiplied by
    ``M[i, j] = (α_tok[i] + α_fea[j]) / 2`` (Eqs. 2–3) through forward hooks,
    so a weakened token or feature is halved and both weakened is zeroed.
    ``steps`` times, the contrastive loss of the two perturbed views is
    maximised w.r.t. the masks: ``p ← clip[0,1](p + β g/||g||₂)`` (Eqs. 5–8)
    and the masks are recomputed. The encoder then takes its step on the final
    two views with in-batch InfoNCE (Eq. 9), [CLS] + MLP. At inference there is
    no perturbation: the hooks exist only inside :meth:`forward`.

    The perturbation is a strategy (``perturbation``, :data:`~sentlab.methods._perturb.PERTURBATIONS`):
    :class:`~sentlab.methods._perturb.MaskPerturbation` (the method) or
    :class:`~sentlab.methods._perturb.NoisePerturbation` (Table 3 "Emb Noise").

    Choices where the paper is silent (params of ``methods.l2p``):

    * gradient: w.r.t. the *binary* masks α, applied to p (straight-through,
      as the code; ``ascent_grad: binary``) or w.r.t. p through continuous
      masks in the ascent passes (``ascent_grad: continuous``);
    * token vector: one per layer, sentence, view and position (as the code);
      padding positions are fixed at p = 1 (never weakened) and the attention
      mask IS passed (the code attends to padding; we do not);
    * feature vector: per layer and view, shared by the batch
      (``feature_scope: view``, default: "the two views get different
      masks"); ``batch`` = the code (one per layer for both views),
      ``sentence`` = per sentence-view;
    * normalisation: L2 over each probability vector (``token_norm: vector``,
      the paper) or per entry (``element``, what the code's token update does);
    * a zero-norm gradient (NaN in the code): ``zero_grad: keep`` (no move) or
      ``reset`` (p = 1, the code);
    * β = 0.5 (paper; the code's 0.1 is the documented alternative), t = 4;
    * the ascent uses ``torch.autograd.grad`` w.r.t. the perturbation only (no
      gradient reaches the encoder's ``.grad``); its passes run under their own
      seeded RNG (:func:`~sentlab.methods._perturb.isolated_rng`), so the
      global dropout stream of the encoder step does not depend on ``steps``
      (``ascent_dropout: shared``: the ascent passes and the encoder step share
      one seeded dropout realisation).

    Ablations (Table 3): ``feature_mask: false``, ``token_mask: false``,
    ``learn: false`` (random masks), ``perturbation: gradient_noise``,
    ``continuous: true`` (M from p directly, ascent w.r.t. p). Sweeps: ``phi``,
    ``layers`` (Fig. 2); sentlab's ``beta: 0.1`` (the code's step). See
    :data:`ABLATIONS`.

    "Emb Noise" follows FreeLB (Zhu et al., ICLR 2020), the VAT paradigm the
    paper cites: the noise δ is added to the *word embeddings* (FreeLB's
    ``inputs_embeds``, before the position/type embeddings and the embedding
    LayerNorm, which would otherwise normalise it away), initialised
    ``U(-1, 1) · noise_init / sqrt(L_i d)``, ``steps`` L2 ascent steps
    ``δ += noise_step · g/||g||`` and the projection to ``noise_max_norm``
    (FreeLB's adv-init-mag, adv-lr, adv-max-norm). The norms are per
    sentence-view row, in word-embedding units and independent of the length:
    ``||δ_i|| ≈ noise_init/√3`` at the start and
    ``||δ_i|| ≤ noise_init/√3 + steps · noise_step``. As with the masks the
    encoder then takes one step on the final views (FreeLB itself accumulates
    the parameter gradient over the ascent steps); ``layers`` is unused.

    Paper settings (§4.1, ``profiles.paper``): 100,000 Wikipedia sentences
    (``max_sentences``: a seeded subset of the corpus, :meth:`split_heldout`),
    1 epoch, batch 512, τ = 0.05, lr 3e-5 (1e-5 for RoBERTa-base:
    :func:`paper_lr`; a run with another lr logs a warning), STS-B dev every
    150 steps; ``batch_size`` / ``lr`` / ``eval_every`` are this method's
    train overrides (:class:`~sentlab.methods.base.MethodParams`).

    Randomness: the initial perturbation and the ascent passes' dropout seeds
    of micro-batch t come from a generator seeded by (seed, ``Batch.draw`` = t),
    drawn in :meth:`prepare`, so they are the same after a resume.

    Logged beside the loss: ``ascent_loss_start`` / ``ascent_loss_end`` (the
    contrastive loss of the two perturbed views before the first and after the
    last ascent step, both under the dropout of the first ascent pass and with
    the masks the ascent differentiates; one extra no-grad pass gives the
    end), ``ascent_gain`` (end − start: what the ascent alone added; log N is
    chance for a batch of N), ``weakened_tokens`` / ``weakened_features`` /
    ``zeroed_entries`` (fractions over real tokens, final masks), or
    ``noise_norm`` (mean ||δ_i||) and ``noise_relative`` (mean ||δ_i|| over the
    norm of the row's word embeddings) for gradient noise.

    Example::

        m = L2PCSR(bert, tok, L2PCSR.Params(layers=2, steps=4, max_length=32), seed=42)
        out = m(m.prepare(Batch(["a cat sat", "dogs bark"], draw=0, seed=42)))
        out["loss"].backward()      # out["weakened_tokens"], out["ascent_gain"], ...
    """

    summary = "L2P-CSR: learned token/feature weakening masks on the first layers, two views, InfoNCE, [CLS]+MLP"
    Params = L2PParams
    inference_pooling = "cls"

    def __init__(self, encoder, tokenizer, params, seed: int = 0):
        super().__init__(encoder, tokenizer, params, seed)
        self.perturbation = PERTURBATIONS[params.perturbation](encoder, params)  # fails early on a bad backbone / k
        if params.lr is not None and params.lr != paper_lr(encoder.config):
            log.warning("%s: the paper trains a %s encoder with lr %g; this run uses lr %g (methods.%s.lr)",
                        self.id, encoder.config.model_type, paper_lr(encoder.config), params.lr, self.id)
        self.last_perturbation = None  # the final perturbation of the last batch (inspection, Fig. 3-style plots)

    def split_heldout(self, corpus):
        """``max_sentences`` set: the first N rows of a permutation seeded by the run seed alone
        (corpus order kept), the paper's 100k random sentences; otherwise the whole corpus."""
        n = self.params.max_sentences
        if n is None:
            return corpus
        if n > len(corpus):
            raise SentlabError(
                f"methods.{self.id}.max_sentences = {n} exceeds the {len(corpus)} sentences of the training corpus; "
                f"set it to at most {len(corpus)} (or null for all of them) in params.yaml, or raise prepare.size.")
        rows = np.random.default_rng([self.seed, _SUBSET_STREAM]).permutation(len(corpus))[:n]
        return corpus.subset(np.sort(rows).tolist())

    # --- the algorithm --------------------------------------------------------
    def prepare(self, batch: Batch) -> Batch:
        """The views, the random start of the perturbation (Eq. 4) and the dropout seeds of the passes."""
        batch = super().prepare(batch)
        gen = self.generator(batch.draw)
        start = self.perturbation.draw(batch.features["views"]["attention_mask"].bool(), gen)
        step_seed = _seed_from(gen) if self.params.ascent_dropout == "shared" else None
        steps = self.params.steps if self.params.learn else 0
        ascent_seeds = [step_seed if step_seed is not None else _seed_from(gen) for _ in range(steps)]
        batch.features.update(perturbation=start, ascent_seeds=ascent_seeds, step_seed=step_seed)
        return batch

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        features = self.prepared(batch)
        views, state = features["views"], features["perturbation"].to(self.device)  # Eq. 4's random start
        stats: dict[str, torch.Tensor] = {}
        if features["ascent_seeds"]:  # learning to perturb (Eqs. 5–8)
            state, stats = self.learn_to_perturb(views, state, features["ascent_seeds"])
        # the encoder's step: InfoNCE of the two views under the final perturbation (Eq. 9)
        with self.perturbation.applied(self.perturbation.transforms(state)), self.dropout(features["step_seed"]):
            loss = self.contrastive_loss(views)
        self.last_perturbation = state
        return {"loss": loss, **stats, **self.perturbation.stats(state, views)}

    def learn_to_perturb(self, views, state, seeds: list[int]):
        """One ascent step per dropout seed (Algorithm 1, lines 6–13); the encoder's grads untouched.

        Returns the final state and the ascent's losses: before the first step and after the last
        one (one more pass, no gradient), both under the first pass's dropout seed."""
        start = None
        for seed in seeds:
            loss, leaves = self.ascent_pass(views, state, seed)
            grads = torch.autograd.grad(loss, list(leaves.values()))
            state = self.perturbation.step(state, dict(zip(leaves, grads)))
            start = loss.detach() if start is None else start
        with torch.no_grad():
            end, _ = self.ascent_pass(views, state, seeds[0])
        return state, {"ascent_loss_start": start, "ascent_loss_end": end, "ascent_gain": end - start}

    def ascent_pass(self, views, state, seed: int):
        """The contrastive loss of the two views under the ascent's perturbation, dropout seeded by ``seed``,
        and the leaves it is differentiated w.r.t."""
        leaves, transforms = self.perturbation.ascent_leaves(state)
        with self.dropout(seed), self.perturbation.applied(transforms):
            return self.contrastive_loss(views), leaves

    # --- randomness ------------------------------------------------------------
    def generator(self, draw: int) -> torch.Generator:
        """The CPU generator of micro-batch ``draw`` (``Batch.draw``): the perturbation's start and the seeds."""
        return torch.Generator().manual_seed((self.seed * 1_000_003 + draw) % (2**63 - 1))

    def dropout(self, seed: Optional[int]):
        """A block whose dropout is drawn from ``seed`` without advancing the global RNG (None: the global stream)."""
        return isolated_rng(seed, self.device) if seed is not None else contextlib.nullcontext()


def _seed_from(gen: torch.Generator) -> int:
    return int(torch.randint(0, 2**62, (1,), generator=gen))


# --------------------------------------------------------------------------- both
@register("prompt_l2p")
class PromptL2P(L2PCSR):
    """L2P-CSR + PromptBERT (L2P-CSR Table 1 "+Prompt+Ours"): the sentence in the
    template, the [MASK] vector as the representation (training: + MLP; test:
    pooling ``mask``), and the learned weakening masks of :class:`L2PCSR` on the
    templated input (template tokens are maskable too, every position has its
    own token probability). Params = ``methods.l2p``'s plus ``template``,
    ``template2``.
    """

    summary = "L2P-CSR + PromptBERT: learned weakening masks on the templated input, [MASK] vector"
    Params = PromptL2PParams
    inference_pooling = "mask"
