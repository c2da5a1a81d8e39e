"""Every equivalence case against its released code, one table (benchmarks/RESULTS.md, "sentlab against the
released code").

    python benchmarks/released/run_all.py --checkouts DIR [--cases simcse_unsup,paser] [--out table.md]

``DIR/<name>`` is a checkout of each case's repository at its pinned commit, ``<name>`` the repository's name
(``DIR/SimCSE``, ``DIR/PT-BERT``, ``DIR/SimCSE-plus-plus`` …); each case module's docstring has its ``git clone``
line. Each case runs in its own process (``<case>.py --released DIR/<name> --json``: two cases may import
different packages of the same name). Prints one Markdown row per case: the optimiser steps compared, the largest
relative loss difference over them, the largest relative gradient difference and over how many tensors, the momentum
weights' and the queue's (rows as sets) where the case carries them, the tensors skipped as zero on both sides, the
mutation control and whether the case caught it, and the setting at which they agree; exits 1 if any case
disagrees or misses its control.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def constants(case: Path) -> dict:
    """The case module's REPOSITORY, COMMIT and SETTING (importing a case imports sentlab and the harness only: the
    released code is imported inside ``released_outputs``)."""
    import importlib.util

    sys.path.insert(0, str(HERE))
    try:
        spec = importlib.util.spec_from_file_location(f"released_case_{case.stem}", case)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(HERE))
    return {k: getattr(mod, k, "") for k in ("REPOSITORY", "COMMIT", "SETTING")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkouts", required=True, type=Path, help="a folder holding one checkout per repository")
    ap.add_argument("--cases", default="", help="comma-separated case names (default: every case module)")
    ap.add_argument("--out", type=Path, help="also write the table here")
    args = ap.parse_args(argv)
    cases = sorted(p for p in HERE.glob("*.py") if not p.name.startswith("_") and p.name != Path(__file__).name)
    if args.cases:
        cases = [c for c in cases if c.stem in args.cases.split(",")]
    rows = ["| case | repository@commit | steps compared | loss Δ (rel.) | max gradient Δ (tensors) | momentum Δ | "
            "queue Δ (rows as sets) | skipped (zero on both) | control | control caught | agrees at |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    ok = True
    for case in cases:
        c = constants(case)
        checkout = args.checkouts / c["REPOSITORY"].split("/")[1]
        with tempfile.TemporaryDirectory() as tmp:
            res_path = Path(tmp) / "r.json"
            proc = subprocess.run([sys.executable, str(case), "--released", str(checkout), "--json", str(res_path)],
                                  capture_output=True, text=True, timeout=1800)
            if not res_path.is_file():
                ok = False
                rows.append(f"| {case.stem} | {c['REPOSITORY']}@{c['COMMIT'][:7]} | did not run (exit "
                            f"{proc.returncode}: {proc.stderr.strip().splitlines()[-1][:120] if proc.stderr else ''})"
                            f" | | | | | | | | |")
                continue
            r = json.loads(res_path.read_text())
        ok &= bool(r["agrees"]) and bool(r["control_caught"])

        def num(v):
            return "—" if v is None else f"{v:.1e}"

        rows.append(f"| {case.stem} | {c['REPOSITORY']}@{c['COMMIT'][:7]} | {r['steps_compared']} | "
                    f"{num(r['loss_rel_delta'])} | {num(r['max_grad_rel_delta'])} ({r['tensors_compared']}) | "
                    f"{num(r['momentum_rel_delta'])} | {num(r['queue_rel_delta'])} | {len(r['skipped_zero_grad'])} | "
                    f"{r['control']} | {'yes' if r['control_caught'] else '**no**'} | "
                    f"{c.get('SETTING', '')}{'' if r['agrees'] else ' — **DISAGREES**'} |")
        print(rows[-1], flush=True)
    table = "\n".join(rows) + "\n"
    print(table)
    if args.out:
        args.out.write_text(table)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
