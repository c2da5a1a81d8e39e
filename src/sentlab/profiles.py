"""Profiles: override files that ``sentlab profile NAME`` applies to params.yaml.

Every ``profiles/<name>.yaml`` is a profile (found by listing the folder: a researcher's ``profiles/mine.yaml``
works without touching code). ``profiles/quick.yaml`` holds every value (the base); any other file states the
profile it changes (``extends: <name>``, default ``quick``) and only what it changes there: ``smoke`` and
``paper`` extend ``quick``, ``paper-lite`` extends ``paper``; a chain of ``extends`` is applied in order, from
the base out. ``sentlab profile NAME`` writes the merged values to ``params.yaml`` (the
values in force, with the base file's comments) and the stage list (``models.yaml``,
:mod:`sentlab.stage_list`). After that, params.yaml is the one place a run's values come from: stages
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

from .config import SeedsParams, deep_merge, read_yaml, validate
from .errors import SentlabError

BASE = "quick"
EXTENDS = "extends"
NAME_RE = r"[A-Za-z0-9][A-Za-z0-9_-]*"
HEADER = ("# params.yaml: the values in force (profile {name}), written by `sentlab profile {name}` from {files}.\n"
          "# Edit it freely (stages declare its keys: `dvc status` shows what an edit re-runs);\n"
          "# `sentlab profile NAME` rewrites it from the profile files, `sentlab stages` the stage list (models.yaml)\n"
          "# after an edit of train.methods, methods_from, seeds, ablations, evaluate.baselines or seed.\n")


def profiles_dir(params_path: str | os.PathLike = "params.yaml") -> Path:
    return Path(params_path).resolve().parent / "profiles"


def profile_names(folder: str | os.PathLike = "profiles") -> list[str]:
    """Every profile of ``folder``: the stems of its ``*.yaml`` files (the base first)."""
    import re

    names = sorted(p.stem for p in Path(folder).glob("*.yaml") if re.fullmatch(NAME_RE, p.stem))
    return sorted(names, key=lambda n: n != BASE)


def _overrides(name: str, folder: Path) -> dict:
    """The mapping of ``profiles/<name>.yaml`` (its ``extends`` key included)."""
    path = folder / f"{name}.yaml"
    if not path.is_file():
        raise SentlabError(f"Unknown profile {name!r}: there is no {path}; the profiles are the files of {folder}: "
                           f"{', '.join(profile_names(folder)) or 'none'}. Write {path} (`extends: <profile>` and "
                           f"the values it changes there) or pick one of them (make repro PROFILE=...).")
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise SentlabError(f"{path} must be a mapping of params sections; got {type(data).__name__}.")
    return data


def chain(name: str, folder: str | os.PathLike = "profiles") -> list[tuple[str, dict]]:
    """``[(name, overrides)]`` from the base profile out to ``name``, each file's ``extends`` followed
    (default: the base); a loop or an unknown parent is one paragraph naming the file."""
    folder = Path(folder)
    out: list[tuple[str, dict]] = []
    cur: str | None = name
    while cur is not None:
        if cur in [n for n, _ in out]:
            loop = " -> ".join([n for n, _ in reversed(out)] + [cur])
            raise SentlabError(f"profiles/{name}.yaml: `extends` goes round in a loop ({loop}); one profile must "
                               f"extend {BASE} (the base, which extends nothing).")
        data = dict(_overrides(cur, folder))
        parent = data.pop(EXTENDS, None if cur == BASE else BASE)
        if cur == BASE and parent is not None:
            raise SentlabError(f"profiles/{BASE}.yaml is the base profile (every value); it cannot `extends: "
                               f"{parent}`. Remove the key.")
        if parent is not None and not isinstance(parent, str):
            raise SentlabError(f"profiles/{cur}.yaml: `extends` must name one profile (a file of {folder}), got "
                               f"{parent!r}.")
        if parent is not None and not (folder / f"{parent}.yaml").is_file():
            raise SentlabError(f"profiles/{cur}.yaml extends `{parent}`, which is not a profile: there is no "
                               f"{folder / parent}.yaml (the profiles: {', '.join(profile_names(folder))}).")
        out.append((cur, data))
        cur = parent
    return list(reversed(out))


def check_overrides(base: dict, overrides: dict, source: str) -> None:
    """A profile changes values; the lines that exist (methods, ablation variants, the seed pool) are
    defined once in the base profile, so every profile names the same models."""
    if "profile" in overrides:
        raise SentlabError(f"{source}: `profile` is set by `sentlab profile NAME` (the file's name), not by a profile "
                           f"file; remove it (`extends: <profile>` names the profile this one changes).")
    for section in ("methods", "methods_from", "ablations"):
        sub = "variants" if section == "ablations" else None
        new = set(((overrides.get(section) or {}).get(sub) if sub else overrides.get(section)) or {})
        have = set(((base.get(section) or {}).get(sub) if sub else base.get(section)) or {})
        if new - have:
            key = f"{section}.{sub}" if sub else section
            raise SentlabError(
                f"{source}: `{key}` adds {sorted(new - have)}, which profiles/{BASE}.yaml's `{key}` does not list; "
                f"a line is defined once for every profile, so add it to profiles/{BASE}.yaml (a profile only "
                f"changes values).")
    pool = (overrides.get("seeds") or {}).get("pool")
    if pool is not None and pool != (base.get("seeds") or {}).get("pool", SeedsParams().pool):
        raise SentlabError(
            f"{source}: `seeds.pool` changes the seed pool, whose seeds are defined once for every profile; edit "
            f"`seeds.pool` in profiles/{BASE}.yaml and set this profile's `seeds.count` / `seeds.per_method`.")


def profile_values(name: str, folder: str | os.PathLike = "profiles") -> dict:
    """The values of profile ``name``: ``profiles/quick.yaml`` merged with each file of its ``extends`` chain."""
    folder = Path(folder)
    links = chain(name, folder)
    values = links[0][1]
    for n, over in links[1:]:
        check_overrides(links[0][1], over, str(folder / f"{n}.yaml"))
        values = deep_merge(values, over)
    return {**values, "profile": name}


def load_all_profiles(folder: str | os.PathLike = "profiles") -> dict:
    """Every profile validated (not just the one in force): a typo in profiles/paper.yaml is found on a
    quick run, before a GPU day is spent on it."""
    return {p: validate(profile_values(p, folder), source=f"{Path(folder) / p}.yaml (profile {p})")
            for p in profile_names(folder)}


def params_text(name: str, folder: str | os.PathLike = "profiles") -> str:
    """params.yaml's text for profile ``name``: the base file's text (its comments kept) with the
    profile's values merged in; a comment on a value the profile changes is dropped with it."""
    from ruamel.yaml import YAML

    folder = Path(folder)
    values = profile_values(name, folder)
    validate(values, source=f"{folder / name}.yaml")
    rt = YAML()
    rt.width = 120
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
    from .io import write_text
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
    write_stage_list(validate(yaml.safe_load(path.read_text(encoding="utf-8")), source=str(path)),
                     path.parent / "models.yaml")
    return changed
