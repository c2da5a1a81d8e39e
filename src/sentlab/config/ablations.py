"""params.yaml ``ablations``: the ablation variants, typed and checked here once.

::

    ablations:
      enabled: false            # true: one train + evaluate stage per variant (models.yaml)
      variants:
        l2p_no_feature_mask: {method: l2p, set: {feature_mask: false}}

A variant is a model of its own (``models/<variant>``): its method's line (``methods.<method>``) with ``set`` merged
over it. Its shape (a method, a mapping ``set``, nothing else; a name DVC's key paths accept) is checked here; what
``set`` may hold is the method's business (:func:`sentlab.methods.blocks.check_blocks` checks it against the
method's ``Params``). Every reader goes through :class:`Ablations` (``variants``, :meth:`Ablations.overrides`).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator

from ..errors import SentlabError
from .sections import Strict


class AblationVariant(Strict):
    method: str = Field(description="the registered method it trains")
    set: dict[str, Any] = Field(default_factory=dict, description="keys of the method's block, over its line")

    @field_validator("set", mode="before")
    @classmethod
    def _none_is_empty(cls, v):
        return {} if v is None else v


class Ablations(Strict):
    enabled: bool = Field(False, description="train and evaluate the variants (one stage each)")
    variants: dict[str, AblationVariant] = Field(default_factory=dict)

    @field_validator("enabled", mode="before")
    @classmethod
    def _real_bool(cls, v):
        if not isinstance(v, bool):
            raise ValueError(f"must be true or false, got {v!r} (a quoted 'false' is a string): write `enabled: "
                             f"false` or `enabled: true`")
        return v

    @field_validator("variants", mode="before")
    @classmethod
    def _names(cls, v):
        if v is None:
            return {}
        bad = [k for k in v if not re.fullmatch(r"[A-Za-z0-9_-]+", str(k))] if isinstance(v, dict) else []
        if bad:
            raise ValueError(f"variant names {bad} must use letters, digits, '_' and '-' only "
                             f"(a '.' breaks DVC's params key paths; write 0p01 for 0.01)")
        return v

    def variant(self, name: str) -> AblationVariant:
        """The variant ``name``; one not listed is one paragraph naming the list."""
        if name not in self.variants:
            raise SentlabError(f"Ablation `{name}` is not in params.yaml `ablations.variants`; known: "
                               f"{', '.join(sorted(self.variants)) or 'none'}. Each variant is "
                               f"`{{method: <id>, set: {{<key>: <value>}}}}`.")
        return self.variants[name]

    def overrides(self, name: str) -> dict[str, Any]:
        """The variant's ``set`` (a copy), or ``{}`` for a name that is no variant (a method line, a seed)."""
        return dict(self.variants[name].set) if name in self.variants else {}
