"""The poolings, each declared once: its name, what it computes, what it needs, how it is exported.

sentence-transformers' ``models/Pooling.py`` shape: one table (:data:`POOLINGS`) that everything else derives
from — the encoder's :func:`sentlab.nn.encoder.pool`, the sentence-transformers modules of an exported folder
(:mod:`sentlab.export.modules`, :mod:`sentlab.export.st`), the params that name a pooling
(``evaluate.pooling``, ``evaluate.whitening.pooling``, ``evaluate.baselines``: :mod:`sentlab.config.sections`),
the backbone's baseline stages (``evaluate_baseline@<pooling>``), ``sentlab evaluate --pooling`` and the model
card. A new pooling is one :class:`Pooling` row here (``tests/test_evaluation_vocabulary.py`` checks that it shows up
everywhere). docs/evaluation.md#pooling explains each.

A pooling is one of two shapes:

* ``layers``: the mean over these hidden states (indices into ``output_hidden_states``: 0 = the embedding output,
  -1 = the last layer) of each one's attention-masked token average (``mean``: the last layer; SimCSE's
  ``avg_first_last`` is ``first_last``, the embedding output and the last layer; PaSeR App. B's "Top2 avg" is
  ``top2_mean``);
* ``token``: one token's last-layer vector: ``first`` ([CLS], SimCSE's ``cls_before_pooler``: no MLP) or
  ``mask`` (the [MASK] of a PromptBERT template, :data:`PROMPT_TEMPLATE` unless the model records its own).

In the core layer, in :mod:`sentlab.config` beside the tasks (:mod:`sentlab.config.tasks`): the params validate the
names (``sections``), and the encoder, the export and the methods apply them. It imports no torch at import time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional, Sequence

PROMPT_TEMPLATE = 'This sentence : "{sentence}" means {mask} .'
"""PromptBERT's template, the ``mask`` pooling's input when a model records none."""


@dataclass(frozen=True)
class Pooling:
    """One pooling.

    name: its key (params, ``sentlab.json``'s ``pooling``, ``--pooling``, ``base-<name>``).
    label: what it computes, one phrase (the model card, ``sentlab methods``).
    layers: ``layers`` shape: the hidden states whose masked token averages are averaged (see the module doc).
    token: ``token`` shape: ``first`` or ``mask`` (then ``layers`` is empty).
    st_mode: sentence-transformers' own ``Pooling`` mode that computes it (None: sentlab's module,
        :mod:`sentlab.export.modules`).
    baseline: the description of the backbone's baseline stage ``evaluate_baseline@<name>`` (None: no such
        stage can be listed in ``evaluate.baselines``).
    """

    name: str
    label: str
    layers: tuple[int, ...] = ()
    token: Optional[str] = None
    st_mode: Optional[str] = None
    baseline: Optional[str] = None

    def __post_init__(self):
        if (self.token is None) == (not self.layers) or self.token not in (None, "first", "mask"):
            raise ValueError(f"pooling {self.name!r}: give either layers or token ('first' or 'mask')")

    @property
    def needs_hidden_states(self) -> bool:
        """Whether the model must return every layer's states (``output_hidden_states=True``)."""
        return any(i != -1 for i in self.layers)

    @property
    def needs_template(self) -> bool:
        """Whether the input goes through a prompt template (the [MASK] it pools)."""
        return self.token == "mask"

    def __call__(self, last, attention_mask, hidden_states=None, input_ids=None, mask_token_id: Optional[int] = None,
                 texts: Optional[Sequence[str]] = None):
        """The pooled ``(batch, dim)`` tensor from the last layer's token states ``last`` (and ``hidden_states``
        when :attr:`needs_hidden_states`; ``input_ids`` and ``mask_token_id`` for ``mask``; ``texts`` only name a
        truncated input in :func:`mask_positions`' message)."""
        if self.token == "first":
            return last[:, 0]
        if self.token == "mask":
            if input_ids is None or mask_token_id is None:
                raise ValueError("mask pooling needs input_ids and the tokenizer's mask token id")
            import torch

            pos = mask_positions(input_ids, attention_mask, mask_token_id, texts)
            return last[torch.arange(last.size(0), device=last.device), pos]
        if self.needs_hidden_states and hidden_states is None:
            raise ValueError(f"{self.name} pooling needs the hidden states of every layer (output_hidden_states)")
        return layer_mean([last if i == -1 else hidden_states[i] for i in self.layers], attention_mask)


