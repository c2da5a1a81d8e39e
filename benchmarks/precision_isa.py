"""Do the quick profile's numbers depend on the CPU? Native bf16 against a capped instruction set.

For each ``--methods`` entry and each ``--precisions`` entry (``train.precision``), the method is trained with
the quick profile (params.yaml as it stands, ``train.precision`` set explicitly, MLflow off) and its exported
model evaluated on the seven STS test sets (fp32 evaluation, every pair), twice:

* ``native``: this CPU as it is (here AVX-512 BF16 + AMX: oneDNN's bf16 kernels, PyTorch's AVX-512 kernels);
* ``capped``: ``ONEDNN_MAX_CPU_ISA=AVX512_CORE`` (oneDNN may not use AVX-512 BF16 or AMX: bf16 is emulated by
  fp32 arithmetic, as on a CPU without native bf16) and ``ATEN_CPU_CAPABILITY=avx2`` (PyTorch's own kernels
  at AVX2, as on most laptops and older servers);
* ``gemm32`` (bf16 only): PyTorch's bf16 autocast as it is, but every bf16 matrix product (``mm``, ``addmm``,
  ``bmm``, ``baddbmm``: the forward's and the backward's) computed by the fp32 kernel on its exact bf16 operands and
  rounded to bf16: what a native bf16 GEMM computes (bf16 in, fp32 sums, bf16 out), up to the order of its sums,
  at fp32's speed. On a CPU without native bf16, where a bf16 step is emulated ~30x slower (RESULTS
  "Precision"), it is the bf16 training of another CPU, in minutes. ``--validate-gemm32 STEPS`` checks that claim
  first: SimCSE's weights after STEPS steps, real (emulated) bf16 and gemm32, each against fp32 and each other.

Each run is its own process (the variables are read when torch loads). The script prints per run the 7 task
Spearmans, Avg., the training wall time and s/step, then per method and precision the |Δ Avg| between native
and capped, against the target of 0.05 (issue #35: what the quick profile states gives the same numbers on a
CPU without native bf16). ``--json`` keeps every figure; ``--only`` runs one (method, precision, isa) cell at a
time (``simcse:bf16:capped``), so a shared machine can run them one by one.

Usage::

    python benchmarks/precision_isa.py --methods simcse,ptbert --precisions bf16,fp32 --json out.json
    python benchmarks/precision_isa.py --only simcse:bf16:capped --json cell.json
    python benchmarks/precision_isa.py --summarise a.json b.json ...      # the table of earlier cells
    python benchmarks/precision_isa.py --methods prompt_l2p --isas gemm32 --set max_steps=40   # fp32, gemm32 bf16
    python benchmarks/precision_isa.py --methods prompt_l2p --isas native,gemm32 --seed 43   # another seed
    python benchmarks/precision_isa.py --validate-gemm32 2

``--set KEY=VALUE`` (repeatable) changes the method's line of the profile for every cell (a setup to try; the
cells record it).

Needs the offline data mirror (``SENTLAB_DATA_MIRROR``) for the corpus and STS; the corpus is prepared once
into ``--work`` (default: a folder under the system temp dir) by the prepare stage's own code.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CAPPED = {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "ATEN_CPU_CAPABILITY": "avx2"}
TARGET = 0.05
STS7 = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness")


def prepare(work: Path) -> None:
    """The prepare stage in ``work``: data/corpus and data/sts, once. A stage script runs in a DVC project (it reads
    the params its dvc.yaml entry declares), so ``work`` is made one: params.yaml, dvc.yaml and models.yaml copied
    there, ``dvc init --no-scm``."""
    if (work / "data" / "sts" / "sts.parquet").is_file():
        return
    work.mkdir(parents=True, exist_ok=True)
    for name in ("params.yaml", "dvc.yaml", "models.yaml"):
        (work / name).write_text((REPO / name).read_text())
    if not (work / ".dvc").is_dir():
        subprocess.run([sys.executable, "-m", "dvc", "init", "--no-scm", "-q"], cwd=work, check=True)
    subprocess.run([sys.executable, str(REPO / "pipeline" / "prepare.py")], cwd=work, check=True,
                   env={**os.environ, "PYTHONPATH": str(REPO / "src")})


def bf16_gemms_in_fp32():
    """A dispatch mode (active for backward too) that runs each bf16 ``mm``/``addmm``/``bmm``/``baddbmm`` as the fp32
    kernel on the upcast (exact) operands and rounds the product to bf16; every other op runs as it is."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten
    gemms = {aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default}

    def up(a):
        return a.float() if isinstance(a, torch.Tensor) and a.dtype == torch.bfloat16 else a

    class Bf16GemmsInFp32(TorchDispatchMode):
        calls = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func in gemms and any(isinstance(a, torch.Tensor) and a.dtype == torch.bfloat16 for a in args):
                type(self).calls += 1
                return func(*[up(a) for a in args], **kwargs).to(torch.bfloat16)
            return func(*args, **kwargs)

    return Bf16GemmsInFp32()


