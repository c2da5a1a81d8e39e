"""L2P-CSR (learned weakening perturbations), PromptBERT and both together — docs/methods.md#l2p-csr.

Three registered methods share one two-view contrastive core
(:class:`~sentlab.methods._two_view.TwoViewContrastive`: SimCSE's doubled batch
``[s_1..s_N, s_1..s_N]`` in one forward pass, in-batch InfoNCE over cos/τ between the two halves):

* ``l2p`` — :class:`L2PCSR`, [CLS] + MLP in training, [CLS] at test;
* ``prompt`` — :class:`PromptBERT`, the sentence inside a template, the
  [MASK] vector as the representation (training and test);
* ``prompt_l2p`` — :class:`PromptL2P`, the template and the learned masks.

The perturbations themselves (masks, FreeLB noise, hooks) are in
:mod:`sentlab.methods._perturb` and :mod:`sentlab.methods._perturb_strategies`, the params in
:mod:`sentlab.methods._l2p_params`.
The paper's ablations (Table 3) and hyper-parameter sweeps (Fig. 2) are params
of ``methods.l2p``; the variants that train them are params.yaml
``ablations.variants`` (the one registry, which the report's table names).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Optional

import numpy as np
import torch

from ..errors import SentlabError
from . import register
from ._l2p_params import L2PParams, PromptL2PParams, PromptParams
from ._perturb import isolated_rng
from ._perturb_strategies import PERTURBATIONS
from ._two_view import TwoViewContrastive
from .base import Batch, PaperAvg

__all__ = ["L2PCSR", "L2PParams", "PromptBERT", "PromptL2P", "PromptL2PParams", "PromptParams", "paper_lr"]

log = logging.getLogger(__name__)

# the stream of the seeded max_sentences subset (apart from the batch order's [seed, epoch] streams)
_SUBSET_STREAM = 0x4C3250


def paper_lr(config) -> float:
    """The encoder's learning rate of the paper (§B): 1e-5 for RoBERTa-base, 3e-5 for the other backbones."""
    return 1e-5 if config.model_type == "roberta" and config.num_hidden_layers == 12 else 3e-5


# --------------------------------------------------------------------------- PromptBERT
@register("prompt")
class PromptBERT(TwoViewContrastive):
    """PromptBERT, unsupervised (Jiang et al., "PromptBERT: Improving BERT
    Sentence Embeddings with Prompts", 2022), as its released code trains it
    (kongds/Prompt-BERT ``run.sh unsup-bert``; docs/methods.md#promptbert),
    used by L2P-CSR Table 1 "+Prompt".

    Each sentence goes into two templates, one per view (``template`` =
    ``This sentence of "[X]" means [MASK] .``, ``template2`` =
    ``This sentence : "[X]" means [MASK] .``); the last-layer [MASK] vector
    minus the [MASK] vector of the same template without the sentence
    (*template denoising*, ``denoise``: :meth:`template_bias`), then the MLP
    (``--mlp_only_train``), is the training representation; in-batch InfoNCE
    over cos/τ. At test (``export_info`` → pooling ``mask`` + ``template``):
    the first template's plain [MASK] vector, no denoising, no MLP, a "."
    ended sentence (``end_period``), as its unsup. evaluation. Paper profile: batch 256, lr 1e-5, max length 32, dev
    every 125 steps.

    Example::

        m = PromptBERT(bert, tok, PromptBERT.Params(max_length=32))
        m(Batch(["a cat sat", "dogs bark"]))["loss"].backward()
        m.sentence_encoder().encode(["a cat sat"])   # [MASK] pooling, the first template
    """

    paper = "Jiang et al.: PromptBERT: Improving BERT Sentence Embeddings with Prompts (EMNLP 2022)"
    citation = """@inproceedings{jiang2022promptbert,
  title = {{PromptBERT}: Improving {BERT} Sentence Embeddings with Prompts},
  author = {Jiang, Ting and Jiao, Jian and Huang, Shaohan and Zhang, Zihan and Wang, Deqing and Zhuang, Fuzhen \
and Wei, Furu and Huang, Haizhen and Deng, Denvy and Zhang, Qi},
  booktitle = {Proceedings of the 2022 Conference on Empirical Methods in Natural Language Processing},
  year = {2022}
}"""
    paper_avg = PaperAvg(78.54, "PromptBERT as L2P-CSR Table 1 prints it (+Prompt)")
    summary = ("PromptBERT (unsup.): two templates, [MASK] vector minus the empty template's (template denoising), "
               "InfoNCE; test: the first template's [MASK] vector")
    Params = PromptParams
    inference_pooling = "mask"

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        return {"loss": self.contrastive_loss(self.prepared(batch)["views"])}


