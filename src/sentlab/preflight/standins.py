"""Missing assets: what a stage's error names, the command that fetches it, and the stand-ins that let the
preflight go on.

A stand-in is a params.yaml edit of the scratch copy, like the slice: SimCSE's NLI triples -> the SICK
stand-in (``prepare.nli: sick_standin``); GloVe's vectors -> the baselines without ``glove``; GLUE's or the
retrieval tasks' data -> the suite without those tasks (without its stages when none is here); anything a method
line can do without declares the edit itself
(:meth:`sentlab.methods.base.MethodParams.standin`: PaSeR's EDA without WordNet's synonyms, ``sr`` -> ``rd``).
The backbone, when it is not here but its architecture is kept (:mod:`sentlab.backbones`), is had as its
hub-shaped stand-in in a scratch mirror.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from ..errors import SentlabError
from ..methods.blocks import method_params
from .slice import method_edits

# Stand-ins of the pipeline's own (not a method's): asset -> (params.yaml edit, description).
PIPELINE_STANDINS = {"nli": ({"prepare": {"nli": "sick_standin"}}, "prepare.nli: sick_standin (the SICK stand-in)")}


def classify_asset(message: str) -> tuple[str, str]:
    """(asset, fetch command) named by an :class:`~sentlab.errors.AssetMissingError` message."""
    from ..assets.resolve import data_fetch_command, hub_fetch_command

    m = re.search(r"NLTK resource '([^']+)'", message)
    if m:
        return f"NLTK {m.group(1)}", f"python -m nltk.downloader {m.group(1)}"
    m = re.search(r"Data asset '([^']+)'", message)
    if m:
        return m.group(1), data_fetch_command(m.group(1))
    m = re.search(r"(?:Model|tokenizer of) '([^']+)'", message)
    if m:
        return f"hub model {m.group(1)}", hub_fetch_command(m.group(1))
    m = re.search(r"`([^`]+)`", message)
    return "asset", m.group(1) if m else ""


def standin_for(asset: str, values: dict) -> tuple[Optional[dict], str]:
    """(params.yaml edit, description) that lets the pipeline go on without ``asset``, or (None, "")."""
    if asset == "nli":
        edit, what = PIPELINE_STANDINS[asset]
        ev = values.get("evaluate") or {}
        if "whitening" in (ev.get("baselines") or []) and (ev.get("whitening") or {}).get("fit_on") == "nli":
            # the stand-in's few hundred sentences cannot whiten a 768-wide embedding (a singular covariance);
            # BERT-flow fits on them (the code path is the same as on SNLI + MNLI)
            return ({**edit, "evaluate": {"whitening": {"fit_on": "sts_pool"}}},
                    what + "; evaluate.whitening.fit_on: sts_pool (too few stand-in sentences to whiten)")
        return edit, what
    if asset in PIPELINE_STANDINS:
        return PIPELINE_STANDINS[asset]
    if asset.startswith("glue_") or asset in RETRIEVAL_ASSETS:
        return suite_standin("glue" if asset.startswith("glue_") else "retrieval", values)
    if asset == "glove":   # the GloVe baseline needs its vectors and nothing else does: the others go on without it
        bases = [b for b in ((values.get("evaluate") or {}).get("baselines") or []) if b != "glove"]
        return {"evaluate": {"baselines": bases}}, "evaluate.baselines without glove (its report row: needs data)"
    edit = method_edits(values, lambda p: p.standin(asset))
    if not edit:
        return None, ""
    changes = [f"{line}: " + ", ".join(f"{k} {v}" for k, v in e.items()) for line, e in _line_edits(edit)]
    more = f" and {len(changes) - 4} more" if len(changes) > 4 else ""
    return edit, f"the method lines' own stand-in without {asset} ({'; '.join(changes[:4])}{more})"


RETRIEVAL_ASSETS = ("qqp", "askubuntu_text", "askubuntu_test")


def _here(suite: str, task: str) -> bool:
    """Whether the data of ``task`` of ``suite`` (glue, retrieval) can be had here."""
    from ..errors import AssetMissingError

    try:
        if suite == "glue":
            from ..evaluate.suites.glue import glue_files

            glue_files(task)
        else:
            from ..assets.resolve import resolve_data
            from ..stages.sources import RETRIEVAL_ASSETS as BY_TASK

            for name in BY_TASK[task]:
                resolve_data(name)
    except AssetMissingError:
        return False
    return True


def suite_standin(suite: str, values: dict) -> tuple[dict, str]:
    """The ``suite`` (glue, retrieval) without its tasks whose data is not here; without its stages when none is
    (their report cells say "needs data", naming the fetch command)."""
    tasks = list((values.get(suite) or {}).get("tasks") or [])
    kept = [t for t in tasks if _here(suite, t)]
    gone = ", ".join(t for t in tasks if t not in kept)
    if kept:
        return {suite: {"tasks": kept}}, f"{suite}.tasks without {gone} (their report cells: needs data)"
    return {suite: {"models": []}}, f"{suite}.models: [] ({gone}: no data here; the report rows: needs data)"


def _line_edits(edit: dict) -> list[tuple[str, dict]]:
    out = [(m, e) for s in ("methods", "methods_from") for m, e in (edit.get(s) or {}).items()]
    return out + [(v, e["set"]) for v, e in ((edit.get("ablations") or {}).get("variants") or {}).items()]


def model_block(values: dict, spec) -> dict:
    """The method block the model ``spec`` (a :class:`~sentlab.config.models.ModelSpec`) trains with under the raw
    params ``values``: its line, with an ablation variant's ``set`` on top."""
    from ..config.yaml_files import deep_merge

    section, _, mid = spec.line.partition(".")
    block = dict((values.get(section) or {}).get(mid) or {})
    if spec.variant:
        variant = ((values.get("ablations") or {}).get("variants") or {}).get(spec.variant) or {}
        block = deep_merge(block, variant.get("set") or {})
    return block


