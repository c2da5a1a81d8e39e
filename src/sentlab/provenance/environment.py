"""The environment a number was produced in: recorded on every training and evaluation run.

:func:`environment_fingerprint` goes into ``models/<name>/sentlab.json``, the metrics JSON, the
MLflow run (as ``env.*`` tags) and the report header: sentlab's git commit and dirty flag, the
versions of Python / torch / transformers / tokenizers / sentence-transformers, the device's name,
CUDA and cuDNN versions, the precision, the determinism settings, the installed packages whose
version is not the lock's (``outside_lock``, :mod:`sentlab.provenance.lock`), and the sha256 of
every data file the run read. "Seed, hardware, library versions" — the usual answer when a number
does not reproduce — becomes something one can diff.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Iterable, Optional

from .lock import drift_summary

PACKAGES = ("torch", "transformers", "tokenizers", "sentence-transformers", "numpy", "scipy")
# tracked files a pipeline run rewrites itself: DVC's lock file (each stage records its outputs' hashes in it).
# A change to them is the run's own bookkeeping, not code or params that differ from the commit. (DVC outputs
# are ignored by .gitignore and never tracked, so they cannot make a checkout dirty.)
RUN_WRITTEN = ("dvc.lock",)
# tracked files `make repro PROFILE=<name>` rewrites from the committed profiles/ (`sentlab profile`): not dirty when
# they are byte for byte what it last wrote (:func:`record_profile_written`), dirty when hand-edited
PROFILE_WRITTEN = ("params.yaml", "models.yaml")


def _changed_paths(porcelain: str) -> list[str]:
    """The paths of ``git status --porcelain`` lines (both sides of a rename)."""
    out = []
    for line in porcelain.splitlines():
        if len(line) > 3:
            out += [p.strip().strip('"') for p in line[3:].split(" -> ")]
    return out


def git_state(cwd: str | os.PathLike | None = None) -> dict[str, str]:
    """``{"commit", "dirty"}`` of the checkout (``"unknown (not a git checkout)"`` outside one);
    dirty means tracked code or params differ from the commit — the files a run rewrites itself
    (:data:`RUN_WRITTEN`: ``dvc.lock``) do not count, so a fresh clone's first ``make repro`` is clean."""
    cwd = Path(cwd or Path.cwd())
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd, capture_output=True,
                               text=True, timeout=30, check=True).stdout  # not stripped: "XY path"
    except (OSError, subprocess.SubprocessError):
        return {"commit": "unknown (not a git checkout)", "dirty": "unknown"}
    changed = [p for p in _changed_paths(dirty) if p not in RUN_WRITTEN]
    if changed and set(changed) <= set(PROFILE_WRITTEN) and _profile_generated(cwd, commit):
        changed = []
    return {"commit": commit, "dirty": str(bool(changed)).lower()}


PROFILE_MARK = "sentlab-profile-written.json"  # in the checkout's git folder: never tracked, never a DVC output


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10,
                          check=True).stdout.strip()


def _profile_state(top: Path, commit: str) -> dict[str, str]:
    """sha256 of params.yaml, models.yaml and of the profile files (names and bytes) in checkout ``top``, with its
    ``commit``: what :func:`record_profile_written` records and :func:`_profile_generated` compares."""
    folder = hashlib.sha256()
    for f in sorted((top / "profiles").glob("*.yaml")):
        folder.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return {"commit": commit, "profiles": folder.hexdigest(),
            **{f: hashlib.sha256((top / f).read_bytes()).hexdigest() for f in PROFILE_WRITTEN if (top / f).is_file()}}


def _mark_path(top: Path) -> Path:
    return top / _git(top, "rev-parse", "--git-path", PROFILE_MARK)


def record_profile_written(root: str | os.PathLike) -> None:
    """Record that params.yaml and models.yaml in ``root`` are what ``sentlab profile`` just wrote from the profile
    files there (called by :func:`sentlab.stages.profiles.set_profile`): :func:`git_state` then does not count them
    as a dirty tree, while a later hand edit (other bytes) or another commit or profile file does. Outside the top of a
    git checkout nothing is recorded."""
    import json

    root = Path(root).resolve()
    try:
        if Path(_git(root, "rev-parse", "--show-toplevel")).resolve() != root:
            return
        state = _profile_state(root, _git(root, "rev-parse", "HEAD"))
        _mark_path(root).write_text(json.dumps(state, sort_keys=True), encoding="utf-8")
    except (OSError, subprocess.SubprocessError):
        return


def _profile_generated(cwd: Path, commit: str) -> bool:
    """Whether params.yaml and models.yaml are byte for byte what ``sentlab profile`` last wrote
    (:func:`record_profile_written`) from the profile files as they are, at this commit (``make repro PROFILE=smoke``
    in a fresh clone): then they are not a dirty tree; a hand edit is."""
    import json

    try:
        top = Path(_git(cwd, "rev-parse", "--show-toplevel"))
        recorded = json.loads(_mark_path(top).read_text(encoding="utf-8"))
        return recorded == _profile_state(top, commit)
    except Exception:  # noqa: BLE001 - anything unexpected: count the files as changed (dirty), never hide an edit
        return False


def _version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "not installed"


@lru_cache(maxsize=None)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_hashes(paths: Iterable[str | os.PathLike]) -> dict[str, str]:
    """sha256 of each file (every file under a folder), keyed by its path; a missing path says so."""
    out: dict[str, str] = {}
    for p in paths:
        p = Path(p)
        files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
        for f in files:
            if not f.is_file():
                out[f.as_posix()] = "missing"
                continue
            st = f.stat()
            out[f.as_posix()] = _sha256(str(f), st.st_size, st.st_mtime_ns)
    return out


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment_fingerprint(device=None, precision: Optional[str] = None,
                            data_files: Iterable[str | os.PathLike] = (), threads: Optional[int] = None) -> dict:
    """The environment of one run (see the module docstring); JSON-serialisable. ``threads``: the intra-op threads
    the numbers were computed on (an evaluation's per-batch threads, :attr:`SentenceEncoder.batch_threads`);
    default the process's."""
    import torch

    dev = torch.device(device) if device is not None else torch.device("cpu")
    cuda = dev.type == "cuda" and torch.cuda.is_available()
    git = git_state()
    return {
        "sentlab_commit": git["commit"], "sentlab_dirty": git["dirty"],
        "python": sys.version.split()[0],
        **{pkg.replace("-", "_"): _version(pkg) for pkg in PACKAGES},
        "device": dev.type,
        "device_name": torch.cuda.get_device_name(dev) if cuda else _cpu_name(),
        "cuda": torch.version.cuda or "none", "cudnn": str(torch.backends.cudnn.version() or "none"),
        "precision": precision or "fp32",
        "deterministic_algorithms": str(torch.are_deterministic_algorithms_enabled()).lower(),
        "cudnn_deterministic": str(torch.backends.cudnn.deterministic).lower(),
        "cudnn_benchmark": str(torch.backends.cudnn.benchmark).lower(),
        "threads": threads or torch.get_num_threads(),
        "outside_lock": drift_summary(),   # installed packages whose version is not the lock's (provenance/lock.py)
        "data_sha256": file_hashes(data_files),
    }


def fingerprint_tags(fp: dict) -> dict[str, str]:
    """MLflow tags ``env.<key>`` (the data hashes as ``env.data.<file>``)."""
    tags = {f"env.{k}": str(v) for k, v in fp.items() if k != "data_sha256"}
    tags.update({f"env.data.{Path(k).name}": v for k, v in (fp.get("data_sha256") or {}).items()})
    return tags
