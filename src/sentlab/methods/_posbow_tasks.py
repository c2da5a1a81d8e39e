"""The two tasks of :mod:`sentlab.methods.posbow_adv` (docs/methods.md): their losses, heads and diagnostics.

C_BOW/C_POS and D_BOW/D_POS are :class:`TaskHeads`; :func:`bow_nll` and :func:`pos_divergence` are their losses,
:func:`bow_r_precision`, :func:`tag_overlap` and :func:`top_tag_accuracy` the accuracies logged beside the constant
predictor's, each baseline scored by the same function as the heads.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..data.tags import POS_TAGS
from ._common import full_precision
from ._grad_reverse import grad_reverse

__all__ = ["TaskHeads", "HeadInputs", "bow_nll", "pos_divergence", "bow_r_precision", "tag_overlap", "top_tag_accuracy",
           "tag_accuracy", "accuracies"]

# --- diagnostics -------------------------------------------------------------------------------
def bow_r_precision(scores: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean over rows with a non-empty bag of: the fraction of the k top-scored labels in the bag (k = bag size).

    ``scores`` is ``(B, N)`` or ``(1, N)`` (one ranking for every row); ties go to the smaller index.
    NaN when no row has a bag.
    """
    k = target.sum(-1)
    order = scores.expand_as(target).argsort(dim=-1, descending=True, stable=True)
    hits = target.gather(1, order).cumsum(-1)
    at_k = hits.gather(1, (k.long() - 1).clamp_min(0).unsqueeze(1)).squeeze(1)
    valid = k > 0
    return (at_k[valid] / k[valid]).mean() if bool(valid.any()) else scores.new_tensor(float("nan"))


def top_tag_accuracy(scores: Optional[torch.Tensor], target: torch.Tensor) -> torch.Tensor:
    """Fraction of rows with tags whose top-scored tag is one of the row's most frequent tags (NaN: no such row).
    ``scores`` None: the majority baseline, the best one tag for every row."""
    top = target >= target.max(-1, keepdim=True).values
    valid = target.sum(-1) > 0
    if not bool(valid.any()):
        return target.new_tensor(float("nan"))
    if scores is None:
        return top[valid].float().mean(0).max()
    return top.gather(1, scores.expand_as(target).argmax(-1, keepdim=True)).squeeze(1)[valid].float().mean()


def tag_accuracy(scores: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean over rows with tags of p[argmax ``scores``]: the share of the sentence's words (those the encoder saw;
    no padding, no special tokens) whose tag is the predicted one, i.e. the accuracy of tagging each of its words
    with the head's top tag (``(B, T)`` or ``(1, T)``: the majority tag for every word; NaN: no row has tags)."""
    valid = target.sum(-1) > 0
    if not bool(valid.any()):
        return target.new_tensor(float("nan"))
    return target.float().gather(1, scores.expand_as(target).argmax(-1, keepdim=True)).squeeze(1)[valid].mean()


def tag_overlap(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean over rows with tags of Σ_t min(p_t, q_t), q = softmax(``logits``) (``(B, T)`` or ``(1, T)``): the share
    of the sentence's words whose tags the predicted distribution accounts for (1 − total variation; 1: q = p). The
    accuracy of a distribution target: a head that lowers the KL raises it, where the top tag stays the majority
    tag for most sentences (NaN: no row has tags)."""
    valid = target.sum(-1) > 0
    if not bool(valid.any()):
        return target.new_tensor(float("nan"))
    q = torch.softmax(logits.float(), dim=-1).expand_as(target)
    return torch.minimum(target.float(), q).sum(-1)[valid].mean()


def accuracies(who: str, bow_logits, pos_logits, bow_target, pos_target) -> dict[str, torch.Tensor]:
    """``acc_<who>_bow`` (R-precision), ``acc_<who>_pos`` (:func:`tag_overlap`), ``acc_<who>_pos_top``
    (:func:`top_tag_accuracy`) and ``acc_<who>_pos_word`` (:func:`tag_accuracy`, the one a KL-trained head's top tag
    maximises) of a pair of heads, or of the constant predictor's logits (``(1, ·)``)."""
    with torch.no_grad():
        return {f"acc_{who}_bow": bow_r_precision(bow_logits, bow_target),
                f"acc_{who}_pos": tag_overlap(pos_logits, pos_target),
                f"acc_{who}_pos_top": top_tag_accuracy(pos_logits, pos_target),
                f"acc_{who}_pos_word": tag_accuracy(pos_logits, pos_target)}


# --- the two tasks -------------------------------------------------------------------------------
def bow_nll(logits: torch.Tensor, target: torch.Tensor, reduction: str = "sum") -> torch.Tensor:
    """−log-likelihood of the bag, mean over rows; fp32, autocast off. ``sum``: one Bernoulli per label, BCE summed
    over the N labels (``mean``: ÷N); ``multinomial``: a softmax over the N labels against the bag as a distribution
    (each word of the bag 1/|bag|), KL(bag ‖ softmax) over the rows with a non-empty bag (John et al. 2019's BoW loss,
    the POS task's form: :func:`pos_divergence`)."""
    if reduction == "multinomial":
        bag = target.float()
        return pos_divergence(logits, bag / bag.sum(-1, keepdim=True).clamp_min(1.0), "kl")
    with full_precision(logits.device):
        loss = F.binary_cross_entropy_with_logits(logits.float(), target.float(), reduction="none").sum(-1).mean()
    return loss / logits.size(-1) if reduction == "mean" else loss


def pos_divergence(logits: torch.Tensor, target: torch.Tensor, kind: str = "kl",
                   words: Optional[torch.Tensor] = None) -> torch.Tensor:
    """KL(p ‖ q) (``soft_ce``: −Σ p log q) averaged over the rows that have tags; fp32, autocast off. ``words``
    (``(B,)``, each row's number of tagged words): each row's term times its words, the −log-likelihood of the
    sentence's tags −Σ_w log q(tag_w) (``soft_ce``; ``kl``: less its value at q = p), each word one observation."""
    with full_precision(logits.device):
        logq = F.log_softmax(logits.float(), dim=-1)
        per_row = -(target * logq).sum(-1)
        if kind == "kl":
            per_row = per_row + torch.special.xlogy(target, target).sum(-1)
        if words is not None:
            per_row = per_row * words.float()
        valid = target.sum(-1) > 0
        return per_row[valid].mean() if bool(valid.any()) else logq.sum() * 0.0


class HeadInputs(NamedTuple):
    """What the heads read: the two channels of the views under ``aux_views`` and the matching targets."""

    bow: torch.Tensor
    pos: torch.Tensor
    bow_target: torch.Tensor
    pos_target: torch.Tensor
    pos_words: Optional[torch.Tensor] = None  # each row's tagged words (``pos_reduction: words``), None: per word


def _head(d_in: int, d_out: int, hidden: int) -> nn.Module:
    if hidden <= 0:
        return nn.Linear(d_in, d_out)
    return nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, d_out))


