"""What this machine can run (sentlab.runtime.device; issues #69 §1 and #65 §1): bf16 is never emulated unless asked
for,
a GPU profile never trains on the CPU of a node where torch sees no GPU, and `sentlab doctor` says which. The GPU
facts are faked (CI has no GPU): the probes are replaced, or nvidia-smi is a script printing a real one's output."""

from __future__ import annotations

import json
import runpy
import shutil
import sys

import pytest
import torch

from sentlab.runtime import cuda_builds as builds
from sentlab.runtime import device as dev
from sentlab.errors import SentlabError

AVX2_ONLY = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu sse sse2 avx fma avx2\n"
NATIVE_BF16 = "processor\t: 0\nmodel name\t: Intel Xeon\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_tile amx_bf16\n"


@pytest.fixture
def cpu(tmp_path, monkeypatch):
    """``cpu(text)``: /proc/cpuinfo replaced by ``text``."""
    def use(text):
        path = tmp_path / "cpuinfo"
        path.write_text(text)
        monkeypatch.setattr(dev, "CPUINFO", path)
    return use


def facts(**kw) -> dev.GpuFacts:
    base = dict(torch_version="2.13.0+cu130", cuda_build="13.0")
    return dev.GpuFacts(**{**base, **kw})


def _train(tmp_path, tok, **kw):
    from _support.training import fake_dev_eval, make_root, params

    from sentlab.train import run

    made = []

    def factory():
        from tiny import tiny_bert
        made.append(1)
        return tiny_bert(tok, 0, initializer_range=0.2), tok
    p = params(max_steps=2, eval_every=1, **kw.pop("train", {}))
    if "runtime" in kw:
        p = p.model_copy(update={"runtime": p.runtime.model_copy(update=kw.pop("runtime"))})
    info = run.train_method(p, kw.pop("method", "simcse"), root=make_root(tmp_path), dev_eval=fake_dev_eval(),
                            encoder_factory=factory, tracking=False, progress=False, **kw)
    return info, made


# --- #69 §1: nothing emulated unless asked for -------------------------------------------------------------------

def test_bf16_on_a_cpu_without_native_bf16_stops_before_any_work(tmp_path, tok, cpu, monkeypatch):
    """Before: a warning, then ~30x slower steps. Now one paragraph (the CPU's flags, the slowdown measured, the
    fix) and nothing done: no model built, nothing written."""
    cpu(AVX2_ONLY)
    with pytest.raises(SentlabError) as e:
        _train(tmp_path, tok, train={"precision": "bf16"})
    msg = str(e.value)
    assert "`train.precision: bf16`" in msg and "avx2 yes" in msg and "avx512_bf16 no" in msg
    assert "AMD EPYC 7B13" in msg and "78-102 s" in msg and "Fix: set `train.precision: fp32`" in msg
    assert "runtime.emulated_precision: allow" in msg and "\n" not in msg
    assert not (tmp_path / "models").exists() and not (tmp_path / "checkpoints").exists()


def test_bf16_on_a_cpu_with_native_bf16_trains(tmp_path, tok, cpu):
    cpu(NATIVE_BF16)
    info, made = _train(tmp_path, tok, train={"precision": "bf16"})
    assert info["status"] == "trained" and info["fingerprint"]["precision"] == "bf16"
    assert "emulated_precision" not in info


def test_the_force_key_runs_it_emulated_and_records_it(tmp_path, tok, cpu):
    cpu(AVX2_ONLY)
    info, made = _train(tmp_path, tok, train={"precision": "bf16"}, runtime={"emulated_precision": "allow"})
    assert info["status"] == "trained" and info["steps"] == 2 and made == [1]
    saved = json.loads((tmp_path / "models" / "simcse" / "sentlab.json").read_text())
    assert saved["emulated_precision"].startswith("bf16 emulated on cpu (this CPU has no native bf16")
    assert saved["fingerprint"]["precision"] == "bf16"


