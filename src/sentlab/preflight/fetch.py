"""``sentlab fetch --profile P``: everything profile P's stages read from the network, downloaded on a connected
machine (a cluster's login node) into the places the stages read it from, so that a compute node without network
runs the profile (``SENTLAB_OFFLINE=1 HF_HUB_OFFLINE=1``; issue #65 §6, docs/slurm.md).

What a profile reads (:func:`profile_needs`), each with the setting that asks for it:

* data sets (:data:`sentlab.assets.resolve.ASSETS`; into ``$SENTLAB_CACHE`` unless the mirror holds them): STS and SICK
  (prepare), ``prepare.corpus``, SimCSE's NLI triples (``prepare.nli``: simcse, or auto, which would otherwise fall
  back to the SICK stand-in), SentEval's transfer tasks (``transfer.models``), GLUE's tasks (``glue.models``), QQP
  and AskUbuntu (``retrieval.models``), GloVe (the ``glove`` baseline): what the ``sources`` stage hashes and
  ``prepare`` and the suite stages read;
* hub models (the Hugging Face cache, only the files transformers loads): ``model.backbone`` and every model a
  trained line or ablation variant loads besides it (its Params' ``hub_models``);
* NLTK resources (the first folder of ``NLTK_DATA``): the annotate stage's (NLTK's English stop words for RAKE, the
  POS tagger for the nltk backend) and every trained line's (its Params' ``nltk_resources``: PaSeR's WordNet when its
  EDA replaces synonyms); the spaCy backend's model is a pip package, checked, never downloaded here.

Each is had through the resolver the stage itself calls (:func:`sentlab.assets.resolve.resolve_data`,
:func:`~sentlab.assets.resolve.resolve_model`, :func:`sentlab.assets.nltk_resources.require_nltk`, GLUE's
:func:`~sentlab.evaluate.suites.glue.glue_files`): the same downloads (resume, size checks, atomic renames), the
same places, no second downloader. What could not be had ends the command with one paragraph naming each and its
fetch command; the others stay fetched.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from ..errors import AssetMissingError, SentlabError


@dataclass(frozen=True)
class Need:
    """One source of the profile: ``kind`` (data, hub, nltk, spacy), ``name``, ``why`` (the setting that asks)."""

    kind: str
    name: str
    why: str


def _add(out: list[Need], kind: str, name: str, why: str) -> None:
    if not any(n.kind == kind and n.name == name for n in out):
        out.append(Need(kind, name, why))


def trained_params(params) -> dict:
    """``{model: its method's Params}`` for every model the profile trains (lines, seeds, ablation variants)."""
    from ..stages.stage_list import models_for
    from .projection import model_params

    return {name: model_params(params, spec) for name, spec in models_for(params).items()}


def profile_needs(values: dict) -> list[Need]:
    """The sources profile ``values`` (its merged values) reads from outside the repository, in stage order."""
    from ..config import validate
    from ..evaluate.suites.glue import asset_name
    from ..stages.sources import RETRIEVAL_ASSETS

    params = validate(values)
    out: list[Need] = []
    for name in ("senteval_sts", "sick"):
        _add(out, "data", name, "prepare: the STS tables")
    _add(out, "data", params.prepare.corpus, "prepare.corpus")
    if params.prepare.nli in ("simcse", "auto"):
        _add(out, "data", "nli", f"prepare.nli: {params.prepare.nli}")
    _add(out, "nltk", "stopwords", "annotate: RAKE's stop words")
    if params.annotate.backend == "nltk":
        _add(out, "nltk", "averaged_perceptron_tagger_eng", "annotate.backend: nltk")
    else:
        _add(out, "spacy", params.annotate.spacy_model, "annotate.backend: spacy")
    _add(out, "hub", params.model.backbone, "model.backbone")
    for model, p in trained_params(params).items():
        for hub in p.hub_models():
            _add(out, "hub", hub, f"train@{model}")
        for res in p.nltk_resources():
            _add(out, "nltk", res, f"train@{model}")
    if "glove" in params.evaluate.baselines:
        _add(out, "data", "glove", "evaluate.baselines: glove")
    for task in params.transfer.tasks if params.transfer.models else ():
        _add(out, "data", f"senteval_{task.lower()}", f"transfer.tasks: {task}")
    for task in params.glue.tasks if params.glue.models else ():
        _add(out, "glue", task, f"glue.tasks: {task} ({asset_name(task)})")
    for task in params.retrieval.tasks if params.retrieval.models else ():
        for name in RETRIEVAL_ASSETS[task]:
            _add(out, "data", name, f"retrieval.tasks: {task}")
    return out


def _tree_bytes(path: Path) -> int:
    """Bytes of a file, or of the files under a folder (links followed: a hub snapshot links into its blobs)."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and ".cache" not in p.parts)


def _data_here(name: str) -> bool:
    from ..assets.resolve import data_present

    return data_present(name)


def _data(name: str) -> tuple[Path, int]:
    from ..assets.resolve import ASSETS, resolve_data

    r = resolve_data(name)
    files = [r.root / p for p in ASSETS[name].paths if (r.root / p).is_file()] or [r.path]
    return r.path, sum(f.stat().st_size for f in files)


def _glue_here(task: str) -> bool:
    from ..assets.resolve import data_present
    from ..evaluate.suites.glue import FALLBACK, asset_name

    return data_present(asset_name(task)) or (task in FALLBACK and data_present(FALLBACK[task][0]))


def _glue(task: str) -> tuple[Path, int]:
    from ..evaluate.suites.glue import glue_files

    _, root, rels = glue_files(task)
    return root / rels[0], sum((root / r).stat().st_size for r in rels)


def _hub_here(name: str) -> bool:
    from ..assets.resolve import resolve_model

    try:
        resolve_model(name, download=False)
        return True
    except AssetMissingError:
        return False


def _hub(name: str) -> tuple[Path, int]:
    from ..assets.resolve import resolve_model

    path = resolve_model(name)
    return path, _tree_bytes(path)


def _nltk_path(resource: str) -> Optional[Path]:
    import nltk

    from ..assets.nltk_resources import NLTK_RESOURCES

    loc = NLTK_RESOURCES.get(resource, resource)
    for root in nltk.data.path:
        for p in (Path(root) / loc, Path(root) / (loc + ".zip")):
            if p.exists():
                return p
    return None


def _nltk(resource: str) -> tuple[Path, int]:
    from ..assets.nltk_resources import require_nltk

    require_nltk(resource)
    path = _nltk_path(resource)
    return path or Path(resource), _tree_bytes(path) if path else 0


def _spacy(model: str) -> tuple[Path, int]:
    from ..annotate.spacy_backend import load_pipeline

    nlp = load_pipeline(model)   # a pip package: a SentlabError naming the install command when it is not here
    path = Path(getattr(nlp, "path", None) or model)
    return path, _tree_bytes(path) if path.exists() else 0


# kind -> (whether it is here, without a download; have it where its stage reads it: (its path, its bytes))
GETTERS: dict[str, tuple[Callable[[str], bool], Callable[[str], tuple[Path, int]]]] = {
    "data": (_data_here, _data), "glue": (_glue_here, _glue), "hub": (_hub_here, _hub),
    "nltk": (lambda r: _nltk_path(r) is not None, _nltk), "spacy": (lambda m: True, _spacy)}


def fetch_command(need: Need) -> str:
    """The command that provides ``need`` by hand (what the stage's own error would name)."""
    from ..assets.resolve import data_fetch_command, hub_fetch_command

    if need.kind == "data":
        return data_fetch_command(need.name)
    if need.kind == "glue":
        from ..evaluate.suites.glue import asset_name

        return data_fetch_command(asset_name(need.name))
    if need.kind == "hub":
        return hub_fetch_command(need.name)
    if need.kind == "nltk":
        return f"python -m nltk.downloader {need.name}"
    return f"python -m spacy download {need.name}"


def human(n: float) -> str:
    """``n`` bytes as B, KB, MB, GB (powers of 1000, as ``du --si``)."""
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def fetch_profile(values: dict, profile: str, echo: Callable[[str], None] = print) -> dict:
    """Have every source of profile ``values`` (:func:`profile_needs`) where its stage reads it, one line each;
    returns ``{"fetched": bytes fetched now, "total": bytes of all}``. A source that cannot be had: the others are
    fetched first, then one :class:`~sentlab.errors.SentlabError` names each with its fetch command."""
    from ..evaluate.suites import retrieval, transfer_data   # noqa: F401 - register their data assets

    needs = profile_needs(values)
    echo(f"sentlab fetch --profile {profile}: {len(needs)} sources")
    fetched = total = 0
    missing: list[tuple[Need, str]] = []
    before = {need: GETTERS[need.kind][0](need.name) for need in needs}   # one download can bring several (a tar)
    for need in needs:
        here = before[need]
        try:
            path, size = GETTERS[need.kind][1](need.name)
        except SentlabError as e:
            first = str(e).split(". ")[0].rstrip(".")
            missing.append((need, first))
            echo(f"  MISSING  {need.kind:<5} {need.name} ({need.why})")
            continue
        total += size
        fetched += 0 if here else size
        echo(f"  {'here   ' if here else 'fetched'}  {need.kind:<5} {need.name} ({need.why}): {human(size)}  {path}")
    if missing:
        items = "; ".join(f"{n.kind} {n.name} ({n.why}): {why}; by hand: `{fetch_command(n)}`" for n, why in missing)
        raise SentlabError(
            f"sentlab fetch --profile {profile}: {len(missing)} of the {len(needs)} sources the profile reads could "
            f"not be had, so a run of it still needs the network (or these files): {items}. The other sources are "
            f"in place. Run `sentlab fetch --profile {profile}` again on a machine with network access (downloads "
            f"are off while SENTLAB_OFFLINE=1 or HF_HUB_OFFLINE=1), or provide each as its command says.")
    echo(f"profile {profile}: {len(needs)} sources, {human(total)} on disk, {human(fetched)} fetched now; it needs no "
         f"network now: run it with SENTLAB_OFFLINE=1 HF_HUB_OFFLINE=1 (e.g. on a compute node).")
    return {"fetched": fetched, "total": total}
