"""DVC's own time in a repository with the whole pipeline's lock: ruamel.yaml's C loader against its pure-Python one.

    python benchmarks/dvc_overhead.py --workdir DIR [--rounds 3]

DIR is a repository where `dvc repro` has run to the end (e.g. the ``--workdir`` that
``benchmarks/stage_times.py --keep`` leaves: the quick profile's 257 stages, a dvc.lock of ~23k lines).
DVC reads ``dvc.yaml`` and ``dvc.lock`` with ruamel.yaml's safe loader, which is the C extension
``ruamel.yaml.clib`` when it is installed (a dependency of sentlab) and pure Python otherwise; the lock
rewrite after every stage uses the round-trip loader, pure Python either way. Timed side by side, rounds
alternated: a second ``dvc repro`` with nothing changed (target <= 10 s), ``dvc status``, and the two loads
of DVC's lock. Nothing in DIR changes (both commands only read when the pipeline is up to date; the script
stops if a stage ran).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

# the pure-Python run: ruamel.yaml imports its C extension in a try block; a None entry makes that import fail
WRAPPER = ("import sys; {block}from dvc.cli import main; sys.exit(main(sys.argv[1:]))")


def dvc(workdir: Path, args: list[str], c_loader: bool) -> float:
    code = WRAPPER.format(block="" if c_loader else "sys.modules['_ruamel_yaml'] = None; ")
    t = time.perf_counter()
    run = subprocess.run([sys.executable, "-c", code, *args], cwd=workdir, capture_output=True, text=True,
                         env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"})
    seconds = time.perf_counter() - t
    if run.returncode != 0 or "Running stage" in run.stdout:
        raise SystemExit(f"`dvc {' '.join(args)}` in {workdir} did not come out a no-op (rc {run.returncode}); run "
                         f"`dvc repro` there to the end first.\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
    return seconds


def lock_loads(lock: Path) -> dict[str, float]:
    """Seconds to load ``lock`` with the safe loader (C when installed) and the round-trip loader."""
    from ruamel.yaml import YAML

    text = lock.read_text(encoding="utf-8")
    out = {}
    for typ, pure in (("safe, C", False), ("safe, pure Python", True), ("round-trip (lock rewrite)", False)):
        t = time.perf_counter()
        YAML(typ="rt" if typ.startswith("round") else "safe", pure=pure).load(text)
        out[typ] = time.perf_counter() - t
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", required=True, type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    try:
        import _ruamel_yaml  # noqa: F401
    except ImportError:
        raise SystemExit("ruamel.yaml.clib is not installed here (`pip install -e .` installs it): nothing to compare.")
    lock = args.workdir / "dvc.lock"
    if not lock.is_file():
        raise SystemExit(f"{lock} is missing: run `dvc repro` in {args.workdir} first.")
    times: dict[tuple[str, bool], list[float]] = {}
    for _ in range(args.rounds):
        for cmd in (["repro"], ["status"]):
            for c_loader in (False, True):
                times.setdefault((cmd[0], c_loader), []).append(dvc(args.workdir, cmd, c_loader))
    lines = len(lock.read_text(encoding="utf-8").splitlines())
    print(f"{args.workdir}: dvc.lock of {lines:,} lines; {args.rounds} rounds alternated ({os.cpu_count()} CPUs)")
    for cmd in ("repro", "status"):
        pure, c = (sum(times[(cmd, k)]) / args.rounds for k in (False, True))
        print(f"  dvc {cmd:<6} (nothing changed): pure-Python YAML {pure:5.1f} s, C loader {c:5.1f} s: {pure / c:.2f}x")
    loads = lock_loads(lock)
    print("  one load of dvc.lock: " + ", ".join(f"{k} {v:.2f} s" for k, v in loads.items()))


if __name__ == "__main__":
    main()