def test_fp32_and_auto_never_ask(cpu):
    cpu(AVX2_ONLY)
    cpu_facts = facts(torch_gpus=())
    assert dev.check_profile(device="auto", train_precision="auto", evaluate_device="auto",
                             evaluate_precision="auto", facts=cpu_facts) == []
    assert dev.check_profile(device="cpu", train_precision="fp32", facts=cpu_facts) == []
    with pytest.raises(SentlabError, match="`evaluate.precision: bf16`"):
        dev.check_profile(device="auto", evaluate_device="cpu", evaluate_precision="bf16", facts=cpu_facts)


def _quick_workspace(tmp_path, edit):
    from conftest import stage_workspace

    return stage_workspace(tmp_path / "ws", edit)


@pytest.mark.parametrize("stage", ["sources", "train@simcse", "evaluate@simcse", "evaluate_baseline@cls",
                                   "transfer@simcse"])
def test_every_stage_that_computes_stops_before_its_work(tmp_path, cpu, monkeypatch, stage):
    """The check runs where a stage reads its params (before anything else); `sources` runs first in every
    `dvc repro`, so `make repro` stops at once."""
    from sentlab.config.stage_params import stage_params

    monkeypatch.delenv("DVC_STAGE", raising=False)
    monkeypatch.delenv(dev.CPU_STAGES_ENV, raising=False)
    cpu(AVX2_ONLY)
    section = "evaluate" if stage.split("@")[0] in ("evaluate", "evaluate_baseline", "transfer") else "train"
    monkeypatch.chdir(_quick_workspace(tmp_path, lambda raw: raw[section].update(precision="bf16")))
    with pytest.raises(SentlabError, match=f"`{section}.precision: bf16`"):
        stage_params(stage)
    cpu(NATIVE_BF16)
    assert stage_params(stage) is not None


@pytest.mark.parametrize("stage", ["glue@base-cls", "sources"])
def test_a_glue_fine_tuning_that_would_be_emulated_stops_before_its_work(tmp_path, cpu, monkeypatch, stage):
    """#65 §5: `glue.finetune.precision` (bf16 on GPUs that have it) is checked like a training's: the GLUE stage,
    and `sources` at the start of every `dvc repro`, stop on a CPU without native bf16; `auto` is fp32 on a CPU."""
    from sentlab.config.stage_params import stage_params

    monkeypatch.delenv("DVC_STAGE", raising=False)
    monkeypatch.delenv(dev.CPU_STAGES_ENV, raising=False)
    cpu(AVX2_ONLY)
    ws = _quick_workspace(tmp_path, lambda raw: raw["glue"]["finetune"].update(precision="bf16"))
    monkeypatch.chdir(ws)
    with pytest.raises(SentlabError, match="`glue.finetune.precision: bf16`"):
        stage_params(stage)
    cpu(NATIVE_BF16)
    assert stage_params(stage).glue.finetune.precision == "bf16"
    cpu(AVX2_ONLY)
    assert dev.check_profile(device="auto", evaluate_device="auto", glue_precision="auto",
                             facts=facts(torch_gpus=())) == []


def test_the_sources_stage_stops_the_run_before_writing(tmp_path, cpu, monkeypatch):
    monkeypatch.delenv("DVC_STAGE", raising=False)
    cpu(AVX2_ONLY)
    ws = _quick_workspace(tmp_path, lambda raw: raw["train"].update(precision="bf16"))
    monkeypatch.chdir(ws)
    main = runpy.run_path(str(ws / "pipeline" / "sources.py"), run_name="sources_script")["main"]
    with pytest.raises(SentlabError, match="train.precision"):
        main()
    assert not (ws / "data").exists()
    # a job of the CPU stages only (a GPU profile's sources / prepare / annotate on a CPU node) is not stopped
    monkeypatch.setenv(dev.CPU_STAGES_ENV, "1")
    from sentlab.config.stage_params import stage_params

    assert stage_params("sources") is not None
    with pytest.raises(SentlabError, match="train.precision"):   # the trainings still are
        stage_params("train@simcse")


