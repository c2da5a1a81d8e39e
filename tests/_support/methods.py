"""``tiny_method``: a registered method on a tiny BERT, the way the method tests build one (issue #57 §5)."""

import torch

from sentlab.config import TrainParams
from sentlab.methods import get_method
from tiny import tiny_bert


def tiny_method(method_id: str, tok, *, model=None, batch_size: int = 8, max_length: int = 16, lr: float = 1e-3,
                torch_seed: int | None = 0, **params):
    """Method ``method_id`` with ``params`` (its Params fields) over ``model`` (default: a tiny BERT with
    ``initializer_range`` 0.2) and ``tok``; torch's global seed is set to ``torch_seed`` first (None: left as is)."""
    cls = get_method(method_id)
    if torch_seed is not None:
        torch.manual_seed(torch_seed)
    model = model if model is not None else tiny_bert(tok, 0, initializer_range=0.2)
    cfg = TrainParams(batch_size=batch_size, max_length=max_length, lr=lr)
    return cls(model, tok, cls.Params(**params).resolved(cfg), seed=0)
