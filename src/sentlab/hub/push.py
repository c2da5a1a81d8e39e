"""``sentlab push MODEL --repo-id ORG/NAME [--dry-run]``: an exported model to the Hugging Face Hub.

The folder pushed is the export stage's ``exports/<model>/`` (or any folder given as MODEL): the
sentence-transformers model and its ``README.md``, the model card (:mod:`sentlab.hub.card`), which the Hub shows
as the model's page. The upload is ``huggingface_hub``'s: :meth:`HfApi.create_repo` (``exist_ok``: a second push
is a new commit of the same repository) then :meth:`HfApi.create_commit` of exactly the files the dry run lists
(:func:`files`: no dot-file, nothing under a dot-folder). A folder that is not a model (no ``modules.json`` or
``sentlab.json``: a workspace, ``.``) is refused before anything is sent. The token is huggingface_hub's own
(``HF_TOKEN``, or ``hf auth login``'s stored one); it goes only to the Hub's endpoint (``HF_ENDPOINT``,
default https://huggingface.co) in huggingface_hub's requests, and is never printed or logged. ``--dry-run``
lists the files, their sizes and the card, and sends nothing (no token needed).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Optional

from ..errors import SentlabError

CARD = "README.md"
MODEL_FILES = ("modules.json", "sentlab.json")   # a sentence-transformers folder, or a sentlab model folder


def export_folder(model: str, exports: str | os.PathLike = "exports") -> Path:
    """The folder to push: ``model`` itself when it is a folder, else ``<exports>/<model>``; it must hold the model
    card (the export stage writes it)."""
    folder = Path(model) if Path(model).is_dir() else Path(exports) / model
    if not folder.is_dir():
        raise SentlabError(f"No exported model {model!r}: {folder} does not exist. The export stage writes "
                           f"exports/<model>/ for every trained model: run `dvc repro export` (or `make repro`), "
                           f"then push exports/<model> (`ls {exports}` lists what was exported).")
    if not any((folder / f).is_file() for f in MODEL_FILES):
        raise SentlabError(f"{folder} is not a model folder (it has none of {', '.join(MODEL_FILES)}): nothing was "
                           f"sent. Push an export of the export stage, exports/<model> (`dvc repro export`), never "
                           f"a workspace or another folder.")
    if not (folder / CARD).is_file():
        raise SentlabError(f"{folder} has no {CARD} (the model card): it is not an export of the export stage. "
                           f"Run `dvc repro export` and push exports/<model>, which carries its card.")
    return folder


def check_repo_id(repo_id: str) -> str:
    """``ORG/NAME`` as the Hub accepts it (huggingface_hub's own validation), or one paragraph saying why not."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as e:
        raise SentlabError(f"--repo-id {repo_id!r} is not a Hub repository id: {e} Use ORG/NAME, e.g. "
                           f"my-lab/simcse-bert-base.") from None
    if repo_id.count("/") != 1:
        raise SentlabError(f"--repo-id {repo_id!r} names no owner: use ORG/NAME (your user or organisation, a "
                           f"slash, the model's name), e.g. my-lab/simcse-bert-base.")
    return repo_id


def files(folder: Path) -> list[tuple[str, int]]:
    """(path relative to ``folder``, bytes) of every file a push sends, sorted: every file, except those under a
    dot-folder or named with a leading dot (``.git``, ``.dvc/config.local``, a killed write's ``.*.tmp``). The dry
    run lists these and :func:`push` commits exactly these."""
    out = []
    for p in folder.rglob("*"):
        rel = p.relative_to(folder)
        if p.is_file() and not p.is_symlink() and not any(part.startswith(".") for part in rel.parts):
            out.append((rel.as_posix(), p.stat().st_size))
    return sorted(out)


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def dry_run(folder: Path, repo_id: str) -> str:
    """What a push would send, as text: the repository, each file with its size, the total, then the card."""
    listed = files(folder)
    lines = [f"dry run: nothing sent. Would create (if missing) the model repository {repo_id} and upload "
             f"{len(listed)} files ({_size(sum(s for _, s in listed))}) from {folder}:"]
    lines += [f"  {_size(s):>10}  {name}" for name, s in listed]
    lines += ["", f"model card ({CARD}):", (folder / CARD).read_text(encoding="utf-8")]
    return "\n".join(lines)


def push(folder: Path, repo_id: str, *, private: bool = False, token: Optional[str] = None,
         api_factory: Optional[Callable] = None) -> str:
    """Create ``repo_id`` (kept if it exists) and upload ``folder`` to it; returns the commit's URL."""
    from huggingface_hub import HfApi, get_token

    token = token or get_token()
    if not token:
        raise SentlabError("No Hugging Face token: set HF_TOKEN (a token with write access, "
                           "https://huggingface.co/settings/tokens) or run `hf auth login`, then push "
                           "again; `--dry-run` shows what would go without one.")
    from huggingface_hub import CommitOperationAdd

    api = (api_factory or HfApi)(token=token)
    operations = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(folder.resolve() / name))
                  for name, _ in files(folder)]    # exactly the dry run's list
    api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
    info = api.create_commit(repo_id=repo_id, repo_type="model", operations=operations,
                             commit_message=f"sentlab push: {folder.name}")
    return str(getattr(info, "commit_url", info))