# --- #65 §1: a GPU profile never trains on the CPU ---------------------------------------------------------------

def test_a_cuda_profile_where_torch_sees_no_gpu_names_driver_gpus_and_the_install(monkeypatch):
    """The common trap: torch's CUDA 13 wheel on a 535 driver. The paragraph names torch and its CUDA build, the
    driver and the GPUs it sees, and the torch build that driver runs."""
    seen = facts(driver="535.104.05", driver_cuda="12.2", nvml_gpus=("NVIDIA A100-SXM4-80GB",) * 2, probe="NVML")
    with pytest.raises(SentlabError) as e:
        dev.check_device("cuda", facts=seen)
    msg = str(e.value)
    assert "`runtime.device: cuda`" in msg and "torch 2.13.0+cu130, CUDA 13.0 build" in msg
    assert "NVIDIA driver 535.104.05 (runs CUDA 12.2), NVML sees 2 GPU(s): NVIDIA A100-SXM4-80GB" in msg
    assert ('make clean-env env TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126"' in msg
            and "\n" not in msg)


def test_the_train_stage_of_a_cuda_profile_stops_before_any_work(tmp_path, tok, monkeypatch):
    """Before: a one-line error without the facts (and paper/paper-lite said `auto`: they trained on the CPU)."""
    seen = facts(driver="535.104.05", driver_cuda="12.2", nvml_gpus=("NVIDIA A100-SXM4-80GB",), probe="NVML")
    monkeypatch.setattr(dev, "probe_gpus", lambda driver=True: seen)
    with pytest.raises(SentlabError) as e:
        _train(tmp_path, tok, train={"device": "cuda"})
    assert "NVIDIA driver 535.104.05" in str(e.value) and "whl/cu126" in str(e.value)
    assert not (tmp_path / "models").exists() and not (tmp_path / "checkpoints").exists()


@pytest.mark.parametrize("driver, cuda, wanted", [
    ("580.65.06", "13.0", "whl/cu130"), ("560.35.03", "12.6", "whl/cu126"),
    ("570.133.20", "12.8", "whl/cu126"),        # torch 2.13 has no CUDA 12.8 build (was: whl/cu128, no such torch)
    ("550.54.15", "12.4", "whl/cu126"),          # CUDA 12's minor-version compatibility: the oldest 12.x build
    ("470.256.02", "11.4", "upgrade the NVIDIA driver"), (None, None, "install the NVIDIA driver")])
def test_the_install_line_fits_the_driver(driver, cuda, wanted):
    assert wanted in builds.install_line(facts(torch_version="2.13.0+cpu", cuda_build=None, driver=driver,
                                            driver_cuda=cuda))


# --- the GPU's architecture: torch 2.13's CUDA 13 build has no kernels for Volta, its CUDA 12.6 none for Blackwell ---

CU130_ARCHS = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")     # torch 2.13.0+cu130's get_arch_list()
V100 = dict(torch_gpus=("Tesla V100-SXM2-32GB",) * 2, torch_caps=("7.0",) * 2, arch_list=CU130_ARCHS,
            driver="580.95.05", driver_cuda="13.0", nvml_gpus=("Tesla V100-SXM2-32GB",) * 2, nvml_caps=("7.0",) * 2,
            probe="NVML")


def test_the_pin_and_the_builds_named_are_the_projects_torch():
    """The install line names torch==TORCH_PIN: the pin of requirements/pins.txt and of the Makefile's TORCH_SPEC."""
    from conftest import REPO

    pins = (REPO / "requirements" / "pins.txt").read_text()
    assert f"torch=={builds.TORCH_PIN}" in pins.split()
    assert f"TORCH_SPEC ?= torch=={builds.TORCH_PIN}\n" in (REPO / "Makefile").read_text()
    assert set(builds.BUILD_ARCHS) == set(builds.TORCH_CUDA_BUILDS)


