"""torch.distributed in one place: a no-op in a single process, DDP under ``torchrun``.

Launch several GPUs with::

    torchrun --nproc_per_node 4 pipeline/train.py ptbert

``torchrun`` sets ``WORLD_SIZE``/``RANK``/``LOCAL_RANK``; :func:`init` then
starts the process group (NCCL on CUDA, Gloo on CPU). Each rank trains on its
share of every global batch; MoCo/PT-BERT keys are gathered across ranks
(:func:`concat_all_gather`) before they enter the queue, as in
facebookresearch/moco.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist


def is_dist() -> bool:
    return dist.is_available() and dist.is_initialized()


def world_size() -> int:
    return dist.get_world_size() if is_dist() else 1


def rank() -> int:
    return dist.get_rank() if is_dist() else 0


def is_main() -> bool:
    return rank() == 0


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0"))


def init(device_type: str) -> bool:
    """Start the process group when launched by torchrun with WORLD_SIZE > 1. Returns True if distributed."""
    if is_dist():
        return True
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return False
    backend = "nccl" if device_type == "cuda" else "gloo"
    if device_type == "cuda":
        torch.cuda.set_device(local_rank())
    dist.init_process_group(backend=backend)
    return True


def barrier() -> None:
    if is_dist():
        dist.barrier()


@torch.no_grad()
def concat_all_gather(tensor: torch.Tensor) -> torch.Tensor:
    """Concatenate ``tensor`` from every rank along dim 0 (rank order). Identity in a single process.

    No gradient flows through the gathered copies (as in facebookresearch/moco's helper).
    """
    if not is_dist() or world_size() == 1:
        return tensor
    gathered = [torch.empty_like(tensor) for _ in range(world_size())]
    dist.all_gather(gathered, tensor.contiguous())
    return torch.cat(gathered, dim=0)


def all_reduce_mean(value: float, device) -> float:
    if not is_dist():
        return value
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return float(t.item()) / world_size()
