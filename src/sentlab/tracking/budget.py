"""One wait on a tracking server per pipeline run, shared by its stages.

A tracking server that accepts connections and never answers costs each MLflow call its timeout and retries
(:data:`sentlab.tracking.HTTP_BOUNDS`, about a minute). Stopping calls in the process that met it
(:func:`sentlab.tracking.degrade`) bounds one stage, not the pipeline: every stage is a process of its own.
So the verdict is shared through a marker file, ``.dvc/tmp/sentlab/tracking.json`` in the store's
repository (``SENTLAB_TRACKING_MARKER`` names another path): ``{"uri", "reachable", "why", "checked"}``.

* The first step of a pipeline run probes the server once (:func:`probe`, at most :data:`PROBE_S` seconds: one
  HTTP request, no retries) and writes the verdict: ``sentlab mlflow start-parent`` / ``wrap`` (the Makefile's
  ``make repro``), ``sentlab run``'s start, and the ``sources`` stage (the first stage of every ``dvc repro``).
* Every later stage reads it (:func:`shared_verdict`): for the same server URI, "unreachable" turns tracking off
  in that process before any MLflow call. A process that finds no verdict for its URI probes once itself.
* A stage whose MLflow call fails anyway (the server went away after the probe) records "unreachable"
  (:func:`remember_unreachable`), so the stages after it do not wait again.

Only ``http(s)://`` stores are probed: a local SQLite store or a file store has no server to wait on.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Optional

PROBE_S = 10.0   # the one request of a probe: connect and first answer
MARKER_ENV = "SENTLAB_TRACKING_MARKER"
_PROBED: dict[str, Optional[str]] = {}   # this process's probes: asked once per URI where no marker can be kept


def is_server(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def marker_path() -> Optional[Path]:
    """Where the verdict is shared: ``SENTLAB_TRACKING_MARKER``, else ``.dvc/tmp/sentlab/tracking.json`` of the
    store's repository; None outside a DVC project (the verdict then lasts one process)."""
    from .uri import store_root

    if os.environ.get(MARKER_ENV):
        return Path(os.environ[MARKER_ENV])
    dvc = store_root() / ".dvc"
    return dvc / "tmp" / "sentlab" / "tracking.json" if dvc.is_dir() else None


def _write(uri: str, reachable: bool, why: str) -> None:
    from ..runtime.io import write_json

    path = marker_path()
    if path is None:
        return
    try:
        write_json(path, {"uri": uri, "reachable": reachable, "why": why, "checked": time.time()})
    except OSError:
        pass   # a read-only workspace: each process then probes for itself (still bounded)


def _read(uri: str) -> Optional[dict]:
    path = marker_path()
    if path is None or not path.is_file():
        return None
    try:
        verdict = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return verdict if isinstance(verdict, dict) and verdict.get("uri") == uri else None


def probe(uri: Optional[str] = None, max_age_s: float = 0.0) -> Optional[str]:
    """Ask the server once (``GET <uri>/health``, :data:`PROBE_S` seconds) and share the verdict; returns why it is
    unreachable, or None (it answered: any HTTP status, an auth error included, is an answer; not a server URI).
    ``max_age_s``: a shared verdict on the URI younger than that is reused instead (the ``sources`` stage right
    after ``sentlab mlflow start-parent`` asks nothing again)."""
    import urllib.error
    import urllib.request

    from .uri import tracking_uri

    uri = uri or tracking_uri()
    if not is_server(uri):
        return None
    known = _read(uri) if max_age_s > 0 else None
    if known is not None and 0 <= time.time() - float(known.get("checked") or 0) < max_age_s:
        return None if known.get("reachable") else (known.get("why") or f"{uri} did not answer")
    why = None
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=PROBE_S):
            pass
    except urllib.error.HTTPError:
        pass   # it answered
    except Exception as e:  # noqa: BLE001 - no answer in time, refused, unresolvable: all "unreachable"
        why = f"no answer from {uri} within {PROBE_S:.0f} s ({type(e).__name__}: {str(e)[:120]})"
    _write(uri, why is None, why or "")
    _PROBED[uri] = why
    return why


def shared_verdict() -> Optional[str]:
    """Why this pipeline run's tracking server is unreachable (the shared verdict, or a probe now when there is
    none for the URI in force), or None when it answered or the store is not a server."""
    from .uri import tracking_uri

    uri = tracking_uri()
    if not is_server(uri):
        return None
    verdict = _read(uri)
    if verdict is None:
        return _PROBED[uri] if uri in _PROBED else probe(uri)
    return None if verdict.get("reachable") else (verdict.get("why") or f"{uri} did not answer")


UNREACHABLE = ("Max retries exceeded", "timed out", "Connection refused", "ConnectionError", "Failed to establish",
               "Name or service not known", "RemoteDisconnected")


def remember_unreachable(why: str, e: Optional[BaseException] = None) -> None:
    """A call on the server failed in this process: when it failed for want of an answer (a timeout, a refused or
    dropped connection; not an error the server answered with), the stages after it skip tracking too."""
    from .uri import tracking_uri

    uri = tracking_uri()
    if not is_server(uri):
        return
    if e is not None and not isinstance(e, (ConnectionError, TimeoutError)) and not any(
            m in f"{type(e).__name__}: {e}" for m in UNREACHABLE):
        return
    _write(uri, False, why)
