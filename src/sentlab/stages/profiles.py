"""Profiles: override files that ``sentlab profile NAME`` applies to params.yaml (read by
:mod:`sentlab.config.profile_files`).

Every ``profiles/<name>.yaml`` is a profile (found by listing the folder: a researcher's ``profiles/mine.yaml``
works without touching code). ``profiles/quick.yaml`` holds every value (the base); any other file states the
profile it changes (``extends: <name>``, default ``quick``) and only what it changes there: ``smoke`` and
``paper`` extend ``quick``, ``paper-lite`` extends ``paper``; a chain of ``extends`` is applied in order, from
the base out. ``sentlab profile NAME`` writes the merged values to ``params.yaml`` (the
values in force, with the base file's comments) and the stage list (``models.yaml``,
:mod:`sentlab.stages.stage_list`). After that, params.yaml is the one place a run's values come from: stages
declare its keys directly, so ``dvc status`` sees an edit at once, and ``dvc exp run -S key=value``
works as DVC documents it. Switching profiles would drop hand edits, so it is refused while
params.yaml differs from the profile it was made from (``--force`` overwrites).
"""
from __future__ import annotations

import copy
import io
import os
from pathlib import Path
from typing import Any

import yaml

from ..methods.blocks import validate_params

from ..config.yaml_files import read_yaml
from ..errors import SentlabError
from ..provenance.environment import record_profile_written
from ..config.profile_files import BASE, EXTENDS, chain, profile_names, profile_values, profiles_dir

HEADER = ("# params.yaml: the values in force (profile {name}), written by `sentlab profile {name}` from {files}.\n"
          "# Edit it freely (stages declare its keys: `dvc status` shows what an edit re-runs);\n"
          "# `sentlab profile NAME` rewrites it from the profile files, `sentlab stages` the stage list (models.yaml)\n"
          "# after an edit of train.methods, methods_from, seeds, ablations, evaluate.baselines or seed.\n")


def load_all_profiles(folder: str | os.PathLike = "profiles") -> dict:
    """Every profile validated (not just the one in force): a typo in profiles/paper.yaml is found on a
    quick run, before a GPU day is spent on it."""
    return {p: validate_params(profile_values(p, folder), source=f"{Path(folder) / p}.yaml (profile {p})")
            for p in profile_names(folder)}


def params_text(name: str, folder: str | os.PathLike = "profiles") -> str:
    """params.yaml's text for profile ``name``: the base file's text (its comments kept) with the
    profile's values merged in; a comment on a value the profile changes is dropped with it."""
    from ruamel.yaml import YAML

    folder = Path(folder)
    values = profile_values(name, folder)
    validate_params(values, source=f"{folder / name}.yaml")
    rt = YAML()
    rt.width = 120
    rt.preserve_quotes = True  # `compile: "off"` stays quoted: PyYAML (YAML 1.1) and DVC (1.2) both read "off"
    rt.representer.add_representer(type(None), lambda r, _: r.represent_scalar("tag:yaml.org,2002:null", "null"))
    doc = rt.load((folder / f"{BASE}.yaml").read_text(encoding="utf-8"))
    # the override files read the same way: values keep their spelling (PyYAML reads a dumped 3e-05 as a string)
    links = [n for n, _ in chain(name, folder)]
    for n in links[1:]:
        over = rt.load((folder / f"{n}.yaml").read_text(encoding="utf-8")) or {}
        over.pop(EXTENDS, None)
        _apply(doc, over)
    _apply(doc, {"profile": name})
    out = io.StringIO()
    rt.dump(doc, out)
    body = out.getvalue()
    while body.startswith("#"):  # the base file's own header line(s)
        body = body.split("\n", 1)[1]
    files = " + ".join(f"profiles/{n}.yaml" for n in links)
    return HEADER.format(name=name, files=files) + body


def _apply(doc, over: dict) -> None:
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(doc.get(k), dict):
            if hasattr(doc, "ca") and getattr(getattr(doc[k], "fa", None), "flow_style", lambda: False)():
                doc.ca.items.pop(k, None)  # a one-line mapping's comment speaks of the values the profile changes
            _apply(doc[k], v)
            continue
        if hasattr(doc, "ca"):
            doc.ca.items.pop(k, None)
        doc[k] = copy.deepcopy(v)


def hand_edits(params_path: str | os.PathLike = "params.yaml") -> list[str]:
    """The keys of params.yaml that differ from the values of the profile it names (``profile:``)."""
    path = Path(params_path)
    if not path.is_file():
        return []
    current = read_yaml(path)
    name = current.get("profile", BASE)
    if name not in profile_names(profiles_dir(path)):
        return ["profile"]
    return _diff(profile_values(name, profiles_dir(path)), current)


def _diff(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            out += _diff(a.get(k), b.get(k), f"{prefix}{k}.") if k in a and k in b else [f"{prefix}{k}"]
        return out
    return [] if a == b else [prefix.rstrip(".")]


def set_profile(params_path: str | os.PathLike, name: str, force: bool = False) -> bool:
    """Write params.yaml from profile ``name`` and the stage list beside it. The same profile again
    keeps params.yaml (hand edits included) and only refreshes the stage list; another profile is
    refused while params.yaml has hand edits, unless ``force``. Returns whether params.yaml changed."""
    from ..runtime.io import write_text
    from .stage_list import write_stage_list

    path = Path(params_path)
    folder = profiles_dir(path)
    current = read_yaml(path) if path.is_file() else {}
    changed = False
    if not path.is_file() or current.get("profile") != name or force:
        edits = hand_edits(path) if path.is_file() and not force else []
        if edits:
            raise SentlabError(
                f"{path} has edits that profile `{current.get('profile')}` does not have ({', '.join(edits[:6])}"
                f"{' ...' if len(edits) > 6 else ''}); switching to `{name}` would drop them. Move them into "
                f"profiles/<name>.yaml to keep them, or pass --force (make repro ... FORCE=1) to drop them.")
        text = params_text(name, folder)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            write_text(path, text)
            changed = True
    write_stage_list(validate_params(yaml.safe_load(path.read_text(encoding="utf-8")), source=str(path)),
                     path.parent / "models.yaml")
    record_profile_written(path.parent)
    return changed


def write_profile(params_path: str | os.PathLike, name: str, force: bool = False, own_lock: bool = False) -> bool:
    """:func:`set_profile`, refused (one paragraph) while a pipeline may be reading params.yaml: a DVC command holds
    the workspace's lock, or a pipeline run (``sentlab run``, ``make repro``) holds the coordinator lock, unless
    ``own_lock``: this process holds it (``sentlab repro``, which writes the profile under it)."""
    from .entry import coordinator_running, dvc_repro_running

    root = Path(params_path).resolve().parent
    if dvc_repro_running(root):
        raise SentlabError(f"A `dvc repro` (or another DVC command) holds this workspace's lock "
                           f"({root / '.dvc/tmp/lock'}): {params_path} is not rewritten while a pipeline may be "
                           f"reading it. Wait for it to finish (`sentlab status`), or run the other profile in a "
                           f"clone of the repository.")
    other = None if own_lock else coordinator_running(root)
    if other is not None:   # `sentlab run` holds DVC's lock only in its shared and final phases: its own lock says
        raise SentlabError(f"A pipeline run (`{other['what']}`; pid {other['pid'] or 'unknown'}) is running in this "
                           f"workspace: {params_path} is not rewritten while its stages and its `dvc repro` read it. "
                           f"Wait for it to finish (`sentlab status`), or run the other profile in a clone of the "
                           f"repository.")
    return set_profile(params_path, name, force=force)
