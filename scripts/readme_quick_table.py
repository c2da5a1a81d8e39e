"""The README's quick table from a quick run's outputs: one row per backbone baseline and per registered method.

    PYTHONPATH=src python scripts/readme_quick_table.py [--root DIR]   # DIR: the workspace of the run (default .)

A method the quick profile trains gets its seed-42 numbers (``reports/metrics/<m>.json``) and its best STS-B dev
score and step (``models/<m>/sentlab.json``); every other registered method gets a row that says it is not trained
in the quick profile and which profiles train it (``profiles/*.yaml``' ``train.methods``), so the table shows every
method sentlab has (issue #55). Prints Markdown.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

from sentlab.config.tasks import STS_KEYS as TASKS   # the seven STS tasks and Avg, as declared


def profiles_training(root: Path) -> dict[str, list[str]]:
    """method id -> the profiles whose params train it (``sentlab profile`` resolves each file's extends)."""
    from sentlab.config.profile_files import profile_values

    out: dict[str, list[str]] = {}
    for f in sorted((root / "profiles").glob("*.yaml")):
        try:
            values = profile_values(f.stem, root / "profiles")
        except Exception:   # noqa: BLE001 - a user's profile that does not resolve: left out of the table
            continue
        for m in (values.get("train") or {}).get("methods") or []:
            out.setdefault(m, []).append(f.stem)
    return out


def row(root: Path, name: str) -> str | None:
    f = root / "reports" / "metrics" / f"{name}.json"
    if not f.is_file():
        return None
    m = json.loads(f.read_text())
    if m.get("status") != "evaluated":
        return None
    cells = [f"{m[t]:.2f}" if isinstance(m.get(t), (int, float)) else "–" for t in TASKS]
    info = root / "models" / name / "sentlab.json"
    dev = ""
    if info.is_file():
        i = json.loads(info.read_text())
        if i.get("best_stsb_dev") is not None:
            dev = f"{i['best_stsb_dev']:.2f} ({i.get('best_step')})"
    return f"| {name} | " + " | ".join(cells) + f" | {dev} |"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path("."))
    args = ap.parse_args(argv)
    root = args.root
    from sentlab.methods import registered

    params = yaml.safe_load((root / "params.yaml").read_text())
    quick = params["train"]["methods"]
    trains = profiles_training(Path(__file__).resolve().parents[1])
    lines = ["| model | STS12 | STS13 | STS14 | STS15 | STS16 | STS-B | SICK-R | Avg | best STS-B dev (step) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for b in params["evaluate"]["baselines"]:
        r = row(root, f"base-{b}")
        if r:
            lines.append(r)
    for m in quick:
        lines.append(row(root, m) or f"| {m} | not evaluated in this run |" + " |" * 8)
    for m in sorted(registered()):
        if m in quick:
            continue
        where = ", ".join(f"`{p}`" for p in trains.get(m, []) if p != "quick") or "no shipped profile"
        lines.append(f"| {m} | not trained in the quick profile (its CPU budget); trained by {where} |" + " |" * 8)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
