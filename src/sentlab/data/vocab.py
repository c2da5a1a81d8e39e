"""Bag-of-words vocabularies counted on a corpus: the BOW task of ``posbow_adv`` (docs/methods.md#posbow-adversarial).

The bag is the set of *word pieces* the encoder sees (after truncation to ``max_length``): every piece of every word
in the window, with WordPiece (``play ##ing``) and byte-level BPE (``Ġplay ing``) alike, so it needs no annotation
and matches any corpus the tokenizer reads. :func:`build_bow_vocab` keeps the pieces with the
highest document frequency; :func:`stopword_and_punct_ids` marks the pieces a content vocabulary leaves out
(NLTK's English stop words — the annotation stage's list — and pieces with no letter or digit);
:func:`corpus_bow_vocab` does both on a Parquet corpus. The POS tag set is in :mod:`sentlab.data.tags`.

Example::

    ids, doc_freq = corpus_bow_vocab(tokenizer, "data/corpus/train.parquet", 5000, 32)
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import AssetMissingError, SentlabError


def read_corpus_texts(path: str) -> list[str]:
    """The non-empty ``text`` column of a Parquet corpus (the one ``methods.posbow_adv.bow_vocab_from`` names)."""
    import pyarrow.parquet as pq

    p = Path(path)
    if not p.is_file():
        raise SentlabError(
            f"methods.posbow_adv.bow_vocab_from: the training corpus {p} (its bag-of-words vocabulary is built from "
            f"it) does not exist. Run the prepare stage first (`dvc repro prepare`), or point `bow_vocab_from` at a "
            f"Parquet file with a `text` column."
        )
    try:
        table = pq.read_table(p, columns=["text"])
    except Exception as e:  # noqa: BLE001 - re-raised as a user error naming the file
        raise SentlabError(f"methods.posbow_adv.bow_vocab_from: cannot read a `text` column from {p} ({e}). "
                           f"Point it at the prepare stage's data/corpus/train.parquet.") from None
    texts = [t for t in table.column("text").to_pylist() if t]
    if not texts:
        raise SentlabError(f"methods.posbow_adv.bow_vocab_from: {p} has no sentences. Re-run the prepare stage.")
    return texts


def _stopword_and_punct_texts(tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """(stop word, no letter or digit): boolean masks over the tokenizer's ids, each piece read as the text it
    decodes to on its own."""
    from ..assets.nltk_resources import stopwords_english

    try:
        stop = {w.lower() for w in stopwords_english()}
    except AssetMissingError as e:
        raise AssetMissingError(
            f"methods.posbow_adv.bow_exclude_stopwords needs NLTK's English stop-word list. {e} Or set "
            f"`bow_exclude_stopwords: false` to keep stop words and punctuation in the bag-of-words vocabulary."
        ) from None
    pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    texts = [tokenizer.convert_tokens_to_string([p]).strip().lower() for p in pieces]
    return (np.array([t in stop for t in texts], dtype=bool),
            np.array([not any(ch.isalnum() for ch in t) for t in texts], dtype=bool))


def stopword_and_punct_ids(tokenizer, starts_word: np.ndarray | None = None) -> np.ndarray:
    """Boolean mask over the tokenizer's ids: word pieces that are a stop word or hold no letter/digit.

    A piece is read as the text it decodes to on its own (``##s`` stays ``##s``, RoBERTa's ``Ġthe``
    becomes ``the``). Stop words: NLTK's English list plus the Penn clitics
    (:func:`sentlab.assets.nltk_resources.stopwords_english`). A word-continuation piece is never taken for a stop word:
    WordPiece marks it (``##``); byte-level BPE marks the word start instead (``Ġ``), and its unmarked pieces are
    both continuations (``s`` of ``cat|s``) and the first word of a text (``The``), so ``starts_word`` (per id:
    :func:`word_start_ids` on the corpus) says which stop-word texts start a word; None: every one does.
    """
    stop, punct = _stopword_and_punct_texts(tokenizer)
    if starts_word is not None:
        stop &= np.asarray(starts_word, dtype=bool)[: stop.size]
    return stop | punct


def word_start_ids(tokenizer, sentences: Sequence[str], max_length: int, candidates: np.ndarray,
                   chunk: int = 4096) -> np.ndarray:
    """Boolean per id: whether the piece is the first piece of a word in at least half of its occurrences in
    ``sentences`` (tokenized as in training; a word: the tokenizer's pre-tokenized word, its ``word_ids``), counted
    for the ids where ``candidates`` is true (the others, and candidates that never occur: true). Needs a fast
    tokenizer."""
    if not getattr(tokenizer, "is_fast", False):
        raise SentlabError(f"posbow_adv reads which word pieces start a word from the tokenizer's word ids, which "
                           f"only a fast tokenizer gives; {type(tokenizer).__name__} is a slow one. Use a model that "
                           f"ships a tokenizer.json (every model in params.yaml does).")
    n_ids = len(tokenizer)
    seen, starts = np.zeros(n_ids, dtype=np.int64), np.zeros(n_ids, dtype=np.int64)
    candidates = np.asarray(candidates, dtype=bool)
    sentences = list(sentences)
    for lo in range(0, len(sentences), chunk):
        enc = tokenizer(sentences[lo: lo + chunk], truncation=True, max_length=max_length, add_special_tokens=False)
        lengths = [len(x) for x in enc["input_ids"]]
        if not sum(lengths):
            continue
        ids = np.concatenate([np.asarray(x, dtype=np.int64) for x in enc["input_ids"]])
        words = np.concatenate([np.asarray(enc.word_ids(j), dtype=np.int64) for j in range(len(lengths))])
        first = np.ones(ids.size, dtype=bool)
        first[1:] = words[1:] != words[:-1]
        first[np.cumsum(lengths)[:-1][np.asarray(lengths[1:]) > 0]] = True   # each sentence's first piece
        keep = (ids < n_ids) & candidates[np.minimum(ids, n_ids - 1)]
        seen += np.bincount(ids[keep], minlength=n_ids)[:n_ids]
        starts += np.bincount(ids[keep & first], minlength=n_ids)[:n_ids]
    out = np.ones(n_ids, dtype=bool)
    out[seen > 0] = 2 * starts[seen > 0] >= seen[seen > 0]
    return out


def build_bow_vocab(tokenizer, sentences: Sequence[str], size: int, max_length: int, exclude: np.ndarray | None = None,
                    chunk: int = 4096, show_progress: bool = True, return_frequencies: bool = False):
    """The ``size`` word-piece ids with the highest document frequency in ``sentences``.

    Sentences are tokenized as in training (truncated to ``max_length``);
    special tokens and the ids where the boolean mask ``exclude`` is true are
    left out; ties are broken by the smaller id. Raises :class:`SentlabError`
    when the corpus has fewer than ``size`` distinct eligible word pieces.
    With ``return_frequencies``: ``(ids, fraction of sentences containing each id)``.
    """
    from tqdm.auto import tqdm

    n_ids = len(tokenizer)
    counts = np.zeros(n_ids, dtype=np.int64)
    sentences = list(sentences)
    for start in tqdm(range(0, len(sentences), chunk), desc="posbow_adv: bag-of-words vocabulary",
                      unit="chunk", disable=not show_progress or len(sentences) < 50_000):
        ids = tokenizer(sentences[start: start + chunk], truncation=True, max_length=max_length)["input_ids"]
        if ids:
            counts += np.bincount(np.concatenate([np.unique(np.asarray(x, dtype=np.int64)) for x in ids]),
                                  minlength=n_ids)[:n_ids]
    counts[[i for i in tokenizer.all_special_ids if 0 <= i < n_ids]] = 0
    if exclude is not None:
        counts[exclude[:n_ids]] = 0
    distinct = int((counts > 0).sum())
    if distinct < size:
        raise SentlabError(
            f"methods.posbow_adv.bow_vocab_size is {size}, but the training corpus has only {distinct} distinct "
            f"word pieces (special tokens{' and excluded stop words/punctuation' if exclude is not None else ''} "
            f"left out). Lower `bow_vocab_size` in params.yaml to at most {distinct}."
        )
    order = np.lexsort((np.arange(n_ids), -counts))[:size]  # by count desc, then id asc
    if return_frequencies:
        return order.astype(np.int64), counts[order] / max(len(sentences), 1)
    return order.astype(np.int64)


def corpus_bow_vocab(tokenizer, path: str, size: int, max_length: int, exclude_stopwords: bool = True):
    """``(ids, doc_freq)``: :func:`build_bow_vocab` over the Parquet corpus ``path`` (:func:`read_corpus_texts`),
    stop words and punctuation left out when ``exclude_stopwords`` (:func:`stopword_and_punct_ids`, a stop-word
    text counted as one where it starts a word in the corpus: :func:`word_start_ids`)."""
    texts = read_corpus_texts(path)
    exclude = None
    if exclude_stopwords:
        stop, _ = _stopword_and_punct_texts(tokenizer)
        exclude = stopword_and_punct_ids(tokenizer, word_start_ids(tokenizer, texts, max_length, stop))
    return build_bow_vocab(tokenizer, texts, size, max_length, exclude=exclude, return_frequencies=True)
