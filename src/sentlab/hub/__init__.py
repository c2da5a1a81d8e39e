"""A trained model on the Hugging Face Hub: its model card and the push.

* :mod:`sentlab.hub.card` — the Hugging Face model card (``README.md`` with ``model-index``), written by the export
  stage (``pipeline/export.py``) beside the sentence-transformers folder (:mod:`sentlab.export`);
* :mod:`sentlab.hub.push` — ``sentlab push``: an exported folder to the Hub.
"""
