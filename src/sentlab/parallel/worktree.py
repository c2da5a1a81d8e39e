"""A task's checkout: a git worktree of the workspace (or, on a node without the workspace's filesystem, the
workspace's files unpacked from a bundle) whose DVC cache is the workspace's, and ``dvc`` run in it with
retries on DVC's lock.

The worktree is the workspace as it is, not HEAD: the files git tracks that differ (params.yaml, models.yaml,
dvc.lock after the shared stages ran) and the untracked ones git does not ignore are copied over HEAD's.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from ..errors import SentlabError
from .graph import LOCK_ERRORS


def git(args: list[str], root: str | Path, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    if check and out.returncode != 0:
        raise SentlabError(f"`git {' '.join(args)}` failed in {root}: {out.stderr.strip()[-800:]}")
    return out


def workspace_files(root: str | Path, changed_only: bool = True) -> tuple[list[str], list[str]]:
    """(files to copy, files to delete): the tracked files that differ from HEAD and the untracked ones git does
    not ignore (every file git would see, when ``changed_only`` is False), and the tracked files deleted."""
    flags = ["-m", "-o"] if changed_only else ["-c", "-o"]
    files = git(["ls-files", *flags, "--exclude-standard", "-z"], root).stdout.split("\0")
    deleted = set(filter(None, git(["ls-files", "-d", "-z"], root).stdout.split("\0")))
    keep = sorted({f for f in files if f and f not in deleted and (Path(root) / f).is_file()})
    return keep, sorted(deleted)


def has_head(root: str | Path) -> bool:
    return git(["rev-parse", "--verify", "-q", "HEAD"], root, check=False).returncode == 0


def cache_dir(root: str | Path) -> str:
    from .graph import dvc

    return str(Path(root, dvc(["cache", "dir"], root).stdout.strip().splitlines()[-1]).resolve())


TRANSIENT = ("-journal", "-wal", "-shm")   # SQLite's beside mlflow.db while the tracking server writes


def overlay(root: Path, dest: Path, changed_only: bool = True) -> None:
    keep, deleted = workspace_files(root, changed_only)
    for f in keep:
        if f.endswith(TRANSIENT):
            continue
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copy2(root / f, dest / f)
        except FileNotFoundError:   # gone since git listed it (a file another process writes and removes)
            continue
    for f in deleted:
        (dest / f).unlink(missing_ok=True)
    local = root / ".dvc" / "config.local"
    if local.is_file():
        shutil.copy2(local, dest / ".dvc" / "config.local")


def make_worktree(root: str | Path, dest: str | Path, cache: str | None = None) -> Path:
    """A git worktree of ``root`` at ``dest`` with the workspace's changes copied in and ``root``'s DVC cache as
    its cache. An existing one (a retried task's, a failed chain's from an earlier run) is brought to the
    workspace's state the same way; what git ignores there (checkpoints/, outputs) stays, so a training resumes."""
    root, dest = Path(root).resolve(), Path(dest).resolve()
    if (dest / ".git").is_file() and has_head(root):
        git(["checkout", "-q", "--detach", "--force", git(["rev-parse", "HEAD"], root).stdout.strip()], dest)
        overlay(root, dest)
    elif (dest / ".dvc").is_dir():
        overlay(root, dest, changed_only=False)
    else:
        shutil.rmtree(dest, ignore_errors=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if has_head(root):
            git(["worktree", "prune"], root, check=False)
            git(["worktree", "add", "--detach", "--force", str(dest), "HEAD"], root)
            overlay(root, dest)
        else:   # a repository without a commit: its files, in a repository of their own
            dest.mkdir(parents=True)
            overlay(root, dest, changed_only=False)
            git(["init", "-q"], dest)
    set_cache(dest, cache or cache_dir(root))
    return dest


def set_cache(dest: Path, cache: str) -> None:
    from .graph import dvc

    dvc(["cache", "dir", "--local", cache], dest)


def remove_worktree(root: str | Path, dest: str | Path) -> None:
    dest = Path(dest)
    if (dest / ".git").is_file():
        git(["worktree", "remove", "--force", str(dest)], root, check=False)
    shutil.rmtree(dest, ignore_errors=True)
    git(["worktree", "prune"], root, check=False)


HEAD_BUNDLE, DELETED = ".sentlab-head.bundle", ".sentlab-deleted"


def bundle(root: str | Path) -> bytes:
    """The workspace for a node without its filesystem, as a tar: its commit (a ``git bundle`` of HEAD, so the
    node's checkout has the same commit id, which the metrics' fingerprint records), the files git sees as they
    are now and the tracked files deleted. Never ``.dvc/config.local``: DVC keeps a remote's credentials there, and
    they do not leave this machine (a node that pushes to a DVC remote is configured on that node)."""
    import tempfile

    root = Path(root)
    keep, deleted = workspace_files(root, changed_only=False)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar, tempfile.TemporaryDirectory() as tmp:
        if has_head(root):
            git(["bundle", "create", "-q", str(Path(tmp) / HEAD_BUNDLE), "HEAD"], root)
            tar.add(Path(tmp) / HEAD_BUNDLE, arcname=HEAD_BUNDLE)
        (Path(tmp) / DELETED).write_text("\n".join(deleted))
        tar.add(Path(tmp) / DELETED, arcname=DELETED)
        for f in keep:
            if not f.endswith(TRANSIENT) and f != ".dvc/config.local" and (root / f).is_file():
                tar.add(root / f, arcname=f)
    return buf.getvalue()


def unpack(data: bytes, dest: str | Path) -> Path:
    """A checkout at ``dest`` from :func:`bundle`'s tar (kept as it is when it exists: a retry resumes in it)."""
    dest = Path(dest)
    if (dest / ".dvc").is_dir():
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    git(["init", "-q"], dest)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")
    if (dest / HEAD_BUNDLE).is_file():
        git(["fetch", "-q", HEAD_BUNDLE, "HEAD"], dest)
        git(["update-ref", "HEAD", "FETCH_HEAD"], dest)
        git(["reset", "-q"], dest)       # the index at HEAD; the files stay the workspace's
        (dest / HEAD_BUNDLE).unlink()
    for f in filter(None, (dest / DELETED).read_text().splitlines()):
        (dest / f).unlink(missing_ok=True)
    (dest / DELETED).unlink()
    return dest


def run_dvc(args: list[str], cwd: str | Path, log: str | Path, env: dict | None = None, lock_retries: int = 20,
            guard: bool = True) -> int:
    """``dvc ARGS`` in ``cwd``, its output appended to ``log``; DVC's lock held by another process is waited
    for and retried (``lock_retries`` times, backing off up to 30 s), never taken for success."""
    cmd = [sys.executable, "-m", "dvc", *args]
    if guard:
        cmd = [sys.executable, "-m", "sentlab.parallel.guard", "--", *cmd]
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(lock_retries + 1):
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"$ dvc {' '.join(args)}   # in {cwd}, {time.strftime('%H:%M:%S')}\n")
            fh.flush()
            start = fh.tell()
            rc = run_stoppable(cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
        if rc == 0:
            return 0
        with open(log, encoding="utf-8", errors="replace") as fh:
            fh.seek(start)
            tail = fh.read()
        if not LOCK_ERRORS.search(tail) or attempt == lock_retries:
            return rc
        wait = min(30.0, 1.5 * 2 ** attempt)
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"# DVC's lock is held by another process: retry {attempt + 1}/{lock_retries} in {wait:.0f} s\n")
        time.sleep(wait)
    return rc


