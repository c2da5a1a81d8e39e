"""The methods' blocks of params.yaml, each checked against its method's own ``Params``.

:mod:`sentlab.config` is the schema of params.yaml and imports no method: it checks the sections' keys and values.
What a ``methods`` / ``methods_from`` line or an ablation variant may hold is the method's business, so it is checked
here, one floor up, by the registry that knows the methods:

* :func:`method_params` — one method's Params in force (its line, an ablation's overrides merged in);
* :func:`check_blocks` — every line names a registered method, in the right section (``init_from``), with keys and
  values its Params accepts; every ablation variant too;
* :func:`validate_params` / :func:`load_checked` — :func:`sentlab.config.validate` / :func:`~sentlab.config.load_params`
  followed by :func:`check_blocks`: what the profile files, ``sentlab profile`` and the command line use.

A stage reads its declared keys through :mod:`sentlab.config.stage_params` (the schema); the stage that uses a method's
block (a training, its evaluation) builds it through :func:`method_params`, which names the bad key.
"""

from __future__ import annotations

import os
from typing import Optional

from pydantic import ValidationError

from ..config import Params, format_validation, load_params, validate
from ..errors import SentlabError
from ..config.yaml_files import deep_merge
from . import get_method, registered


def method_params(params: Params, method_id: str, overrides: Optional[dict] = None, source: str = "params.yaml"):
    """The validated Params of ``method_id``: its params.yaml line with ``overrides`` (an ablation's ``set``) merged
    over it."""
    section = "methods_from" if method_id in params.methods_from else "methods"
    return _validated(get_method(method_id), deep_merge(params.method_block(method_id), overrides or {}),
                      f"{section}.{method_id}", source)


def _validated(cls, raw: dict, prefix: str, source: str):
    """``cls.Params(**raw)``; a bad key or value becomes one paragraph naming it as ``<prefix>.<key>``."""
    try:
        return cls.Params(**raw)
    except ValidationError as e:
        raise SentlabError(format_validation(e, cls.Params, prefix=prefix, source=source)) from None


def check_blocks(params: Params, source: str = "params.yaml") -> Params:
    """Each method line and ablation variant of ``params`` checked against its method (see the module docstring);
    returns ``params``. The error names the key, the allowed values and the fix."""
    known = registered()
    for mid in params.trained_ids:
        if mid not in known:
            raise SentlabError(
                f"Invalid params in {source}: method `{mid}` (in methods / methods_from) is not a registered method; "
                f"allowed: {', '.join(sorted(known))}. Run `sentlab methods` for the list."
            )
    for mid in params.trained_ids:
        init, given = known[mid].init_from, (params.methods_from.get(mid) or {}).get("from")
        if init != given:
            where = (f"it is in `methods_from` with from: {given}" if given else "it is in `methods`")
            fix = (f"move its line to `methods_from` as `{mid}: {{from: {init}, ...}}`" if init else
                   "move its line to `methods`")
            raise SentlabError(
                f"Invalid params in {source}: method `{mid}` starts from "
                f"{'the trained model of `' + init + '`' if init else 'the backbone'} (its init_from), but {where}; "
                f"{fix}, so its train stage depends on the right model.")
        method_params(params, mid, source=source)
    _check_ablations(params, known, source)
    return params


def _check_ablations(params: Params, known: dict[str, type], source: str) -> None:
    """Each variant (its shape checked by :class:`sentlab.config.Ablations`) names a registered method (``known``)
    and only keys of that method's Params, with values it accepts (merged over ``methods.<id>``, as the stage
    does)."""
    for name, spec in params.ablations.variants.items():
        key = f"ablations.variants.{name}"
        if spec.method not in known:
            raise SentlabError(f"Invalid params in {source}: `{key}.method`: {spec.method!r} is not a registered "
                               f"method; allowed: {', '.join(sorted(known))}.")
        _validated(known[spec.method], deep_merge(params.method_block(spec.method), spec.set), f"{key}.set", source)


def validate_params(raw: dict, source: str = "params.yaml") -> Params:
    """A raw params mapping validated whole: the schema (:func:`sentlab.config.validate`), then every method block."""
    return check_blocks(validate(raw, source), source)


def load_checked(path: str | os.PathLike = "params.yaml", profile: Optional[str] = None) -> Params:
    """:func:`sentlab.config.load_params` followed by :func:`check_blocks`."""
    return check_blocks(load_params(path, profile), f"profile {profile}" if profile is not None else str(path))
