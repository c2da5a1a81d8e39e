"""Keep freed memory in the training process (``runtime.heap``).

glibc's ``malloc`` serves a block of 32 MB or more (its largest mmap threshold) with a fresh ``mmap``
and gives it back to the kernel on ``free``, so the next block of that size is page-faulted in
again, one 4 KB page at a time. On a CPU that is a cost per step: the dense gradient of the word
embeddings (30,522 × 384 fp32 = 47 MB, one per encoder pass) and the vocabulary logits of PaSeR's
decoder and MLM head are such blocks, and on the 2-core VM this was measured on, a fresh 47 MB
``torch.zeros`` takes 18 ms against 5.6 ms reused. ``retain`` sets ``M_MMAP_MAX = 0`` (every block
from the heap, reused after ``free`` by any request that fits it) and ``M_TRIM_THRESHOLD`` to 2 GB (free memory at
the top of the heap stays mapped). Quick steps (``python benchmarks/train_speed.py --compare-heap --methods
simcse,paser,l2p --steps 6``): PaSeR 2.432 → 2.095 s (2.303 → 2.061 s in another session), L2P-CSR
4.215 → 4.016 s; SimCSE within noise (1.099 → 0.982, 0.979 → 1.024, 1.029 → 0.991 s in three sessions);
resident set +7–15 %. The numbers do not change (allocation only).

``auto``: ``retain`` when training on the CPU of a glibc system (Linux), ``system`` otherwise (other
C libraries, and CUDA, whose tensors come from PyTorch's caching allocator anyway). The setting is
for the whole process, from the call on: the train stage applies it before loading the model.

Example::

    apply_heap(resolve_heap("auto", torch.device("cpu")))   # -> "retain" on Linux
"""

from __future__ import annotations

import ctypes
import platform

import torch

from ..errors import SentlabError

M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # glibc's malloc.h
TRIM_THRESHOLD = 2**31 - 1  # mallopt takes an int: 2 GB of free heap top kept mapped


def glibc() -> bool:
    return platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def resolve_heap(setting: str, device: torch.device) -> str:
    """``auto`` -> ``retain`` for CPU training under glibc, else ``system``; ``retain`` where glibc is
    missing is an error naming the key (the values themselves are checked by ``TrainParams.heap``)."""
    if setting == "auto":
        return "retain" if device.type == "cpu" and glibc() else "system"
    if setting == "retain" and not glibc():
        raise SentlabError(f"runtime.heap: retain needs glibc's malloc (Linux); this system is "
                           f"{platform.system()} {' '.join(platform.libc_ver()) or 'without glibc'}. "
                           f"Set runtime.heap to auto or system in params.yaml.")
    return setting


def apply_heap(setting: str) -> bool:
    """Apply a resolved setting to this process; True when malloc's parameters were changed."""
    if setting != "retain":
        return False
    libc = ctypes.CDLL("libc.so.6")
    ok = libc.mallopt(M_MMAP_MAX, 0) == 1 and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    if not ok:
        raise SentlabError("runtime.heap: retain: glibc refused mallopt(M_MMAP_MAX / M_TRIM_THRESHOLD); set "
                           "runtime.heap: system in params.yaml.")
    return True


__all__ = ["resolve_heap", "apply_heap", "glibc"]