STOP_WAIT_S = 120.0   # an interrupted task waits this long for its guard (whose own grace is guard.GRACE_S)


def run_stoppable(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    """``subprocess.run`` whose interruption (Ray's ``ray.cancel``: a KeyboardInterrupt; a SystemExit) asks the
    process to stop (SIGTERM: the guard passes it to the stage, where a training writes its resume checkpoint,
    :mod:`sentlab.train.preempt`) and waits for it, where ``subprocess.run`` would SIGKILL it after 0.25 s and
    leave the stage it guards running, orphaned."""
    proc = subprocess.Popen(cmd, **kw)
    try:
        while True:
            try:
                return subprocess.CompletedProcess(cmd, proc.wait(timeout=0.5))
            except subprocess.TimeoutExpired:
                continue
    except BaseException:
        proc.terminate()
        try:
            proc.wait(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise


def node_env(extra: dict[str, str], threads: int | None) -> dict[str, str]:
    """This process's environment with ``extra``, the Python's folder first on PATH (a stage's ``python``), and
    ``threads`` CPU threads per stage process (OMP/MKL/torch read these)."""
    env = {**os.environ, **extra}
    bindir = str(Path(sys.executable).parent)
    if env.get("PATH", "").split(os.pathsep)[0] != bindir:
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    if threads:
        for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[k] = str(threads)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


# what a worker's stages get of the coordinator's environment (:func:`task_env`)
ENV_PREFIXES = ("SENTLAB_", "MLFLOW_", "HF_", "NLTK_", "TRANSFORMERS_", "TOKENIZERS_", "TORCH_")


def task_env(local: bool) -> dict[str, str]:
    """What a worker's stages need of this environment: all of it that matters on one machine; for a node of a
    cluster (``local`` false) the credentials only where its stages use them (:func:`needed_remotely`)."""
    keys = [k for k in os.environ if k.startswith(ENV_PREFIXES)] + ["PYTHONPATH"] + ["PATH"] * local
    env = {k: os.environ[k] for k in keys if k in os.environ}
    return env if local else {k: v for k, v in env.items() if needed_remotely(k, env)}


HUB_TOKENS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_TOKEN")
MLFLOW_SETTINGS = ("MLFLOW_TRACKING_URI", "MLFLOW_HTTP_REQUEST_", "MLFLOW_EXPERIMENT_NAME")   # no credential in them


def needed_remotely(key: str, env: dict[str, str]) -> bool:
    """Whether a remote node's stages need ``key``: the Hub's token only when they may download (``HF_HUB_OFFLINE``
    unset: with it they read the mirror and the HF cache only); MLflow's credentials (``MLFLOW_TRACKING_TOKEN``,
    ``_USERNAME``, ``_PASSWORD``, ...) only when the tracking store is a server another machine reaches (not this
    machine's loopback) and it answered this run's probe (:mod:`sentlab.tracking.budget`)."""
    if key in HUB_TOKENS:
        return env.get("HF_HUB_OFFLINE", "").strip().lower() not in ("1", "true", "yes", "on")
    if key.startswith("MLFLOW_") and not key.startswith(MLFLOW_SETTINGS):
        from urllib.parse import urlparse

        from ..tracking.budget import is_server, shared_verdict

        uri = env.get("MLFLOW_TRACKING_URI", "")
        host = urlparse(uri).hostname or ""
        return (is_server(uri) and host not in ("localhost", "127.0.0.1", "::1")
                and shared_verdict() is None)
    return True
