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



def gather_with_grad(tensor: torch.Tensor) -> torch.Tensor:
    """Concatenate ``tensor`` from every rank along dim 0, keeping the gradient of this rank's rows:
    the other ranks' rows are constants, this rank's slot holds ``tensor`` itself, as SimCSE's
    ``cl_forward`` does for in-batch negatives (``z1_list[dist.get_rank()] = z1``). Identity in a
    single process."""
    if not is_dist() or world_size() == 1:
        return tensor
    gathered = [torch.empty_like(tensor) for _ in range(world_size())]
    dist.all_gather(gathered, tensor.detach().contiguous())
    gathered[rank()] = tensor
    return torch.cat(gathered, dim=0)


def torchrun_command(nproc: int, script: str, argv: list[str]) -> list[str]:
    """The ``torchrun`` command line (PyTorch's own launcher, as a module of this interpreter) that
    runs ``script argv`` in ``nproc`` processes on this machine; an argument list, no shell."""
    import sys

    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc),
            script, *argv]


def launch(nproc: int, script: str, argv: list[str]) -> int | None:
    """Re-run ``script argv`` under torchrun when ``nproc`` > 1 and this process is not already one
    of its ranks; returns torchrun's exit status, or None when the caller should train itself."""
    import subprocess

    if nproc <= 1 or "WORLD_SIZE" in os.environ:
        return None
    return subprocess.run(torchrun_command(nproc, script, argv), check=False).returncode

def all_reduce_sum_(tensor: torch.Tensor) -> torch.Tensor:
    """Sum ``tensor`` over the ranks in place (on its device); identity in a single process."""
    if is_dist():
        dist.all_reduce(tensor)
    return tensor

