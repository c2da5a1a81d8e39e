"""The stages of the scratch copy, from dvc.yaml and its ``vars`` files (models.yaml), in a valid DVC order.

dvc.yaml is data: each stage's ``cmd``, ``deps``, ``outs`` (with ``metrics`` and ``plots``) and ``params``,
its ``foreach`` loops over the lists of its ``vars`` files (``${key}``, ``${item}``, ``${item.<field>}``).
A stage depends on another when one of its deps is, contains or lies inside one of the other's outputs
(how DVC links them). The order is a topological one that keeps dvc.yaml's order among stages that are
free to run (DVC's: sources, prepare, annotate, the trainings, the evaluations, report, export), then
:func:`consumers_first` runs the stages reading a trained model right after its training, so that its
weights can be deleted then (:func:`prune_weights`; in DVC's order every training comes first, and the
paper profile's 124 bert-base models would need ~60 GB of disk at once). tests/test_preflight.py checks
the names against ``dvc stage list``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import SentlabError

_VAR = re.compile(r"\$\{\s*([A-Za-z0-9_.\-\[\]]+)\s*\}")   # ${a.b}, ${item.reads[0]} (a list's element)


@dataclass
class Stage:
    name: str
    cmd: str
    upstream: list[str]
    outs: list[str]
    deps: list[str]
    params: list[str] = field(default_factory=list)


def _lookup(ctx: dict, path: str) -> Any:
    value: Any = ctx
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        index = int(part[1:-1]) if part.startswith("[") else None
        if index is None and isinstance(value, dict) and part in value:
            value = value[part]
        elif index is not None and isinstance(value, list) and index < len(value):
            value = value[index]
        else:
            raise SentlabError(f"dvc.yaml uses ${{{path}}}, which its vars do not define.")
    return value


def _interpolate(obj: Any, ctx: dict) -> Any:
    if isinstance(obj, str):
        whole = _VAR.fullmatch(obj.strip())
        if whole:
            return _lookup(ctx, whole.group(1))
        return _VAR.sub(lambda m: str(_lookup(ctx, m.group(1))), obj)
    if isinstance(obj, list):
        return [_interpolate(x, ctx) for x in obj]
    if isinstance(obj, dict):
        return {_interpolate(k, ctx): _interpolate(v, ctx) for k, v in obj.items()}
    return obj


def _paths(entries) -> list[str]:
    """The paths of a deps/outs/metrics/plots list (``path`` or ``{path: options}``)."""
    out = []
    for e in entries or []:
        out += [str(k) for k in e] if isinstance(e, dict) else [str(e)]
    return out


def _params(entries) -> list[str]:
    out = []
    for e in entries or []:
        if isinstance(e, dict):
            for keys in e.values():
                out += [str(k) for k in keys or []]
        else:
            out.append(str(e))
    return out


def _stage(name: str, d: dict) -> Stage:
    cmd = d.get("cmd", "")
    cmd = " && ".join(cmd) if isinstance(cmd, list) else str(cmd)
    outs = _paths(d.get("outs")) + _paths(d.get("metrics")) + _paths(d.get("plots"))
    return Stage(name, cmd, [], outs, _paths(d.get("deps")), _params(d.get("params")))


def read_stages(root: Path) -> list[Stage]:
    """Every stage of ``root``/dvc.yaml, with its loops expanded, in dvc.yaml's order (no upstream yet)."""
    doc = yaml.safe_load((root / "dvc.yaml").read_text(encoding="utf-8")) or {}
    ctx: dict = {}
    for v in doc.get("vars") or []:
        if isinstance(v, dict):
            ctx.update(v)
            continue
        file, _, key = str(v).partition(":")
        data = yaml.safe_load((root / file).read_text(encoding="utf-8")) or {}
        ctx.update({k: data[k] for k in key.split(",")} if key else data)
    out = []
    for name, d in (doc.get("stages") or {}).items():
        if "matrix" in d:
            raise SentlabError(f"dvc.yaml stage `{name}` uses `matrix`, which the preflight does not expand.")
        if "foreach" not in d:
            out.append(_stage(name, _interpolate(d, ctx)))
            continue
        items = _interpolate(d["foreach"], ctx)
        pairs = items.items() if isinstance(items, dict) else ((x, x) for x in items)
        for key, item in pairs:
            out.append(_stage(f"{name}@{key}", _interpolate(d["do"], {**ctx, "key": key, "item": item})))
    return out


def _inside(a: str, b: str) -> bool:
    """Whether path ``a`` is ``b`` or lies inside it (or ``b`` inside ``a``): DVC links such a dep and out."""
    a, b = a.rstrip("/"), b.rstrip("/")
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def dvc_stages(root: Path) -> list[Stage]:
    """The stages of ``root`` with their upstream, each after everything it depends on."""
    stages = read_stages(Path(root))
    for s in stages:
        s.upstream = [u.name for u in stages if u is not s and any(_inside(d, o) for d in s.deps for o in u.outs)]
    done: set[str] = set()
    order: list[Stage] = []
    todo = list(stages)
    while todo:
        ready = next((s for s in todo if all(u in done for u in s.upstream)), None)
        if ready is None:
            raise SentlabError(f"dvc.yaml's stages {[s.name for s in todo][:5]} depend on each other in a cycle.")
        todo.remove(ready)
        order.append(ready)
        done.add(ready.name)
    return order


def with_upstream(stages: list[Stage], pattern: str) -> list[Stage]:
    """The stages matching ``pattern`` (a regex on the name) and every stage they depend on, in order."""
    by = {s.name: s for s in stages}
    want = {s.name for s in stages if re.search(pattern, s.name)}
    todo = list(want)
    while todo:
        for u in by[todo.pop()].upstream:
            if u not in want:
                want.add(u)
                todo.append(u)
    return [s for s in stages if s.name in want]


def consumers(stages: list[Stage]) -> dict[str, list[str]]:
    """``models/<x>`` out -> the stages that depend on exactly it, in ``stages``' order (its weights can go once
    they ran)."""
    out: dict[str, list[str]] = {}
    for s in stages:
        for d in s.deps:
            if d.startswith("models/") and d.count("/") == 1:
                out.setdefault(d, []).append(s.name)
    return out


def consumers_first(stages: list[Stage]) -> list[Stage]:
    """DVC's order, except that the stages reading a model (its evaluation, a model trained from it) run as soon
    as it is trained, so that its weights can go (:func:`prune_weights`)."""
    by_name = {s.name: s for s in stages}
    readers = consumers(stages)
    out: list[Stage] = []
    done: set[str] = set()

    def emit(s: Stage) -> None:
        out.append(s)
        done.add(s.name)
        for model in s.outs:
            for c in map(by_name.get, readers.get(model, [])):
                if c.name not in done and all(u in done for u in c.upstream):
                    emit(c)

    for s in stages:
        if s.name not in done:
            emit(s)
    return out


def prune_weights(scratch: Path, readers: dict[str, list[str]], done) -> None:
    """Delete a trained model's weights in the scratch folder once every stage that reads them ran
    (a paper preflight trains ~70 bert-base models: 30 GB otherwise); its sentlab.json stays for the report."""
    for out_path, users in readers.items():
        if users and set(users) <= set(done):
            for f in (scratch / out_path).glob("*.safetensors"):
                f.unlink()