def _torch_table():
    import torch.cuda as tc

    if torch.__version__.split("+")[0] != builds.TORCH_PIN or not hasattr(tc, "PYTORCH_RELEASES_CODE_CC"):
        pytest.skip(f"needs torch {builds.TORCH_PIN} with its build table torch.cuda.PYTORCH_RELEASES_CODE_CC (this is "
                    f"torch {torch.__version__})")
    return tc


# real GPUs: Maxwell M40, Pascal P100 and GTX 1080, V100, T4, A100, A10, L4, H100, B200, B300, RTX 5090, DGX Spark
GPU_CAPS = ("5.2", "6.0", "6.1", "7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "10.3", "12.0", "12.1")


def test_the_builds_architectures_are_torchs_own_table():
    """BUILD_ARCHS against torch's table of its release builds (x86_64), and arch_runs against torch's own rule
    (torch.cuda._code_compatible_with_device) for every kernel of every build on every GPU above."""
    tc = _torch_table()
    for build, archs in builds.BUILD_ARCHS.items():
        assert {int(a[3:]) for a in archs} == tc.PYTORCH_RELEASES_CODE_CC[build]["x86_64"], build
        for cap in GPU_CAPS:
            for a in archs:
                torchs = tc._code_compatible_with_device(builds.cc_number(cap), int(a[3:]))
                assert builds.arch_runs(a, cap) == torchs, (a, cap)


@pytest.mark.parametrize("arch, cap, runs", [
    ("sm_80", "8.6", True), ("sm_86", "8.0", False), ("sm_90", "10.0", False), ("sm_90a", "9.0", True),
    ("sm_90a", "9.1", False), ("compute_90", "12.0", True), ("compute_120", "9.0", False), ("sm_75", "7.0", False)])
def test_kernels_run_on_their_major_version_and_ptx_on_newer_gpus(arch, cap, runs):
    assert builds.arch_runs(arch, cap) is runs


def test_a_gpu_torch_has_no_kernels_for_stops_before_any_work():
    """Before: check_device said "cuda" (torch.cuda.is_available() is True on a V100 with torch 2.13's CUDA 13
    build), and the first CUDA operation of the first training failed ("no kernel image is available")."""
    for setting in ("cuda", "auto"):
        with pytest.raises(SentlabError) as e:
            dev.check_device(setting, facts=facts(**V100))
        msg = str(e.value)
        assert f"`runtime.device: {setting}`" in msg and "no kernels for Tesla V100-SXM2-32GB (7.0)" in msg
        assert "CUDA 13.0 build with kernels for sm_75 sm_80 sm_86 sm_90 sm_100 sm_120" in msg
        assert ('TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126"' in msg
                and "has kernels for Tesla V100-SXM2-32GB (7.0)" in msg and "\n" not in msg)
    h100 = facts(torch_gpus=("NVIDIA H100 80GB HBM3",), torch_caps=("9.0",), arch_list=CU130_ARCHS)
    assert dev.check_device("cuda", facts=h100) == "cuda" and dev.check_device("auto", facts=h100) == "cuda"


def test_the_train_stage_on_a_gpu_without_kernels_stops_before_any_work(tmp_path, tok, monkeypatch):
    monkeypatch.setattr(dev, "probe_gpus", lambda driver=True: facts(**V100))
    with pytest.raises(SentlabError, match="no kernels for Tesla V100"):
        _train(tmp_path, tok, train={"device": "cuda"})
    assert not (tmp_path / "models").exists() and not (tmp_path / "checkpoints").exists()


@pytest.mark.parametrize("gpu, cap, driver, cuda, wanted", [
    ("Tesla V100-SXM2-32GB", "7.0", "580.95.05", "13.0", "whl/cu126"),     # CUDA 13 has no Volta kernels
    ("Tesla P100-PCIE-16GB", "6.0", "535.183.01", "12.2", "whl/cu126"),
    ("NVIDIA H100 80GB HBM3", "9.0", "580.95.05", "13.0", "whl/cu130"),
    ("NVIDIA B200", "10.0", "570.133.20", "12.8", "upgrade the NVIDIA driver (>= 580 for CUDA 13.0)"),
    ("Tesla K80", "3.7", "470.256.02", "11.4", "no CUDA build of torch==2.13.0 (12.6, 13.0) has kernels for Tesla "
                                               "K80 (3.7)")])
def test_the_install_line_fits_the_gpus_too(gpu, cap, driver, cuda, wanted):
    got = builds.install_line(facts(torch_version="2.13.0+cpu", cuda_build=None, driver=driver, driver_cuda=cuda,
                                 nvml_gpus=(gpu,), nvml_caps=(cap,), probe="NVML"))
    assert wanted in got


def test_nvml_reports_each_gpus_compute_capability(monkeypatch):
    import types

    class NVMLError(Exception):
        pass
    fake = types.SimpleNamespace(
        NVMLError=NVMLError, nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlSystemGetCudaDriverVersion=lambda: 12020, nvmlSystemGetDriverVersion=lambda: b"535.183.01",
        nvmlDeviceGetCount=lambda: 2, nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: b"Tesla V100-SXM2-32GB", nvmlDeviceGetCudaComputeCapability=lambda h: (7, 0))
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    got = dev.probe_gpus()
    assert (got.probe, got.driver, got.driver_cuda, got.nvml_caps) == ("NVML", "535.183.01", "12.2", ("7.0", "7.0"))
    assert "NVML sees 2 GPU(s): Tesla V100-SXM2-32GB (7.0), Tesla V100-SXM2-32GB (7.0)" in dev.gpu_summary(got)


def test_a_cpu_build_on_a_node_without_driver(monkeypatch):
    with pytest.raises(SentlabError) as e:
        dev.check_device("cuda", facts=facts(torch_version="2.13.0+cpu", cuda_build=None))
    msg = str(e.value)
    assert "torch is a CPU-only build" in msg and "no NVIDIA driver found" in msg
    assert "set `runtime.device: cpu`" in msg


def test_auto_and_cpu_still_run_without_a_gpu():
    none = facts(torch_gpus=())
    assert dev.check_device("auto", facts=none) == "cpu" and dev.check_device("cpu", facts=none) == "cpu"
    assert dev.check_device("cuda", facts=facts(torch_gpus=("NVIDIA H100",))) == "cuda"


def test_nvidia_smi_is_asked_without_a_shell_when_nvml_is_not_installed(tmp_path, monkeypatch):
    """No nvidia-ml-py: the driver's view comes from nvidia-smi (its query and its header's CUDA version)."""
    smi = tmp_path / "nvidia-smi"
    old_driver = tmp_path / "old"
    old_driver.write_text("1")

    # a driver from 510 on answers compute_cap; an older one refuses the field (exit 2), then is asked without it
    smi.write_text("#!/bin/sh\nif [ \"$1\" = \"--query-gpu=name,driver_version,compute_cap\" ]; then\n"
                   f"  if [ -e {old_driver} ]; then echo 'Field \"compute_cap\" is not a valid field to query.'; "
                   "exit 2; fi\n"
                   "  echo 'Tesla V100-SXM2-32GB, 535.183.01, 7.0'; echo 'Tesla V100-SXM2-32GB, 535.183.01, 7.0'\n"
                   "elif [ \"$1\" = \"--query-gpu=name,driver_version\" ]; then\n"
                   "  echo 'Tesla V100-SXM2-32GB, 535.183.01'; echo 'Tesla V100-SXM2-32GB, 535.183.01'\n"
                   "else\n  echo '| NVIDIA-SMI 535.183.01   Driver Version: 535.183.01   CUDA Version: 12.2 |'\n"
                   "fi\n")
    smi.chmod(0o755)
    monkeypatch.setitem(sys.modules, "pynvml", None)    # `import pynvml` raises ImportError
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    got = dev.probe_gpus()
    assert (got.probe, got.driver, got.driver_cuda, got.nvml_caps) == ("nvidia-smi", "535.183.01", "12.2", ())
    assert got.nvml_gpus == ("Tesla V100-SXM2-32GB",) * 2 and got.torch_gpus == ()
    old_driver.unlink()
    got = dev.probe_gpus()
    assert got.nvml_caps == ("7.0", "7.0") and got.driver == "535.183.01"
    monkeypatch.setenv("PATH", "/nonexistent")
    assert dev.probe_gpus().probe == "none"


# --- GPUs without bf16: fp16 with a gradient scaler ---------------------------------------------------------------

@pytest.mark.parametrize("bf16, wanted", [(True, "bf16"), (False, "fp16")])
def test_auto_on_cuda_follows_the_gpus_bf16(monkeypatch, bf16, wanted):
    from sentlab.train import loop

    monkeypatch.setattr(dev, "gpu_bf16", lambda: bf16)
    assert loop.resolve_precision("auto", torch.device("cuda")) == wanted
    assert loop.resolve_precision("auto", torch.device("cpu")) == "fp32"
    assert loop.resolve_precision("bf16", torch.device("cuda")) == "bf16"


def test_explicit_bf16_on_a_gpu_without_it_is_refused_naming_auto():
    v100 = facts(torch_gpus=("Tesla V100-SXM2-32GB",), torch_bf16=False)
    with pytest.raises(SentlabError) as e:
        dev.check_profile(device="cuda", train_precision="bf16", facts=v100)
    assert "Tesla V100-SXM2-32GB" in str(e.value) and "`train.precision: auto` (fp16 autocast" in str(e.value)
    assert dev.check_profile(device="cuda", train_precision="auto", facts=v100) == []   # fp16: native on a GPU
    with pytest.raises(SentlabError, match=r"`evaluate.precision: auto` \(exact fp32\)"):
        dev.check_profile(device="cuda", evaluate_device="auto", evaluate_precision="bf16", facts=v100)


def test_an_fp16_step_goes_through_the_gradient_scaler(tmp_path, tok, cpu, monkeypatch):
    """fp16 autocast (torch's CPU autocast has it) with the scaler: the loss scaled, the gradients unscaled before
    clipping, the step and the update through the scaler, its state in the resume checkpoint."""
    from sentlab.train import loop

    events, scales = [], []
    real = torch.amp.GradScaler

    class Spy(real):
        def scale(self, outputs):
            events.append("scale")
            return super().scale(outputs)

        def unscale_(self, optimizer):
            events.append("unscale")
            return super().unscale_(optimizer)

        def step(self, optimizer, *a, **kw):
            events.append("step")
            return super().step(optimizer, *a, **kw)

        def update(self, *a, **kw):
            events.append("update")
            super().update(*a, **kw)
            scales.append(self.get_scale())

    clip = loop.clip_gradients
    monkeypatch.setattr(torch.amp, "GradScaler", Spy)
    monkeypatch.setattr(loop, "clip_gradients", lambda *a, **kw: (events.append("clip"), clip(*a, **kw))[1])
    cpu(AVX2_ONLY)
    info, _ = _train(tmp_path, tok, train={"precision": "fp16", "grad_accum": 2, "batch_size": 4},
                     runtime={"emulated_precision": "allow"}, keep_checkpoint=True)
    assert info["steps"] == 2 and info["fingerprint"]["precision"] == "fp16"
    assert events == ["scale", "scale", "unscale", "clip", "step", "update"] * 2
    state = json.loads(next((tmp_path / "checkpoints" / "simcse").glob("*/last/state.json")).read_text())
    # the checkpoint of step 1 holds the scaler as step 1 left it (2**16 at the start, halved by a step whose
    # scaled gradients overflowed in fp16)
    assert state["step"] == 1 and state["scaler"]["scale"] == scales[0] and scales[0] in (2.0 ** 16, 2.0 ** 15)
    assert state["scaler"]["growth_interval"] == 2000


def test_a_resumed_fp16_run_continues_its_scaler(tmp_path, tok, cpu, monkeypatch):
    from _support.training import Interrupt

    loaded = []

    class Spy(torch.amp.GradScaler):
        def load_state_dict(self, state):
            loaded.append(dict(state))
            return super().load_state_dict(state)

    def stop(step, record):
        if step == 1:
            raise Interrupt
    monkeypatch.setattr(torch.amp, "GradScaler", Spy)
    cpu(AVX2_ONLY)
    kw = dict(train={"precision": "fp16", "batch_size": 4}, runtime={"emulated_precision": "allow"})
    with pytest.raises(Interrupt):
        _train(tmp_path, tok, callbacks=[stop], keep_checkpoint=True, **kw)
    saved = json.loads(next((tmp_path / "checkpoints" / "simcse").glob("*/last/state.json")).read_text())["scaler"]
    shutil.rmtree(tmp_path / "data")   # _train's make_root writes the same corpus again
    info, _ = _train(tmp_path, tok, **kw)
    assert info["resumed_from_step"] == 1 and loaded == [saved]


def test_bf16_and_fp32_have_no_scaler():
    from sentlab.train.loop import loss_scaler

    assert loss_scaler("bf16", torch.device("cpu")) is None and loss_scaler("fp32", torch.device("cpu")) is None
    assert isinstance(loss_scaler("fp16", torch.device("cpu")), torch.amp.GradScaler)


# --- sentlab doctor ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("profile, rc", [("quick", 0), ("paper", 1)])
def test_doctor_prints_the_facts_and_fails_where_the_profile_cannot_run(monkeypatch, capsys, cpu, profile, rc):
    from conftest import REPO

    from sentlab import cli

    cpu(AVX2_ONLY)
    seen = facts(driver="550.54.15", driver_cuda="12.4", nvml_gpus=("NVIDIA L4",), probe="NVML")
    monkeypatch.setattr(dev, "probe_gpus", lambda driver=True: seen)
    assert cli.main(["doctor", "--params", str(REPO / "params.yaml"), "--profile", profile]) == rc
    out = capsys.readouterr().out
    assert "torch 2.13.0+cu130, CUDA 13.0 build; torch sees no CUDA GPU" in out
    assert "NVIDIA driver 550.54.15 (runs CUDA 12.4), NVML sees 1 GPU(s): NVIDIA L4" in out
    assert "AMD EPYC 7B13" in out and "native bf16 no" in out
    if rc:
        assert "runtime.device cuda, train.precision auto" in out and "cannot run here" in out
        assert "whl/cu126" in out
    else:
        assert "verdict:  runs here: training on cpu in fp32" in out


# --- the preflight and the rehearsal run a GPU profile on the CPU by saying so ----------------------------------

def test_the_preflight_states_the_device_it_runs_a_gpu_profiles_slice_on(monkeypatch):
    from conftest import REPO

    from sentlab.config.profile_files import profile_values
    from sentlab.preflight import slice as S

    paper = profile_values("paper", REPO / "profiles")
    monkeypatch.setattr(dev, "probe_gpus", lambda driver=True: facts(torch_gpus=()))
    here, note = S.slice_device(paper)
    assert here == "cpu" and note.startswith("runtime.device: cpu (the profile's: cuda)")
    assert "the projected times are CPU times" in note
    assert S.slice_edits(paper, S.SLICE, here)["runtime"] == {"nproc": 1, "device": "cpu"}
    monkeypatch.setattr(dev, "probe_gpus", lambda driver=True: facts(torch_gpus=("NVIDIA H100",)))
    assert S.slice_device(paper) == ("cuda", "runtime.device: cuda (the profile's: cuda)")


def test_the_rehearsal_profile_says_it_trains_on_the_cpu():
    import yaml
    from conftest import REPO
    from synthetic_upstream import rehearsal_profile

    from sentlab.config.profile_files import profile_values

    text = rehearsal_profile(profile_values("paper-lite", REPO / "profiles"), "paper-lite")
    assert "runtime.device: cpu, stated" in text
    assert yaml.safe_load(text)["runtime"]["device"] == "cpu"
