"""Where the tracking store is: :func:`tracking_uri` (``MLFLOW_TRACKING_URI``, else the repository's ``mlflow.db``)."""

from __future__ import annotations

import os
from pathlib import Path


def store_root(cwd: str | os.PathLike | None = None) -> Path:
    """The folder of the default store: the user's repository root, as an absolute path.

    ``dvc exp run --temp`` / ``--queue`` run a stage in a copy of the repository under
    ``<repo>/.dvc/tmp/exps/…`` (``DVC_ROOT`` names the copy): their runs must land in the user's
    ``<repo>/mlflow.db``, not in a store deleted with the copy.
    """
    here = Path(cwd or os.environ.get("DVC_ROOT") or Path.cwd()).resolve()
    parts = here.parts
    for i in range(len(parts) - 3):
        if parts[i: i + 3] == (".dvc", "tmp", "exps"):
            return Path(*parts[:i])
    return here


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{store_root() / 'mlflow.db'}"
