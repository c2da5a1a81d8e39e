"""Downloads that a multi-gigabyte, hours-long campaign can rely on (issue #54 §1).

:func:`fetch` brings one upstream file into place:

* progress on the terminal (tqdm: bytes, rate, time left);
* **resume**: the bytes received so far stay in ``.<name>.part`` beside the destination; a retry, or the next run
  after a cut, asks for the rest with an HTTP ``Range`` request (a server that answers 200 instead of 206 sends the
  whole file again, and the part is restarted);
* **checks** before the file counts as present: the byte count the server announced (``Content-Length``, or the
  ``Content-Range`` total), and where sentlab knows it, the number of lines (:data:`EXPECTED_LINES`, each with
  where it comes from); a file that fails a check is removed with one paragraph naming the URL, what was expected
  and what came;
* **atomic**: the destination appears only complete (a rename of the checked part).

:func:`extract_zip` unpacks an archive the same way :func:`sentlab.assets.resolve.extract_tar` does: every member
checked
against its destination first, each file written to a temporary sibling and renamed, so a cut-off extraction never
leaves a partial file that counts as present.

``SENTLAB_UPSTREAM`` (tests and the rehearsal only: ``http://127.0.0.1:PORT``) replaces the scheme and host of every
upstream URL, keeping its path: a local server in the upstream layout stands in for the real hosts
(``tests/upstream.py``).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path
from typing import Iterator, Optional

from ..errors import SentlabError
from ..runtime.io import atomic_path

UPSTREAM_ENV = "SENTLAB_UPSTREAM"
CHUNK = 1 << 20
RETRIES = 5          # attempts after a cut transfer, each resuming where the last one stopped
TIMEOUT_S = 60       # per read: a stalled connection is a cut one

# Line counts sentlab knows for an upstream file, and where each comes from.
EXPECTED_LINES = {
    # SimCSE's README: "1 million sentences randomly sampled from English Wikipedia" (one per line), the corpus of
    # its unsupervised runs (run_unsup_example.sh)
    "wiki1m_for_simcse.txt": 1_000_000,
}


def upstream_url(url: str) -> str:
    """``url`` with its scheme and host replaced by ``$SENTLAB_UPSTREAM`` when that is set (its path kept)."""
    base = os.environ.get(UPSTREAM_ENV, "").strip()
    if not base:
        return url
    u, b = urllib.parse.urlsplit(url), urllib.parse.urlsplit(base)
    return urllib.parse.urlunsplit((b.scheme, b.netloc, b.path.rstrip("/") + u.path, u.query, ""))


class DownloadError(SentlabError):
    """A download that did not bring the file (unreachable, refused, cut past its retries): the asset resolver
    treats it as a miss (:func:`sentlab.assets.resolve.resolve_data`), so a caller's fallback still applies."""


def _unreachable(e: BaseException) -> bool:
    import socket

    reason = getattr(e, "reason", None)
    return isinstance(e, urllib.error.URLError) and isinstance(reason, (socket.gaierror, ConnectionRefusedError))


@contextlib.contextmanager
def download_lock(folder: str | os.PathLike, name: str, create: bool = True) -> Iterator[None]:
    """Hold the lock on downloads of ``name`` into ``folder`` (``folder/.name.lock``, :mod:`filelock`: an OS lock the
    kernel releases when its process dies) for the ``with`` block: concurrent stages or Ray tasks that all miss the
    same file (PaSeR's chains loading WordNet, two stages reading one tar) download it once, and none reads a copy
    that another is still writing or unpacking. The caller checks for the file again inside the block. A folder this
    process cannot write, that has no write permission for anyone (a shared read-only copy, even for root), or that
    is not there without ``create``, is not locked (nothing is being downloaded into it from here)."""
    from filelock import FileLock

    folder = Path(folder)
    lock = None
    try:
        if create:
            folder.mkdir(parents=True, exist_ok=True)
        if folder.stat().st_mode & 0o222:   # a folder nobody may write (a shared read-only copy) is left alone
            lock = FileLock(folder / f".{name}.lock")
            lock.acquire()
    except OSError:
        lock = None
    try:
        yield
    finally:
        if lock is not None:
            lock.release()


