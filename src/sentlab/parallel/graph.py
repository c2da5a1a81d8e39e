"""The stages of a parallel run, from DVC's public interfaces only.

* every stage: ``dvc stage list --name-only``; the edges: ``dvc dag --dot`` (upstream -> downstream);
* what is stale: ``dvc status --json`` (a stage whose own deps, params or outs changed), closed downstream
  (a stage below a stale one runs again once that one has run, which ``dvc status`` cannot see yet).

:func:`plan` splits the stale stages into the shared upstream ones (run once, in the workspace), chains
(the stages of one ``foreach`` item: ``train@m``, ``evaluate@m``, ``<suite>@m``;
``evaluate_baseline@p``),
each one Ray
task, and the final ones (``report``, ``export``), which the workspace's last ``dvc repro`` runs. A chain
whose stages depend on another chain's (``paser_sup`` starts from ``models/paser``) waits for it and first
restores that chain's stages from DVC's run cache in its own worktree.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..config.models import train_stage
from ..errors import SentlabError
from . import SHARED

# DVC's words for its lock held by another process (dvc below, worktree's retries)
LOCK_ERRORS = re.compile(r"Unable to acquire lock|is busy, it is being blocked by|LockError", re.I)
EDGE = re.compile(r'^\s*"([^"]+)"\s*->\s*"([^"]+)"')


class DvcBusy(SentlabError):
    """Another dvc process holds the workspace's lock (a ``dvc repro`` running)."""


def dvc(args: list[str], root: str | Path, check: bool = True, lock_tries: int = 3) -> subprocess.CompletedProcess:
    """``python -m dvc ARGS`` in ``root`` (the DVC of this Python); DVC's lock held elsewhere is waited for a few
    times, then :class:`DvcBusy`."""
    for i in range(lock_tries):
        out = subprocess.run([sys.executable, "-m", "dvc", *args], cwd=root, capture_output=True, text=True)
        if out.returncode == 0 or not LOCK_ERRORS.search(out.stdout + out.stderr):
            break
        if i == lock_tries - 1:
            raise DvcBusy(f"`dvc {' '.join(args)}`: another dvc process holds the lock of {root}")
        time.sleep(2.0 * (i + 1))
    if check and out.returncode != 0:
        raise SentlabError(f"`dvc {' '.join(args)}` failed in {root} (exit {out.returncode}):\n"
                           f"{(out.stdout + out.stderr)[-2000:]}")
    return out


def stage_names(root: str | Path) -> list[str]:
    return dvc(["stage", "list", "--name-only"], root).stdout.split()


def stage_edges(root: str | Path) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for ln in dvc(["dag", "--dot"], root).stdout.splitlines()
            if (m := EDGE.match(ln))]


def changed_stages(root: str | Path) -> set[str]:
    """The stages ``dvc status`` reports (their own deps, params, outs or command changed), less the
    always_changed ones that report nothing else (``sources``: it looks at every run)."""
    out = dvc(["status", "--json"], root).stdout
    start = out.find("{")
    data = json.loads(out[start:]) if start >= 0 else {}
    return {name.rsplit(":", 1)[-1] for name, what in data.items() if what != ["always changed"]}


def descendants(edges: list[tuple[str, str]], roots: set[str]) -> set[str]:
    below: dict[str, set[str]] = {}
    for a, b in edges:
        below.setdefault(a, set()).add(b)
    seen, todo = set(roots), list(roots)
    while todo:
        for b in below.get(todo.pop(), ()):
            if b not in seen:
                seen.add(b)
                todo.append(b)
    return seen


def ancestors(edges: list[tuple[str, str]], stages: set[str]) -> set[str]:
    return descendants([(b, a) for a, b in edges], stages) - set(stages)


