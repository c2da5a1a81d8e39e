"""Discrete sentence augmentations: MoCo-BERT's key branch (PT-BERT Table 3, docs/methods.md#moco-bert) and
SimCSE's second view (Gao et al. 2021, Table 1; docs/methods.md#simcse-with-crop-or-word-deletion).

PT-BERT (Tan et al., ACL 2022, Sec. 4.4 / Table 3) compares MoCo-BERT with
four discrete augmentations of the key sentence but gives neither rates nor
the exact operations. The choices made here (all seeded, all parameters):

* :func:`reorder` — the whitespace words in a uniformly random order
  (one Fisher–Yates shuffle of *all* words with the given RNG; punctuation
  glued to a word moves with it). A sentence of one word is unchanged.
* :func:`duplicate` — ``n = max(1, round(rate · #words))`` distinct word
  positions drawn without replacement; each chosen word is repeated
  immediately after itself ("the cat sat" → "the the cat sat").
* :func:`delete` — ``n = max(1, round(rate · #words))`` distinct word
  positions removed (or exactly ``count`` of them); at least one word is always kept.
* :func:`crop` — SimCSE's "crop k%: keep 100−k% of the length": a contiguous
  run of ``#words − max(1, round(rate · #words))`` words (at least one), its
  start drawn uniformly; the words of the run in their order.
* :func:`srl_rebuild` — SRL-guided: for every predicate-argument frame of
  the annotation stage, the spans ``[ARG0, PRED, ARGM-NEG, ARG1]`` that exist,
  in that order; the frames' word lists concatenated (in the annotation's
  order) into one new sentence. A sentence without frames is returned
  unchanged.

Rates of 0 return the sentence unchanged. Each function takes a
:class:`random.Random` so a caller can derive one reproducible stream per
batch (see :class:`sentlab.methods.moco.MoCo`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

AUGMENTATIONS = ("none", "reorder", "duplication", "deletion", "crop", "srl")


def _count(n_words: int, rate: float) -> int:
    if rate <= 0 or n_words == 0:
        return 0
    return max(1, int(round(rate * n_words)))


def reorder(sentence: str, rng: random.Random) -> str:
    """Shuffle the whitespace words of ``sentence`` (a full random permutation)."""
    words = sentence.split()
    rng.shuffle(words)
    return " ".join(words)


def duplicate(sentence: str, rng: random.Random, rate: float = 0.1) -> str:
    """Repeat ``max(1, round(rate·n))`` randomly chosen words in place."""
    words = sentence.split()
    chosen = set(rng.sample(range(len(words)), _count(len(words), rate)))
    out: list[str] = []
    for i, w in enumerate(words):
        out.append(w)
        if i in chosen:
            out.append(w)
    return " ".join(out)


def delete(sentence: str, rng: random.Random, rate: float = 0.1, count: Optional[int] = None) -> str:
    """Remove ``max(1, round(rate·n))`` randomly chosen words (``count``: exactly that many), keeping at least
    one word."""
    words = sentence.split()
    k = min(_count(len(words), rate) if count is None else count, max(len(words) - 1, 0))
    dropped = set(rng.sample(range(len(words)), k))
    return " ".join(w for i, w in enumerate(words) if i not in dropped)


def crop(sentence: str, rng: random.Random, rate: float = 0.1) -> str:
    """Keep a random contiguous run of the words: ``max(1, round(rate·n))`` fewer than ``n``, at least one."""
    words = sentence.split()
    keep = max(len(words) - _count(len(words), rate), min(len(words), 1))
    start = rng.randrange(len(words) - keep + 1) if words else 0
    return " ".join(words[start:start + keep])


SRL_ORDER = ("arg0", "predicate", "argm_neg", "arg1")


def span_text(span: Any) -> Optional[str]:
    if span is None:
        return None
    text = span.get("text") if isinstance(span, Mapping) else span
    text = (text or "").strip()
    return text or None


def srl_rebuild(sentence: str, frames: Optional[Sequence[Mapping[str, Any]]]) -> str:
    """Rebuild ``sentence`` from its predicate-argument frames: ``[ARG0, PRED, ARGM-NEG, ARG1]`` per frame.

    ``frames`` is the annotation stage's ``frames`` column for this sentence: a list of
    ``{predicate, arg0, arg1, argm_neg}`` where each is a span ``{text, start, end}`` or None.
    No frame (or only empty spans) → the sentence unchanged.
    """
    parts: list[str] = []
    for frame in frames or ():
        for key in SRL_ORDER:
            text = span_text(frame.get(key))
            if text:
                parts.append(text)
    return " ".join(parts) if parts else sentence


@dataclass(frozen=True)
class Augmenter:
    """``f(sentence, rng, frames) -> augmented sentence`` for one augmentation kind. A plain object, not a
    closure: the training's DataLoader workers receive it pickled wherever processes are not forked (the
    ``spawn``/``forkserver`` start methods: macOS, Python 3.14's default, the preflight's stage server)."""

    kind: str
    rate: float = 0.1
    count: Optional[int] = None  # deletion: exactly this many words (None: the rate)

    def __call__(self, s: str, rng: random.Random, frames: Any = None) -> str:
        if self.kind == "reorder":
            return reorder(s, rng)
        if self.kind == "duplication":
            return duplicate(s, rng, self.rate)
        if self.kind == "deletion":
            return delete(s, rng, self.rate, self.count)
        if self.kind == "crop":
            return crop(s, rng, self.rate)
        if self.kind == "srl":
            return srl_rebuild(s, frames)
        return s


def make_augmenter(kind: str, rate: float = 0.1,
                   count: Optional[int] = None) -> Callable[[str, random.Random, Any], str]:
    """``f(sentence, rng, frames) -> augmented sentence`` for one augmentation kind (:class:`Augmenter`)."""
    if kind in AUGMENTATIONS:
        return Augmenter(kind, rate, count)
    raise ValueError(f"unknown augmentation {kind!r}; allowed: {', '.join(AUGMENTATIONS)}")
