"""Self-guided contrastive learning, SG-OPT (Kim, Yoo & Lee, ACL 2021), docs/methods.md#sg-opt."""

from __future__ import annotations

import copy
import math
from typing import Literal, Optional

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from ..nn.encoder import masked_mean
from ..errors import SentlabError
from . import register
from ._common import full_precision
from ..nn.optim import AdamWLegacy
from .base import Batch, ContrastiveParams, Method, PaperAvg


class SGOPTParams(ContrastiveParams):
    """``methods.sg_opt``: every choice of the released code (galsang/SG-BERT ``training.py`` / ``loss.py``) is a
    key; its defaults are the code's (docs/methods.md#sg-opt says where the paper is silent)."""

    temperature: float = Field(0.01, gt=0, description="τ of the SG-OPT NT-Xent over cosine (the code's --T 1e-2)")
    reg_lambda: float = Field(0.1, ge=0, description="λ of the regulariser λ·Σ||θ_T − θ_F||² (squared L2 distance "
                                                     "of the tuned copy to the fixed one; the code's --lamb 0.1)")
    layer_pooling: Literal["mean", "max"] = Field(
        "mean", description="pooling of one layer's token states of BERT_F into a guide vector (the code's "
                            "--pooling2 mean; max: masked max-pooling)")
    layer_sampling: Literal["all", "uniform"] = Field(
        "all", description="all: every layer of [layer_min, layer_max) is a positive of the [CLS] (SG-OPT, the "
                           "code's --obj SG-OPT); uniform: one layer per sentence drawn uniformly (the SG sampler)")
    layer_min: int = Field(0, ge=0, description="first hidden state used as a guide (0: the embedding output)")
    layer_max: Optional[int] = Field(None, gt=0, description="one past the last hidden state used (None: all, "
                                                             "num_hidden_layers + 1, the code's --lmax -1)")
    head_dim: int = Field(4096, gt=0, description="width of the shared projection head Linear-GELU-Linear-GELU "
                                                  "(the code's 4096)")
    freeze_embeddings: bool = Field(True, description="BERT_T's embedding layer is not trained (the code's --freeze)")
    fixed_dropout: bool = Field(
        True, description="dropout on in BERT_F during training: the code calls .eval() on it but its fit() puts "
                          "the whole loss module back in train mode; false: BERT_F deterministic")
    adam_beta2: float = Field(0.9, gt=0, lt=1, description="AdamW β2 (the code passes betas (0.9, 0.9))")
    adam_eps: float = Field(1e-6, gt=0, description="AdamW ε (the code's transformers.AdamW default, 1e-6)")
    weight_decay: float = Field(
        0.01, ge=0, description="decoupled weight decay of every tensor but biases and LayerNorm (the code's "
                                "SentenceTransformer.fit groups: its weight_decay=0.01; training.py's --weight_decay "
                                "0 reaches only the optimiser default, which the groups override); replaces "
                                "train.weight_decay")
    warmup: float = Field(0.1, ge=0, lt=1, description="share of the optimiser steps with a linear warm-up, rounded "
                                                       "up (training.py: 10 %), then the linear decay")
    corpus: Literal["sts_unlabeled", "train"] = Field(
        "sts_unlabeled", description="training sentences: sts_unlabeled (the distinct STS sentences; the code reads "
                                     "every STS-B sentence, all three splits) or train (the Wikipedia corpus)")


