"""ESimCSE (Wu et al., COLING 2022), docs/methods.md#esimcse."""

from __future__ import annotations

import random
from typing import Literal, Optional

import torch
from pydantic import Field
from torch import nn

from ..errors import SentlabError
from ..runtime.distributed import concat_all_gather, gather_with_grad
from . import register
from ._common import info_nce
from .base import Batch, Method, PaperAvg
from .moco import MoCo, MoCoParams, momentum_update


class ESimCSEParams(MoCoParams):
    """``methods.esimcse``: MoCo's momentum and queue keys with ESimCSE's meanings and defaults, plus the
    word repetition."""

    momentum: float = Field(0.995, ge=0.0, le=1.0,
                            description="λ in θm ← λθm + (1−λ)θe (ESimCSE Sec. 3.2; 0.995 for BERT-base)")
    queue_size: int = Field(
        160, ge=0, description="M: momentum-encoded sentences of earlier batches kept as extra negatives (the current "
                               "batch not included; 160 = 2.5 × batch 64, the released run; 0: no momentum contrast)")
    key_dropout: bool = Field(False, description="dropout on while the momentum encoder encodes the queued sentences "
                                                 "(false: the released code's model.eval() pass)")
    dup_rate: float = Field(0.32, ge=0.0, le=1.0, description="dup_rate of the sub-word repetition (BERT-base: 0.32)")
    dup_len_rule: Literal["paper", "code"] = Field(
        "paper", description="how many sub-words a sentence repeats: paper = uniform in [0, max(2, int(dup_rate·N))] "
                             "| code = the release's randrange(min(10, int(dup_rate·N)))")
    key_mlp: Literal["online", "momentum"] = Field(
        "online", description="head over the momentum encoder's [CLS]: the online MLP (the released code) | a momentum "
                              "copy of it")
    momentum_init: Literal["copy", "random"] = Field(
        "copy", description="the momentum encoder's start: copy = the pretrained encoder (MoCo's θm = θe) | random = "
                            "BERT's init, N(0, initializer_range), then one momentum update with the pretrained "
                            "weights before the first keys (the released run: its momentum_model is not in the "
                            "checkpoint, its log lists it as newly initialised; the paper profile)")

    momentum_update: Literal["optimizer_step", "forward"] = Field(
        "optimizer_step", description="when θm moves: after each optimiser step (MoCo) | at the start of each "
                                      "training forward, before the keys (the release's cl_forward: with "
                                      "train.grad_accum k, k updates per optimiser step; the paper profile)")
    queue_reset: Literal["never", "epoch"] = Field(
        "never", description="empty the queue: never (MoCo) | at the first micro-batch of each pass over the corpus "
                             "(the release's trainer sets pre_z1 = None at each epoch; the paper profile)")

    def slice_caps(self, *, steps: int, batch_size: int, sentences: int) -> dict:
        """The queue fits the slice: at most the keys of all but its last step, so it fills and turns over."""
        caps = super().slice_caps(steps=steps, batch_size=batch_size, sentences=sentences)
        if batch_size > 0:
            caps["queue_size"] = min(self.queue_size, batch_size * max(1, steps - 1))
        return caps


