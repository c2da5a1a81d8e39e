"""A model folder as a sentence-transformers model: the on-disk format every trained model is published in.

* :mod:`sentlab.export.modules` — sentence-transformers module classes for the poolings
  sentence-transformers lacks ([MASK] vector, first_last/top2_mean, channel slices, template tail);
* :mod:`sentlab.export.st` — writes a model folder's sentence-transformers files with
  sentence-transformers' own ``save``, and reads any such folder's pooling back.

On the ground floor (docs/architecture.md): training publishes its models in this format
(:mod:`sentlab.train.checkpoint`), ``sentlab evaluate --model`` and RankCSE's teachers read it back. The package's
name is part of the format: a folder's ``modules.json`` names the module classes by their import path
(``sentlab.export.modules.MaskPooling``, ...), so a move would break every published model. What publishes a model
beyond its folder (the model card, the push to the Hub) is :mod:`sentlab.hub`.
"""

from .st import load_sentence_transformer, st_pooling_info, write_sentence_transformers

__all__ = ["load_sentence_transformer", "st_pooling_info", "write_sentence_transformers"]
