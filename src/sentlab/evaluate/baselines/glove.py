"""Averaged GloVe vectors (Pennington et al. 2014), as SentEval's bag-of-words example computes them
(facebookresearch/SentEval ``examples/bow.py``; docs/methods.md#glove).

* vectors: glove.840B.300d (SentEval's ``PATH_TO_GLOVE``), the asset ``glove`` of :mod:`sentlab.assets.resolve`
  (``<mirror or cache>/glove/glove.840B.300d.txt``, unpacked from the Stanford release);
* tokenisation: SentEval's loaders split each sentence on whitespace (``str.split()``), case kept (the 840B
  vectors are cased);
* a sentence's vector is the mean of the vectors of its in-vocabulary tokens (a token repeated counts each
  time); out-of-vocabulary tokens are skipped; a sentence with no in-vocabulary token (or no token) gets the
  vector of ``.``, as SentEval's batcher does;
* the vector file is read once, keeping only the words of the evaluated sentences (SentEval's ``prepare``):
  each line is ``word v1 … v300`` split at its first space (``get_wordvec``); a word listed twice keeps its last
  line.

Only the text lines' words are parsed (never unpickled). :class:`GloveEncoder` has the ``encode`` of a
sentence encoder, so the protocol and the diagnostics run on it unchanged.

Example::

    enc = GloveEncoder.from_file(path, sentences)
    enc.encode(["A man is playing a guitar ."])     # (1, 300)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Sequence

import numpy as np
import torch

from ...errors import AssetMissingError, SentlabError

log = logging.getLogger(__name__)
FALLBACK = "."   # SentEval's vector for a sentence with no known word


def tokens(sentence: str) -> list[str]:
    """SentEval's tokenisation of an STS / SICK sentence: whitespace split, case kept."""
    return sentence.split()


def read_vectors(path: Path, vocabulary: Iterable[str]) -> dict[str, np.ndarray]:
    """The vectors of the words of ``vocabulary`` found in the text file ``path`` (``word v1 … vd`` per line)."""
    wanted = set(vocabulary)
    out: dict[str, np.ndarray] = {}
    dim = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            word, _, rest = line.rstrip("\n").partition(" ")
            if word not in wanted:
                continue
            vec = np.array(rest.split(" "), dtype=np.float64) if rest else np.zeros(0)
            if dim is None:
                dim = vec.size
            if vec.size != dim or dim == 0:
                raise SentlabError(f"{path}, line {n}: the vector of {word!r} has {vec.size} values, the file's first "
                                   f"vector {dim}: the file is truncated or not a GloVe text file. Fetch it again "
                                   f"(`sentlab` names the command when it is missing: delete the file first).")
            out[word] = vec
    return out


@dataclass
class GloveEncoder:
    """Mean of in-vocabulary GloVe vectors: a sentence encoder's ``encode`` over a loaded vocabulary."""

    vectors: dict[str, np.ndarray]
    loaded: frozenset            # every word looked up in the file (found or not)
    name: str = "base-glove"
    pooling: str = "glove-mean"
    precision: str = "fp32"
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    post = None
    dims = None
    # what an embedding's bits can depend on (the evaluation's fingerprint, SentenceEncoder.batch_threads): a
    # numpy mean of vectors, one thread
    batch_threads = 1

    @classmethod
    def from_file(cls, path: Path, sentences: Iterable[str], name: str = "base-glove") -> "GloveEncoder":
        vocab = {w for s in sentences for w in tokens(s)} | {FALLBACK}
        vectors = read_vectors(Path(path), vocab)
        if FALLBACK not in vectors:
            raise SentlabError(f"{path} has no vector for {FALLBACK!r}, which SentEval gives a sentence without a "
                               f"known word; it is not the glove.840B.300d file. Fetch it again.")
        return cls(vectors, frozenset(vocab), name=name)

    @property
    def dim(self) -> int:
        return int(self.vectors[FALLBACK].size)

    def sentence_vector(self, sentence: str) -> np.ndarray:
        words = tokens(sentence)
        unknown = [w for w in words if w not in self.loaded]
        if unknown:   # not an OOV word: a sentence the vocabulary was not read for
            raise SentlabError(f"GloveEncoder: {unknown[0]!r} was not among the words read from the vector file; "
                               f"build the encoder from every sentence it will encode.")
        found = [self.vectors[w] for w in words if w in self.vectors]
        return np.mean(found, axis=0) if found else self.vectors[FALLBACK]

    def encode(self, sentences: Sequence[str], batch_size: int = 128, **_) -> np.ndarray:
        if not len(sentences):
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.sentence_vector(s) for s in sentences]).astype(np.float32)

    def coverage(self, sentences: Iterable[str]) -> float:
        """The share of the tokens of ``sentences`` that have a vector."""
        toks = [w for s in sentences for w in tokens(s)]
        return sum(w in self.vectors for w in toks) / max(1, len(toks))


def glove_path() -> Path:
    """The vector file (mirror or cache), or :class:`AssetMissingError` naming the command that fetches it."""
    from ...assets.resolve import data_fetch_command, resolve_data

    try:
        return resolve_data("glove").path
    except AssetMissingError as e:
        raise AssetMissingError(f"{e} Fetch command (on a connected machine, or put the file in the mirror's "
                                f"glove/ folder): `{data_fetch_command('glove')}`.") from None


def glove_missing() -> Optional[str]:
    """The report's reason for a GloVe row without results when the vectors are not here (None when they are)."""
    from ...assets.resolve import data_fetch_command, data_present

    if data_present("glove"):
        return None
    return (f"needs data: glove.840B.300d is not in the mirror or the cache here (`{data_fetch_command('glove')}`); "
            f"then list glove in evaluate.baselines (the paper profile does) and `dvc repro "
            f"evaluate_baseline@glove`")


def glove_encoder(params, table, name: str = "base-glove") -> tuple[GloveEncoder, None, dict]:
    """The GloVe baseline of the stage: ``(encoder, None, info)``; the encoder holds the vectors of every
    sentence of the STS table (all tasks and splits: the SICK pairs the cosine table adds included)."""
    path = glove_path()
    sentences = list(dict.fromkeys([*table.sentence1, *table.sentence2]))
    enc = GloveEncoder.from_file(path, sentences, name=name)
    info = {"name": params.evaluate.glove.vectors, "dim": enc.dim, "vocabulary": len(enc.loaded),
            "found": len(enc.vectors), "token_coverage": round(enc.coverage(sentences), 6),
            "tokenisation": "whitespace (SentEval's str.split), cased",
            "oov": "skipped; a sentence without a known token gets the vector of '.'"}
    log.info("GloVe: %d of %d words found (%.1f %% of the tokens)", len(enc.vectors), len(enc.loaded),
             100 * info["token_coverage"])
    return enc, None, info
