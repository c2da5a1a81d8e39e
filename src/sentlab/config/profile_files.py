"""The profile files (``profiles/<name>.yaml``), read: their names, their ``extends`` chains and the values
of a profile (the base merged with each file of its chain). Core: a schema of files that imports no method and no
stage, so :func:`sentlab.config.load_params` (``profile=``) and the report read a profile without the pipeline's
writer (:mod:`sentlab.stages.profiles`, which writes params.yaml and the stage list from these values).

Every ``profiles/<name>.yaml`` is a profile (found by listing the folder: a researcher's ``profiles/mine.yaml``
works without touching code). ``profiles/quick.yaml`` holds every value (the base); any other file states the
profile it changes (``extends: <name>``, default ``quick``) and only what it changes there: ``smoke`` and
``paper`` extend ``quick``, ``paper-lite`` extends ``paper``; a chain of ``extends`` is applied in order, from
the base out.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import SentlabError
from .sections import SeedsParams
from .yaml_files import deep_merge, read_yaml

BASE = "quick"
EXTENDS = "extends"
NAME_RE = r"[A-Za-z0-9][A-Za-z0-9_-]*"


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
