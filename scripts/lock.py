"""The dependency lock, re-resolved (`make lock`) or checked against the newest releases (`make lock-check`).

``requirements/lock.txt`` pins every package `make env` installs, with the sha256 of each of its files on PyPI
(`pip install --require-hashes --no-deps`), for CPython 3.11+ on every platform (uv's universal resolution). It is
resolved from pyproject.toml's ranges (the ``test``, ``ray`` and ``bench`` extras included) under
``requirements/pins.txt``.
torch is not in it: `make env` installs torch first, the CPU build here or the CUDA build a GPU node needs
(``TORCH_SPEC``), so torch and its CUDA libraries (``nvidia-*``, ``cuda-*``, ``triton``) are left out; every other
package is resolved against the torch the pins name.

    python scripts/lock.py write    # re-resolve: requirements/lock.txt (then `make env`, `make test`, `make repro`)
    python scripts/lock.py check    # resolve the newest allowed by pyproject.toml alone (no pins but torch), and
                                    # list what would move against the lock; exit 0 (a report, never a failure)
    python scripts/lock.py keep-torch TORCH_SPEC [--explicit]
                                    # `make env`: exit 0 when the venv's torch is kept (a CUDA build, or the
                                    # version TORCH_SPEC pins), 1 when it is to be installed (always: --explicit)

Needs uv (`make lock` installs the version UV names into the venv); uv reads PyPI, not pip's configuration.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "requirements" / "lock.txt"
PINS = REPO / "requirements" / "pins.txt"
# installed with torch by `make env` (TORCH_SPEC), never from the lock
TORCH_FAMILY = re.compile(r"^(torch|triton|nvidia-.*|cuda-.*)$")
PACKAGE_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^ ;\\]+)")


def uv() -> str:
    exe = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    if not Path(exe).is_file() and shutil.which(exe) is None:
        sys.exit("uv is not installed: `make lock` installs it into the venv (or `pip install uv`); then run this "
                 "again.")
    return exe


def compile_lock(out: Path, pins: Path) -> None:
    """``uv pip compile`` into ``out``, the torch family left out."""
    base = [uv(), "pip", "compile", "pyproject.toml", "--extra", "test", "--extra", "ray", "--extra", "bench",
            "--universal", "--python-version", "3.11", "--generate-hashes", "--quiet", "-c", str(pins)]
    first = out.with_suffix(".all")
    subprocess.run([*base, "-o", str(first)], cwd=REPO, check=True)
    family = sorted({m.group(1) for line in first.read_text().splitlines()
                     if (m := PACKAGE_LINE.match(line)) and TORCH_FAMILY.match(m.group(1).lower())})
    first.unlink()
    cmd = [*base, "--custom-compile-command", "make lock", *[a for p in family for a in ("--no-emit-package", p)],
           "-o", str(out)]
    subprocess.run(cmd, cwd=REPO, check=True)


def pinned(text: str) -> dict[str, set[str]]:
    """``{package: {versions}}`` of a lock's text (a package forked by Python version has several)."""
    out: dict[str, set[str]] = {}
    for line in text.splitlines():
        if m := PACKAGE_LINE.match(line):
            out.setdefault(m.group(1).lower(), set()).add(m.group(2))
    return out


def keep_torch(spec: str, explicit: bool) -> int:
    """0: keep the installed torch (a CUDA build the user put there first, or the version ``spec`` pins), 1:
    install ``spec``. A TORCH_SPEC the user names is always installed (pip keeps what already satisfies it)."""
    if explicit:
        return 1
    try:
        import torch
    except ImportError:
        return 1
    cuda = torch.version.cuda
    pin = re.search(r"torch==([^\s+]+)", spec)
    if cuda or (pin and torch.__version__.split("+")[0] == pin.group(1)):
        print(f"make env: keeping torch {torch.__version__} ({'CUDA ' + cuda if cuda else 'CPU'} build) found in "
              f"the venv; TORCH_SPEC=... installs another")
        return 0
    return 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["write", "check", "keep-torch"])
    ap.add_argument("spec", nargs="?", default="torch")
    ap.add_argument("--explicit", action="store_true")
    args = ap.parse_args(argv)
    if args.mode == "keep-torch":
        return keep_torch(args.spec, args.explicit)
    if args.mode == "write":
        compile_lock(LOCK, PINS)
        print(f"wrote {LOCK.relative_to(REPO)} ({len(pinned(LOCK.read_text()))} packages)")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        only_torch = Path(tmp) / "pins.txt"
        only_torch.write_text("".join(line + "\n" for line in PINS.read_text().splitlines()
                                      if line.startswith("torch==")))
        newest = Path(tmp) / "newest.txt"
        compile_lock(newest, only_torch)
        now, new = pinned(LOCK.read_text()), pinned(newest.read_text())
    moved = sorted(p for p in now.keys() | new.keys() if now.get(p) != new.get(p))
    if not moved:
        print("the newest releases pyproject.toml allows are the locked ones")
        return 0
    print(f"{len(moved)} package(s) would move from the lock (then `make lock`, the tests and the quick profile "
          f"decide):")
    for p in moved:
        print(f"  {p}: lock {', '.join(sorted(now.get(p, {'-'})))} -> newest {', '.join(sorted(new.get(p, {'-'})))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
