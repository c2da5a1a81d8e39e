"""The GPU checklist (../shared/docs/GPU.md) in one run on a lent GPU: every figure printed and written to ``--out``.

    python benchmarks/gpu_checklist.py --out DIR [--parts env,train,compile,share,eval,glue,preflight] [--steps 20]
                                       [--stages REGEX] [--preflight-timeout 300]
    python benchmarks/gpu_checklist.py --out /tmp/gc --device cpu --tiny --parts compile,share --steps 2  # dry run

Parts (each in its own process, each failure a line of the summary, never the end of the run):

- ``env``: the device, torch/transformers versions, and the dense bf16 matrix-product rate measured here
  (8192³, ten timed products after three warm-ups): the "achievable peak" the shares are also given against.
- ``train`` (checklist 1): ``benchmarks/train_speed.py`` on CUDA, bf16 autocast, bert-base-uncased's shape
  (random weights), batch 64, length 32, the paper profile's method lines: plain eager SimCSE, SimCSE,
  PT-BERT; sentences/s, tokens/s, share of the dense bf16 peak (``--peak-tflops``, the H100/H200 data-sheet
  989; and of the measured rate), peak CUDA memory, projected time of one 1M-sentence epoch.
- ``eval`` (checklist 3): the 7-task STS evaluation (+ STS-B dev) of a bert-base-shaped model on CUDA, fp32
  and bf16 autocast, seconds each and the largest Spearman difference. No trained bert-base exists offline:
  the model is random (its architecture config, LayerNorms spread as in a trained model), so the difference
  says how far bf16 moves the numbers of *a* bert-base, not of a trained one.
- ``compile`` (checklist 6, issue #58): ``benchmarks/compiled_step.py``: SimCSE, PT-BERT and PaSeR (the paper
  profile's lines) at batch 64, length 32, bf16, bert-base's shape, eager (``train.compile: off``) against
  ``default`` and ``reduce-overhead`` (CUDA graphs) side by side in one run, batches padded to 32 tokens
  (``train.pad_buckets``; PaSeR refuses it and runs dynamic); first step (compilation) apart, s/step, sentences/s,
  the 1M-sentence epoch, peak memory, and one fixed batch's loss eager and compiled.
- ``share`` (checklist 5, issue #58): K = 2, then 4 small trainings (``--share-backbone``: the quick profile's
  MiniLM SimCSE; ``bert-base`` for bert-base's) at once on the one GPU, as ``runtime.gpus_per_task`` 1/K puts them,
  against the same K one at a time: wall seconds and total sentences/s.
- ``glue`` (issue #65 §5): GLUE fine-tuning steps of a bert-base-shaped model, batch 32, length 128, fp32
  against bf16 autocast (``glue.finetune.precision``): s/step each and the ratio, for ``sentlab plan``'s GLUE cost.
- ``preflight`` (checklists 2 and 4): ``sentlab preflight --profile paper --batch-size 0`` (every method at
  its paper batch size) on the hub-shaped stand-ins, the training stages ``--stages`` selects and their
  upstream: per stage s/step, peak CUDA memory, projected full time and where each module's weights came from.
  ``preflight.md`` / ``preflight.json`` are copied to ``--out``.

Needs the data mirror (``SENTLAB_DATA_MIRROR``: STS, SICK, wiki; MiniLM's tokenizer files under
``models/sentence-transformers/all-MiniLM-L6-v2`` for the bert-base tokenizer) and ``NLTK_DATA``.
The results of a run are in benchmarks/RESULTS.md ("On a GPU").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATASHEET_BF16_TFLOPS = 989.0  # H100 SXM / H200 dense bf16 (data sheet)
STAGES = r"^train@(simcse|ct|moco|moco_srl|ptbert|paser|paser_sup|l2p|prompt|prompt_l2p|posbow_adv|simcse_sup)$"


def env_part() -> dict:
    import torch
    import transformers

    from sentlab.runtime import cuda_builds, device as dev

    out = {"torch": torch.__version__, "transformers": transformers.__version__, "cuda": torch.cuda.is_available()}
    facts = dev.probe_gpus()   # what `sentlab doctor` shows: the build's kernels, each GPU's compute capability
    out["sentlab_gpus"] = dev.gpu_summary(facts)
    out["kernels_for_every_gpu"] = cuda_builds.runs_here(facts.arch_list, facts.torch_caps)
    out["install_line"] = cuda_builds.install_line(facts)
    if not torch.cuda.is_available():
        return out
    out["device"] = torch.cuda.get_device_name(0)
    out["memory_gib"] = torch.cuda.get_device_properties(0).total_memory / 2**30
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    out["matmul_bf16_tflops"] = 10 * 2 * 8192**3 / (time.perf_counter() - t) / 1e12
    return out


def train_part(steps: int, measured_tflops: float | None, device: str) -> list[dict]:
    rows = []
    for m in ("plain", "simcse", "ptbert"):
        cmd = [sys.executable, str(REPO / "benchmarks" / "train_speed.py"), "--child", m, "--steps", str(steps),
               "--device", device, "--precision", "bf16", "--profile", "paper"]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO,
                              env=dict(os.environ, TOKENIZERS_PARALLELISM="false"))
        if proc.returncode:
            rows.append({"method": m, "error": (proc.stderr.strip().splitlines() or ["failed"])[-1]})
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        if "model_flops_per_s" not in r:  # a dry run on the CPU
            rows.append(r)
            continue
        r["share_of_datasheet_peak"] = r["model_flops_per_s"] / (DATASHEET_BF16_TFLOPS * 1e12)
        if measured_tflops:
            r["share_of_measured_peak"] = r["model_flops_per_s"] / (measured_tflops * 1e12)
        r["epoch_1m_min"] = 1e6 / r["sentences_per_s"] / 60
        rows.append(r)
    return rows


def compile_part(steps: int, device: str, tiny: bool, out: Path) -> list[dict]:
    """``benchmarks/compiled_step.py``: eager against compiled steps, one child process per method and mode."""
    modes = "off,default,reduce-overhead" if device == "cuda" else "off,default"
    cmd = [sys.executable, str(REPO / "benchmarks" / "compiled_step.py"), "--device", device, "--methods",
           "simcse,ptbert,paser", "--modes", modes, "--pad-buckets", "32", "--profile", "paper", "--steps", str(steps),
           "--precision", "bf16", "--same-batch-loss", "--json", str(out / "compiled_step.json")]
    proc = subprocess.run(cmd + (["--tiny"] if tiny else []), capture_output=True, text=True, cwd=REPO,
                          env=dict(os.environ, TOKENIZERS_PARALLELISM="false"))
    if not (out / "compiled_step.json").is_file():
        raise RuntimeError((proc.stderr.strip() or "failed")[-1500:])
    return json.loads((out / "compiled_step.json").read_text())["rows"]


def share_part(steps: int, device: str, tiny: bool, backbone: str) -> list[dict]:
    """K small trainings at once on the one device against one at a time, K = 2 then 4."""
    rows = []
    for k in (2, 4):
        cmd = [sys.executable, str(REPO / "benchmarks" / "compiled_step.py"), "--device", device, "--methods",
               "simcse", "--modes", "off", "--steps", str(steps), "--precision", "bf16", "--concurrent", str(k),
               "--backbone", "tiny" if tiny else backbone]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO,
                              env=dict(os.environ, TOKENIZERS_PARALLELISM="false"))
        if proc.returncode:
            rows.append({"k": k, "error": (proc.stderr.strip().splitlines() or ["failed"])[-1]})
            continue
        c = json.loads(proc.stdout)["concurrent"]
        rows.append({key: v for key, v in c.items() if not key.endswith("_rows")}
                    | {"errors": [r["error"] for key in ("serial_rows", "together_rows") for r in c[key]
                                  if "error" in r]})
    return rows


def eval_part(device: str = "cuda", max_pairs: int | None = None) -> dict:
    import torch
    from transformers import AutoModel

    sys.path.insert(0, str(REPO / "src"))
    from sentlab.assets.resolve import resolve_data
    from sentlab.backbones import architecture_config, build_tokenizer, spread_layer_norms
    from sentlab.data.sts import TASKS, parse_all
    from sentlab.nn.encoder import SentenceEncoder
    from sentlab.evaluate.sts.protocol import evaluate_table

    table = parse_all(resolve_data("senteval_sts").root, resolve_data("sick").root)
    tok = build_tokenizer("bert-base-uncased")
    torch.manual_seed(0)
    model = AutoModel.from_config(architecture_config("bert-base-uncased"))
    spread_layer_norms(model)
    model.to(device).eval()
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    out = {"pairs": int(len(table)), "model": "bert-base-uncased (random: no trained bert-base offline)"}
    res = {}
    for precision in ("fp32", "bf16", "fp32", "bf16"):  # the first of each warms the kernels up
        enc = SentenceEncoder(model, tok, pooling="cls", precision=precision, name=f"gpu-{precision}",
                              device=torch.device(device))
        sync()
        t = time.perf_counter()
        res[precision] = evaluate_table(enc, table, batch_size=128, with_dev=True, max_pairs=max_pairs)
        sync()
        out[f"{precision}_s"] = time.perf_counter() - t
    keys = [*TASKS, "STSBenchmark-dev"]
    out["max_abs_diff_spearman_x100"] = max(abs(res["fp32"][k] - res["bf16"][k]) for k in keys)
    out["fp32"] = {k: res["fp32"][k] for k in [*keys, "Avg"]}
    out["bf16"] = {k: res["bf16"][k] for k in [*keys, "Avg"]}
    return out


def glue_part(device: str, steps: int, tiny: bool) -> dict:
    """GLUE fine-tuning steps of a bert-base-shaped model (random) on STS-B's training pairs (the mirror's copy),
    batch 32, max length 128 (run_glue's defaults), in fp32 and in bf16 autocast (``glue.finetune.precision``):
    seconds a step each and their ratio, what ``sentlab plan`` needs to cost GLUE in fp32 (issue #65 §5)."""
    import torch
    from transformers import AutoModel

    sys.path.insert(0, str(REPO / "src"))
    from sentlab.backbones import architecture_config, build_tokenizer
    from sentlab.evaluate.suites.glue import GlueConfig, finetune, load_glue

    splits = load_glue("STS-B")
    tok = build_tokenizer("bert-base-uncased")
    config = architecture_config("bert-base-uncased")
    if tiny:   # a dry run of the code path on a CPU
        config.update({"num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 2, "intermediate_size": 256})
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    out = {"model": f"bert-base-uncased shape{' (tiny: 2 layers, 128 wide)' if tiny else ''}, random weights",
           "task": "STS-B", "batch_size": 32, "max_length": 128, "steps": steps}
    for precision in ("fp32", "bf16", "fp32", "bf16"):   # the first of each warms the kernels up
        torch.manual_seed(0)
        model = AutoModel.from_config(config)
        cfg = GlueConfig(max_steps=steps, max_dev=32, precision=precision)
        sync()
        t = time.perf_counter()
        finetune(model, tok, "STS-B", splits, cfg, seed=0, device=device, progress=False)
        sync()
        out[f"{precision}_s_per_step"] = (time.perf_counter() - t) / steps
    out["fp32_over_bf16"] = out["fp32_s_per_step"] / out["bf16_s_per_step"]
    return out


def preflight_part(out: Path, stages: str, timeout: int, size: int, steps: int) -> dict:
    scratch = Path("/tmp/sentlab-gpu-preflight")
    cmd = [sys.executable, "-c", "import sys; from sentlab.cli import main; sys.exit(main())", "preflight",
           "--profile", "paper", "--stages", stages, "--batch-size", "0", "--size", str(size), "--steps", str(steps),
           "--scratch", str(scratch), "--out", str(out / "preflight")]
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)
        rc, tail = proc.returncode, (proc.stdout + proc.stderr)[-3000:]
    except subprocess.TimeoutExpired as e:
        rc, tail = "timeout", ((e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(
            errors="replace"))[-3000:]
    return {"rc": rc, "seconds": time.perf_counter() - t, "cmd": " ".join(cmd[3:]), "tail": tail}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--parts", default="env,train,compile,share,eval,glue,preflight")
    ap.add_argument("--tiny", action="store_true", help="compile, share, glue: a tiny BERT (a dry run of the code "
                                                        "path)")
    ap.add_argument("--share-backbone", default="minilm", choices=("minilm", "bert-base"))
    ap.add_argument("--steps", type=int, default=20, help="train: timed steps per method")
    ap.add_argument("--stages", default=STAGES, help="preflight: the training stages (regex)")
    ap.add_argument("--preflight-timeout", type=int, default=300)
    ap.add_argument("--preflight-size", type=int, default=4000, help="preflight: corpus sentences (>= 512 x steps)")
    ap.add_argument("--preflight-steps", type=int, default=5)
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of the code paths (MiniLM training, few pairs)")
    ap.add_argument("--eval-max-pairs", type=int, default=None, help="eval: a seeded sample per task (dry runs)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:  # one part in this process: its JSON on the last line
        fn = env_part if args.child == "env" else (lambda: eval_part(args.device, args.eval_max_pairs))
        print(json.dumps(fn()))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict = {}

    def save():
        (args.out / "gpu_checklist.json").write_text(json.dumps(results, indent=2, default=str))

    for part in args.parts.split(","):
        t = time.perf_counter()
        print(f"== {part}", flush=True)
        try:
            if part in ("env", "eval"):
                proc = subprocess.run([sys.executable, __file__, "--out", str(args.out), "--child", part, "--device",
                                       args.device, *(["--eval-max-pairs", str(args.eval_max_pairs)]
                                                      if args.eval_max_pairs else [])],
                                      capture_output=True, text=True, cwd=REPO)
                if proc.returncode:
                    raise RuntimeError(proc.stderr.strip()[-1500:])
                results[part] = json.loads(proc.stdout.strip().splitlines()[-1])
            elif part == "train":
                results[part] = train_part(args.steps, (results.get("env") or {}).get("matmul_bf16_tflops"),
                                           args.device)
            elif part == "compile":
                results[part] = compile_part(args.steps, args.device, args.tiny, args.out)
            elif part == "share":
                results[part] = share_part(args.steps, args.device, args.tiny, args.share_backbone)
            elif part == "glue":
                results[part] = glue_part(args.device, args.steps, args.tiny)
            elif part == "preflight":
                results[part] = preflight_part(args.out, args.stages, args.preflight_timeout, args.preflight_size,
                                               args.preflight_steps)
            else:
                raise ValueError(f"unknown part {part!r}")
        except Exception as e:  # noqa: BLE001 - a failed part is a line of the summary
            results[part] = {"error": f"{type(e).__name__}: {e}"}
        results.setdefault("seconds", {})[part] = time.perf_counter() - t
        print(json.dumps(results[part], indent=1, default=str)[:4000], flush=True)
        save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
