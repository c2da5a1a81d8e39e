"""What one resume checkpoint of a bert-base training costs to write (issue #54 §6: ``runtime.checkpoint_minutes``).

    PYTHONPATH=src python benchmarks/checkpoint_write.py [--repeats 3] [--dir DIR] [--minutes 10]

Builds bert-base-uncased's architecture (sentlab's kept config, random values) inside a method-shaped module, takes
one AdamW step so the optimiser holds its two moments, and writes the state with sentlab's own
:func:`sentlab.train.checkpoint.save_resume` (a temporary folder renamed into place) into ``--dir`` (default: a
folder under ``checkpoints/`` of this checkout, so the disk is the one a run writes to), timing each write through
an ``fsync`` of the file. Prints the size, each write's seconds, and the share of training time that one write every
``--minutes`` costs, against the 2 % target the profiles' ``runtime.checkpoint_minutes`` was chosen for.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    from transformers import AutoConfig, BertModel

    from sentlab.backbones import spec
    from sentlab.train.checkpoint import save_resume

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=REPO / "checkpoints" / "_bench_checkpoint_write")
    ap.add_argument("--minutes", type=float, default=10.0, help="runtime.checkpoint_minutes to cost")
    args = ap.parse_args(argv)

    torch.manual_seed(0)
    cfg = AutoConfig.for_model(**spec("bert-base-uncased")["config"])
    method = torch.nn.Module()
    method.encoder = BertModel(cfg, add_pooling_layer=False)
    params = sum(p.numel() for p in method.parameters())
    opt = torch.optim.AdamW(method.parameters(), lr=3e-5)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    out = method.encoder(input_ids=torch.randint(0, cfg.vocab_size, (2, 16))).last_hidden_state
    out.float().pow(2).mean().backward()
    opt.step()
    sched.step()
    times = []
    try:
        for i in range(args.repeats):
            folder = args.dir / "last"
            t0 = time.perf_counter()
            save_resume(folder, method, opt, sched, {"step": i})
            with open(folder / "state.pt", "rb") as fh:
                os.fsync(fh.fileno())
            times.append(time.perf_counter() - t0)
        size = (args.dir / "last" / "state.pt").stat().st_size
    finally:
        shutil.rmtree(args.dir, ignore_errors=True)
    worst = max(times)
    share = worst / (args.minutes * 60)
    print(f"bert-base state: {params:,} parameters, {size / 1e9:.2f} GB (weights + AdamW's two moments)")
    print("writes: " + ", ".join(f"{t:.2f} s" for t in times))
    print(f"one write every {args.minutes:g} min: {100 * share:.1f} % of training time (target <= 2 %: a write every "
          f"{worst / 0.02 / 60:.1f} min at the slowest write)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
