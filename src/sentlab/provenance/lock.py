"""Installed packages against the dependency lock (issue #68).

`make env` installs exactly ``requirements/lock.txt`` (``pip install --require-hashes --no-deps``), so the numbers
of a fresh clone do not depend on the day it was installed. An environment built otherwise (``pip install -e .``
by hand, a package upgraded later, a cluster's own image) can hold other versions: :func:`outside_lock` lists
them, every stage warns at its start (:func:`warn_outside_lock`), and the environment fingerprint of each run
records them (``outside_lock``), which the report's environment table shows.

A package of the lock that is not installed is not listed (an install without the ``test`` or ``ray`` extra);
torch is not in the lock (`make env` installs the build the machine needs, ``TORCH_SPEC``): the fingerprint
records its version and CUDA build apart.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Optional

from packaging.markers import Marker
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

log = logging.getLogger(__name__)

# the source tree's lock (an editable install: src/sentlab/provenance/lock.py -> the repository root)
LOCK = Path(__file__).resolve().parents[3] / "requirements" / "lock.txt"
_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?\s*$")


@dataclass(frozen=True)
class Drift:
    package: str
    locked: str
    installed: str

    def __str__(self) -> str:
        return f"{self.package} {self.installed} (lock {self.locked})"


def locked_versions(text: str) -> dict[str, str]:
    """``{canonical name: version}`` of a lock's lines whose environment marker holds here (a package the lock
    forks by Python version keeps the one version that applies)."""
    out = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        name, version, marker = m.groups()
        if marker and not Marker(marker).evaluate():
            continue
        out[canonicalize_name(name)] = version
    return out


def _same(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def outside_lock(lock: Optional[Path] = None) -> Optional[list[Drift]]:
    """The installed packages whose version differs from the lock's; None when there is no lock file (an install
    from a wheel, without the repository)."""
    lock = Path(lock) if lock is not None else LOCK
    if not lock.is_file():
        return None
    return _outside(str(lock), lock.stat().st_mtime_ns)


@lru_cache(maxsize=4)
def _outside(lock: str, _mtime_ns: int) -> list[Drift]:
    out = []
    for name, want in sorted(locked_versions(Path(lock).read_text(encoding="utf-8")).items()):
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        if not _same(have, want):
            out.append(Drift(name, want, have))
    return out


def drift_summary(lock: Optional[Path] = None) -> str:
    """One value for the fingerprint: ``none``, ``no lock file``, or ``pkg installed (lock v), …``."""
    drift = outside_lock(lock)
    if drift is None:
        return "no lock file"
    return ", ".join(map(str, drift)) or "none"


def warn_outside_lock(logger: logging.Logger = log, lock: Optional[Path] = None) -> list[Drift]:
    """A warning naming each installed package that differs from the lock, and the fix; returns them."""
    drift = outside_lock(lock) or []
    if drift:
        logger.warning(
            "%d installed package(s) differ from requirements/lock.txt: %s. The numbers of this run may differ from "
            "those of the locked versions; `make env` (or `pip install --require-hashes --no-deps -r "
            "requirements/lock.txt`) installs the lock. Each run records the list (env.outside_lock, the report's "
            "environment table).", len(drift), "; ".join(map(str, drift)))
    return drift