def part_path(dest: Path) -> Path:
    return dest.with_name(f".{dest.name}.part")


def fetch(url: str, dest: str | os.PathLike, *, expected_lines: Optional[int] = None, desc: Optional[str] = None,
          progress: bool = True, retries: int = RETRIES) -> Path:
    """Download ``url`` to ``dest`` (see the module docstring); returns ``dest``. ``expected_lines`` defaults to
    :data:`EXPECTED_LINES` for the file's name."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    url = upstream_url(url)
    if expected_lines is None:
        expected_lines = EXPECTED_LINES.get(Path(urllib.parse.urlsplit(url).path).name)
    part = part_path(dest)
    total, announced = None, []
    for attempt in range(retries + 1):
        try:
            total = _transfer(url, part, desc or dest.name, progress, announced)
            break
        except (OSError, http.client.HTTPException) as e:   # URLError, a reset or timed-out connection, a cut read
            if isinstance(e, urllib.error.HTTPError) and e.code not in (408, 429, 500, 502, 503, 504):
                raise DownloadError(f"Downloading {url} failed: HTTP {e.code} {e.reason}. Check the URL, or provide "
                                    f"the file another way (the asset's error message lists them).") from None
            if _unreachable(e):   # no name resolution, nothing listening: no retry helps within this run
                raise DownloadError(f"Downloading {url} failed: the host cannot be reached ({e}).") from None
            if attempt == retries:
                raise DownloadError(f"Downloading {url} failed {retries + 1} times ({type(e).__name__}: {e}); the "
                                   f"{part.stat().st_size if part.exists() else 0:,} bytes received are kept in "
                                   f"{part} and the next run resumes from there.") from None
            time.sleep(min(2 ** attempt, 30))
    _check(url, part, total, expected_lines)
    os.replace(part, dest)
    return dest


def _announce(url: str, part: Path, total: Optional[int], announced: list) -> Optional[int]:
    """Record the file's size as this response states it; a size that differs from an earlier response's (a server
    that announces a wrong size, or a file that changed upstream between two attempts) is refused."""
    if total is not None:
        if announced and announced[0] != total:
            part.unlink(missing_ok=True)
            raise SentlabError(f"The download of {url} is not the upstream file: the server announced "
                               f"{announced[0]:,} bytes, then {total:,}. The part received was removed; run again "
                               f"(the file may have changed upstream), or put the real file in place yourself.")
        announced.append(total)
    return total


def _transfer(url: str, part: Path, desc: str, progress: bool, announced: list) -> Optional[int]:
    """One attempt: append the rest of ``url`` to ``part``; returns the file's total size as the server states it."""
    from tqdm.auto import tqdm

    have = part.stat().st_size if part.exists() else 0
    req = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        resp = urllib.request.urlopen(req, timeout=TIMEOUT_S)  # noqa: S310 - an upstream URL of a kept asset
    except urllib.error.HTTPError as e:
        if e.code == 416 and have:   # nothing left to send: the part is whole, if the server's size agrees
            return _announce(url, part, _range_total(e.headers.get("Content-Range")) or have, announced)
        raise
    with resp:
        if have and resp.status == 206:
            total = _range_total(resp.headers.get("Content-Range"))
            mode = "ab"
        else:   # a fresh download, or a server that ignores Range: the whole file again
            have, mode = 0, "wb"
            length = resp.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
        _announce(url, part, total, announced)
        with open(part, mode) as out, tqdm(total=total, initial=have, unit="B", unit_scale=True, unit_divisor=1024,
                                           desc=desc, disable=not progress, leave=False) as bar:
            while True:
                chunk = resp.read(CHUNK)
                if not chunk:
                    break
                out.write(chunk)
                bar.update(len(chunk))
    got = part.stat().st_size
    if total is not None and got < total:   # the connection ended early without an error: resume
        raise ConnectionError(f"the transfer stopped at {got:,} of {total:,} bytes")
    return total