class TaskHeads(nn.ModuleDict):
    """A BOW head and a POS head (C_BOW/C_POS, or D_BOW/D_POS) and their losses; logits in fp32 with autocast
    off (bf16 logits of ±10 have a resolution of 0.06)."""

    def __init__(self, bow_in: int, pos_in: int, n_bow: int, hidden: int, bow_reduction: str, pos_loss: str):
        super().__init__({"bow": _head(bow_in, n_bow, hidden), "pos": _head(pos_in, len(POS_TAGS), hidden)})
        self.bow_reduction, self.pos_loss = bow_reduction, pos_loss

    def losses(self, bow_in, pos_in, bow_target, pos_target, who: str, log: dict, pos_words=None):
        """(BOW loss of ``self["bow"](bow_in)``, POS loss of ``self["pos"](pos_in)``, weighted by ``pos_words``:
        :func:`pos_divergence`); logs their :func:`accuracies`."""
        bow_logits, pos_logits = self._logits("bow", bow_in), self._logits("pos", pos_in)
        log.update(accuracies(who, bow_logits, pos_logits, bow_target, pos_target))
        return (bow_nll(bow_logits, bow_target, self.bow_reduction),
                pos_divergence(pos_logits, pos_target, self.pos_loss, pos_words))

    def _logits(self, name: str, x: torch.Tensor) -> torch.Tensor:
        with full_precision(x.device):
            return self[name](x.float())

    @torch.no_grad()
    def zero_output_weights(self) -> None:
        """Both heads' output weights = 0: each head is its biases, a constant predictor, until it learns
        (``head_init: constant``)."""
        for head in self.values():
            (head if isinstance(head, nn.Linear) else head[-1]).weight.zero_()

    @torch.no_grad()
    def init_bias(self, name: str, logit: torch.Tensor) -> None:
        """The ``name`` head's output biases = ``logit`` (the prior init of Lin et al. 2017, RetinaNet)."""
        head = self[name]
        (head if isinstance(head, nn.Linear) else head[-1]).bias.copy_(logit)


# --- the adversary, one object per mode ----------------------------------------------------------
class NoAdversary(nn.Module):
    """``adversary: none``: no discriminators (the "no adversary" ablation)."""

    def forward(self, x: Optional[HeadInputs], log: dict) -> dict[str, torch.Tensor]:
        return {}

    def objective(self, loss: torch.Tensor, log: dict) -> torch.Tensor:
        return loss


class GradientReversal(nn.Module):
    """``adversary: grl``: D_BOW reads the POS channel and D_POS the BOW channel, each through a gradient
    reversal layer of scale λ, so one backward gives the discriminators +∂L_adv and the encoder −λ·∂L_adv.
    The returned terms sum to L_adv (the method's ``loss`` is ``L_con + L_cls + L_adv``, whose gradient is the
    algorithm's); :meth:`objective` is the encoder's ``L_con + L_cls − λ·L_adv``."""

    def __init__(self, discriminators: TaskHeads, lambd: float, bow_weight: float, pos_weight: float):
        super().__init__()
        self.discriminators = discriminators
        self.lambd, self.bow_weight, self.pos_weight = lambd, bow_weight, pos_weight

    def forward(self, x: HeadInputs, log: dict) -> dict[str, torch.Tensor]:
        l_dbow, l_dpos = self.losses(grad_reverse(x.bow, self.lambd), grad_reverse(x.pos, self.lambd),
                                     x.bow_target, x.pos_target, log, x.pos_words)
        terms = {"adv_bow": self.bow_weight * l_dbow, "adv_pos": self.pos_weight * l_dpos}
        log.update(loss_adv=sum(terms.values()).detach(), loss_adv_bow=l_dbow.detach(), loss_adv_pos=l_dpos.detach())
        return terms

    def losses(self, bow_ch, pos_ch, bow_target, pos_target, log: Optional[dict] = None, pos_words=None):
        """(L_D_BOW, L_D_POS): each discriminator tries the other channel's task."""
        return self.discriminators.losses(pos_ch, bow_ch, bow_target, pos_target, "d", {} if log is None else log,
                                          pos_words)

    def objective(self, loss: torch.Tensor, log: dict) -> torch.Tensor:
        return loss - (1 + self.lambd) * log["loss_adv"]
