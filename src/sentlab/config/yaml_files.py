"""The YAML files of a run's params (params.yaml, the profile files) read strictly, and merged: a key given twice in
one mapping is an error (PyYAML keeps the last), a missing or malformed file one paragraph naming it. Core: imports
nothing of sentlab's but its errors, so the schema (:mod:`sentlab.config`) and the profile files
(:mod:`sentlab.config.profile_files`) both read through it."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import yaml

from ..errors import SentlabError


def deep_merge(base: dict, override: dict) -> dict:
    """Recursively merge ``override`` into a copy of ``base`` (dicts merge, anything else replaces)."""
    out = copy.deepcopy(base)
    for k, v in (override or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def read_yaml(path: str | os.PathLike) -> dict:
    path = Path(path)
    if not path.exists():
        raise SentlabError(f"Params file {path} not found. Run from the repository root (where params.yaml lives) or "
                           f"pass --params PATH.")
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader
    except _UnhashableKey as e:
        raise SentlabError(f"Params file {path} has a key that is a {e.kind} at line {e.line} (`? [a, b]`-style, or "
                           f"`{{a: 1}}: x`); a params key is a name. Write it as a plain name (e.g. `a_b:`) and run "
                           f"again.") from None
    except _DuplicateKey as e:
        raise SentlabError(f"Params file {path} sets `{e.key}` twice in one mapping (lines {e.first} and {e.second}); "
                           f"YAML would silently keep the last one. Keep one of the two lines and run again.") from None
    except yaml.YAMLError as e:
        raise SentlabError(f"Params file {path} is not valid YAML: {e}. Fix the syntax and run again.") from None
    return data or {}


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key, first: int, second: int):
        super().__init__(f"duplicate key {key!r}")
        self.key, self.first, self.second = key, first, second


class _UnhashableKey(yaml.YAMLError):
    def __init__(self, kind: str, line: int):
        super().__init__(f"a {kind} as a key at line {line}")
        self.kind, self.line = kind, line


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader, except that a key given twice in one mapping is an error (PyYAML keeps the last)."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                hash(key)
            except TypeError:
                raise _UnhashableKey("list" if isinstance(key, list) else type(key).__name__, line) from None
            if key in seen:
                raise _DuplicateKey(key, seen[key], line)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)
