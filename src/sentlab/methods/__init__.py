"""Training methods, one module each, registered by id.

A method is a :class:`~sentlab.methods.base.Method` subclass decorated with
:func:`register`. ``sentlab methods`` lists them. The method-agnostic loop in
:mod:`sentlab.train` drives any of them.
"""

from __future__ import annotations

import importlib
import pkgutil

from ..errors import SentlabError

_REGISTRY: dict[str, type] = {}
NOT_METHODS = ("base", "blocks")   # the modules here that define no method: the base class, the params check
_LOADED = False


def register(method_id: str):
    """Class decorator: make a Method available under ``method_id``."""

    def deco(cls):
        if method_id in _REGISTRY and _REGISTRY[method_id] is not cls:
            raise RuntimeError(f"method id {method_id!r} registered twice")
        cls.id = method_id
        _REGISTRY[method_id] = cls
        return cls

    return deco


def _load_all() -> None:
    global _LOADED
    if _LOADED:
        return
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_") and info.name not in NOT_METHODS:
            importlib.import_module(f"{__name__}.{info.name}")
    _LOADED = True


def registered() -> dict[str, type]:
    """All registered methods, id -> class."""
    _load_all()
    return dict(_REGISTRY)


def get_method(method_id: str):
    methods = registered()
    if method_id not in methods:
        raise SentlabError(
            f"Unknown method {method_id!r}; allowed: {', '.join(sorted(methods))}. "
            f"Run `sentlab methods` for one line on each."
        )
    return methods[method_id]
