"""sentlab: a reproducible pipeline for unsupervised sentence embeddings."""

__version__ = "0.1.0"
