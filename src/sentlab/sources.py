"""The content of every source file a profile reads, as files DVC can compare.

The sources live outside the repository (the mirror, the cache, the Hugging Face cache), where DVC
cannot see them: with 200 STS-B gold scores changed in the mirror, ``dvc status`` still said "up to
date". The ``sources`` stage (``always_changed`` in dvc.yaml: it runs at every ``dvc repro``, a few
hundred ms) writes the sha256 of each file, by its path inside the asset (not where the asset was
found: moving the mirror changes nothing):

* ``data/sources/data.json``: every file ``prepare`` reads (STS, SICK, the corpus, the NLI file);
  ``prepare`` depends on it, so a changed file re-runs prepare and, through its outputs, what reads
  them, and nothing when the bytes are the same;
* ``data/sources/model.json``: every file of the backbone's folder (weights, config, tokenizer); the
  stages that load the backbone (the train stages, the baselines) depend on it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from .assets import ASSETS, resolve_data, resolve_model

_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def data_sources(corpus: str, nli_mode: str) -> dict:
    """``{asset: {path inside the asset: sha256}}`` of what ``prepare`` reads with these settings."""
    from .data.nli import choose_source

    out: dict = {}
    for name in ("senteval_sts", "sick"):
        r = resolve_data(name)
        out[name] = {rel: sha256_file(r.root / rel) for rel in ASSETS[name].paths}
    c = resolve_data(corpus)
    out[corpus] = {c.path.relative_to(c.root).as_posix(): sha256_file(c.path)}
    source, nli = choose_source(nli_mode)
    out["nli"] = {"source": source}
    if nli is not None:
        out["nli"][nli.path.relative_to(nli.root).as_posix()] = sha256_file(nli.path)
    return out


def model_sources(backbone: str) -> dict:
    """``{"backbone": id, "files": {path inside the model folder: sha256}}`` (links followed)."""
    root = resolve_model(backbone)
    files = sorted(p for p in root.rglob("*") if p.is_file() and ".cache" not in p.relative_to(root).parts)
    return {"backbone": backbone, "files": {p.relative_to(root).as_posix(): sha256_file(p) for p in files}}
