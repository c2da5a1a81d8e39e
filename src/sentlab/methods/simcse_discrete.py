"""SimCSE with a discrete second view: crop / word deletion (Gao et al. 2021, Table 1), the rows "SimCSE + Crop" and
"SimCSE + Deletion" of PT-BERT Table 4; docs/methods.md#simcse-with-crop-or-word-deletion.

Registered ids: ``simcse_crop``, ``simcse_deletion``. One class, :class:`SimCSEDiscrete`, with the augmentation as
a class attribute (as :mod:`sentlab.methods.moco`'s variants); the augmentations are :mod:`sentlab.augment`'s.
"""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar, Literal, Optional

import torch
from pydantic import Field

from ..augment import make_augmenter
from . import register
from ._common import augmentation_info, paired_views
from .base import Batch
from .simcse import SimCSE, SimCSEParams


class DiscreteViewParams(SimCSEParams):
    """``methods.simcse_crop`` / ``methods.simcse_deletion``: SimCSE's params and the augmentation's."""

    rate: float = Field(0.1, ge=0.0, lt=1.0, description="crop: the share of the words cut away (SimCSE Table 1's "
                                                         "'crop 10%': keep 90% of the length); deletion: the share "
                                                         "of the words deleted ('word deletion 10%')")
    augment_views: Literal["second", "both"] = Field(
        "second", description="which view is augmented: the second (x, g(x): SimCSE Sec. 3's h = f(g(x), z) for "
                              "the positive) or both, each its own draw (the paper does not say)")


class DeletionParams(DiscreteViewParams):
    words: Optional[int] = Field(None, ge=1, description="delete exactly this many words instead of `rate` of them "
                                                         "(1: SimCSE Table 1's 'delete one word', also 75.9 on STS-B "
                                                         "dev); None: the rate")


class SimCSEDiscrete(SimCSE):
    """SimCSE whose positive pair is a sentence and a discrete augmentation of it (Gao et al., EMNLP 2021, Sec. 3 /
    Table 1: "crop k%: keep 100−k% of the length; word deletion k%: delete k% words").

    Per batch of N sentences ``x_i``:

    1. ``g(x_i)`` (:mod:`sentlab.augment`, whitespace words, drawn from :meth:`Batch.rng` in :meth:`prepare`);
    2. ``[x_1..x_N, g(x_1)..g(x_N)]`` tokenised together and encoded in one forward pass, dropout on (so each
       view keeps SimCSE's dropout noise as well, as the paper's study does);
    3. ``z = MLP([CLS])``; InfoNCE over cos/τ with ``(x_i, g(x_i))`` the positive pair and the other N−1
       second views the negatives (SimCSE's loss, unchanged).

    Inference: [CLS] without the MLP, as SimCSE.
    """

    augmentation: ClassVar[str] = "none"
    Params = DiscreteViewParams

    def __init__(self, encoder, tokenizer, params: DiscreteViewParams, seed: int = 0):
        super().__init__(encoder, tokenizer, params, seed)
        self._augment_fn = make_augmenter(self.augmentation, params.rate, getattr(params, "words", None))

    def augment(self, batch: Batch) -> tuple[list[str], list[str]]:
        """The two views' texts: ``x`` (or ``g(x)`` with ``augment_views: both``) and ``g(x)``."""
        rng = batch.rng(self.augmentation)
        second = [self._augment_fn(s, rng) for s in batch.sentences]
        if self.params.augment_views == "second":
            return list(batch.sentences), second
        return [self._augment_fn(s, rng) for s in batch.sentences], second

    def prepare(self, batch: Batch) -> Batch:
        first, second = self.augment(batch)
        return replace(batch, features={"pair": self.encode_text(first + second)})

    def views(self, features: dict) -> tuple[torch.Tensor, torch.Tensor]:
        return paired_views(self._embed, features["pair"])

    def export_info(self) -> dict:
        return {**super().export_info(), **augmentation_info(self.augmentation, self.params)}


@register("simcse_crop")
class SimCSECrop(SimCSEDiscrete):
    """SimCSE, second view = a random contiguous 90 % of the sentence's words (:func:`sentlab.augment.crop`)."""

    run_name_params = ("rate", "augment_views")
    summary = "SimCSE + crop: the positive is a contiguous (1 − rate) = 90% of the words (SimCSE Table 1)"
    augmentation = "crop"


@register("simcse_deletion")
class SimCSEDeletion(SimCSEDiscrete):
    """SimCSE, second view = the sentence with ``rate`` (10 %) of its words deleted, or exactly ``words``
    (:func:`sentlab.augment.delete`)."""

    run_name_params = ("rate", "words", "augment_views")
    summary = "SimCSE + word deletion: the positive drops `rate` (10%) of the words, or `words` of them"
    Params = DeletionParams
    augmentation = "deletion"