def changed_models(before: dict, after: dict, models: dict) -> set[str]:
    """The models (models.yaml names) whose method block differs between the values ``before`` and ``after``
    (a stand-in's edit): they train with the stand-in."""
    return {n for n, s in models.items() if model_block(before, s) != model_block(after, s)}


def corpus_standin(real) -> Optional[str]:
    """The sample asset the preflight's slice trains on when the profile's corpus is not here (wiki1m_head for a
    missing wiki1m), or None (the corpus is here, or no sample is: prepare's own row says what is missing). The
    slice is a few hundred sentences either way; the full run never takes the sample (issue #54 §2)."""
    from ..assets.resolve import ASSETS, data_present

    name = real.prepare.corpus
    if data_present(name):
        return None
    samples = [a for a in ASSETS if a.startswith(name + "_") and data_present(a)]
    return samples[0] if samples else None


def corpus_shortfall(real, standin: Optional[str]) -> Optional[tuple[str, str]]:
    """(asset, fetch) when the slice ran on the sample ``standin`` because the profile's corpus is not here."""
    from ..assets.resolve import ASSETS, data_fetch_command, resolve_data

    if standin is None:
        return None
    r = resolve_data(standin)
    return (f"{real.prepare.corpus} (only {r.path} here, the {ASSETS[standin].lines:,}-line sample `{standin}`; the "
            f"profile asks for {real.prepare.corpus}, {real.prepare.size:,} sentences)",
            data_fetch_command(real.prepare.corpus))


def backbone_standin(backbone: str, scratch: Path) -> tuple[Optional[Path], str, Optional[tuple[str, str]]]:
    """(a scratch mirror that holds the backbone's stand-in, for the stage processes' SENTLAB_DATA_MIRROR, or None
    when the backbone is here; how the backbone is had; (asset, fetch) when it cannot be)."""
    from .. import backbones
    from ..assets.resolve import hub_fetch_command, mirror_root, resolve_model
    from ..backbones.standin import standin_mirror

    try:
        return None, f"{backbone} ({resolve_model(backbone)})", None
    except SentlabError:
        pass
    if backbones.spec(backbone) is None:
        return None, f"{backbone}: not here", (f"hub model {backbone}", hub_fetch_command(backbone))
    dest = scratch / ".preflight" / "mirror"
    try:
        standin_mirror(backbone, dest, mirror_root())
    except SentlabError:
        return None, f"{backbone}: not here, no offline tokenizer", (f"hub model {backbone}",
                                                                     hub_fetch_command(backbone))
    return dest, (f"stand-in of {backbone} (weights not here): the original checkpoint's layout, random values, "
                  f"loaded from the mirror's models/{backbone}"), None


def method_hub_models(real) -> list[str]:
    """Hub ids the profile's trained method lines load besides the backbone (their Params' ``hub_models``:
    a line's own backbone, DiffCSE's generator), each once, in order."""
    out: list[str] = []
    for mid in real.train.methods:
        for name in method_params(real, mid).hub_models():
            if name != real.model.backbone and name not in out:
                out.append(name)
    return out


def hub_standins(names, scratch: Path, mirror: Optional[Path]) -> tuple[Optional[Path], list[str]]:
    """(the scratch mirror, what it stands in) after writing the stand-in of every hub model of ``names`` that is
    not here but whose architecture is kept (:mod:`sentlab.backbones`: DiffCSE's ``distilbert-base-uncased``) into
    ``mirror`` (the backbone's scratch mirror; None: one is made when needed). A model that is here, or has no kept
    config or offline tokenizer, is left to its stage, whose row names the asset."""
    from .. import backbones
    from ..assets.resolve import mirror_root, resolve_model
    from ..backbones.standin import standin_mirror

    notes = []
    for name in names:
        try:
            resolve_model(name)
            continue
        except SentlabError:
            pass
        if backbones.spec(name) is None:
            continue
        dest = mirror or scratch / ".preflight" / "mirror"
        try:
            standin_mirror(name, dest, mirror_root())
        except SentlabError:
            continue
        mirror = dest
        notes.append(f"stand-in of {name} (weights not here): the original checkpoint's layout, random values")
    return mirror, notes
