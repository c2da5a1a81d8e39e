"""PT-BERT: "A Sentence is Worth 128 Pseudo Tokens" (Tan et al., ACL 2022), docs/methods.md#pt-bert."""

from __future__ import annotations

import contextlib
from typing import Literal, Optional

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from ..errors import SentlabError
from . import register
from .base import Method, PaperAvg
from .moco import MoCo, MoCoParams, frozen_copy


class PTBertParams(MoCoParams):
    pseudo_len: int = Field(128, gt=0, description="m: pseudo tokens (ids 0..m-1); ablation 64/90/128/256/360")
    attend_to: Literal["cls", "tokens"] = Field(
        "cls", description="Y = the [CLS] vector (authors' code) | all last-layer token states, padding masked (eqs)")
    num_heads: Optional[int] = Field(
        None, gt=0, description="heads of the pseudo-token attention (None: the encoder's, as the code's "
                                "BertSelfAttention; 1: Eq. 2 with d_k = d)")
    attn_dropout: Optional[float] = Field(
        None, ge=0.0, lt=1.0,
        description="dropout on attention probabilities (None: the encoder's attention_probs_dropout_prob)")
    key_second_attention: Literal["momentum", "online"] = Field(
        "momentum", description="attention of the key branch's second mapping: its momentum copy (the paper) | "
                                "the online one (released code)")
    key_init: Literal["copy", "random"] = Field(
        "copy", description="the momentum key encoder's start: a copy of the pretrained encoder (MoCo; the paper's "
                            "'inherits parameters') | BERT's random init, N(0, initializer_range) weights, zero "
                            "biases, LayerNorm 1/0 (the released code: its momentum_encoder is not in the checkpoint)")


