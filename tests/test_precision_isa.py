"""benchmarks/precision_isa.py's ``gemm32`` cells (issue #69 §2): bf16 autocast whose matrix products are summed by
the fp32 kernels. The cells stand for another CPU's bf16 training only if the products are what a native bf16 GEMM
computes: operands rounded to bf16, sums in fp32, one rounding of the result to bf16."""

import importlib.util
import json
from pathlib import Path

import torch

from conftest import mirror_with

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("precision_isa", REPO / "benchmarks" / "precision_isa.py")
precision_isa = importlib.util.module_from_spec(spec)
spec.loader.exec_module(precision_isa)


def test_a_bf16_product_rounds_its_operands_sums_in_fp32_and_rounds_once():
    """x = 1 + 2^-9 is 1 in bf16 (7 fraction bits: the step at 1 is 2^-7), so x * 3 is 3, not 3.005859375. The sum
    1 + 2^-8 is half a bf16 step above 1: kept in fp32 until the end, it rounds once, to even: 1."""
    x = torch.tensor([[1 + 2 ** -9, 1.0]])
    w = torch.tensor([[3.0, 0.0], [1.0, 2 ** -8]])
    with precision_isa.bf16_gemms_in_fp32() as mode, torch.autocast("cpu", dtype=torch.bfloat16):
        y = torch.nn.functional.linear(x, w)
    assert y.dtype == torch.bfloat16
    assert y.float().tolist() == [[3.0, 1.0]]
    assert type(mode).calls == 1
    assert torch.nn.functional.linear(x, w).tolist() == [[3.005859375, 1 + 2 ** -9 + 2 ** -8]]   # fp32, unrounded


def test_the_backward_products_go_through_it_and_fp32_work_does_not():
    """A linear's backward is two more products (the input's and the weight's gradients), both bf16 under autocast;
    an fp32 product outside autocast is left alone (the dev evaluation, the loss in fp32)."""
    w = torch.tensor([[2 ** -9, 1.0]], requires_grad=True)
    x = torch.tensor([[1.0, 1.0], [1.0, 0.0]], requires_grad=True)
    with precision_isa.bf16_gemms_in_fp32() as mode:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ w.t()
        y.float().sum().backward()
        assert type(mode).calls == 3
        fp32 = torch.tensor([[1.0 + 2 ** -9]]) @ torch.tensor([[1.0]])
        assert type(mode).calls == 3 and fp32.item() == 1.0 + 2 ** -9
    assert y.float().flatten().tolist() == [1.0, 2 ** -9]    # 1 + 2^-9 rounds to 1; 2^-9 alone is a bf16 number
    assert w.grad.tolist() == [[2.0, 1.0]]
    assert x.grad.tolist() == [[2 ** -9, 1.0], [2 ** -9, 1.0]]


def test_the_summary_compares_cells_within_their_seed():
    """Cells of two seeds (``--seed``): bf16 against fp32 within each seed (|74.81 - 74.75|, |74.50 - 74.90|), never
    across them; cells from before ``--seed`` (no seed recorded) keep the method's name."""
    def cell(precision, isa, avg, seed):
        c = {"method": "prompt_l2p", "precision": precision, "isa": isa, "torch_cpu_capability": "AVX512",
             "train_s": 100.0, "sts": {t: avg for t in precision_isa.STS7}, "avg": avg}
        return c if seed is None else {**c, "seed": seed}

    out = precision_isa.summarise([cell("fp32", "native", 74.75, 42), cell("bf16", "gemm32", 74.81, 42),
                                   cell("fp32", "native", 74.90, 43), cell("bf16", "gemm32", 74.50, 43),
                                   cell("fp32", "native", 70.0, None), cell("bf16", "gemm32", 70.5, None)])
    deltas = [line for line in out.splitlines() if "bf16 vs fp32" in line]
    assert deltas == ["prompt_l2p gemm32: |Δ Avg.| bf16 vs fp32 = 0.500; train time fp32/bf16 = 1.00x",
                      "prompt_l2p s42 gemm32: |Δ Avg.| bf16 vs fp32 = 0.060; train time fp32/bf16 = 1.00x",
                      "prompt_l2p s43 gemm32: |Δ Avg.| bf16 vs fp32 = 0.400; train time fp32/bf16 = 1.00x"]
    assert "| prompt_l2p s43 | bf16 | gemm32 |" in out


def test_its_work_folder_is_prepared_by_the_prepare_stage(tmp_path, monkeypatch):
    """The cells read data/corpus and data/sts from ``--work``, written by pipeline/prepare.py, a stage script that
    runs only in a DVC project (it reads the params its dvc.yaml entry declares): an empty folder failed there with
    "not a sentlab DVC project". The quick profile's corpus is 11,000 sentences (profiles/quick.yaml)."""
    mirror_with(monkeypatch, "STS", "SICK", "wiki/wiki1m_head.txt")
    work = tmp_path / "work"
    precision_isa.prepare(work)
    assert (work / "data" / "sts" / "sts.parquet").is_file()
    assert json.loads((work / "data" / "prepare_stats.json").read_text())["corpus"]["sampled"] == 11000