def layer_vectors(hidden_states, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """``(B, L, d)``: each hidden state of ``hidden_states`` (L of them) pooled over the sentence's tokens."""
    if pooling == "mean":
        return torch.stack([masked_mean(h, attention_mask) for h in hidden_states], dim=1)
    pad = ~attention_mask.bool().unsqueeze(-1)
    return torch.stack([h.masked_fill(pad, torch.finfo(h.dtype).min).amax(dim=1) for h in hidden_states], dim=1)


def sg_opt_loss(c: torch.Tensor, h: torch.Tensor, temperature: float) -> torch.Tensor:
    """SG-OPT's NT-Xent (Kim et al. 2021, Eq. 5; the code's ``NTXentLoss``), fp32 with autocast off.

    ``c``: ``(B, d)`` the projected [CLS] of BERT_T; ``h``: ``(B, L, d)`` the projected guides of BERT_F (sentence
    j, layer l). For sentence b and layer l the positive is ``cos(c_b, h_{b,l})``; the negatives are every guide of
    the other sentences, ``cos(c_b, h_{j,l'})`` for j ≠ b and every l'. The loss is the cross-entropy of the
    positive among ``1 + L·(B − 1)`` logits over τ, averaged over the ``B·L`` positives.
    """
    with full_precision(c.device):
        cn = F.normalize(c.float(), dim=-1)
        hn = F.normalize(h.float(), dim=-1)
        b, n_layers = hn.shape[:2]
        sim = torch.einsum("bd,jld->blj", cn, hn) / temperature          # (B, L, B): c_b against h_{j,l}
        pos = sim.diagonal(dim1=0, dim2=2).T                               # (B, L): sim[b, l, b]
        other = ~torch.eye(b, dtype=torch.bool, device=c.device)          # j ≠ b
        neg = sim.permute(0, 2, 1)[other].reshape(b, (b - 1) * n_layers)  # (B, L·(B−1)): sentence b's negatives
        logits = torch.cat([pos.unsqueeze(-1), neg.unsqueeze(1).expand(b, n_layers, neg.size(1))], dim=-1)
        return (torch.logsumexp(logits, dim=-1) - pos).mean()


class ProjectionHead(nn.Module):
    """The released code's projection head, shared by both branches: Linear(d, w) GELU Linear(w, w) GELU, weights
    N(0, initializer_range), biases zero."""

    def __init__(self, hidden: int, width: int, std: float = 0.02):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(hidden, width), nn.GELU(), nn.Linear(width, width), nn.GELU())
        for layer in (self.net[0], self.net[2]):
            nn.init.normal_(layer.weight, mean=0.0, std=std)
            nn.init.zeros_(layer.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


@register("sg_opt")
class SGOPT(Method):
    """SG-OPT: the tuned encoder's [CLS] is guided by a fixed copy's intermediate layers.

    Kim, Yoo & Lee, "Self-Guided Contrastive Learning for BERT Sentence Representations", ACL 2021 (the
    optimised objective, SG-OPT). Two copies of the pretrained encoder: BERT_T (``self.encoder``, tuned) and
    BERT_F (``self.fixed``, frozen: in ``state_dict``, never in the optimiser). Per batch:

    1. ``c_i`` = head(BERT_T's last-layer [CLS] of sentence i);
    2. ``h_{i,l}`` = head(pool(BERT_F's hidden state l of sentence i)) for every layer l (or one sampled layer);
    3. loss = SG-OPT NT-Xent(c, h) / τ (:func:`sg_opt_loss`) + λ Σ_θ ||θ_T − θ_F||².

    The projection head is shared by both branches and dropped at test: inference is BERT_T's [CLS].

    Example::

        method = SGOPT(bert, tok, SGOPT.Params(max_length=32))
        method(Batch(["a cat sat", "dogs bark"]))["loss"].backward()
    """

    paper = "Kim, Yoo and Lee: Self-Guided Contrastive Learning for BERT Sentence Representations (ACL 2021)"
    citation = """@inproceedings{kim2021sgopt,
  title = {Self-Guided Contrastive Learning for {BERT} Sentence Representations},
  author = {Kim, Taeuk and Yoo, Kang Min and Lee, Sang-goo},
  booktitle = {Proceedings of the 59th Annual Meeting of the Association for Computational Linguistics and the 11th \
International Joint Conference on Natural Language Processing (Volume 1: Long Papers)},
  pages = {2528--2540},
  year = {2021}
}"""
    paper_avg = PaperAvg(74.62, "SG-OPT as L2P-CSR Table 1 prints it")
    summary = ("SG-OPT: tuned [CLS] vs a frozen copy's pooled layers (NT-Xent, τ 0.01) + λ·L2 to the fixed "
               "weights; [CLS] at test")
    Params = SGOPTParams
    inference_pooling = "cls"

    def __init__(self, encoder, tokenizer, params: SGOPTParams, seed: int = 0):
        super().__init__(encoder, tokenizer, params, seed)
        cfg = encoder.config
        n_states = cfg.num_hidden_layers + 1
        self.layer_range = (params.layer_min, params.layer_max or n_states)
        lo, hi = self.layer_range
        if not lo < hi <= n_states:
            raise SentlabError(f"methods.{self.id or 'sg_opt'}: layer_min = {lo}, layer_max = {params.layer_max} "
                               f"select no hidden state of a {cfg.num_hidden_layers}-layer encoder ({n_states} "
                               f"states, 0 = embeddings); set 0 <= layer_min < layer_max <= {n_states} (null: all).")
        self.fixed = copy.deepcopy(encoder)  # BERT_F: the pretrained weights, kept
        for p in self.fixed.parameters():
            p.requires_grad_(False)
        if params.freeze_embeddings:
            emb = getattr(encoder, "embeddings", None)
            if emb is None:
                raise SentlabError(f"methods.{self.id or 'sg_opt'}.freeze_embeddings: the encoder "
                                   f"({type(encoder).__name__}) has no `embeddings` module; set it to false.")
            for p in emb.parameters():
                p.requires_grad_(False)
        with torch.random.fork_rng():  # the head's init from the seed, the caller's RNG stream untouched
            torch.manual_seed(seed)
            self.head = ProjectionHead(cfg.hidden_size, params.head_dim, getattr(cfg, "initializer_range", 0.02))
        self.module_init["head"] = "random"

    def corpus_name(self) -> str:
        return self.params.corpus

    def prepare(self, batch: Batch) -> Batch:
        feats = {"enc": self.encode_text(batch.sentences)}
        if self.params.layer_sampling == "uniform":  # the SG sampler: one guide layer per sentence
            rng, (lo, hi) = batch.rng("layers"), self.layer_range
            feats["layer"] = torch.tensor([rng.randrange(lo, hi) for _ in batch.sentences])
        batch.features = feats
        return batch

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        feats = self.prepared(batch)
        enc = feats["enc"]
        c = self.head(self.encoder(**enc, return_dict=True).last_hidden_state[:, 0])   # BERT_T's [CLS]
        h = self.head(self._guides(enc, feats.get("layer")))                            # BERT_F's layers
        contrastive = sg_opt_loss(c, h, self.params.temperature)
        reg = self.distance_to_fixed()
        return {"loss": contrastive + self.params.reg_lambda * reg, "contrastive": contrastive.detach(),
                "l2_to_fixed": reg.detach()}

    def _guides(self, enc: dict, layer: Optional[torch.Tensor]) -> torch.Tensor:
        """``(B, L, d)`` pooled hidden states of BERT_F (no gradient), L = the layer range or 1 sampled layer."""
        was = self.fixed.training
        self.fixed.train(was and self.params.fixed_dropout)
        try:
            with torch.no_grad():
                out = self.fixed(**enc, output_hidden_states=True, return_dict=True)
                lo, hi = self.layer_range
                vecs = layer_vectors(out.hidden_states[lo:hi], enc["attention_mask"], self.params.layer_pooling)
        finally:
            self.fixed.train(was)
        if layer is not None:
            vecs = vecs[torch.arange(vecs.size(0), device=vecs.device), layer.to(vecs.device) - lo].unsqueeze(1)
        return vecs

    def distance_to_fixed(self) -> torch.Tensor:
        """Σ over BERT_T's parameters of ||θ_T − θ_F||² (fp32); the frozen embeddings contribute 0."""
        fixed = dict(self.fixed.named_parameters())
        with full_precision(self.device):
            return sum(((p.float() - fixed[n].float()) ** 2).sum() for n, p in self.encoder.named_parameters()
                       if p.requires_grad)

    def warmup_steps(self, total_steps: int) -> int:
        return math.ceil(total_steps * self.params.warmup)

    @property
    def grad_clip(self) -> str:
        return "global"   # fit's clip_grad_norm_(loss_model.parameters(), max_grad_norm): one norm over both groups

    def configure_optimizers(self, *, weight_decay: float = 0.0, fused: bool = False) -> torch.optim.Optimizer:
        """The code's ``SentenceTransformer.fit`` with ``training.py``'s ``optimizer_params``: transformers'
        ``AdamW`` (bias correction on, the decay after the step: :class:`~sentlab.nn.optim.AdamWLegacy`), betas
        (0.9, ``adam_beta2``), ε ``adam_eps``, over BERT_T (embeddings frozen) and the head in two groups:
        ``weight_decay`` on every tensor but biases and LayerNorm, 0 on those (the loop's ``train.weight_decay``
        is not used)."""
        p = self.params
        named = [(n, t) for n, t in self.named_parameters() if t.requires_grad]
        exempt = [t for n, t in named if any(k in n for k in ("bias", "LayerNorm.weight"))]
        plain = [t for n, t in named if not any(k in n for k in ("bias", "LayerNorm.weight"))]
        groups = [g for g in ({"params": plain, "weight_decay": p.weight_decay},
                              {"params": exempt, "weight_decay": 0.0}) if g["params"]]
        return AdamWLegacy(groups, lr=p.lr, betas=(0.9, p.adam_beta2), eps=p.adam_eps, correct_bias=True,
                           decay="after")