@torch.no_grad()
def bert_random_init(module: nn.Module, std: float, seed: int) -> None:
    """BERT's ``_init_weights`` (transformers 4.2.1, the released code's) over every submodule: Linear and Embedding
    weights N(0, ``std``) (no zeroed padding row), Linear biases 0, LayerNorm weight 1 and bias 0; drawn from
    ``seed`` without touching the caller's RNG stream."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for m in module.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                m.weight.normal_(0.0, std)
            if isinstance(m, nn.Linear) and m.bias is not None:
                m.bias.zero_()
            if isinstance(m, nn.LayerNorm):
                m.weight.fill_(1.0)
                m.bias.zero_()


class PseudoTokenAttention(nn.Module):
    """Scaled dot-product attention with W_Q, W_K, W_V and no output projection (HF ``BertSelfAttention``).

    ``forward(x_q, x_kv, kv_mask)`` = softmax((x_q W_Q)(x_kv W_K)^T / sqrt(d_k)) (x_kv W_V), per head.
    """

    def __init__(self, hidden: int, num_heads: int, dropout: float):
        super().__init__()
        if hidden % num_heads:
            raise ValueError(f"hidden size {hidden} is not a multiple of num_heads {num_heads}")
        self.num_heads = num_heads
        self.dropout = dropout
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        return x.view(b, n, self.num_heads, d // self.num_heads).transpose(1, 2)

    def forward(self, x_q: torch.Tensor, x_kv: torch.Tensor, kv_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        q, k, v = self._heads(self.query(x_q)), self._heads(self.key(x_kv)), self._heads(self.value(x_kv))
        mask = None if kv_mask is None else kv_mask.bool()[:, None, None, :]
        # one key (attend_to: cls): the plain softmax path, whose backward through softmax ≡ 1 is exactly 0
        # (fused kernels leave ~1e-10 round-off that Adam would turn into random steps of P)
        kernel = sdpa_kernel(SDPBackend.MATH) if k.size(2) == 1 else contextlib.nullcontext()
        with kernel:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                 dropout_p=self.dropout if self.training else 0.0)
        b, h, n, dh = out.shape
        return out.transpose(1, 2).reshape(b, n, h * dh)


@register("ptbert")
class PTBert(MoCo):
    """PT-BERT: MoCo-BERT whose representations pass through a pseudo-token attention in training.

    Tan et al., "A Sentence is Worth 128 Pseudo Tokens: A
    Semantic-Aware Contrastive Learning Framework for Sentence Embeddings",
    Findings of ACL 2022, Sec. 3.2 (Eqs. 1–5), Fig. 2; docs/methods.md#pt-bert.

    * ``P`` — an ``nn.Embedding(m, d)`` table (torch's default N(0, 1) init,
      independent of the BERT vocabulary); the pseudo sentence is always the
      ids ``0..m−1``.
    * One attention module (W_Q, W_K, W_V) used for both mappings:
      ``Z′ = Attn(P W_Q, Y W_K, Y W_V)`` (Eq. 1) maps the sentence onto the
      pseudo sentence, ``h = Attn(Y W_Q, Z′ W_K, Z′ W_V)`` (Eq. 3) maps it back;
      the [CLS] row of ``h``, then the MLP, is the training representation.
      Only the [CLS] query row of Eq. 3 is computed: rows are independent.
    * The key branch has momentum copies of the encoder, ``P``, the attention
      and the MLP (θk ← λθk + (1−λ)θq, λ = 0.885, Eq. 5); keys enter the FIFO
      queue of :class:`~sentlab.methods.moco.MoCo`; 256 candidates (the paper's); InfoNCE (Eq. 4).
    * Inference: the bare encoder's [CLS] (no pseudo tokens, no MLP).

    Paper vs the authors' released code (Namco0816/PT-BERT), each a param:

    * ``attend_to``: the paper says Y is "the sentence embedding", Fig. 2 "the
      pooler output"; the code attends to the single [CLS] vector → ``cls``
      (default; every row of Z′ is then the same value vector).
      ``tokens`` = all last-layer token states with padding masked, as the
      equations read. Finding: under ``cls`` the first attention has one key,
      its softmax is 1 whatever the scores, so Z′ = V(y) does not depend on P
      and **P receives exactly zero gradient** (pinned by a test); the m
      (``pseudo_len``) and queue ablations are therefore also run with
      ``tokens`` (``ptbert_tokens_m*``, ``ptbert_tokens_q*``).
    * ``num_heads``: Eq. 2 is single-head with d_k = d (``num_heads: 1``); the
      code uses HF ``BertSelfAttention`` (the encoder's heads, no output
      projection) → default None = the encoder's heads.
    * ``key_second_attention``: the paper gives the key branch its own
      momentum attention (``momentum``, default); the code reuses the online
      attention for the key's second mapping (``online``, the paper profile; no
      gradient flows through keys either way).
    * ``attn_dropout``: the code's BertSelfAttention applies attention dropout
      (0.1); default None = the encoder's ``attention_probs_dropout_prob``.
    * queue: the code keeps a list of whole batches that pops only when longer
      than its ``queue_size = 4``, so it settles at 5 batches: 320 candidates
      with the current batch, not the paper's 256. Here a FIFO of keys with the
      same content order (current batch first) of ``queue_size`` candidates:
      256 as the paper (default), the released run = ``queue_size: 320`` (the
      paper profile). Table 5b's rows are the code's ``queue_size`` q = 3/4/5
      (the text: "q = 4 performs best", its Q-256 main row), i.e. 256/320/384
      candidates: the paper profile's ``ptbert_q192`` / ``ptbert_q320`` run
      those (256 / 384), the quick profile's the labels' 192 / 320.
    * ``key_init``: MoCo starts the momentum encoder as a copy of the encoder
      (``copy``, default); the released ``BertForPolyMoCo`` deep-copies its
      BERT before ``init_weights`` and ``from_pretrained`` fills ``bert.*``
      only, so its momentum encoder starts from BERT's random init
      (``random``, the paper profile; λ = 0.885 leaves 0.885^40 < 1 % of it
      after 40 steps).
    * equivalence with the released code: benchmarks/released/ptbert.py (loss
      and every gradient at ``attend_to: cls``, ``num_heads: null``,
      ``key_second_attention: online``; tests/test_released_golden.py).
    * precision: the code used fp16; here fp32 on CPU and bf16 autocast on GPU,
      the similarity logits and the loss in fp32.

    ``sentlab.json`` records ``pseudo_len``, ``attend_to``, ``num_heads`` (the
    heads used) and ``key_second_attention``.
    """

    run_name_params = ("pseudo_len", "queue_size", "attend_to")
    paper_avg = PaperAvg(77.74, "PT-BERT Table 3 (PT-BERTbase)")
    summary = "PT-BERT: MoCo-BERT + 128 pseudo tokens through one shared attention (training only); [CLS] at test"
    Params = PTBertParams
    pad_buckets_ok = True   # [CLS] and pseudo-token attention with padding masked (tests/test_compiled_step.py)
    augmentation = "none"

    def __init__(self, encoder, tokenizer, params: PTBertParams, seed: int = 0):
        super().__init__(encoder, tokenizer, params, seed)
        cfg = encoder.config
        heads = params.num_heads or cfg.num_attention_heads
        if cfg.hidden_size % heads:
            raise SentlabError(f"methods.{self.id}.num_heads = {heads} does not divide the encoder's hidden size "
                               f"{cfg.hidden_size}; use 1, null (the encoder's {cfg.num_attention_heads}) "
                               f"or a divisor.")
        dropout = (params.attn_dropout if params.attn_dropout is not None
                   else getattr(cfg, "attention_probs_dropout_prob", 0.1))
        self.pseudo = nn.Embedding(params.pseudo_len, cfg.hidden_size)
        self.attn = PseudoTokenAttention(cfg.hidden_size, heads, dropout)
        if params.key_init == "random":
            bert_random_init(self.key_encoder, getattr(cfg, "initializer_range", 0.02), seed)
        self.key_pseudo = frozen_copy(self.pseudo)
        self.key_attn = frozen_copy(self.attn)
        self.register_buffer("pseudo_ids", torch.arange(params.pseudo_len), persistent=False)

    def _momentum_pairs(self):
        return super()._momentum_pairs() + [(self.pseudo, self.key_pseudo), (self.attn, self.key_attn)]

    def _pseudo_token_map(self, hidden: torch.Tensor, attention_mask: torch.Tensor, pseudo: nn.Embedding,
                          attn_first: nn.Module, attn_second: nn.Module) -> torch.Tensor:
        """The [CLS] row of h = Attn(Y W_Q, Z′ W_K, Z′ W_V), Z′ = Attn(P W_Q, Y W_K, Y W_V)."""
        b = hidden.size(0)
        if self.params.attend_to == "cls":
            y, mask = hidden[:, :1], None
        else:
            y, mask = hidden, attention_mask
        p = pseudo(self.pseudo_ids).unsqueeze(0).expand(b, -1, -1).to(hidden.dtype)
        z = attn_first(p, y, mask)                  # Eq. 1: (B, m, d)
        h = attn_second(hidden[:, :1], z)           # Eq. 3, [CLS] query row only: (B, 1, d)
        return h[:, 0]

    def _query(self, enc) -> torch.Tensor:
        hidden = self.encoder(**enc, return_dict=True).last_hidden_state
        return self.mlp(self._pseudo_token_map(hidden, enc["attention_mask"], self.pseudo, self.attn, self.attn))

    @torch.no_grad()
    def _key(self, enc) -> torch.Tensor:
        was_training = self.key_encoder.training
        self.key_encoder.train(was_training and self.params.key_dropout)
        try:
            hidden = self.key_encoder(**enc, return_dict=True).last_hidden_state
            second = self.key_attn if self.params.key_second_attention == "momentum" else self.attn
            return self.key_mlp(self._pseudo_token_map(hidden, enc["attention_mask"], self.key_pseudo, self.key_attn,
                                                       second))
        finally:
            self.key_encoder.train(was_training)

    def export_info(self) -> dict:
        return {**Method.export_info(self), "pseudo_len": self.params.pseudo_len,
                "attend_to": self.params.attend_to, "num_heads": self.attn.num_heads,
                "key_second_attention": self.params.key_second_attention}
