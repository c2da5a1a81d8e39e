"""sentence-transformers modules for the poolings sentence-transformers does not have.

A sentlab model folder is a ``SentenceTransformer`` folder: sentence-transformers' own ``Transformer``
and ``Pooling`` (cls, mean) wherever they express the pooling, and these small modules where they
do not (:func:`sentlab.export.st.build_sentence_transformer` chooses):

* :class:`TemplateTransformer` — ``Transformer`` that appends the text after ``{sentence}`` of a
  PromptBERT template; the text before it is the model's default prompt
  (``prompts`` in ``config_sentence_transformers.json``), which sentence-transformers prepends;
* :class:`MaskPooling` — the vector at the (first) [MASK] token (PromptBERT, L2P-CSR ``prompt``);
* :class:`LayerMeanPooling` — the mean of several layers' masked token averages (``first_last``:
  the embedding output and the last layer; ``top2_mean``: the last two layers);
* :class:`ChannelSlice` — named slices of the embedding (the POS/BOW channels):
  ``model.encode(texts, channel="pos")``; without ``channel`` the whole embedding.

Each calls the declared pooling (:mod:`sentlab.config.poolings`), the one implementation
:class:`sentlab.nn.encoder.SentenceEncoder` calls too (``tests/test_st_export.py`` pins the agreement to 1e-5); which
module exports which pooling follows from its declaration (:func:`sentlab.export.st.build_sentence_transformer`).
Loading a folder that uses them needs sentlab installed and, since sentence-transformers 6,
``trust_remote_code=True`` (the flag that lets sentence-transformers import a module class from outside its own
package; nothing is downloaded).
"""

from __future__ import annotations

from typing import Any, Optional

try:  # sentence-transformers >= 6
    from sentence_transformers.sentence_transformer.modules import Module, Transformer
except ImportError:  # 5.x
    from sentence_transformers.models import Module, Transformer

from ..config.poolings import POOLINGS, layer_mean


class TemplateTransformer(Transformer):
    """sentence-transformers' ``Transformer`` that appends ``template_suffix`` to every text input.

    The PromptBERT template ``'This sentence : "{sentence}" means [MASK] .'`` is split at
    ``{sentence}``: the head is the model's default prompt (prepended by sentence-transformers), the
    tail is appended here, so the text tokenised is the template filled in, as sentlab's encoder
    tokenises it.
    """

    config_keys = [*Transformer.config_keys, "template_suffix", "end_period"]

    def __init__(self, model_name_or_path: str, *, template_suffix: str = "", end_period: bool = False,
                 **kwargs) -> None:
        super().__init__(model_name_or_path, **kwargs)
        self.template_suffix = template_suffix
        self.end_period = end_period   # PromptBERT's test input: sentlab.nn.encoder.end_with_period

    def preprocess(self, inputs, prompt: Optional[str] = None, **kwargs) -> dict[str, Any]:
        if self.end_period:
            from ..config.poolings import end_with_period

            inputs = [end_with_period([x])[0] if isinstance(x, str) else x for x in inputs]
        if self.template_suffix:
            inputs = [x + self.template_suffix if isinstance(x, str) else x for x in inputs]
        return super().preprocess(inputs, prompt=prompt, **kwargs)

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), "template_suffix": self.template_suffix, "end_period": self.end_period}


class _PoolingModule(Module):
    """A pooling module whose output width is its ``embedding_dimension`` and whose state is its config."""

    embedding_dimension: int

    def get_sentence_embedding_dimension(self) -> int:
        return self.embedding_dimension

    get_embedding_dimension = get_sentence_embedding_dimension

    def save(self, output_path: str, *args, **kwargs) -> None:
        self.save_config(output_path)


class MaskPooling(_PoolingModule):
    """The last layer's vector at the first ``mask_token_id`` of each input (PromptBERT's [MASK]).

    An input whose [MASK] was truncated away raises :class:`~sentlab.errors.SentlabError`, as in
    :func:`sentlab.nn.encoder.mask_positions`, instead of pooling another token.
    """

    config_keys = ["mask_token_id", "embedding_dimension"]

    def __init__(self, mask_token_id: int, embedding_dimension: int) -> None:
        super().__init__()
        self.mask_token_id = int(mask_token_id)
        self.embedding_dimension = int(embedding_dimension)

    def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
        features["sentence_embedding"] = POOLINGS["mask"](features["token_embeddings"], features["attention_mask"],
                                                          input_ids=features["input_ids"],
                                                          mask_token_id=self.mask_token_id)
        return features


class LayerMeanPooling(_PoolingModule):
    """The mean over ``layers`` (indices into the hidden states, 0 = embedding output) of each
    layer's attention-masked token average: a declared pooling's ``layers`` (``[0, -1]`` is ``first_last``,
    ``[-1, -2]`` ``top2_mean``).

    Reads ``all_layer_embeddings``, which the ``Transformer`` module returns when the model config
    has ``output_hidden_states`` (the exported ``config.json`` does).
    """

    config_keys = ["layers", "embedding_dimension"]

    def __init__(self, layers: list[int], embedding_dimension: int) -> None:
        super().__init__()
        self.layers = [int(i) for i in layers]
        self.embedding_dimension = int(embedding_dimension)

    def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
        if "all_layer_embeddings" not in features:
            raise ValueError("LayerMeanPooling needs the hidden states of every layer: load the model with "
                             "config_kwargs={'output_hidden_states': True} (the exported config.json sets it)")
        hs = features["all_layer_embeddings"]
        features["sentence_embedding"] = layer_mean([hs[i] for i in self.layers], features["attention_mask"])
        return features


class ChannelSlice(Module):
    """Named slices ``[lo, hi)`` of the sentence embedding (the POS/BOW model's channels).

    ``model.encode(texts, channel="pos")`` returns that channel; without ``channel`` the whole
    embedding passes through unchanged.
    """

    config_keys = ["channels"]
    forward_kwargs = {"channel"}

    def __init__(self, channels: dict[str, list[int]]) -> None:
        super().__init__()
        self.channels = {str(k): [int(v[0]), int(v[1])] for k, v in channels.items()}

    def forward(self, features: dict[str, Any], channel: Optional[str] = None, **kwargs) -> dict[str, Any]:
        if channel is None:
            return features
        if channel not in self.channels:
            raise ValueError(f"unknown channel {channel!r}; this model has: {', '.join(self.channels)}")
        lo, hi = self.channels[channel]
        features["sentence_embedding"] = features["sentence_embedding"][:, lo:hi]
        return features

    def save(self, output_path: str, *args, **kwargs) -> None:
        self.save_config(output_path)