@register("esimcse")
class ESimCSE(MoCo):
    """ESimCSE: SimCSE whose positive repeats some sub-words, plus a queue of momentum-encoded negatives.

    Wu, Gao, Zang, Han, Wang & Hu, "ESimCSE: Enhanced Sample Building Method for
    Contrastive Learning of Unsupervised Sentence Embedding", COLING 2022
    (arXiv:2109.04380), Sec. 3; released code caskcsg/sentemb (``ESimCSE/``);
    docs/methods.md#esimcse.

    Per batch of B sentences x:

    1. ``x⁺ = repeat(x)`` (Sec. 3.1): after the sub-word tokenizer (N sub-words,
       [CLS]/[SEP] included, cut at max_length as the code does), draw
       ``dup_len`` uniformly in ``[0, max(2, int(dup_rate · N))]`` and repeat
       that many distinct sub-words chosen uniformly (never [CLS]/[SEP]), each
       right after itself; the positive's length differs from the sentence's,
       so length no longer gives the pair away;
    2. ``z = MLP([CLS])`` of x and x⁺ from one pass of the online encoder
       (dropout on, two masks), as SimCSE;
    3. candidates of query z_i = every z⁺_j of the batch (gathered across
       ranks) followed by the queue's M momentum-encoded sentences of earlier
       batches; the positive is z⁺_i; InfoNCE over cos/τ;
    4. the momentum encoder encodes x (not x⁺) and those keys enter the FIFO
       queue (:class:`~sentlab.methods.moco.MoCo`'s, holding ``queue_size`` keys);
    5. after each optimiser step θm ← λθm + (1−λ)θe, λ = 0.995 (Sec. 3.2).

    Settings: dup_rate 0.32, λ 0.995, M = 2.5 × batch = 160 (the paper's
    BERT-base values; 160 is also the released run's ``neg_size``); τ 0.05,
    batch 64, lr 3e-5, max length 32 (as SimCSE); dev every 125 steps (the
    released log). Reported (BERT-base, the release's README): avg 78.27.
    Inference: the encoder's [CLS], no MLP.

    Where the paper is silent, as the released code does, each a param:

    * ``key_dropout: false`` — the keys come from a dropout-off pass (the code
      puts the model in eval mode for it);
    * ``key_mlp: online`` — the keys pass through the online MLP (the code has
      no momentum MLP); ``momentum`` adds a momentum copy;
    * ``queue_size: 160`` counts only the queued keys (the run
      ``…-bpe-0.3-160-bs64``); the queue starts empty;
    * ``dup_len_rule``: the paper's formula (default) or the code's
      ``randrange(min(10, int(dup_rate · N)))`` (at most 9, never the upper end);
      N counts the special tokens, as the code's ``input_len`` does; a draw is
      capped by the sentence's sub-words and the encoder's position table;
    * the repeated positive may exceed max_length (the code repeats after the cut);
    * ``momentum_init``: ``copy`` (default, MoCo's θm = θe) or ``random``, the
      released run (paper profile): its ``BertForCL`` builds ``momentum_model``
      as a fresh ``BertModel(config)``, which is not in the checkpoint, so
      ``from_pretrained`` leaves it at BERT's random init (its log,
      ``ESimCSE/logs/bert-base-uncased.log``, lists every ``momentum_model.*``
      as "newly initialized"); its first forward then updates it once with the
      pretrained weights before the first keys: here that update is done at
      construction (:func:`bert_init_`, then θm ← λθm + (1−λ)θe), or by the
      first forward under ``momentum_update: forward``;
    * ``momentum_update``: after the optimiser step (``optimizer_step``,
      default) or at the start of each training forward, before the keys
      (``forward``, the code's ``cl_forward``; the paper profile): the same
      keys at ``grad_accum`` 1, k updates per step at ``grad_accum`` k;
    * ``queue_reset``: the queue lives across epochs (``never``, default) or
      empties at the first micro-batch of each pass over the corpus
      (``epoch``, the code's trainer; the paper profile: one epoch, so equal);
    * the queue keeps the newest ``queue_size`` keys, the set of the code's
      ``cat((pre_z1, eval_z))[-neg_size:]`` (:class:`~sentlab.methods.moco.MoCo`'s
      FIFO; a queue smaller than the batch: the code keeps the whole first batch
      for one step, here ``queue_size`` from the start).

    Randomness: the repetition is drawn in :meth:`prepare` from
    ``batch.rng("repetition")``; the queue and the momentum encoder are in
    ``state_dict()``.
    """

    paper = ("Wu et al.: ESimCSE: Enhanced Sample Building Method for Contrastive Learning of Unsupervised Sentence "
             "Embedding (COLING 2022)")
    citation = """@inproceedings{wu2022esimcse,
  title = {{ESimCSE}: Enhanced Sample Building Method for Contrastive Learning of Unsupervised Sentence Embedding},
  author = {Wu, Xing and Gao, Chaochen and Zang, Liangjun and Han, Jizhong and Wang, Zhongyuan and Hu, Songlin},
  booktitle = {Proceedings of the 29th International Conference on Computational Linguistics},
  year = {2022}
}"""
    paper_avg = PaperAvg(78.27, "ESimCSE (Wu et al., COLING 2022), BERT-base")
    summary = ("ESimCSE: sub-word repetition positives (dup_rate 0.32), momentum-encoder queue of 160 negatives "
               "(λ=0.995); [CLS] at test")
    Params = ESimCSEParams
    inference_pooling = "cls"

    def __init__(self, encoder, tokenizer, params: ESimCSEParams, seed: int = 0):
        super().__init__(encoder, tokenizer, params, seed)
        if params.key_mlp == "online":
            del self.key_mlp  # the keys pass through the online MLP: no momentum copy to carry
        if params.momentum_init == "random":
            std = getattr(encoder.config, "initializer_range", 0.02)
            bert_init_(self.key_encoder, std, torch.Generator().manual_seed(seed))
            if params.momentum_update == "optimizer_step":   # the release's update before its first keys
                momentum_update(self.encoder, self.key_encoder, params.momentum)
            self.module_init["key_encoder"] = (f"random (BERT's init at std {std} from seed {seed}) + one momentum "
                                               "update before the first keys")
        if params.queue_reset == "epoch":   # the pass the queued keys come from (resume: in state_dict)
            self.register_buffer("queue_epoch", torch.zeros((), dtype=torch.long))
            self._epoch: Optional[int] = 0
        self._max_positions = _position_limit(encoder.config, tokenizer)

    def _queue_capacity(self, params: ESimCSEParams) -> int:
        return params.queue_size

    def _load_from_state_dict(self, *args, **kwargs):
        super()._load_from_state_dict(*args, **kwargs)
        self._epoch = None

    def _start_pass(self, epoch: int) -> None:
        """``queue_reset: epoch``: the first micro-batch of a new pass over the corpus empties the queue (the
        release's ``self.pre_z1 = None`` at each epoch, esimcse/trainers.py:452)."""
        if self._epoch is None:
            self._epoch = int(self.queue_epoch)
        if epoch != self._epoch:
            self._filled, self._blocks, self._epoch = 0, [], epoch
            self.queue_len.fill_(0)
            self.queue_epoch.fill_(epoch)

    def after_optimizer_step(self) -> None:
        if self.params.momentum_update == "optimizer_step":
            super().after_optimizer_step()

    def _momentum_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        pairs = [(self.encoder, self.key_encoder)]
        return pairs + ([(self.mlp, self.key_mlp)] if self.params.key_mlp == "momentum" else [])

    def _key_head(self) -> nn.Module:
        return self.key_mlp if self.params.key_mlp == "momentum" else self.mlp

    # --- word repetition (Sec. 3.1) ----------------------------------------------------------------
    def _dup_len(self, n_tokens: int, cap: int, rng: random.Random) -> int:
        """How many sub-words a sequence of ``n_tokens`` (specials included) repeats, at most ``cap``."""
        if cap <= 0:
            return 0
        if self.params.dup_len_rule == "paper":
            return rng.randint(0, min(max(2, int(self.params.dup_rate * n_tokens)), cap))
        hi = min(10, int(self.params.dup_rate * n_tokens), cap)
        return rng.randrange(hi) if hi > 0 else 0

    def _dup_positions(self, special: list[int], rng: random.Random) -> list[int]:
        """The positions to repeat: ``dup_len`` distinct non-special positions, drawn uniformly, sorted."""
        words = [i for i, s in enumerate(special) if not s]
        cap = min(len(words), self._max_positions - len(special))
        return sorted(rng.sample(words, self._dup_len(len(special), cap, rng)))

    @staticmethod
    def _repeat(row: dict[str, list[int]], positions: list[int]) -> dict[str, list[int]]:
        """``row`` (token ids and their aligned columns) with the entry at each of ``positions`` repeated."""
        dup = set(positions)
        return {k: [x for i, x in enumerate(v) for _ in range(2 if i in dup else 1)] for k, v in row.items()}

    def prepare(self, batch: Batch) -> Batch:
        """Tokenise x, build x⁺ by repetition, pad both to one length: ``views`` = [x_1..x_B, x⁺_1..x⁺_B]."""
        enc = self.tokenizer(list(batch.sentences), truncation=True, max_length=self.params.max_length,
                             return_special_tokens_mask=True)
        special = enc.pop("special_tokens_mask")
        rows = [{k: enc[k][i] for k in enc} for i in range(len(batch))]
        rng = batch.rng("repetition")
        repeated = [self._repeat(r, self._dup_positions(s, rng)) for r, s in zip(rows, special)]
        batch.features = {"views": dict(self.tokenizer.pad(rows + repeated, padding=True, return_tensors="pt"))}
        return batch

    # --- the algorithm ----------------------------------------------------------------------------
    def _views(self, views: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(z, z⁺): MLP([CLS]) of the sentences and their repetitions, one online pass, dropout on."""
        z = self._query(views)
        n = z.size(0) // 2
        return z[:n], z[n:]

    @staticmethod
    def _sentences(views: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The first half of ``views``: the sentences as they are (the momentum encoder's input)."""
        n = views["input_ids"].size(0) // 2
        return {k: v[:n] for k, v in views.items()}

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        views = self.prepared(batch)["views"]
        if self.training and self.params.queue_reset == "epoch":
            self._start_pass(batch.epoch)
        if self.training and self.params.momentum_update == "forward":
            self._momentum_update_key_encoder()                   # the release's cl_forward, before its keys
        z, z_pos = self._views(views)
        keys = concat_all_gather(self._key(self._sentences(views)).float())
        candidates = self._candidates(gather_with_grad(z_pos))      # in-batch positives, then the queue
        loss = info_nce(gather_with_grad(z), candidates, self.params.temperature)
        self._dequeue_and_enqueue(keys)
        return {"loss": loss, "candidates": float(candidates.size(0))}

    def export_info(self) -> dict:
        return {**Method.export_info(self), "dup_rate": self.params.dup_rate,
                "dup_len_rule": self.params.dup_len_rule, "queue_size": self.params.queue_size,
                "momentum": self.params.momentum, "momentum_init": self.params.momentum_init,
                "momentum_update": self.params.momentum_update, "queue_reset": self.params.queue_reset}


@torch.no_grad()
def bert_init_(module: nn.Module, std: float, generator: torch.Generator) -> nn.Module:
    """``module``'s parameters drawn afresh as BERT's ``_init_weights`` draws them (transformers 4.2.1, the
    ESimCSE release's): every Linear and Embedding weight N(0, ``std``) (the padding row too), Linear biases 0,
    LayerNorm weight 1 and bias 0; from ``generator``, in module order. A parameter of another kind of module
    is an error (no rule to draw it by)."""
    done = set()
    for name, m in module.named_modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            m.weight.normal_(0.0, std, generator=generator)
            if getattr(m, "bias", None) is not None:
                m.bias.zero_()
        elif isinstance(m, nn.LayerNorm):
            m.weight.fill_(1.0)
            if m.bias is not None:
                m.bias.zero_()
        else:
            continue
        done.update(id(p) for p in m.parameters(recurse=False))
    left = [n for n, p in module.named_parameters() if id(p) not in done]
    if left:
        raise SentlabError(
            f"methods.esimcse.momentum_init = random: the backbone has parameters outside Linear, Embedding and "
            f"LayerNorm modules ({', '.join(left[:3])}), which BERT's init does not cover; set "
            f"methods.esimcse.momentum_init: copy for this backbone.")
    return module


def _position_limit(config, tokenizer) -> int:
    """The longest sequence the encoder takes: its position table (RoBERTa's offset by padding_idx + 1) and the
    tokenizer's own maximum, whichever is smaller."""
    limit = getattr(config, "max_position_embeddings", None) or 10**9
    if getattr(config, "model_type", "") in ("roberta", "xlm-roberta", "camembert"):
        limit -= (getattr(config, "pad_token_id", 1) or 0) + 1
    tok_max = getattr(tokenizer, "model_max_length", None)
    return min(limit, tok_max) if isinstance(tok_max, int) and tok_max < 10**6 else limit
