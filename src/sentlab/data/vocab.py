"""Bag-of-words vocabularies counted on a corpus: the BOW task of ``posbow_adv`` (docs/methods.md#posbow-adversarial).

The bag is the set of *word pieces* the encoder sees (after truncation to ``max_length``), so it needs no
annotation and matches any corpus the tokenizer reads. :func:`build_bow_vocab` keeps the pieces with the
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


def stopword_and_punct_ids(tokenizer) -> np.ndarray:
    """Boolean mask over the tokenizer's ids: word pieces that are a stop word or hold no letter/digit.

    A piece is read as the text it decodes to on its own (``##s`` stays ``##s``, RoBERTa's ``Ġthe``
    becomes ``the``), so a word-continuation piece is never taken for a stop word. Stop words: NLTK's
    English list plus the Penn clitics (:func:`sentlab.annotate.base.stopwords_english`).
    """
    from ..annotate.base import stopwords_english

    try:
        stop = {w.lower() for w in stopwords_english()}
    except AssetMissingError as e:
        raise AssetMissingError(
            f"methods.posbow_adv.bow_exclude_stopwords needs NLTK's English stop-word list. {e} Or set "
            f"`bow_exclude_stopwords: false` to keep stop words and punctuation in the bag-of-words vocabulary."
        ) from None
    pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    texts = [tokenizer.convert_tokens_to_string([p]).strip().lower() for p in pieces]
    return np.array([t in stop or not any(ch.isalnum() for ch in t) for t in texts], dtype=bool)


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
    stop words and punctuation left out when ``exclude_stopwords`` (:func:`stopword_and_punct_ids`)."""
    exclude = stopword_and_punct_ids(tokenizer) if exclude_stopwords else None
    return build_bow_vocab(tokenizer, read_corpus_texts(path), size, max_length, exclude=exclude,
                           return_frequencies=True)
