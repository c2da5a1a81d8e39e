"""The backend interface and the pieces every backend shares (text cleaning, spans, RAKE).

A backend turns a batch of raw sentences into rows of the annotation schema. To plug
in another one (e.g. a neural SRL model), subclass :class:`Backend`, implement
:meth:`Backend.annotate` (and :meth:`Backend.fingerprint` if it depends on a model
or library version), and register it::

    from sentlab.annotate import Backend, register_backend

    @register_backend("mysrl")
    class MySRL(Backend):
        def __init__(self, options):
            super().__init__(options)
            self.model = load_my_model()            # once per worker process

        def annotate(self, texts):
            return [self.row(text) for text in texts]   # dicts with the schema's columns, or None

Rows are dicts with the keys ``tokens``, ``pos``, ``rake``, ``chunks``, ``frames``
(see :mod:`sentlab.annotate`); a backend returns ``None`` for a sentence it skips
(it is kept in the table with empty lists and counted as skipped).
"""

from __future__ import annotations

import re
import string
from dataclasses import asdict, dataclass
from typing import Callable, Optional, Sequence


# C0/C1 control characters, zero-width and bidi marks, line/paragraph separators, BOM.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\ufeff]")
_HAS_WORD = re.compile(r"\w")
NEGATIONS = frozenset({"not", "n't", "never", "nt"})


@dataclass(frozen=True)
class BackendOptions:
    """What a backend is built from (hashed into the params hash of every output)."""

    rake_max_words: Optional[int] = None  # None: unbounded
    spacy_model: str = "en_core_web_sm"


def clean(text: str) -> str:
    """``text`` with control characters replaced by spaces: same length, so offsets stay valid."""
    return _CONTROL.sub(" ", text)


def has_word(text: str) -> bool:
    """False for an empty, whitespace-only, punctuation-only or control-only sentence (skipped)."""
    return _HAS_WORD.search(text) is not None


def span(text: str, start: int, end: int) -> dict:
    return {"text": text[start:end], "start": start, "end": end}


class Backend:
    """Interface of an annotation backend (one instance per worker process)."""

    name = "base"

    def __init__(self, options: BackendOptions):
        self.options = options

    def fingerprint(self) -> dict:
        """Everything the output depends on besides the input text (hashed into the params hash)."""
        return {"backend": self.name, **asdict(self.options)}

    def annotate(self, texts: Sequence[str]) -> list[dict | None]:  # pragma: no cover - interface
        raise NotImplementedError


_BACKENDS: dict[str, Callable[[BackendOptions], Backend]] = {}


def register_backend(name: str):
    """Class decorator: make a :class:`Backend` available under ``name``."""

    def deco(cls):
        cls.name = name
        _BACKENDS[name] = cls
        return cls

    return deco


class _GivenTokens:
    """RAKE's word tokenizer: returns the tokens already computed for the sentence.

    Punctuation-only tokens become ``"."`` (a RAKE phrase break) so multi-character
    punctuation such as ``--`` or ``...`` never enters a phrase.
    """

    tokens: list[str] = []

    def __call__(self, sentence: str) -> list[str]:
        return self.tokens


class RakeExtractor:
    """Sentence-level RAKE (rake-nltk) with character spans.

    The stopword list is NLTK's English list plus the Treebank clitics (``n't``,
    ``'s``, ...), passed explicitly; the sentence
    tokenizer returns the whole sentence (no punkt); the word tokenizer returns the
    backend's own tokens, so every ranked phrase maps back to a token run and hence to
    a character span. Phrases longer than ``max_words`` are dropped (rake-nltk's
    ``max_length``); None keeps every candidate (the paper profile: RAKE ranks long
    phrases first, and a cap of 4 words changed the top-1 phrase of 6.1 % of the STS
    sentences). Ranking: degree/frequency, best first; ties by phrase text.
    """

    UNBOUNDED = 100000  # rake-nltk's own default max_length

    def __init__(self, stopwords: Sequence[str], max_words: Optional[int]):
        from rake_nltk import Rake

        self._tok = _GivenTokens()
        max_words = max_words or self.UNBOUNDED
        self.rake = Rake(stopwords=set(stopwords), punctuations=set(string.punctuation), max_length=max_words,
                         sentence_tokenizer=lambda s: [s], word_tokenizer=self._tok)
        self.ignore = self.rake.to_ignore
        self.max_words = max_words

    def extract(self, text: str, tokens: Sequence[str], spans: Sequence[tuple[int, int]]) -> list[dict]:
        words = [t if _HAS_WORD.search(t) else "." for t in tokens]
        self._tok.tokens = words
        self.rake.extract_keywords_from_sentences([text])
        # The candidate runs RAKE built, in sentence order, so each ranked phrase finds its span.
        runs: dict[str, list[tuple[int, int]]] = {}
        i, n = 0, len(words)
        low = [w.lower() for w in words]
        while i < n:
            if low[i] in self.ignore:
                i += 1
                continue
            j = i
            while j < n and low[j] not in self.ignore:
                j += 1
            if j - i <= self.max_words:
                runs.setdefault(" ".join(low[i:j]), []).append((i, j))
            i = j
        out = []
        for score, phrase in self.rake.get_ranked_phrases_with_scores():
            occ = runs.get(phrase)
            if not occ:  # cannot happen with the tokens above; never invent a span
                continue
            a, b = occ.pop(0)
            start, end = spans[a][0], spans[b - 1][1]
            out.append({"text": text[start:end], "score": float(score), "start": start, "end": end})
        return out
