"""The ablation variants the papers' tables need: one definition for params.yaml, DVC and the report.

A variant ``<method>_<suffix>`` is the method trained with a few keys of
``methods.<method>`` overridden (``pipeline/train.py METHOD --variant SUFFIX --set k=v ...``);
its model is ``models/<method>_<suffix>`` and its metrics ``reports/metrics/<method>_<suffix>.json``.
The DVC ablation stages run only with ``ablations.enabled: true``; otherwise they write
"not run in this profile" and the report says so in the row.

:func:`params_block` renders the ``ablations.variants`` mapping for params.yaml, so the
matrix/foreach stage and the report read the same names::

    python -c "from sentlab.report.ablations import params_block; print(params_block())"
"""

from __future__ import annotations

from typing import Any


def _l2p_variants() -> dict[str, dict[str, Any]]:
    from ..methods.l2p import ABLATIONS

    return {k: dict(v["overrides"]) for k, v in ABLATIONS.items() if k != "full"}


def _num(v: float) -> str:
    """0.1 -> '0p1', 10.0 -> '10': a DVC/file-name-safe spelling of a number."""
    return f"{v:g}".replace(".", "p")


# method -> {suffix: overrides of methods.<method>}
VARIANTS: dict[str, dict[str, dict[str, Any]]] = {
    # PT-BERT Table 2: SimCSE max length 32 (= simcse) / 64 / 128
    "simcse": {"len64": {"max_length": 64}, "len128": {"max_length": 128}},
    # PT-BERT Table 5a/b: pseudo sequence length m (128 = ptbert), queue size (256 = ptbert);
    # SPEC §3.5: the two readings of Y
    "ptbert": {
        **{f"m{m}": {"pseudo_len": m} for m in (64, 90, 256, 360)},
        **{f"q{q}": {"queue_size": q} for q in (192, 320)},
        "tokens": {"attend_to": "tokens"},
    },
    "paser": {
        # Table 4: augmentation (SR = paser)
        **{f"aug_{k.replace('+', '_')}": {"eda": k} for k in ("none", "rs", "rd", "sr", "sr+rd", "sr+rs")},
        # Table 5: phrases (RAKE top-5 = paser)
        "np": {"phrases": "np"}, "vp": {"phrases": "vp"}, "np_vp": {"phrases": "np_vp"},
        **{f"rake{k}": {"top_k": k} for k in (1, 2, 3, 4)},
        # Table 8: m, n grid (10, 10 = paser)
        **{f"m{_num(m)}_n{_num(n)}": {"m": m, "n": n} for m, n in ((0.1, 1.0), (1.0, 1.0), (10.0, 1.0), (10.0, 0.1))},
        # Table 9: pooling ([CLS] = paser)
        "pool_mean": {"pooling": "mean"}, "pool_top2": {"pooling": "top2_mean"}, "pool_first_last": {"pooling": "first_last"},
        # Fig. 4: decoder depth 1..8 (6 = paser)
        **{f"dec{d}": {"decoder_layers": d} for d in (1, 2, 3, 4, 5, 7, 8)},
    },
    # L2P-CSR Table 3 + Fig. 2 sweeps (sentlab.methods.l2p.ABLATIONS; "full" = l2p)
    "l2p": _l2p_variants(),
    # sentlab's own POS/BOW ablations (no paper number)
    "posbow_adv": {"noadv": {"adversary": "none"}, "noaux": {"aux_tasks": False, "adversary": "none"}},
}


def variant_names() -> list[str]:
    return [f"{m}_{s}" for m, vs in VARIANTS.items() for s in vs]


def set_args(overrides: dict[str, Any]) -> str:
    """``{"m": 0.1, "n": 1.0}`` -> ``m=0.1 --set n=1.0`` (follows a literal ``--set`` in the stage cmd)."""
    def val(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        return str(v)
    return " --set ".join(f"{k}={val(v)}" for k, v in overrides.items())


def params_block() -> str:
    """The ``ablations:`` block of params.yaml (``enabled`` + one entry per variant, ``set`` = overrides)."""
    import yaml

    lines = ["ablations:", "  enabled: false", "  variants:"]
    for m, vs in VARIANTS.items():
        for s, ov in vs.items():
            flow = yaml.safe_dump(ov, default_flow_style=True, width=1000).strip()
            lines.append(f"    {m}_{s}: {{method: {m}, set: {flow}}}")
    return "\n".join(lines) + "\n"
