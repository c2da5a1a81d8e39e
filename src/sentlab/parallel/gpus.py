"""Which GPU each chain runs on (issue #65 §4): shares spread over the GPUs first.

Ray packs fractional GPU requests onto the fewest GPUs: four tasks of ``num_gpus=0.25`` on a node of four GPUs all
get ``CUDA_VISIBLE_DEVICES=0`` while three GPUs idle. So sentlab places the GPU work itself. Each node declares one
custom Ray resource per GPU, ``sentlab_gpu_<i>: 1`` (:func:`slot_resources`; a local Ray declares them itself, a
cluster's nodes with ``ray start --resources``), and a chain asks for its share of the emptiest slot
(:class:`Placer`: a fraction on the GPU with the most room left, ties to the lowest index; ``n`` whole GPUs on ``n``
free ones) instead of Ray's ``GPU``. Its stages then see that GPU alone: ``CUDA_VISIBLE_DEVICES`` is the node's
``i``-th device (:func:`visible_devices`). The coordinator submits a chain only when its share fits and a task's
CPUs are free, so each placement is made against what is running now, not against a queue.

A cluster whose GPU nodes declare no slots still runs chains of whole GPUs through Ray's own ``GPU`` (it never
puts two whole requests on one GPU); a fraction there is refused, naming the ``ray start`` flag (:func:`check`).
"""

from __future__ import annotations

import json
import os
import re
from typing import Optional

from ..errors import SentlabError

SLOT = "sentlab_gpu_{}"
SLOT_RE = re.compile(r"^sentlab_gpu_(\d+)$")


def slot_resources(gpus: int) -> dict[str, float]:
    """The custom resources a node of ``gpus`` GPUs declares: one slot of capacity 1 per GPU."""
    return {SLOT.format(i): 1.0 for i in range(int(gpus))}


def slot_capacity(resources: dict) -> dict[int, float]:
    """GPU index -> the cluster's capacity of its slot (the number of nodes declaring it), from
    ``ray.cluster_resources()``."""
    return {int(m.group(1)): float(v) for k, v in resources.items() if (m := SLOT_RE.match(k))}


def check(resources: dict, shares: list[float]) -> None:
    """Refuse a fractional share on a cluster with GPUs but no slots (Ray would pack every share onto GPU 0)."""
    if resources.get("GPU", 0) <= 0 or slot_capacity(resources):
        return
    frac = sorted({s for s in shares if s and s != int(s)})
    if frac:
        per_node = int(resources["GPU"])
        raise SentlabError(
            f"The Ray cluster has {resources['GPU']:g} GPUs but no node declares sentlab's per-GPU slots, and chains "
            f"ask for a fraction of a GPU ({', '.join(f'{s:g}' for s in frac)}): Ray would put every fraction on the "
            f"first GPU of a node and leave the others idle. Start each GPU node with its slots, e.g. for "
            f"{per_node} GPUs: `ray start ... --resources '{json.dumps(slot_resources(per_node))}'` (one "
            f"sentlab_gpu_<i> per GPU of that node; docs/scale-ray.md), or set `runtime.gpus_per_task: 1`.")


class Placer:
    """The slots' free capacity as the coordinator places chains on them and takes them back."""

    def __init__(self, capacity: dict[int, float]):
        self.capacity = dict(capacity)
        self.free = dict(capacity)

    def place(self, gpus: float) -> Optional[dict[int, float]]:
        """``{gpu index: share}`` for a chain asking for ``gpus`` (a fraction: the slot with the most room that holds
        it; ``n`` whole: the ``n`` fullest-free slots, each free), or None when nothing holds it now."""
        if gpus <= 0:
            return {}
        if gpus < 1:
            fits = [i for i, f in self.free.items() if f + 1e-9 >= gpus]
            if not fits:
                return None
            best = max(fits, key=lambda i: (round(self.free[i], 9), -i))
            take = {best: gpus}
        else:
            n = int(gpus)
            if n != gpus:
                raise SentlabError(f"A chain asks for {gpus:g} GPUs: more than one GPU is a whole number of GPUs "
                                   f"(runtime.gpus_per_task: a fraction below 1, or 1, 2, ...).")
            whole = sorted((i for i, f in self.free.items() if f + 1e-9 >= 1.0), key=lambda i: (-self.free[i], i))
            if len(whole) < n:
                return None
            take = {i: 1.0 for i in sorted(whole[:n])}
        for i, s in take.items():
            self.free[i] -= s
        return take

    def release(self, taken: dict[int, float]) -> None:
        for i, s in taken.items():
            self.free[i] = min(self.capacity[i], self.free[i] + s)


def ray_options(taken: dict[int, float]) -> dict:
    """The Ray options of a chain placed on ``taken``: its slots, and no GPU of Ray's (whose choice would differ)."""
    return {"num_gpus": 0, "resources": {SLOT.format(i): s for i, s in taken.items()}}


def visible_devices(indices: list[int], node_visible: Optional[str]) -> str:
    """``CUDA_VISIBLE_DEVICES`` for the node's GPUs ``indices``: the node's own list (a task asking no GPU of Ray
    sees the node's ``CUDA_VISIBLE_DEVICES``, e.g. the GPUs a scheduler gave the job) picked at those positions, or
    the indices themselves when the node sets none."""
    devices = [d for d in (node_visible or "").split(",") if d.strip()]
    if not devices:
        return ",".join(str(i) for i in indices)
    if max(indices) >= len(devices):
        raise SentlabError(f"A chain was placed on GPU slot {max(indices)} of a node whose CUDA_VISIBLE_DEVICES is "
                           f"{node_visible!r} ({len(devices)} GPUs): the node declares more sentlab_gpu_<i> slots "
                           f"than it has GPUs. Start it with one slot per visible GPU (docs/scale-ray.md).")
    return ",".join(devices[i] for i in indices)


def chain_devices(slots: list[int]) -> str:
    """On the worker: ``CUDA_VISIBLE_DEVICES`` for a chain placed on ``slots`` of this node ("" for none: no GPU)."""
    return visible_devices(slots, os.environ.get("CUDA_VISIBLE_DEVICES")) if slots else ""
