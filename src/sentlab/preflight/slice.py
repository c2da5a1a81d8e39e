"""The tiny slice, as plain edits of the scratch copy's params.yaml (the values in force).

In the scratch copy, ``sentlab profile P`` writes the profile's values (``--force`` when the copy's
params.yaml is another profile's; the same profile keeps its hand edits, as ``make repro PROFILE=P`` does),
then :func:`slice_edits` are merged into params.yaml and the stage list is written again (``sentlab
stages``). The slice: ``prepare.size``; a few training steps with one dev evaluation at the end
(``train.max_steps``, ``train.eval_every``; as many for the BERT-flow fit, ``evaluate.bert_flow.steps``), a
small batch, few STS-B dev pairs (``train.dev_max_pairs``), few pairs per evaluation task (``evaluate.max_pairs``),
one process (``runtime.nproc``); GLUE's fine-tunings as many steps on one seed (``glue``); and each method
line's own caps, which the method declares (:meth:`sentlab.methods.base.MethodParams.slice_caps`: its step
budget, CT's batch of 1 + negatives, L2P-CSR's ``max_sentences``, PaSeR's reconstruction check). Everything
else is the profile's own: the backbone, the methods, the ablation variants, their settings.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Optional

import yaml

from ..methods.blocks import validate_params

from ..config.yaml_files import deep_merge, read_yaml
from ..errors import SentlabError

# The slice (CLI flags change them; ``batch_size`` 0 keeps the profile's batch sizes).
SLICE = {"size": 1200, "steps": 3, "batch_size": 8, "dev_max_pairs": 40, "max_pairs": 40}


def apply_profile(scratch: Path, profile: str) -> dict:
    """``sentlab profile <profile>`` in the scratch copy (``--force`` over another profile's params.yaml);
    returns the values in force. A profile that does not validate raises its SentlabError."""
    from ..stages.profiles import set_profile

    path = scratch / "params.yaml"
    current = read_yaml(path).get("profile") if path.is_file() else None
    set_profile(path, profile, force=current != profile)
    return read_yaml(path)


def write_params(scratch: Path, values: dict, *edits: Optional[dict]) -> dict:
    """params.yaml of the scratch copy = ``values`` with ``edits`` merged in, and its stage list written
    again (what ``sentlab stages`` does); returns the merged values."""
    from ..stages.stage_list import write_stage_list

    merged = values
    for edit in edits:
        merged = deep_merge(merged, edit or {})
    path = scratch / "params.yaml"
    path.write_text(yaml.safe_dump(merged, sort_keys=False, width=120), encoding="utf-8")
    write_stage_list(validate_params(merged, source=f"{path} (preflight slice)"), scratch / "models.yaml")
    return merged


def _params_of(method_id: str, block: Optional[dict]):
    """Method ``method_id``'s Params for ``block`` (None when it is not registered or the block is invalid:
    its stage says so in its row)."""
    from ..methods import registered

    cls = registered().get(method_id)
    if cls is None:
        return None
    try:
        return cls.Params(**{k: v for k, v in (block or {}).items() if k != "from"})
    except Exception:  # noqa: BLE001 - an invalid block is its stage's row to report
        return None


def method_edits(values: dict, edit_of) -> dict:
    """``{methods: {id: edit}, methods_from: ..., ablations: {variants: {v: {set: edit}}}}`` where
    ``edit_of(params) -> dict`` (a method's own declaration: its slice caps, a stand-in) is not empty. A variant
    gets the keys of its own ``set`` only: the others it takes from its method's (edited) line."""
    out: dict = {}
    for section in ("methods", "methods_from"):
        for mid, block in (values.get(section) or {}).items():
            p = _params_of(mid, block)
            edit = edit_of(p) if p is not None else {}
            if edit:
                out.setdefault(section, {})[mid] = edit
    lines = {**(values.get("methods") or {}), **(values.get("methods_from") or {})}
    for name, spec in ((values.get("ablations") or {}).get("variants") or {}).items():
        own = (spec or {}).get("set") or {}
        method = (spec or {}).get("method")
        p = _params_of(method, deep_merge({k: v for k, v in (lines.get(method) or {}).items() if k != "from"}, own))
        edit = {k: v for k, v in (edit_of(p) if p is not None else {}).items() if k in own}
        if edit:
            out.setdefault("ablations", {}).setdefault("variants", {})[name] = {"set": edit}
    return out


def slice_edits(values: dict, sl: dict, device: str = "cpu") -> dict:
    """The params.yaml edits of the slice ``sl`` for the values in force ``values``, on ``device``
    (``runtime.device``, stated: a GPU profile's slice runs on the CPU only where it says so, as the rehearsal's
    stand-ins do; the preflight passes the device it finds: :func:`slice_device`)."""
    size = min(sl["size"], int((values.get("prepare") or {}).get("size", sl["size"])))
    steps = sl["steps"]
    train = {"max_steps": steps, "eval_every": steps, "grad_accum": 1, "dev_max_pairs": sl["dev_max_pairs"],
             "epochs": 1}
    if sl["batch_size"] > 0:  # 0: the profile's own batch sizes (memory and step time at the paper's batch)
        train["batch_size"] = sl["batch_size"]
    edits = {"prepare": {"size": size}, "train": train,
             "evaluate": {"max_pairs": sl["max_pairs"]},
             "runtime": {"nproc": 1, "device": device}}
    if "bert_flow" in ((values.get("evaluate") or {}).get("baselines") or []):
        edits["evaluate"]["bert_flow"] = {"steps": steps}   # the BERT-flow fit: the slice's step budget, not an epoch
    glue = values.get("glue") or {}
    if glue.get("models"):   # each GLUE fine-tuning: the slice's steps on as many examples, one seed, few dev rows
        batch = sl["batch_size"] or int((glue.get("finetune") or {}).get("batch_size", 32))
        edits["glue"] = {"seeds": list(glue.get("seeds") or [values.get("seed", 42)])[:1],
                         "finetune": {"max_steps": steps, "max_train": steps * batch, "max_dev": sl["max_pairs"],
                                      "batch_size": batch}}
    caps = {"steps": steps, "batch_size": sl["batch_size"], "sentences": size}
    return deep_merge(edits, method_edits(values, lambda p: p.slice_caps(**caps)))


def slice_device(values: dict) -> tuple[str, str]:
    """(the preflight's ``runtime.device``, the line that says so): CUDA where torch sees a GPU, else the CPU; a
    profile that asks for ``cuda`` and runs its slice on the CPU here is told so (its full run here would stop:
    ``sentlab doctor``)."""
    from ..runtime.device import check_device

    here = check_device("auto")
    asked = (values.get("runtime") or {}).get("device", "auto")
    note = f"runtime.device: {here} (the profile's: {asked})"
    if asked == "cuda" and here == "cpu":
        note += ("; torch sees no CUDA GPU here, so the slice runs on the CPU by this override, and the projected "
                 "times are CPU times; the full run stops here until it does (`sentlab doctor`)")
    return here, note


WHITENING_STAGE = "evaluate_baseline@whitening"


def whitening_min_pairs(values: dict) -> int:
    """Pairs per task the whitening baseline's stage needs so that its ``sts_pool`` fit (the distinct sentences
    of the evaluated pairs of 7 tasks + STS-B dev: at most 16 per pair count) has 1.5x more sentences than the
    backbone has dimensions (else the covariance is singular: a failure of the slice, not of the profile); 0
    when the profile has no such baseline or the backbone's width is unknown here. Only that stage runs with
    them: at 72 pairs per task every bert-base evaluation took twice as long."""
    ev = values.get("evaluate") or {}
    wh = ev.get("whitening") or {}
    if "whitening" not in (ev.get("baselines") or []) or wh.get("fit_on", "sts_pool") != "sts_pool":
        return 0
    hidden = backbone_width(str((values.get("model") or {}).get("backbone", "")))
    return math.ceil(1.5 * hidden / 16) if hidden else 0


def backbone_width(backbone: str) -> Optional[int]:
    """``hidden_size`` of ``backbone``: its kept architecture config, else its config.json when it is here."""
    from .. import backbones

    kept = backbones.spec(backbone)
    if kept is not None:
        return int(kept["config"]["hidden_size"])
    try:
        from ..assets.resolve import resolve_model

        cfg = json.loads((Path(resolve_model(backbone)) / "config.json").read_text(encoding="utf-8"))
        return int(cfg["hidden_size"])
    except (SentlabError, OSError, KeyError, ValueError):  # not here: the stages that load it say so
        return None
