"""Which CUDA build of torch runs on which NVIDIA driver and GPU (issue #65 §1): the builds of the pinned torch,
the GPU architectures each has kernels for, the newest CUDA each driver runs, and from these the install line that
:mod:`sentlab.runtime.device`'s refusals and ``sentlab doctor`` print. Plain data and arithmetic: no probe, no torch.
"""

from __future__ import annotations

from typing import Optional

# The torch this project pins (requirements/pins.txt, the Makefile's TORCH_SPEC; tests/test_device.py checks both),
# and PyTorch's CUDA builds of it on its wheel index (download.pytorch.org/whl/cuXYZ), oldest first, each with the
# GPU architectures it has kernels for (Linux x86_64). Checked on 2026-12-07 (benchmarks/RESULTS.md "torch 2.13's
# CUDA builds, checked"): PyPI's torch 2.13.0 wheel requires cuda-toolkit 13.0.3 (the default build); torch 2.13 has
# cu126 and cu130 builds and no cu128 (PyTorch dropped CUDA 12.8 in 2.12; pytorch/FBGEMM#5976 counted the index);
# the architectures are torch 2.13's own table, torch.cuda.PYTORCH_RELEASES_CODE_CC (the test compares them).
# CUDA 13 has no kernels for Maxwell, Pascal and Volta (V100, P100); CUDA 12.6 none for Blackwell. Check all of this
# against PyTorch's install matrix when the pin moves.
TORCH_PIN = "2.13.0"
TORCH_CUDA_BUILDS = ("12.6", "13.0")
BUILD_ARCHS = {"12.6": ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
               "13.0": ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")}
# The oldest Linux NVIDIA driver of each CUDA release (NVIDIA's CUDA toolkit release notes, table 3): where the
# driver is known but not the CUDA it runs (nvidia-smi without its header line).
DRIVER_CUDA = ((580, "13.0"), (575, "12.9"), (570, "12.8"), (560, "12.6"), (555, "12.5"), (550, "12.4"),
               (545, "12.3"), (535, "12.2"), (530, "12.1"), (525, "12.0"), (520, "11.8"))


def driver_cuda(driver: Optional[str]) -> Optional[str]:
    """The newest CUDA a Linux driver of version ``driver`` runs (:data:`DRIVER_CUDA`)."""
    try:
        major = int(str(driver).split(".")[0])
    except ValueError:
        return None
    return next((cuda for least, cuda in DRIVER_CUDA if major >= least), None)


def cc_number(capability: str) -> int:
    """``"8.6"`` -> 86."""
    major, minor = capability.split(".")
    return 10 * int(major) + int(minor)


def arch_runs(arch: str, capability: str) -> bool:
    """Whether kernels compiled for ``arch`` (``sm_80``, ``sm_90a``, ``compute_120``: an entry of
    ``torch.cuda.get_arch_list()``) run on a GPU of compute capability ``capability`` ("8.6"): machine code runs on
    its own major version at the same or a newer minor one (``a``: that GPU only), PTX on any newer GPU."""
    kind, _, code = arch.partition("_")
    exact = code.endswith("a")
    code_cc, cc = int(code.rstrip("af")), cc_number(capability)
    if kind == "compute":
        return code_cc <= cc
    if exact:
        return code_cc == cc
    return code_cc // 10 == cc // 10 and code_cc % 10 <= cc % 10


def runs_here(arch_list, capabilities) -> bool:
    """Whether every GPU (``capabilities``) has kernels in ``arch_list`` (True where either is unknown)."""
    return all(any(arch_runs(a, c) for a in arch_list) for c in capabilities) if arch_list else True


def named(names, caps) -> str:
    """``Tesla V100-SXM2-32GB (7.0), ...``: each GPU with its compute capability, where known."""
    return ", ".join(f"{n} ({c})" for n, c in zip(names, caps)) if caps else ", ".join(names)


def install_line(facts) -> str:
    """The torch install that fits this node (``facts``: :class:`sentlab.runtime.device.GpuFacts`): the newest CUDA
    build of the pinned torch (:data:`TORCH_CUDA_BUILDS`) that the driver runs (CUDA 12's minor-version
    compatibility: any 12.x driver runs the oldest 12.x build) and that has kernels for every GPU seen
    (:data:`BUILD_ARCHS`; where the GPUs' capabilities are known)."""
    pin = f"torch=={TORCH_PIN}"
    if facts.driver is None:
        return ("install the NVIDIA driver (none was found), then the CUDA build of torch its CUDA runs: "
                f"`make clean-env env TORCH_SPEC=\"{pin} --index-url https://download.pytorch.org/whl/cuXYZ\"` "
                "(`sentlab doctor` names the build once the driver is there)")

    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in v.split("."))
    cuda = facts.driver_cuda
    caps = facts.nvml_caps or facts.torch_caps
    gpus = named(facts.nvml_gpus or facts.torch_gpus, caps)
    for_gpus = [b for b in TORCH_CUDA_BUILDS if runs_here(BUILD_ARCHS[b], caps)]
    if not for_gpus:
        return (f"no CUDA build of {pin} ({', '.join(TORCH_CUDA_BUILDS)}) has kernels for {gpus}: run this profile "
                "on another GPU, or on the CPU")
    fits = [b for b in for_gpus if cuda and key(b) <= key(cuda)]
    if not fits and cuda and key(cuda)[0] == key(for_gpus[0])[0]:
        fits = [for_gpus[0]]
    if not fits:
        least = min(d for d, c in DRIVER_CUDA if c == for_gpus[0])
        older = (f"older than every CUDA build of {pin} that has kernels for {gpus} ({', '.join(for_gpus)})"
                 if caps else f"older than every CUDA build of {pin} ({', '.join(for_gpus)})")
        return (f"the driver {facts.driver} runs CUDA {cuda or 'unknown'}, {older}: upgrade the NVIDIA driver "
                f"(>= {least} for CUDA {for_gpus[0]})")
    index = f"https://download.pytorch.org/whl/cu{fits[-1].replace('.', '')}"
    gpu_note = f" and has kernels for {gpus}" if caps else ""
    return (f"`make clean-env env TORCH_SPEC=\"{pin} --index-url {index}\"` (in a venv of your own: `pip install {pin} "
            f"--index-url {index}`), the CUDA {fits[-1]} build, which driver {facts.driver} (CUDA {cuda}) runs"
            f"{gpu_note}")
