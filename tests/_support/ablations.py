"""A test helper (nothing in src/ imports it, so it left ``sentlab.report``: #67 §3). The ablation variants, read from
their one registry: ``params.yaml``'s ``ablations.variants``.

A variant ``<name>: {method: <id>, set: {<key>: <value>}}`` is the method trained with those keys of
``methods.<id>`` overridden (``pipeline/train.py --variant``); its model is ``models/<name>`` and its
metrics ``reports/metrics/<name>.json``. The DVC ablation stages run only with ``ablations.enabled:
true``; otherwise they write "not run in this profile" and the report says so in the row.

The report does not keep a copy of this list: a table row names the model(s) it reads and the method
settings it expects (:class:`sentlab.report.paper_tables.RowSpec`), and :func:`trained_settings` gives
the method block a model name is trained with under a profile, so a test can check that each row's
model is trained with what the row expects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from sentlab.config import Params
from sentlab.methods.blocks import load_checked

from sentlab.config.yaml_files import deep_merge
from sentlab.errors import SentlabError

REPO_PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"


def load(path: Optional[Path] = None, profile: Optional[str] = None) -> Params:
    """params.yaml (``path``; else the working directory's, else the repository's) with ``profile`` in force."""
    path = Path(path) if path else (Path("params.yaml") if Path("params.yaml").is_file() else REPO_PARAMS)
    return load_checked(path, profile)


def variants(params: Params) -> dict[str, tuple[str, dict[str, Any]]]:
    """``{name: (method id, overrides)}`` of ``ablations.variants``."""
    return {name: (v.method, dict(v.set)) for name, v in params.ablations.variants.items()}


def trained_settings(params: Params, model: str) -> Optional[dict[str, Any]]:
    """The validated method block ``models/<model>`` is trained with under ``params``: ``methods.<model>``
    for a method, ``methods.<method>`` + the variant's ``set`` for an ablation; None for anything else
    (a baseline)."""
    from sentlab.methods import get_method

    spec = variants(params).get(model)
    method, overrides = spec if spec else (model, {})
    try:
        cls = get_method(method)
    except (KeyError, SentlabError):
        return None
    return cls.Params(**deep_merge(params.method_block(method), overrides)).model_dump()
