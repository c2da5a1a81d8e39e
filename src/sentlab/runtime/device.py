"""What this machine can run: the device and precision a profile asks for, checked before any work.

Two ways a run used to lose its time silently (issues #65 §1, #69 §1):

* a profile meant for GPUs (``runtime.device: cuda``) on a node where torch sees no CUDA GPU (a CPU build of torch,
  or a CUDA build newer than the NVIDIA driver) trained on the CPU; now :func:`check_device` stops with one
  paragraph: torch's version and CUDA build, the driver and the GPUs NVML sees, the install line that fits
  (:mod:`.cuda_builds`: which build runs on which driver and GPU). A
  torch that sees a GPU it has no kernels for (torch 2.13's default CUDA 13 build on a V100 or P100) stops the same
  way, where it used to fail at the first CUDA operation of the first training;
* ``bf16`` (or ``fp16``) autocast on a CPU without the native instructions (AVX-512 BF16 / AMX) is emulated, ~30x
  slower a step in fp32's place; on a GPU without bf16 (V100, T4) it is emulated too. :func:`check_precision`
  stops with one paragraph (the CPU features seen, the slowdown measured, the fix), unless params.yaml
  ``runtime.emulated_precision: allow`` asks for it (the run then records it).

:func:`check_profile` runs both for the settings of one stage (:func:`sentlab.config.stage_params.stage_params`
calls it for every stage that trains or encodes, the ``sources`` stage for the whole profile, so ``make repro``
stops at once); ``sentlab doctor`` prints the same facts (:func:`doctor`). The probes (:func:`cpu_flags`,
:func:`probe_gpus`) are plain functions the tests replace.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..errors import SentlabError
from .cuda_builds import driver_cuda, install_line, named, runs_here

CPUINFO = Path("/proc/cpuinfo")
NATIVE = {"bf16": ("avx512_bf16", "amx_bf16"), "fp16": ("avx512_fp16", "amx_fp16")}
SHOWN_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_fp16")
# Set in the environment of a job that runs only the CPU stages of a GPU profile (sources, prepare, annotate on a
# CPU node; the GPU job trains): its stages do not check the GPU the profile asks for (the train stages still do).
CPU_STAGES_ENV = "SENTLAB_CPU_STAGES"

# The slowdown of emulated bf16, as measured (quoted in the refusal; the figures and their commands are in
# benchmarks/RESULTS.md "Precision"): SimCSE on MiniLM, the quick profile's step.
EMULATED_BF16_COST = ("a SimCSE step of the quick profile took 78-102 s in bf16 against 2.9 s in fp32 (~30x) on a "
                      "2-core AMD EPYC with AVX2 only, and its training 3.0x the fp32 time on an Intel Xeon with "
                      "AVX-512F but no AVX-512 BF16 (benchmarks/RESULTS.md \"Precision\")")



# --- the CPU -----------------------------------------------------------------------------------------------------

def cpu_flags(cpuinfo: Optional[Path] = None) -> set[str]:
    """The CPU's feature flags (/proc/cpuinfo's ``flags``, or ``cpuinfo``'s; empty where it cannot be read: other
    OSes)."""
    try:
        text = Path(cpuinfo or CPUINFO).read_text(errors="replace")
    except OSError:
        return set()
    return {f for line in text.splitlines() if line.startswith("flags") for f in line.split(":", 1)[-1].split()}


def cpu_model(cpuinfo: Optional[Path] = None) -> str:
    try:
        text = Path(cpuinfo or CPUINFO).read_text(errors="replace")
    except OSError:
        return "unknown CPU"
    m = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    return m.group(1).strip() if m else "unknown CPU"


def cpu_native(precision: str, flags: Optional[set[str]] = None) -> bool:
    """Whether this CPU computes ``precision`` (bf16, fp16) natively; fp32 always."""
    if precision not in NATIVE:
        return True
    flags = cpu_flags() if flags is None else flags
    return any(f in flags for f in NATIVE[precision])


def cpu_summary(flags: Optional[set[str]] = None) -> str:
    """``AMD EPYC ..., os.cpu_count() cores; avx2 yes, avx512f no, ...``: what the refusals and the doctor show."""
    flags = cpu_flags() if flags is None else flags
    seen = ", ".join(f"{f} {'yes' if f in flags else 'no'}" for f in SHOWN_FLAGS)
    return f"{cpu_model()}, {os.cpu_count()} cores; flags: {seen}"


# --- the GPUs ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GpuFacts:
    """What torch and the NVIDIA driver say about the GPUs here."""
    torch_version: str
    cuda_build: Optional[str]                 # torch.version.cuda (None: a CPU build of torch)
    torch_gpus: tuple[str, ...] = ()          # the CUDA devices torch sees
    torch_bf16: bool = False                  # device 0 computes bf16 natively (Ampere and newer)
    driver: Optional[str] = None              # the NVIDIA driver's version (None: none found)
    driver_cuda: Optional[str] = None         # the newest CUDA that driver runs
    nvml_gpus: tuple[str, ...] = ()           # the GPUs the driver sees
    probe: str = "none"                       # how the driver was asked: NVML, nvidia-smi, or none
    probe_error: str = field(default="", compare=False)
    arch_list: tuple[str, ...] = ()           # the kernels this torch carries (torch.cuda.get_arch_list())
    torch_caps: tuple[str, ...] = ()          # the compute capability ("7.0") of each GPU torch sees
    nvml_caps: tuple[str, ...] = ()           # ... of each GPU the driver sees (empty: not asked or not known)

    @property
    def cuda(self) -> bool:
        return bool(self.torch_gpus)


def _nvml() -> Optional[tuple]:
    """(driver, its CUDA, GPU names, their compute capabilities, error) through NVML (``nvidia-ml-py``), None where
    it is not installed."""
    try:
        import pynvml
    except ImportError:
        return None

    def text(v):
        return v.decode() if isinstance(v, bytes) else str(v)
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:   # the library without a driver (libnvidia-ml.so not found)
        return None, None, (), (), f"NVML: {e}"
    try:
        cuda = pynvml.nvmlSystemGetCudaDriverVersion()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        names = tuple(text(pynvml.nvmlDeviceGetName(h)) for h in handles)
        caps = tuple("{}.{}".format(*pynvml.nvmlDeviceGetCudaComputeCapability(h)) for h in handles)
        return text(pynvml.nvmlSystemGetDriverVersion()), f"{cuda // 1000}.{cuda % 1000 // 10}", names, caps, ""
    except pynvml.NVMLError as e:
        return None, None, (), (), f"NVML: {e}"
    finally:
        pynvml.nvmlShutdown()


def _nvidia_smi() -> Optional[tuple]:
    """(driver, its CUDA, GPU names, their compute capabilities, error) from ``nvidia-smi`` (no shell), None where
    it is not on PATH. Drivers before 510 know no ``compute_cap`` field: they are asked without it."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        for fields in ("name,driver_version,compute_cap", "name,driver_version"):
            q = subprocess.run([smi, f"--query-gpu={fields}", "--format=csv,noheader"], capture_output=True,
                               text=True, timeout=30)
            if q.returncode == 0:
                break
        if q.returncode != 0:
            return None, None, (), (), f"nvidia-smi: {(q.stdout + q.stderr).strip().splitlines()[:1]}"
        rows = [[c.strip() for c in line.split(",")] for line in q.stdout.strip().splitlines() if line.strip()]
        header = subprocess.run([smi], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, None, (), (), f"nvidia-smi: {e}"
    m = re.search(r"CUDA Version:\s*([0-9]+\.[0-9]+)", header)
    driver = rows[0][1] if rows and len(rows[0]) > 1 else None
    caps = tuple(r[2] for r in rows) if rows and all(len(r) > 2 and re.fullmatch(r"[0-9]+\.[0-9]+", r[2])
                                                      for r in rows) else ()
    return driver, m.group(1) if m else None, tuple(r[0] for r in rows), caps, ""


def probe_gpus(driver: bool = True) -> GpuFacts:
    """torch's view (version, CUDA build, devices, bf16), then, with ``driver``, the driver's: NVML where
    ``nvidia-ml-py`` is installed, else ``nvidia-smi`` where it is on PATH, else none."""
    import torch

    gpus: tuple[str, ...] = ()
    caps: tuple[str, ...] = ()
    if torch.cuda.is_available():
        gpus = tuple(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
        caps = tuple("{}.{}".format(*torch.cuda.get_device_capability(i)) for i in range(len(gpus)))
    facts = dict(torch_version=torch.__version__, cuda_build=torch.version.cuda, torch_gpus=gpus,
                 torch_bf16=bool(gpus) and gpu_bf16(),
                 arch_list=tuple(torch.cuda.get_arch_list()), torch_caps=caps)
    for probe, ask in (("NVML", _nvml), ("nvidia-smi", _nvidia_smi)) if driver else ():
        got = ask()
        if got is not None:
            found, cuda, names, nvml_caps, error = got
            return GpuFacts(**facts, driver=found, driver_cuda=cuda or driver_cuda(found), nvml_gpus=names,
                            nvml_caps=nvml_caps, probe=probe, probe_error=error)
    return GpuFacts(**facts)


def gpu_bf16() -> bool:
    """Whether CUDA device 0 computes bf16 natively (Ampere and newer; emulation not counted)."""
    import torch

    return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)


def gpu_summary(facts: GpuFacts) -> str:
    build = f"CUDA {facts.cuda_build} build" if facts.cuda_build else "a CPU-only build (no CUDA)"
    if facts.arch_list:
        build += f" with kernels for {' '.join(facts.arch_list)}"
    seen = f"torch sees {len(facts.torch_gpus)} GPU(s): {named(facts.torch_gpus, facts.torch_caps)}" \
        if facts.cuda else "torch sees no CUDA GPU"
    if facts.driver is None and not facts.probe_error:
        driver = "no NVIDIA driver found (neither NVML nor nvidia-smi)"
    elif facts.driver is None:
        driver = f"no NVIDIA driver answered ({facts.probe_error})"
    else:
        driver = (f"NVIDIA driver {facts.driver} (runs CUDA {facts.driver_cuda or 'unknown'}), {facts.probe} sees "
                  f"{len(facts.nvml_gpus)} GPU(s)" + (f": {named(facts.nvml_gpus, facts.nvml_caps)}"
                                                       if facts.nvml_gpus else ""))
    return f"torch {facts.torch_version}, {build}; {seen}; {driver}"


# --- the checks --------------------------------------------------------------------------------------------------

def check_device(setting: str, key: str = "runtime.device", facts: Optional[GpuFacts] = None) -> str:
    """The device type ``setting`` (auto | cpu | cuda) resolves to here; ``cuda`` where torch sees no CUDA GPU, and
    ``auto`` or ``cuda`` where torch sees a GPU it has no kernels for, raise one paragraph: what torch and the
    driver say, and the install line that fits."""
    if setting not in ("auto", "cpu", "cuda"):
        raise SentlabError(f"{key} {setting!r}: allowed auto, cpu, cuda.")
    if setting == "cpu":
        return "cpu"
    given = facts is not None
    facts = facts if given else probe_gpus(driver=False)
    if setting == "cuda" and not facts.cuda:
        facts = facts if given else probe_gpus()   # the driver's view too, for the paragraph
        why = ("torch is a CPU-only build" if not facts.cuda_build else
               f"this torch's CUDA {facts.cuda_build} build cannot use the driver" if facts.driver else
               "no NVIDIA driver runs here")
        raise SentlabError(
            f"params.yaml `{key}: cuda` (the profile is meant for GPUs) but torch sees no CUDA GPU here, so "
            f"this stops before any work: {why}. Seen: {gpu_summary(facts)}. Fix: {install_line(facts)}; then "
            f"`sentlab doctor` says whether it runs. To run this profile on the CPU on purpose, set `{key}: cpu`.")
    if setting in ("auto", "cuda") and facts.cuda and not runs_here(facts.arch_list, facts.torch_caps):
        facts = facts if given else probe_gpus()
        lost = [(n, c) for n, c in zip(facts.torch_gpus, facts.torch_caps) if not runs_here(facts.arch_list, (c,))]
        raise SentlabError(
            f"params.yaml `{key}: {setting}` would run on CUDA, but this torch has no kernels for "
            f"{named(*zip(*lost))} (compute capability in brackets): every CUDA operation would fail with \"no kernel "
            f"image is available\", so this stops before any work. Seen: {gpu_summary(facts)}. Fix: "
            f"{install_line(facts)}; then `sentlab doctor` says whether it runs. To run on the CPU on purpose, set "
            f"`{key}: cpu`.")
    return "cuda" if facts.cuda else "cpu"


def resolve_precision(precision: str, device_type: str, facts: Optional[GpuFacts] = None) -> str:
    """``auto``: fp32 on every CPU (never detected from the CPU: the same numbers on every CPU, issue #35); on
    CUDA bf16 where the GPU computes it natively, else fp16 autocast with a gradient scaler (V100, T4). An explicit
    value is kept."""
    if precision != "auto":
        return precision
    if device_type != "cuda":
        return "fp32"
    return "bf16" if (facts.torch_bf16 if facts else gpu_bf16()) else "fp16"


def native(precision: str, device_type: str, facts: Optional[GpuFacts] = None,
           flags: Optional[set[str]] = None) -> bool:
    """Whether ``precision`` runs natively on ``device_type`` here (fp32 always; fp16 on every CUDA GPU)."""
    if precision == "fp32" or (device_type == "cuda" and precision == "fp16"):
        return True
    if device_type == "cuda":
        return facts.torch_bf16 if facts else gpu_bf16()
    return cpu_native(precision, flags)


def check_precision(precision: str, device_type: str, key: str, allow: str = "refuse",
                    facts: Optional[GpuFacts] = None, flags: Optional[set[str]] = None) -> Optional[str]:
    """``precision`` (already resolved) on ``device_type``: None where it runs natively; where it would be
    emulated, one paragraph raised, or with ``allow`` = ``allow`` (params.yaml ``runtime.emulated_precision``)
    the line that records it."""
    if native(precision, device_type, facts, flags):
        return None
    if device_type == "cuda":
        gpus = (facts or probe_gpus(driver=False)).torch_gpus
        seen = f"the GPU ({gpus[0] if gpus else 'unknown'}) has no native bf16 (a GPU before Ampere: V100, T4)"
        fix = (f"`{key}: auto` (fp16 autocast with a gradient scaler on such a GPU) or `{key}: fp32`"
               if key.startswith("train.") else f"`{key}: auto` (exact fp32)")
        cost = "emulated bf16 runs several times slower than fp16 or fp32 there"
    else:
        want = " / ".join(NATIVE[precision])
        seen = f"this CPU has no native {precision} ({want} not in its flags: {cpu_summary(flags)})"
        fix = f"`{key}: fp32` (the same numbers within 0.005: benchmarks/RESULTS.md \"Precision\")"
        cost = (EMULATED_BF16_COST if precision == "bf16" else
                "fp16 autocast is converted through fp32 there, slower than fp32 itself")
    record = f"{precision} emulated on {device_type} ({seen}); runtime.emulated_precision: allow"
    if allow == "allow":
        return record
    raise SentlabError(
        f"params.yaml `{key}: {precision}` asks for {precision} autocast on the {device_type.upper()}, but {seen}: "
        f"it would be emulated, so this stops before any work ({cost}). Fix: set {fix}. To run it emulated all the "
        f"same, set `runtime.emulated_precision: allow` (each run records it).")


def check_profile(*, device: str, train_precision: Optional[str] = None, evaluate_device: Optional[str] = None,
                  evaluate_precision: Optional[str] = None, glue_precision: Optional[str] = None,
                  allow: str = "refuse", facts: Optional[GpuFacts] = None,
                  flags: Optional[set[str]] = None) -> list[str]:
    """Every check of the settings given (``device``: runtime.device, the training's; ``evaluate_device``: the
    encoding's and GLUE's fine-tuning's, ``glue_precision`` that fine-tuning's), raising the first refusal; returns
    the records of what ``allow`` let run emulated."""
    records = []
    train_dev = check_device(device, "runtime.device", facts)
    if train_precision is not None:
        p = resolve_precision(train_precision, train_dev, facts)
        records.append(check_precision(p, train_dev, "train.precision", allow, facts, flags))
    if evaluate_device is not None:
        dev = check_device(evaluate_device, "evaluate.device", facts)
        p = "fp32" if evaluate_precision in (None, "auto") else evaluate_precision
        records.append(check_precision(p, dev, "evaluate.precision", allow, facts, flags))
        if glue_precision is not None:
            p = resolve_precision(glue_precision, dev, facts)
            records.append(check_precision(p, dev, "glue.finetune.precision", allow, facts, flags))
    return [r for r in records if r]


def cpu_stages_only() -> bool:
    return os.environ.get(CPU_STAGES_ENV, "") not in ("", "0")


def doctor(params, facts: Optional[GpuFacts] = None, flags: Optional[set[str]] = None) -> tuple[str, bool]:
    """``sentlab doctor``: the facts (torch, its CUDA build, the driver, the GPUs NVML and torch see, the CPU's flags),
    what the profile in force (``params``, validated) asks, and whether it can run here: (text, ok)."""
    facts = facts or probe_gpus()
    flags = cpu_flags() if flags is None else flags
    rt, tr, ev = params.runtime, params.train, params.evaluate
    lines = [f"GPUs:     {gpu_summary(facts)}" + (f"; bf16 {'native' if facts.torch_bf16 else 'not native'}"
                                                  if facts.cuda else ""),
             f"CPU:      {cpu_summary(flags)}; native bf16 {'yes' if cpu_native('bf16', flags) else 'no'}",
             f"profile:  {params.profile}: runtime.device {rt.device}, train.precision {tr.precision}, "
             f"evaluate.device {ev.device}, evaluate.precision {ev.precision}, "
             f"glue.finetune.precision {params.glue.finetune.precision}"]
    try:
        allowed = check_profile(device=rt.device, train_precision=tr.precision, evaluate_device=ev.device,
                                evaluate_precision=ev.precision, glue_precision=params.glue.finetune.precision,
                                allow=rt.emulated_precision, facts=facts, flags=flags)
    except SentlabError as e:
        return "\n".join(lines + [f"verdict:  cannot run here. {e}"]), False
    dev = check_device(rt.device, facts=facts)
    lines.append(f"verdict:  runs here: training on {dev} in {resolve_precision(tr.precision, dev, facts)}"
                 + "".join(f"; {r}" for r in allowed))
    return "\n".join(lines), True
