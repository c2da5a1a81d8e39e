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
  stages that load the backbone (the train stages, the baselines) depend on it;
* ``data/sources/transfer.json``: every file of the SentEval transfer tasks the ``transfer@<model>`` stages
  read (``{}`` when the profile has none: nothing is resolved then, so a machine without the data runs);
* ``data/sources/glue.json``, ``data/sources/retrieval.json``: the same for the GLUE and retrieval stages; a
  file that is not here is recorded as missing with its fetch command (its stage fails naming it, the others run).
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from types import SimpleNamespace

from ..assets.resolve import ASSETS, resolve_data, resolve_model
from ..config.tasks import RETRIEVAL_ASSETS   # each retrieval task's data assets, as declared (re-exported)

log = logging.getLogger("prepare")
_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def data_sources(corpus: str, nli_mode: str) -> dict:
    """``{asset: {path inside the asset: sha256}}`` of what ``prepare`` reads with these settings."""
    from ..data.nli import choose_source

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


def transfer_sources(tasks, models, previous: dict | None = None) -> dict:
    """``{asset: {path inside the asset: sha256}}`` of the transfer tasks ``tasks`` ({} without ``models``);
    a task whose hashes differ from ``previous`` (the last run's) is parsed and its record counts checked here,
    so a bad copy fails before the transfer stages run (one paragraph naming the file)."""
    from ..evaluate.suites.transfer_data import load_task

    out: dict = {}
    for task in tasks if models else ():
        name = f"senteval_{task.lower()}"
        r = resolve_data(name)
        out[name] = {rel: sha256_file(r.root / rel) for rel in ASSETS[name].paths}
        if (previous or {}).get(name) != out[name]:
            load_task(task, r.root)
    return out


def _missing(name: str, e: Exception) -> dict:
    """The record of data that is not here: the stage that reads it fails naming the fetch command; once fetched,
    its hashes replace this record and the stage runs."""
    from ..assets.resolve import data_fetch_command

    return {"missing": data_fetch_command(name) if name in ASSETS else str(e)}


def glue_sources(tasks, models) -> dict:
    """``{asset: {path inside the asset: sha256}}`` of the GLUE tasks' files (GLUE's own, else the copy of SST-2 /
    STS-B the mirror holds; ``{}`` without ``models``); a task whose data is not here: ``{"missing": fetch}``."""
    from ..errors import AssetMissingError
    from ..evaluate.suites.glue import asset_name, glue_files

    out: dict = {}
    for task in tasks if models else ():
        try:
            name, root, rels = glue_files(task)
        except AssetMissingError as e:
            out[asset_name(task)] = _missing(asset_name(task), e)
            continue
        out[name] = {rel: sha256_file(root / rel) for rel in rels}
    return out


def retrieval_sources(tasks, models) -> dict:
    """``{asset: {path inside the asset: sha256}}`` of the retrieval tasks' files (``{}`` without ``models``); an
    asset that is not here: ``{"missing": fetch}``."""
    from ..errors import AssetMissingError
    from ..evaluate.suites import retrieval  # noqa: F401 - registers the qqp / askubuntu assets

    out: dict = {}
    for name in (a for task in (tasks if models else ()) for a in RETRIEVAL_ASSETS[task]):
        try:
            r = resolve_data(name)
        except AssetMissingError as e:
            out[name] = _missing(name, e)
            continue
        out[name] = {rel: sha256_file(r.root / rel) for rel in ASSETS[name].paths}
    return out


def model_sources(backbone: str) -> dict:
    """``{"backbone": id, "files": {path inside the model folder: sha256}}`` (links followed)."""
    root = resolve_model(backbone)
    files = sorted(p for p in root.rglob("*") if p.is_file() and ".cache" not in p.relative_to(root).parts)
    return {"backbone": backbone, "files": {p.relative_to(root).as_posix(): sha256_file(p) for p in files}}


def parse_sources(params) -> SimpleNamespace:
    """Resolve and parse every source ``prepare`` reads, where it lies: the STS/SICK table, its language
    warnings, the corpus sample, the NLI triples. A bad file is a :class:`~sentlab.errors.SentlabError`
    naming it (in the mirror or cache, not a copy). ``prepare`` builds its outputs from the result; the
    ``sources`` stage calls it when a source's bytes changed, so a bad source fails there, before DVC
    removes prepare's outputs to run it."""
    from ..data.corpus import select_corpus
    from ..data.nli import SICK_TRAIN, choose_source, parse_nli
    from ..data.sts import language_warnings, parse_all
    from ..errors import SentlabError

    p = params.prepare
    sts, sick, corpus = resolve_data("senteval_sts"), resolve_data("sick"), resolve_data(p.corpus)
    nli_source, nli = choose_source(p.nli)
    table = parse_all(sts.root, sick.root)
    warnings = language_warnings(table)
    for task, w in warnings.items():
        log.warning("%s: %s", task, w)
    if nli_source == "sick_standin" and "SICKRelatedness" in warnings:
        raise SentlabError(f"prepare.nli = {p.nli} would build the NLI stand-in from SICK train, whose copy is not "
                           f"English ({warnings['SICKRelatedness']}). Provide the English SICK files or SimCSE's "
                           f"nli_for_simcse.csv, or set prepare.nli: none (and drop paser_sup from train.methods).")
    sample, stats = select_corpus(corpus.path, p.size, params.seed, p.min_words, p.max_words, p.dedupe,
                                  p.accept_size)
    nli_file = nli_table = nli_counts = None
    if nli_source != "none":
        nli_file = nli.path if nli is not None else sick.root / SICK_TRAIN
        nli_table, nli_counts = parse_nli(nli_source, nli_file)
    return SimpleNamespace(sts=sts, sick=sick, corpus=corpus, nli=nli, nli_source=nli_source, table=table,
                           warnings=warnings, sample=sample, corpus_stats=stats, nli_file=nli_file,
                           nli_table=nli_table, nli_counts=nli_counts)