POOLINGS: dict[str, Pooling] = {p.name: p for p in (
    Pooling("cls", "the last layer's [CLS] vector", token="first", st_mode="cls",
            baseline="the backbone's last-layer [CLS] (no training)"),
    Pooling("mean", "the mean of the last layer's token vectors", layers=(-1,), st_mode="mean",
            baseline="the backbone's mean of the last layer's token states (no training)"),
    Pooling("first_last", "the mean of the embedding output's and the last layer's token averages", layers=(0, -1),
            baseline="the backbone's mean of the first and last layers' token states (no training)"),
    Pooling("top2_mean", "the mean of the last two layers' token averages", layers=(-1, -2)),
    Pooling("mask", "the last layer's vector at the template's [MASK] token", token="mask"),
)}
"""Every pooling, by name, in the order the docs and ``--help`` list them."""

BASELINE_POOLINGS: tuple[str, ...] = tuple(n for n, p in POOLINGS.items() if p.baseline)
"""The poolings the backbone is evaluated with as baselines (``evaluate.baselines``)."""
UNTEMPLATED_POOLINGS: tuple[str, ...] = tuple(n for n, p in POOLINGS.items() if not p.needs_template)
"""The poolings of the text itself (a method that pools its training views chooses among these)."""
NEEDS_HIDDEN_STATES: tuple[str, ...] = tuple(n for n, p in POOLINGS.items() if p.needs_hidden_states)

# the types of the params that name a pooling (pydantic validates them against the declared names)
PoolingName = Literal[tuple(POOLINGS)]
TextPoolingName = Literal[UNTEMPLATED_POOLINGS]
BaselinePoolingName = Literal[BASELINE_POOLINGS]


def get_pooling(name: str) -> Pooling:
    """The declared pooling ``name``; an unknown name raises ``ValueError`` listing the known ones."""
    try:
        return POOLINGS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown pooling {name!r}; allowed: {', '.join(POOLINGS)}") from None


def masked_mean(hidden, attention_mask):
    """The attention-masked mean of token states ``(batch, tokens, dim)`` -> ``(batch, dim)``."""
    m = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp_min(1e-9)


def layer_mean(layers, attention_mask):
    """The mean of the given layers' masked token averages (one layer: its average, no division)."""
    total = masked_mean(layers[0], attention_mask)
    for h in layers[1:]:
        total = total + masked_mean(h, attention_mask)
    return total / len(layers) if len(layers) > 1 else total


def mask_positions(input_ids, attention_mask, mask_token_id: int, texts: Optional[Sequence[str]] = None):
    """Position of the first [MASK] of each row; a row whose [MASK] was truncated away raises.

    (``argmax`` of an all-false row is 0: without the check such a row would silently be pooled
    at [CLS].) ``texts`` (the batch's inputs) only make the message name the sentence.
    """
    is_mask = input_ids == mask_token_id
    missing = (~is_mask.any(dim=1)).nonzero().flatten().tolist()
    if missing:
        from ..errors import SentlabError

        i = missing[0]
        n = int(attention_mask[i].sum())
        what = f"row {i} of the batch" + (f" ({texts[i][:80]!r})" if texts is not None else "")
        raise SentlabError(
            f"mask pooling: {len(missing)} input(s) of the batch have no [MASK] token left, first {what}: "
            f"with its prompt template it was truncated to {n} tokens, cutting the template's [MASK] off "
            f"(mask pooling would have fallen back to [CLS]). Raise the max_length (evaluate.max_length when "
            f"evaluating, the method's max_length or train.max_length when training) above the sentence's length "
            f"plus the template's, or use a shorter template.")
    return is_mask.int().argmax(dim=1)


def apply_template(sentences: Sequence[str], mask_token: str, template: str = PROMPT_TEMPLATE) -> list[str]:
    """Each sentence put into ``template`` (the ``mask`` pooling's input), the tokenizer's mask token at ``{mask}``."""
    return [template.format(sentence=s, mask=mask_token) for s in sentences]


def end_with_period(sentences: Sequence[str]) -> list[str]:
    """PromptBERT's evaluation batcher (kongds/Prompt-BERT ``evaluation.py``): "." appended to a non-empty
    sentence whose last character is not one of ``.?"'``, before it goes into the template."""
    return [s + "." if s and s[-1] not in ".?\"'" else s for s in sentences]