# --------------------------------------------------------------------------- L2P-CSR
@register("l2p")
class L2PCSR(TwoViewContrastive):
    """L2P-CSR: learning to perturb for contrastive sentence representations
    (Zhou et al., "Learning to Perturb for Contrastive Learning of Unsupervised
    Sentence Representations"; RUCAIBox/L2P-CSR), docs/methods.md#l2p-csr.

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

    The perturbation is a strategy (``perturbation``, :data:`~sentlab.methods._perturb_strategies.PERTURBATIONS`):
    :class:`~sentlab.methods._perturb_strategies.MaskPerturbation` (the method) or
    :class:`~sentlab.methods._perturb_strategies.NoisePerturbation` (Table 3 "Emb Noise").

    Choices where the paper is silent (params of ``methods.l2p``):

    * gradient: w.r.t. the *binary* masks α, applied to p (straight-through,
      as the code; ``ascent_grad: binary``) or w.r.t. p through continuous
      masks in the ascent passes (``ascent_grad: continuous``);
    * token vector: one per layer, sentence, view and position (as the code);
      padding positions are fixed at p = 1 (never weakened) and the attention
      mask is passed; ``attend_padding: true`` is the code (its perturbed
      passes get no attention mask, and padding is perturbed like tokens);
    * feature vector: per layer and view, shared by the batch
      (``feature_scope: view``, default: "the two views get different
      masks"); ``batch`` = the code (one per layer for both views),
      ``sentence`` = per sentence-view;
    * normalisation: L2 over each probability vector (``token_norm: vector``,
      the paper) or per entry (``element``, what the code's token update does);
    * a zero-norm gradient (NaN in the code): ``zero_grad: keep`` (no move) or
      ``reset`` (p = 1, the code);
    * β = 0.5 (paper; the code's 0.1 is the paper profile's), t = 4;
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
    params.yaml ``ablations.variants`` (``l2p_*``).

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

    paper = ("Learning to Perturb for Contrastive Learning of Unsupervised Sentence Representations (L2P-CSR; "
             "manuscript under review, shared/papers/l2p_csr.md)")
    citation = None                   # a manuscript: no published BibTeX entry
    run_name_params = ("layers", "phi", "steps", "beta", "token_mask", "feature_mask", "learn", "perturbation",
                       "continuous")
    paper_avg = PaperAvg(77.20, "L2P-CSR Table 1 (+Ours)")
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
        real = batch.features["views"]["attention_mask"].bool()
        if self.params.attend_padding:   # the code: its noise covers the padded grid, which it attends to
            real = torch.ones_like(real)
        start = self.perturbation.draw(real, gen)
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

    def encoder_inputs(self, views: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``attend_padding``: the views without their attention mask (the code's perturbed passes)."""
        if self.params.attend_padding:
            return {k: v for k, v in views.items() if k != "attention_mask"}
        return views

    def unperturbed(self):
        return self.perturbation.paused()

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
    """L2P-CSR + PromptBERT (L2P-CSR Table 1 "+Prompt+Ours"): PromptBERT's input
    recipe (:class:`PromptBERT`: two templates, template denoising; test: the
    first template's [MASK] vector) and the learned weakening masks of
    :class:`L2PCSR` on the templated input (template tokens are maskable too,
    every position has its own token probability; the empty-template pass of
    the denoising is not perturbed). Params = ``methods.l2p``'s plus
    ``template``, ``template2``, ``denoise``.
    """

    run_name_params = ("layers", "phi", "steps", "beta")
    paper_avg = PaperAvg(79.03, "L2P-CSR Table 1 (+Prompt+Ours)")
    summary = "L2P-CSR + PromptBERT: learned weakening masks on the templated input, [MASK] vector"
    Params = PromptL2PParams
    inference_pooling = "mask"
