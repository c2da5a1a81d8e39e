"""POS-tag targets counted on annotated sentences: the POS task of ``posbow_adv`` (docs/methods.md#posbow-adversarial).

:data:`POS_TAGS` are the 45 Penn tags plus one ``OTHER`` bucket (spaCy's ``HYPH``, ``NFP``, ``_SP`` …);
:func:`pos_histogram` is a sentence's normalised tag distribution over them; :func:`words_seen` says how
many annotation words of each sentence lie in the encoder's ``max_length`` window, so that
:func:`pos_targets` counts only the tags of the words the encoder saw.

Example::

    target = pos_targets(tokenizer, ["The cat sat ."], [["The", "cat", "sat", "."]], [["DT", "NN", "VBD", "."]], 32)
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Sequence

import numpy as np

from ..errors import SentlabError

PENN_TAGS: tuple[str, ...] = (
    "CC", "CD", "DT", "EX", "FW", "IN", "JJ", "JJR", "JJS", "LS", "MD", "NN", "NNS", "NNP", "NNPS",
    "PDT", "POS", "PRP", "PRP$", "RB", "RBR", "RBS", "RP", "SYM", "TO", "UH", "VB", "VBD", "VBG",
    "VBN", "VBP", "VBZ", "WDT", "WP", "WP$", "WRB",
    "#", "$", "''", "``", ",", ".", ":", "-LRB-", "-RRB-",
)
"""The 45 Penn Treebank tags (36 part-of-speech tags + 9 punctuation tags)."""

OTHER_TAG = "OTHER"
POS_TAGS: tuple[str, ...] = PENN_TAGS + (OTHER_TAG,)
"""Classes of the POS distribution: the Penn tags, then one bucket for any other tag (spaCy's HYPH, NFP, _SP …)."""

POS_TAG_ALIASES = {"(": "-LRB-", ")": "-RRB-", "[": "-LRB-", "]": "-RRB-", "{": "-LRB-", "}": "-RRB-",
                   "-LCB-": "-LRB-", "-RCB-": "-RRB-"}
"""NLTK's bracket tags read as the Penn ones."""

_POS_INDEX = {t: i for i, t in enumerate(POS_TAGS)}


def pos_histogram(tags: Sequence[str], normalise: bool = True) -> np.ndarray:
    """Normalised histogram of Penn ``tags`` over :data:`POS_TAGS` (all zeros for no tags; ``normalise`` False:
    the tag counts)."""
    h = np.zeros(len(POS_TAGS), dtype=np.float32)
    for t in tags:
        t = POS_TAG_ALIASES.get(t, t)
        h[_POS_INDEX.get(t, _POS_INDEX[OTHER_TAG])] += 1.0
    total = h.sum()
    return h / total if total > 0 and normalise else h


def word_starts(text: str, tokens: Sequence[str]) -> list[int]:
    """Character offset of each annotation token in ``text`` (the tokens are the text's own characters, in order)."""
    starts, cursor = [], 0
    for t in tokens:
        i = text.find(t, cursor)
        if i < 0:
            raise SentlabError(
                f"posbow_adv: the annotation token {t!r} is not in the sentence {text[:80]!r} (after character "
                f"{cursor}); the `tokens` column does not match the training corpus. Re-run the annotate stage."
            )
        starts.append(i)
        cursor = i + len(t)
    return starts


def words_seen(tokenizer, sentences: Sequence[str], token_lists: Sequence[Sequence[str]], max_length: int) -> list[int]:
    """How many leading annotation tokens of each sentence start inside the encoder's ``max_length`` window,
    i.e. before the end of the last word piece the encoder sees (a word cut in the middle counts: its first
    pieces were seen). Needs the character offsets of a fast tokenizer."""
    if not getattr(tokenizer, "is_fast", False):
        raise SentlabError(
            f"posbow_adv cuts the POS target to the words inside the encoder's window with the tokenizer's "
            f"character offsets, which only a fast tokenizer gives; {type(tokenizer).__name__} is a slow "
            f"one. Use a model that ships a tokenizer.json (every model in params.yaml does)."
        )
    enc = tokenizer(list(sentences), truncation=True, max_length=max_length, return_offsets_mapping=True,
                    return_special_tokens_mask=True)
    seen = []
    for text, tokens, offsets, special in zip(sentences, token_lists, enc["offset_mapping"],
                                              enc["special_tokens_mask"]):
        end = max((e for (_, e), sp in zip(offsets, special) if not sp), default=0)
        seen.append(bisect_left(word_starts(text, list(tokens)), end))
    return seen


def pos_targets(tokenizer, sentences: Sequence[str], token_lists: Sequence[Sequence[str]],
                tag_lists: Sequence[Sequence[str]], max_length: int, normalise: bool = True) -> np.ndarray:
    """``(B, |POS_TAGS|)``: each sentence's :func:`pos_histogram` over the tags of the words inside the
    ``max_length`` window (:func:`words_seen`); a zero row for a sentence without tags (``normalise`` False: the
    tag counts, each row summing to its number of words seen)."""
    rows = []
    for tokens, tags, n_seen in zip(token_lists, tag_lists, words_seen(tokenizer, sentences, token_lists, max_length)):
        if len(tokens) != len(tags):
            raise SentlabError(f"posbow_adv: a sentence has {len(tokens)} annotation tokens but {len(tags)} POS "
                               f"tags; the annotations are corrupt. Re-run the annotate stage.")
        rows.append(pos_histogram(list(tags)[:n_seen], normalise))
    return np.stack(rows)
