"""Atomic writes: every output is written to a temporary path and renamed.

An interrupted stage therefore never leaves a half-written file behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, is_dir: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling of ``path``; rename it onto ``path`` on success.

    On an exception the temporary file or folder is removed and ``path`` is
    left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if is_dir:
        recover_replaced(path)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    else:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        tmp = Path(name)
    try:
        yield tmp
        _normal_mode(tmp, is_dir)
        if is_dir and path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            path.rename(old)
            tmp.rename(path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise



def recover_replaced(path: str | os.PathLike) -> Path:
    """A folder that :func:`atomic_path` was replacing when its process was killed between the two renames
    (``path`` moved to ``.<name>.old``, the new one not yet in place) is put back as it was; returns ``path``."""
    path = Path(path)
    old = path.with_name(f".{path.name}.old")
    if not path.exists() and old.is_dir():
        old.rename(path)
    elif path.is_dir() and old.is_dir():   # killed after the second rename: the new folder is in place
        shutil.rmtree(old, ignore_errors=True)
    return path


# where the sources stage (the first of every `dvc repro`, which holds the workspace's lock) looks for temporaries
TEMP_DIRS = ("models", "data", "reports", "checkpoints")


def sweep_temporaries(root: str | os.PathLike = ".") -> list[Path]:
    """Remove what killed writers left: ``.<name>.*.tmp`` files and folders of :func:`atomic_path`,
    :func:`staged_outputs` and the annotation's parts, under :data:`TEMP_DIRS` and in ``root`` itself (an export's
    ``.exports.*.tmp``); a folder cut between :func:`atomic_path`'s renames (``.<name>.old``, there too: an export's
    ``.exports.old``) is recovered first: put back when the new one never arrived, else removed. Call it only where
    no writer of the workspace runs: the sources stage runs under ``dvc repro``'s lock. Returns what it removed."""
    root = Path(root)
    removed = []
    candidates = [p for p in root.glob(".*.tmp")]
    olds = [p for p in root.glob(".*.old")]   # an export cut between its renames: `.exports.old`
    for d in TEMP_DIRS:
        if (root / d).is_dir():
            candidates += [p for p in (root / d).rglob(".*.tmp")]
            olds += [p for p in (root / d).rglob(".*.old")]
    for old in olds:
        if old.is_dir() and not old.is_symlink():
            recover_replaced(old.with_name(old.name[1:-len(".old")]))
    for p in sorted(set(candidates), key=lambda p: len(p.parts), reverse=True):
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        removed.append(p)
    return removed


@contextlib.contextmanager
def staged_outputs(*outputs: str | os.PathLike) -> Iterator[Callable[[str | os.PathLike], Path]]:
    """Several outputs of one stage, published together: yields ``where(output)``, the path in one
    temporary folder (beside the first output) to write ``output`` to; on success every output is
    renamed into place, last; on an exception nothing that existed is touched and the folder goes.
    Outputs must have distinct names."""
    paths = [Path(o) for o in outputs]
    names = [p.name for p in paths]
    if len(set(names)) != len(names):
        raise ValueError(f"staged_outputs needs distinct names, got {names}")
    paths[0].parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".staged.", suffix=".tmp", dir=paths[0].parent))
    where = {p: stage / "new" / p.name for p in paths}
    (stage / "new").mkdir()
    try:
        yield lambda o: where[Path(o)]
        missing = [str(p) for p, w in where.items() if not w.exists()]
        if missing:
            raise RuntimeError(f"staged outputs not written: {missing}")
        (stage / "old").mkdir()
        for p, w in where.items():
            _normal_mode(w, w.is_dir())
            p.parent.mkdir(parents=True, exist_ok=True)
            if p.exists():
                p.rename(stage / "old" / p.name)
            w.rename(p)
    finally:
        shutil.rmtree(stage, ignore_errors=True)

def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _normal_mode(tmp: Path, is_dir: bool) -> None:
    """``mkstemp``/``mkdtemp`` create 0600/0700 paths: give the output the mode a plain ``open``/``mkdir``
    would (0666/0777 less the umask) before it is renamed into place. Inside a folder, only the folder
    itself is fixed: files written into it were created with plain ``open`` already."""
    if tmp.exists():
        os.chmod(tmp, (0o777 if is_dir else 0o666) & ~_umask())


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def _json_default(o: Any):
    import numpy as np

    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def independent_copy(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """Copy ``src`` to ``dst`` as a file of its own: a copy-on-write clone where the filesystem has them
    (Btrfs, XFS, APFS-like: no second copy of the bytes until one side is written), else a plain copy.
    Never a hard link: writing one name would change the other (exports/<m> and models/<m> shared their
    weights, so corrupting the exported copy corrupted the trained model)."""
    import fcntl

    with open(src, "rb") as fin, open(dst, "wb") as fout:
        try:
            fcntl.ioctl(fout.fileno(), 0x40049409, fin.fileno())  # FICLONE
        except OSError:
            shutil.copyfileobj(fin, fout, 1 << 20)
    shutil.copystat(src, dst)