def topo(stages: set[str], edges: list[tuple[str, str]], order: list[str]) -> list[str]:
    """``stages`` upstream first, ties in ``order`` (dvc stage list's)."""
    rank = {s: i for i, s in enumerate(order)}
    preds = {s: {a for a, b in edges if b == s and a in stages} for s in stages}
    out: list[str] = []
    while preds:
        ready = sorted((s for s, p in preds.items() if not p), key=lambda s: rank.get(s, len(rank)))
        if not ready:
            raise SentlabError(f"the stage graph has a cycle among {sorted(preds)}")
        out.append(ready[0])
        del preds[ready[0]]
        for p in preds.values():
            p.discard(ready[0])
    return out


@dataclass
class Chain:
    """One Ray task: ``stages`` run in order; ``restore`` (other chains' stages, from the run cache) first;
    ``checkout`` the up-to-date stages whose outputs they read; ``needs`` the chains it waits for."""
    id: str
    stages: list[str]
    restore: list[str] = field(default_factory=list)
    checkout: list[str] = field(default_factory=list)
    needs: list[str] = field(default_factory=list)


@dataclass
class Plan:
    shared: list[str]
    chains: list[Chain]
    final: list[str]
    order: list[str]
    edges: list[tuple[str, str]]

    @property
    def parallel(self) -> list[str]:
        return [s for c in self.chains for s in c.stages]


def item(stage: str) -> str | None:
    """The ``foreach`` item of ``stage``: its model (``train@m``, ``evaluate@m`` and the suites ``<suite>@m``
    reading ``models/m`` are one chain)."""
    return stage.split("@", 1)[1] if "@" in stage else None


def plan(names: list[str], edges: list[tuple[str, str]], changed: set[str], shared=SHARED,
         targets: list[str] | None = None) -> Plan:
    """Split the stale stages (``changed`` closed downstream; the shared ones not propagated: they run first
    and their effect shows in ``changed``) into shared, chains and final. ``targets`` (``sentlab run --table``):
    only those stages and what they depend on."""
    edges = [(a, b) for a, b in edges if a in names and b in names]
    shared_set = set(shared)
    stale = descendants(edges, set(changed) - shared_set) | (set(changed) & shared_set)
    if targets is not None:
        unknown = [t for t in targets if t not in names]
        if unknown:
            raise SentlabError(f"no stage {', '.join(unknown)} in this workspace's dvc.yaml (`dvc stage list` "
                               f"names them); regenerate the stage list (`sentlab stages`) if params.yaml changed.")
        stale &= set(targets) | ancestors(edges, set(targets))
    par = {s for s in stale if item(s) is not None and s not in shared_set}
    parent = {s: s for s in par}

    def find(s: str) -> str:
        while parent[s] != s:
            parent[s] = parent[parent[s]]
            s = parent[s]
        return s

    for a, b in edges:
        if a in par and b in par and item(a) == item(b):
            parent[find(a)] = find(b)
    groups: dict[str, set[str]] = {}
    for s in par:
        groups.setdefault(find(s), set()).add(s)
    ordered = topo(par, edges, names)
    chain_of: dict[str, str] = {}
    chains: list[Chain] = []
    for members in sorted(groups.values(), key=lambda g: min(ordered.index(s) for s in g)):
        stages = [s for s in ordered if s in members]
        cid = item(stages[0]) if stages[0] == train_stage(item(stages[0])) else stages[0].replace("@", "-")
        for s in stages:
            chain_of[s] = cid
        up = ancestors(edges, members)
        restore = [s for s in ordered if s in up and s in par]
        checkout = [s for s in names if s in up and s not in par]
        chains.append(Chain(cid, stages, restore, checkout))
    for c in chains:
        c.needs = sorted({chain_of[s] for s in c.restore})
    final = [s for s in names if s in stale and s not in par and s not in shared_set]
    return Plan([s for s in names if s in stale and s in shared_set], chains, final, names, edges)


def plan_for(root: str | Path, shared=SHARED, targets: list[str] | None = None) -> Plan:
    names = stage_names(root)
    return plan(names, stage_edges(root), changed_stages(root), shared, targets)
