"""MLflow run names (:func:`run_name`): the method and the params that tell its runs apart."""

from __future__ import annotations

from typing import Any, Mapping

# --- run names -------------------------------------------------------------------------------
# The params that tell runs of one method apart (ablation axes) are the method's own: its class's
# ``run_name_params`` (sentlab.methods.base.Method), handed to run_name as ``keys``.
TRAIN_KEYS = ("batch_size", "lr")


def _short(v: Any) -> str:
    if isinstance(v, bool):
        return "T" if v else "F"
    if isinstance(v, float):
        return f"{v:g}"
    return "null" if v is None else str(v)


def run_name(method: str, params: Mapping[str, Any] | None = None, *, variant: str | None = None,
             train: Mapping[str, Any] | None = None, keys: tuple[str, ...] = ()) -> str:
    """A run name carrying the method and its key params, e.g.
    ``ptbert[m64] pseudo_len=64 queue_size=256 bs=64 lr=3e-05``.

    ``params`` is the method's params (``methods.<method>`` validated, as a dict); ``keys`` the ones named, in
    order (the method class's ``run_name_params``); ``train`` adds batch size and learning rate. At most 250
    characters (MLflow's limit).
    """
    params = dict(params or {})
    head = method + (f"[{variant}]" if variant else "")
    parts = [f"{k}={_short(params[k])}" for k in keys if k in params]
    if train:
        abbrev = {"batch_size": "bs", "lr": "lr"}
        parts += [f"{abbrev[k]}={_short(train[k])}" for k in TRAIN_KEYS if k in train]
    return " ".join([head, *parts])[:250]
