"""Fixed-shape batches (``train.pad_buckets``, issue #58): the padded length of a batch and the padding itself.

Below the methods (:meth:`sentlab.methods.base.Method.encode_text` pads with them); why and when:
:mod:`sentlab.train.compiled`.
"""

from __future__ import annotations

from typing import Sequence

import torch


def bucket_length(longest: int, buckets: Sequence[int], max_length: int) -> int:
    """The padded length of a batch whose longest row has ``longest`` tokens: the smallest bucket >= it, else
    ``max_length`` (the implicit last bucket)."""
    return next((b for b in sorted(buckets) if b >= longest), max(max_length, longest))


def pad_features(enc: dict[str, torch.Tensor], length: int, pad_token_id: int) -> dict[str, torch.Tensor]:
    """``enc`` (a right-padded tokenizer output: ``input_ids``, ``attention_mask``, ``token_type_ids`` ...) padded on
    the right to ``length`` columns: input ids with ``pad_token_id``, every other column with 0."""
    out = {}
    for k, v in enc.items():
        extra = length - v.size(-1)
        if not isinstance(v, torch.Tensor) or v.dim() != 2 or extra <= 0:
            out[k] = v
            continue
        fill = pad_token_id if k == "input_ids" else 0
        out[k] = torch.nn.functional.pad(v, (0, extra), value=fill)
    return out
