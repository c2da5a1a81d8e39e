"""EDA (Wei & Zou, EMNLP 2019) that leaves chosen phrase spans intact — for PaSeR (docs/methods.md#paser).

Wei & Zou, "EDA: Easy Data Augmentation Techniques for Boosting Performance on
Text Classification Tasks", EMNLP 2019, Sec. 2:

* **SR** synonym replacement: ``n = max(1, int(α_sr · #words))`` distinct
  non-stop-words are replaced by a random WordNet synonym each (multi-word
  synonyms have their ``_`` turned into spaces);
* **RD** random deletion: every word is deleted with probability ``α_rd``
  (if all would go, one random word is kept);
* **RS** random swap: ``n = max(1, int(α_rs · #words))`` times, two random
  words swap places.

``#words`` and the words an operation may touch are the *words* it may edit:
EDA's reference code strips punctuation before it counts, so punctuation runs
are never counted, deleted or swapped here either, and protected slots (below)
are not counted.

PaSeR (Wu & Zhao 2022, Sec. 3.1.3 / Table 4) applies one strategy at a time
(``sr``, ``rd``, ``rs``) or the combinations ``sr+rd`` and ``sr+rs`` (SR first),
or none, to both ``s`` and the masked duplicate ``s̃``.

**Phrase alignment.** PaSeR masks chosen phrase spans in ``s̃`` and the decoder
must regenerate them, so augmentation must not break that alignment. The
phrase spans passed to :meth:`EDA.augment` are *protected* (PaSeR passes
them for ``s̃`` and for ``s``; ``edit_phrases`` names the operations that may
edit them anyway: PaSeR's ``eda_edit_phrases`` for ``s``): the
sentence is cut into words and punctuation runs (also cut at every span
boundary), words inside a protected span are never replaced, deleted or moved, and only
the other words take part in SR/RD/RS (RS swaps two *unprotected* word slots,
so a phrase stays contiguous and in place relative to its neighbours' slots).
After augmentation the text is rebuilt from the word slots with their
original trailing whitespace (a space is inserted if two word characters
would otherwise touch), and :class:`Augmented` returns the phrases' new
character spans; the phrase text is unchanged byte for byte (asserted).

Unlike the EDA reference code the sentence is not lower-cased and
punctuation is not stripped (the encoder's tokenizer sees the sentence as in
the corpus, docs/evaluation.md). SR needs WordNet (``nltk``); where it is not installed,
building an SR augmenter raises :class:`~sentlab.errors.AssetMissingError`
naming ``python -m nltk.downloader wordnet`` — unless a synonym source is
passed in (tests do). RD and RS need nothing.

Example::

    eda = EDA("rd", alpha_rd=0.2)
    out = eda.augment("At least 89 dead in china earthquakes", random.Random(0), [(3, 8)])
    out.text, out.spans   # 'least' kept at its new span
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

STRATEGIES = ("none", "sr", "rd", "rs", "sr+rd", "sr+rs")
SynonymSource = Callable[[str], Sequence[str]]

_WORD = re.compile(r"\w+(?:[-'.]\w+)*|[^\w\s]+")
_ALPHA = re.compile(r"^[A-Za-z][A-Za-z'-]*$")
_IS_WORD = re.compile(r"\w")


@dataclass
class _Slot:
    text: str
    ws: str  # whitespace that followed this word in the original sentence
    phrase: Optional[int] = None  # index of the protected span it belongs to


@dataclass
class Augmented:
    """An augmented sentence and the new character spans of the protected phrases (same order as given)."""

    text: str
    spans: list[tuple[int, int]] = field(default_factory=list)
    ops: dict = field(default_factory=dict)  # per operation: words replaced (sr), deleted (rd), swaps (rs)

    @property
    def edits(self) -> int:
        """All edits made: words replaced + words deleted + swaps."""
        return sum(self.ops.values())


def wordnet_synonyms(word: str) -> list[str]:
    """WordNet synonyms of ``word`` (lemma names, ``_`` → space), without the word itself."""
    from nltk.corpus import wordnet

    out: list[str] = []
    for syn in wordnet.synsets(word):
        for lemma in syn.lemmas():
            name = lemma.name().replace("_", " ").replace("-", " ").lower()
            name = "".join(c for c in name if c.isalpha() or c == " ").strip()
            if name and name != word.lower() and name not in out:
                out.append(name)
    return out


def _english_stopwords() -> frozenset[str]:
    from ..assets.nltk_resources import require_nltk

    require_nltk("stopwords")
    from nltk.corpus import stopwords

    return frozenset(stopwords.words("english"))


def segment(text: str, spans: Sequence[tuple[int, int]] = ()) -> list[_Slot]:
    """Words and punctuation runs of ``text``, also cut at every span boundary; words inside span j get ``phrase=j``."""
    cuts = sorted({c for s, e in spans for c in (s, e)})
    slots: list[_Slot] = []
    for m in _WORD.finditer(text):
        a, b = m.start(), m.end()
        inner = [c for c in cuts if a < c < b]
        bounds = [a, *inner, b]
        for i in range(len(bounds) - 1):
            s, e = bounds[i], bounds[i + 1]
            ws = "" if i < len(bounds) - 2 else _trailing_ws(text, b)
            owner = next((j for j, (ps, pe) in enumerate(spans) if ps <= s and e <= pe), None)
            slots.append(_Slot(text[s:e], ws, owner))
    return slots


def _trim(text: str, s: int, e: int) -> tuple[int, int]:
    """A span without leading/trailing whitespace (a protected phrase is a run of whole word pieces)."""
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return s, e


def _trailing_ws(text: str, end: int) -> str:
    j = end
    while j < len(text) and text[j].isspace():
        j += 1
    return text[end:j]


def _join(slots: Sequence[_Slot], ws: Sequence[str], n_spans: int) -> tuple[str, list[tuple[int, int]]]:
    parts: list[str] = []
    pos = 0
    starts: dict[int, int] = {}
    ends: dict[int, int] = {}
    for i, slot in enumerate(slots):
        if i > 0:
            sep = ws[i - 1]
            if not sep and parts and parts[-1][-1:].isalnum() and slot.text[:1].isalnum():
                sep = " "
            parts.append(sep)
            pos += len(sep)
        if slot.phrase is not None:
            starts.setdefault(slot.phrase, pos)
            ends[slot.phrase] = pos + len(slot.text)
        parts.append(slot.text)
        pos += len(slot.text)
    text = "".join(parts)
    return text, [(starts[j], ends[j]) if j in starts else (-1, -1) for j in range(n_spans)]


class EDA:
    """One EDA strategy (``none``, ``sr``, ``rd``, ``rs``, ``sr+rd``, ``sr+rs``) that protects phrase spans.

    Args:
        strategy: one of :data:`STRATEGIES`.
        alpha_sr, alpha_rd, alpha_rs: EDA's α per operation (the PaSeR code used SR with 0.5).
        synonyms: ``word -> list of synonyms``; default WordNet (needs the NLTK resource).
        stopwords: words SR never replaces; default NLTK's English list (EDA uses the same list).
    """

    def __init__(self, strategy: str = "none", alpha_sr: float = 0.5, alpha_rd: float = 0.1, alpha_rs: float = 0.1,
                 synonyms: Optional[SynonymSource] = None, stopwords: Optional[frozenset[str]] = None):
        from ..errors import SentlabError

        if strategy not in STRATEGIES:
            raise SentlabError(f"Unknown EDA strategy {strategy!r} (params methods.paser.eda); "
                               f"allowed: {', '.join(STRATEGIES)}.")
        self.strategy = strategy
        self.ops = [] if strategy == "none" else strategy.split("+")
        self.alpha = {"sr": alpha_sr, "rd": alpha_rd, "rs": alpha_rs}
        self.stopwords = stopwords
        self.synonyms = synonyms
        if "sr" in self.ops:
            if self.synonyms is None:
                from ..assets.nltk_resources import require_nltk

                require_nltk("wordnet")  # AssetMissingError naming `python -m nltk.downloader wordnet`
                self.synonyms = wordnet_synonyms
            if self.stopwords is None:
                self.stopwords = _english_stopwords()

    def augment(self, text: str, rng: random.Random, spans: Sequence[tuple[int, int]] = (),
                edit_phrases: Sequence[str] = ()) -> Augmented:
        """Augment ``text`` with ``rng``, leaving every ``spans`` (char ``(start, end)``) untouched except by
        the operations in ``edit_phrases`` (e.g. ``("sr",)``: synonyms may replace phrase words, RD/RS not).

        Spans are first trimmed of surrounding whitespace; the returned spans are the trimmed ones,
        relocated in the augmented text (none are returned when ``edit_phrases`` is set: a phrase may
        have changed).
        """
        spans = [_trim(text, int(s), int(e)) for s, e in spans]
        if not self.ops:
            return Augmented(text, list(spans), {})
        slots = segment(text, spans)
        ws = [s.ws for s in slots]
        counts = {}
        for op in self.ops:
            slots, ws, counts[op] = getattr(self, f"_{op}")(slots, ws, rng, op in edit_phrases)
        new_text, new_spans = _join(slots, ws, len(spans))
        if edit_phrases:
            return Augmented(new_text, [], counts)
        for (s, e), (ns, ne) in zip(spans, new_spans):
            assert new_text[ns:ne] == text[s:e], "EDA broke a protected phrase"  # by construction
        return Augmented(new_text, new_spans, counts)

    # --- the three operations, each on the word slots it may edit only -------------
    @staticmethod
    def _free(slots: Sequence[_Slot], phrases: bool = False) -> list[int]:
        """The word slots (not punctuation) an operation may edit: unprotected ones, and the phrase words
        when ``phrases``."""
        return [i for i, s in enumerate(slots) if (phrases or s.phrase is None) and _IS_WORD.search(s.text)]

    def _sr(self, slots, ws, rng, phrases=False):
        words = self._free(slots, phrases)
        free = [i for i in words if _ALPHA.match(slots[i].text) and slots[i].text.lower() not in self.stopwords]
        n = max(1, int(self.alpha["sr"] * len(words))) if words else 0
        rng.shuffle(free)
        slots = list(slots)
        done = 0
        for i in free:
            if done >= n:
                break
            cands = list(self.synonyms(slots[i].text.lower()))
            if not cands:
                continue
            slots[i] = _Slot(rng.choice(cands), slots[i].ws, slots[i].phrase)  # a phrase word stays one
            done += 1
        return slots, ws, done

    def _rd(self, slots, ws, rng, phrases=False):
        free = self._free(slots, phrases)
        p = self.alpha["rd"]
        drop = {i for i in free if rng.random() < p}
        if drop and len(drop) == len(self._free(slots, True)):  # EDA: never return a sentence without a word
            drop.discard(rng.choice(sorted(drop)))
        keep = [i for i in range(len(slots)) if i not in drop]
        return [slots[i] for i in keep], [ws[i] for i in keep], len(drop)

    def _rs(self, slots, ws, rng, phrases=False):
        free = self._free(slots, phrases)
        if len(free) < 2:
            return slots, ws, 0
        n = max(1, int(self.alpha["rs"] * len(free)))
        slots = list(slots)
        for _ in range(n):
            a, b = rng.sample(free, 2)
            slots[a], slots[b] = slots[b], slots[a]
        return slots, ws, n
