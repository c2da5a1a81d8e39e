"""Trained models for use elsewhere: sentence-transformers folders and model cards.

* :mod:`sentlab.export.modules` — sentence-transformers module classes for the poolings
  sentence-transformers lacks ([MASK] vector, first_last/top2_mean, channel slices, template tail);
* :mod:`sentlab.export.st` — writes a model folder's sentence-transformers files with
  sentence-transformers' own ``save``, and reads any such folder's pooling back;
* :mod:`sentlab.export.card` — the Hugging Face model card (``README.md`` with ``model-index``).
"""

from .st import load_sentence_transformer, st_pooling_info, write_sentence_transformers

__all__ = ["load_sentence_transformer", "st_pooling_info", "write_sentence_transformers"]