def parse_sets(sets: list[str]) -> dict:
    import yaml

    out = {}
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--set {item!r}: expected KEY=VALUE (a key of the method's line, e.g. max_steps=40)")
        out[key] = yaml.safe_load(value)
    return out


def child(method: str, precision: str, isa: str, work: Path, sets: dict | None = None,
          seed: int | None = None) -> dict:
    """One cell, in this process (the ISA variables were set by the parent before torch loaded)."""
    os.chdir(work)
    import contextlib

    import torch

    from sentlab.config import load_params
    from sentlab.data.sts import read_sts_table
    from sentlab.evaluate.sts.diagnostics import make_dev_evaluator
    from sentlab.evaluate.sts.runner import build_encoders, evaluate_encoders
    from sentlab.train.run import train_method

    params = load_params("params.yaml")
    # emulated bf16 is what a `capped` cell (or a CPU without native bf16) measures: asked for, so it runs
    # (sentlab.runtime.device refuses it otherwise)
    params = params.model_copy(update={"train": params.train.model_copy(update={"precision": precision}),
                                       "evaluate": params.evaluate.model_copy(update={"precision": "fp32",
                                                                                      "diagnostics": False}),
                                       "runtime": params.runtime.model_copy(update={"emulated_precision": "allow"})})
    if seed is not None:   # the training's seed (the corpus stays the one prepared with params.yaml's)
        params = params.model_copy(update={"seed": seed})
    if sets:
        params = params.model_copy(update={"methods": {**params.methods, method: {**(params.methods.get(method) or {}),
                                                                                  **sets}}})
    if isa == "gemm32" and precision != "bf16":
        raise SystemExit(f"cell {method}:{precision}:gemm32: gemm32 changes bf16 matrix products only; use "
                         f"{method}:bf16:gemm32, or {method}:{precision}:native")
    name = f"{method}-{precision}-{isa}-s{params.seed}"
    mode = bf16_gemms_in_fp32() if isa == "gemm32" else contextlib.nullcontext()
    t0 = time.perf_counter()
    with mode:
        info = train_method(params, method, name=name, root=work, make_dev_eval=make_dev_evaluator, tracking=False,
                            progress=False)
    train_s = time.perf_counter() - t0
    table = read_sts_table(work / "data" / "sts" / "sts.parquet")
    ep = params.evaluate
    encoders = build_encoders(str(work / "models" / name), precision="fp32", max_length=ep.max_length, name=name,
                              device="cpu", workers=ep.workers)
    res = evaluate_encoders({name: encoders[name]}, table, params)
    return {"method": method, "precision": precision, "isa": isa, "env": {k: os.environ.get(k) for k in CAPPED},
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(), "train_s": round(train_s, 1),
            "steps": info.get("steps"), "best_stsb_dev": info.get("best_stsb_dev"), "best_step": info.get("best_step"),
            "seed": params.seed, "set": sets or {}, "gemm32_calls": getattr(mode, "calls", None),
            "sts": {t: round(float(res[t]), 4) for t in STS7}, "avg": round(float(res["Avg"]), 4)}


def run_cell(method: str, precision: str, isa: str, work: Path, sets: dict | None = None,
             seed: int | None = None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    for k in CAPPED:
        env.pop(k, None)
    if isa == "capped":
        env.update(CAPPED)
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = Path(f.name)
    subprocess.run([sys.executable, __file__, "--child", f"{method}:{precision}:{isa}", "--work", str(work),
                    "--child-out", str(out), "--child-set", json.dumps(sets or {})]
                   + ([] if seed is None else ["--seed", str(seed)]), env=env, check=True)
    cell = json.loads(out.read_text())
    out.unlink()
    print(json.dumps(cell), flush=True)
    return cell


def summarise(cells: list[dict]) -> str:
    # cells of several seeds are compared within their seed: "prompt_l2p s43" (cells from before --seed: the method)
    cells = [{**c, "method": f"{c['method']} s{c['seed']}" if c.get("seed") is not None else c["method"]}
             for c in cells]
    cells = sorted(cells, key=lambda c: (c["method"], c["precision"], c["isa"] != "native"))
    lines = ["| method | train.precision | ISA | torch capability | train s | " + " | ".join(STS7) + " | Avg. |",
             "|---" * (len(STS7) + 6) + "|"]
    for c in cells:
        lines.append(f"| {c['method']} | {c['precision']} | {c['isa']} | {c['torch_cpu_capability']} | "
                     f"{c['train_s']:.0f} | " + " | ".join(f"{c['sts'][t]:.2f}" for t in STS7) + f" | {c['avg']:.3f} |")
    lines.append("")
    by = {(c["method"], c["precision"], c["isa"]): c for c in cells}
    for (m, p, isa), c in sorted(by.items()):
        other = by.get((m, p, "capped"))
        gemm32 = by.get((m, p, "gemm32"))
        if isa == "native" and gemm32:
            d = abs(c["avg"] - gemm32["avg"])
            lines.append(f"{m} {p}: |Δ Avg.| native vs gemm32 (bf16 GEMMs summed by the fp32 kernels) = {d:.3f}")
        if isa == "native" and other:
            d = abs(c["avg"] - other["avg"])
            lines.append(f"{m} {p}: |Δ Avg.| native vs capped = {d:.3f} ({'within' if d <= TARGET else 'OUTSIDE'} "
                         f"{TARGET}); train time capped/native = {other['train_s'] / c['train_s']:.2f}x")
    for (m, p, isa), c in sorted(by.items()):
        fp32 = by.get((m, "fp32", "native" if isa == "gemm32" else isa))   # fp32's gemm32 cell is its native one
        if p == "bf16" and fp32:
            lines.append(f"{m} {isa}: |Δ Avg.| bf16 vs fp32 = {abs(c['avg'] - fp32['avg']):.3f}; "
                         f"train time fp32/bf16 = {fp32['train_s'] / c['train_s']:.2f}x")
    return "\n".join(lines)


def validate_gemm32(steps: int, method_id: str = "simcse") -> int:
    """Three trainings of ``method_id`` from the same weights and batches (sentlab's loop, the quick profile's batch
    and length, 2 threads): fp32, bf16 autocast as PyTorch runs it here, and gemm32; per step the relative distance
    ``||θ_a − θ_b|| / ||θ_b||`` of each pair. gemm32 stands for another CPU's bf16 when its distance to fp32 is that
    of the real bf16 and its distance to the real bf16 is of the same order (two bf16 runs that sum in other
    orders), not above it."""
    import torch

    sys.path.insert(0, str(REPO / "src"))
    sys.path.insert(0, str(REPO / "benchmarks"))
    import roundoff_probe
    import train_speed

    texts = train_speed.corpus_sentences(64 * steps)

    def weights(precision: str, gemm32: bool) -> tuple[list, float]:
        t0 = time.perf_counter()
        run = roundoff_probe.trajectory(method_id, steps, 2, texts, precision=precision, gemm32=gemm32)
        return [r["w"] for r in run], time.perf_counter() - t0

    fp32, t_fp32 = weights("fp32", False)
    fast, t_fast = weights("bf16", True)
    real, t_real = weights("bf16", False)
    rel = roundoff_probe.rel
    print(f"{method_id}, {steps} steps: fp32 {t_fp32:.1f} s, gemm32 {t_fast:.1f} s, bf16 as PyTorch runs it here "
          f"{t_real:.1f} s (torch CPU capability {torch.backends.cpu.get_cpu_capability()})")
    print("| step | gemm32 vs fp32 | real bf16 vs fp32 | real bf16 vs gemm32 |\n|---|---:|---:|---:|")
    for i in range(steps):
        print(f"| {i + 1} | {rel(fast[i], fp32[i]):.2e} | {rel(real[i], fp32[i]):.2e} | {rel(real[i], fast[i]):.2e} |")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--methods", default="simcse,ptbert")
    ap.add_argument("--precisions", default="bf16,fp32")
    ap.add_argument("--isas", default="native,capped")
    ap.add_argument("--only", default=None, help="one cell METHOD:PRECISION:ISA")
    ap.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "sentlab-precision-isa"))
    ap.add_argument("--json", default=None)
    ap.add_argument("--summarise", nargs="+", default=None, help="JSON files of earlier runs: print their table")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a key of the method's line for every cell (repeatable), e.g. max_steps=40")
    ap.add_argument("--validate-gemm32", type=int, default=None, metavar="STEPS",
                    help="SimCSE's weights after STEPS steps: real bf16, gemm32 and fp32 against each other")
    ap.add_argument("--seed", type=int, default=None,
                    help="the trainings' seed (default: params.yaml's); the corpus stays the one prepared with it")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-out", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-set", default="{}", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    work = Path(args.work)
    if args.child:
        m, p, isa = args.child.split(":")
        Path(args.child_out).write_text(json.dumps(child(m, p, isa, work, json.loads(args.child_set), args.seed)))
        return 0
    if args.validate_gemm32:
        return validate_gemm32(args.validate_gemm32)
    if args.summarise:
        cells = []
        for f in args.summarise:
            data = json.loads(Path(f).read_text())
            cells.extend(data if isinstance(data, list) else [data])
        print(summarise(cells))
        return 0
    prepare(work)
    if args.only:
        todo = [tuple(args.only.split(":"))]
    else:
        # fp32 has no bf16 product for gemm32 to change: its gemm32 cell is the native one
        todo = list(dict.fromkeys((m, p, "native" if (i, p) == ("gemm32", "fp32") else i)
                                  for m in args.methods.split(",") for p in args.precisions.split(",")
                                  for i in args.isas.split(",")))
    sets = parse_sets(args.set)
    cells = [run_cell(m, p, i, work, sets, args.seed) for m, p, i in todo]
    if args.json:
        Path(args.json).write_text(json.dumps(cells, indent=1))
    print(summarise(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
