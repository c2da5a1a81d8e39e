"""BERT-whitening baseline (Su et al., 2021, "Whitening Sentence Representations for
Better Semantics and Faster Retrieval"; docs/methods.md#baselines).

Fit on a sample of sentence embeddings X (n × d):

    μ = mean(X),  Σ = cov(X) = U Λ Uᵀ (SVD),  W = U Λ^(−1/2)

and transform x ↦ (x − μ) W, optionally keeping the first k columns of W
(the k largest-variance directions: Su et al.'s dimension reduction). The
transformed fit sample has identity covariance (its first k × k block with a cut).
Σ is the unbiased sample covariance (``np.cov``, as in Su et al.'s code).

Where μ and W are fitted is a param (``evaluate.whitening.fit_on``):

* ``sts_pool`` — the distinct sentences of every evaluation split (Su et al.'s
  STS setting); their embeddings are the ones the evaluation computes anyway,
  so no extra encoding is done;
* ``corpus`` — a seeded sample of ``sample_size`` sentences of
  ``data/corpus/train.parquet``;
* ``nli`` — the distinct NLI sentences of ``data/corpus/nli.parquet`` (or a seeded
  sample of ``sample_size``): SimCSE App. C's "NLI" fit, the setting of its Table 5
  row (the paper profile).

The fitted transform is a plain callable, handed to
``SentenceEncoder(post=whitening)`` so the whitened model is an encoder like any other.

Example::

    wh = Whitening.fit(raw_encoder.encode(sample), dim=256)
    enc = dataclasses.replace(raw_encoder, post=wh)
    enc.encode(["A man is playing a guitar."])      # (1, 256), whitened
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ...errors import SentlabError

log = logging.getLogger(__name__)


@dataclass
class Whitening:
    """The fitted transform x ↦ (x − μ) W (W already cut to ``dim`` columns)."""

    mu: np.ndarray  # (d,)
    W: np.ndarray  # (d, k)
    fit_size: int

    @classmethod
    def fit(cls, x: np.ndarray, dim: Optional[int] = None) -> "Whitening":
        x = np.asarray(x, dtype=np.float64)
        n, d = x.shape
        if dim is not None and not 0 < dim <= d:
            raise SentlabError(f"evaluate.whitening.dim = {dim} is not in 1..{d} (the embedding width). "
                               f"Set it to at most {d} or to null in params.yaml.")
        if n <= d:
            raise SentlabError(f"Whitening needs more fit sentences than embedding dimensions ({n} sentences for "
                               f"{d} dimensions): the covariance is singular. Raise evaluate.whitening.sample_size "
                               f"or use fit_on: sts_pool in params.yaml.")
        mu = x.mean(axis=0)
        cov = np.cov(x - mu, rowvar=False)
        u, s, _ = np.linalg.svd(cov)  # eigenvalues in decreasing order
        k = dim or d
        u, s = u[:, :k], s[:k]  # the cut drops the smallest-variance directions before inverting
        if s[-1] <= s[0] * 1e-10:
            rank = int(np.sum(s > s[0] * 1e-10))
            raise SentlabError(f"The fit embeddings' covariance is singular in the kept directions (eigenvalue "
                               f"{s[-1]:.2e} vs largest {s[0]:.2e}; about {rank} usable): whitening cannot invert it. "
                               f"Set evaluate.whitening.dim to at most {rank}, or fit on more varied sentences "
                               f"(evaluate.whitening.fit_on / sample_size) in params.yaml.")
        w = u / np.sqrt(s)[None, :]
        return cls(mu=mu, W=w, fit_size=n)

    @property
    def out_dim(self) -> int:
        return int(self.W.shape[1])

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return ((np.asarray(x, dtype=np.float64) - self.mu) @ self.W).astype(np.float32)

    def info(self) -> dict:
        return {"fit_size": self.fit_size, "in_dim": int(self.W.shape[0]), "out_dim": self.out_dim}


def corpus_sample(path: Path, sample_size: Optional[int], seed: int) -> list[str]:
    """A seeded sample of ``sample_size`` sentences of the training corpus (all of it if smaller or None)."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise SentlabError(f"{path} is missing; evaluate.whitening.fit_on: corpus needs the prepared corpus. "
                           f"Run `dvc repro prepare`, or set fit_on: sts_pool in params.yaml.")
    texts = pd.read_parquet(path, columns=["text"]).text
    if sample_size is not None and len(texts) > sample_size:
        texts = texts.sample(n=sample_size, random_state=seed)
    return list(texts)


def whiten_lookup(lookup: dict[str, np.ndarray], whitening: Whitening) -> dict[str, np.ndarray]:
    """Apply the transform to every embedding of a sentence -> embedding lookup (one matrix product)."""
    keys = list(lookup)
    out = whitening(np.stack([lookup[k] for k in keys]))
    return dict(zip(keys, out))
