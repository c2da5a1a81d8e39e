"""Reading tensor files without unpickling, and one paragraph when they cannot be read.

sentlab reads weights only as tensors: safetensors, or ``torch.load(weights_only=True)``. A file
that needs arbitrary code to load (a pickled object inside a ``.bin``/``.pt``) or a corrupt one
(truncated by an interrupted copy) is a :class:`~sentlab.errors.SentlabError` (exit 2) naming the
file and the fix, never PyTorch's advice to retry with ``weights_only=False`` (which would run the
code inside the file).
"""

from __future__ import annotations

import pickle
from pathlib import Path

from ..errors import SentlabError

PICKLED = ("holds Python objects that only unpickling could load (not just tensors); sentlab never unpickles "
           "weights, as that can run arbitrary code")


def unreadable_reason(e: BaseException) -> str:
    """Why a tensor file could not be read, in words that never suggest ``weights_only=False``."""
    text = str(e)
    if isinstance(e, pickle.UnpicklingError) or "weights_only" in text or "Weights only load failed" in text:
        return PICKLED
    first = text.strip().splitlines()[0][:200] if text.strip() else ""
    return f"is corrupt or incomplete ({type(e).__name__}{': ' + first if first else ''})"


def load_tensors(path: str | Path, fix: str):
    """``torch.load(path, weights_only=True)`` on the CPU; an unreadable file raises one paragraph
    naming ``path`` and ``fix`` (what the user does about it)."""
    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, KeyError, AttributeError) as e:
        raise SentlabError(f"The weights file {path} {unreadable_reason(e)}. {fix}") from None