def _range_total(content_range: Optional[str]) -> Optional[int]:
    """The total of ``bytes a-b/total`` (None when the server says ``*``)."""
    if not content_range or "/" not in content_range:
        return None
    total = content_range.rsplit("/", 1)[1].strip()
    return int(total) if total.isdigit() else None


def _check(url: str, part: Path, total: Optional[int], expected_lines: Optional[int]) -> None:
    got = part.stat().st_size
    problems = []
    if total is not None and got != total:
        problems.append(f"{got:,} bytes where the server announced {total:,}")
    if expected_lines is not None:
        with open(part, "rb") as fh:
            lines = sum(block.count(b"\n") for block in iter(lambda: fh.read(CHUNK), b""))
        if lines != expected_lines:
            problems.append(f"{lines:,} lines where the file has {expected_lines:,} "
                            f"(sentlab.assets.download.EXPECTED_LINES)")
    if problems:
        part.unlink(missing_ok=True)
        raise SentlabError(f"The download of {url} is not the upstream file: {'; '.join(problems)}. It was removed, "
                           f"so nothing incomplete counts as present. Run again (a mirror or proxy serving a partial "
                           f"or different file is the usual cause), or put the real file in place yourself.")


def extract_zip(archive: str | os.PathLike, dest: str | os.PathLike) -> list[Path]:
    """Unpack the regular files of ``archive`` under ``dest``: every member checked first (a name that leaves
    ``dest`` is refused and nothing is written), each file streamed to a temporary sibling and renamed into place."""
    dest = Path(dest)
    real = dest.resolve()
    written = []
    with zipfile.ZipFile(archive) as z:
        plan = []
        for info in z.infolist():
            if info.is_dir():
                continue
            target = dest / info.filename
            if not target.resolve().is_relative_to(real):
                raise SentlabError(f"The archive {archive} holds a member {info.filename!r} that would land outside "
                                   f"{real}; it was not extracted. Delete it and download it again.")
            plan.append((info, target))
        for info, target in plan:
            target.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(target) as tmp, z.open(info) as src, open(tmp, "wb") as out:
                while True:
                    block = src.read(CHUNK)
                    if not block:
                        break
                    out.write(block)
            written.append(target)
    return written


# --- hub models: the files transformers and sentence-transformers load (issue #65 §6) -----------------------------
# A model repository on the Hub holds its weights in several formats (PyTorch, TensorFlow, Flax, Rust, ONNX,
# OpenVINO, Core ML: ~3 GB for bert-base, of which transformers reads one 0.4 GB file). A download takes the
# configurations and tokenizer files (JSON, vocabularies, SentencePiece models) and one format: safetensors where the
# repository has it (transformers' first choice), else PyTorch's pytorch_model*.bin (read with weights_only=True).
HUB_META = ("*.json", "*.txt", "*.model")
HUB_WEIGHTS = ("*.safetensors",)
HUB_WEIGHTS_BIN = ("*pytorch_model*.bin",)


def hub_patterns(repo_files: list[str] | None = None) -> list[str]:
    """The ``allow_patterns`` of a hub download: :data:`HUB_META` and one weight format (safetensors unless
    ``repo_files``, the repository's file list, has none)."""
    has_safetensors = repo_files is None or any(f.endswith(".safetensors") for f in repo_files)
    return [*HUB_META, *(HUB_WEIGHTS if has_safetensors else HUB_WEIGHTS_BIN)]


def hub_fetch_command(name: str) -> str:
    """The command that puts hub model ``name`` into the Hugging Face cache: huggingface_hub's ``hf`` (its 2.x
    installs no ``huggingface-cli``), the files :func:`hub_patterns` names."""
    return f"hf download {name} " + " ".join(f"--include '{p}'" for p in hub_patterns())


def hub_snapshot(name: str) -> str:
    """Download hub model ``name`` into the Hugging Face cache, only the files :func:`hub_patterns` names; returns
    its snapshot folder."""
    from huggingface_hub import list_repo_files, snapshot_download

    return snapshot_download(name, allow_patterns=hub_patterns(list_repo_files(name)))
