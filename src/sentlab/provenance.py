"""What produced an output: the code that ran.

:func:`training_code_fingerprint` hashes the code a training run executes (comments and docstrings
left out). The resume key of a training run includes it, so a fix to the training code followed by
``dvc repro`` starts afresh instead of resuming a checkpoint written by the code before the fix, while
a comment, or an edit of a module training never runs, keeps the checkpoint.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


# --- the code each pipeline stage executes ----------------------------------------------------
# The entry point of each kind of stage (dvc.yaml's cmd). The sources stage writes, for each, the
# sha256 of the code (comments, formatting and docstrings left out) of every file it can execute
# (data/sources/code/<kind>.json); the stages of that kind depend on that one file, so DVC re-runs a
# stage exactly when code it runs changed, with a dvc.lock entry of one line instead of one per module.
STAGE_ENTRIES = {"sources": "pipeline/sources.py", "prepare": "pipeline/prepare.py",
                 "annotate": "pipeline/annotate.py", "train": "pipeline/train.py",
                 "evaluate": "pipeline/evaluate.py", "evaluate_baseline": "pipeline/evaluate_baseline.py",
                 "evaluate_transfer": "pipeline/evaluate_transfer.py",
                 "evaluate_glue": "pipeline/evaluate_glue.py",
                 "evaluate_retrieval": "pipeline/evaluate_retrieval.py",
                 "report": "pipeline/report.py",
                 "export": "pipeline/export.py"}


def _module_file(name: str) -> Path | None:
    p = PACKAGE_DIR.parent.joinpath(*name.split("."))
    if (p / "__init__.py").is_file():
        return p / "__init__.py"
    return p.with_suffix(".py") if p.with_suffix(".py").is_file() else None


def _imports(path: Path, modname: str) -> frozenset[str]:
    """sentlab modules (and their parent packages) named by any import statement of ``path``,
    module-level or inside a function; relative imports resolved."""
    package = modname if path.name == "__init__.py" else modname.rpartition(".")[0]
    return _imports_of(path.read_text(encoding="utf-8"), package)


@lru_cache(maxsize=None)
def _imports_of(text: str, package: str) -> frozenset[str]:
    """:func:`_imports` of a file's ``text`` (memoised by content: the sources stage walks the same ~80 modules for
    each of its 11 kinds of stage, and parsing them again took 3/4 of its time)."""
    import ast

    found: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "sentlab"}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else [])) if node.level else (node.module or "")
            if mod.split(".")[0] == "sentlab":
                found |= {mod} | {f"{mod}.{a.name}" for a in node.names if _module_file(f"{mod}.{a.name}")}
    return frozenset(".".join(m.split(".")[: i + 1]) for m in found for i in range(m.count(".") + 1))


def executed_modules(entry: str | Path) -> list[Path]:
    """The sentlab source files ``entry`` can execute: its imports followed transitively; the
    method registry (``sentlab.methods``) loads every method module."""
    return sorted(_module_file(m) for m in _walk(list(_imports(Path(entry), "__main__"))))


def _walk(todo: list[str]) -> set[str]:
    """The sentlab modules reachable from ``todo`` by imports."""
    seen: set[str] = set()
    while todo:
        mod = todo.pop()
        f = _module_file(mod)
        if mod in seen or f is None:
            continue
        seen.add(mod)
        todo += _imports(f, mod)
        if mod == "sentlab.methods":
            todo += [f"sentlab.methods.{p.stem}" for p in (PACKAGE_DIR / "methods").glob("*.py")]
    return seen


def stage_code(kind: str, root: str | Path = ".") -> dict:
    """``{"entry", "files": {path: sha256}}`` of what a ``kind`` stage executes (paths relative to
    ``root``, the repository). Each hash is of the file's code without comments, formatting and
    docstrings (:func:`_semantic_source`): a comment never re-runs a stage, let alone a training."""
    root = Path(root).resolve()
    entry = root / STAGE_ENTRIES[kind]
    files = [entry, *executed_modules(entry)]

    def rel(f: Path) -> str:
        try:
            return f.resolve().relative_to(root).as_posix()
        except ValueError:
            return f.resolve().relative_to(PACKAGE_DIR.parent).as_posix()

    return {"entry": STAGE_ENTRIES[kind],
            "files": {rel(f): hashlib.sha256(_semantic_source(f)).hexdigest() for f in files}}


def _semantic_source(path: Path) -> bytes:
    """The code of ``path`` without comments, formatting and docstrings (its AST, docstrings removed):
    what decides what the file does."""
    return _semantic_of(path.read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def _semantic_of(text: str) -> bytes:
    """:func:`_semantic_source` of a file's ``text`` (memoised by content, as :func:`_imports_of`)."""
    import ast

    tree = ast.parse(text)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False, include_attributes=False).encode()


TRAINING_ENTRY = "sentlab.train.run"  # what pipeline/train.py and `sentlab train` run


@lru_cache(maxsize=None)
def training_code_fingerprint() -> str:
    """sha256 (16 hex digits) of the code a training run executes (:data:`TRAINING_ENTRY` and every sentlab
    module it can import, as :func:`executed_modules` walks them), comments, formatting and docstrings left
    out. The resume key of a training run includes it: a fix to the training code starts afresh; a comment,
    or an edit of a module training never runs (report, export), keeps the checkpoint resumable."""
    h = hashlib.sha256()
    for f in sorted(_module_file(m) for m in _walk([TRAINING_ENTRY])):
        h.update(f.relative_to(PACKAGE_DIR).as_posix().encode() + b"\0" + _semantic_source(f) + b"\0")
    return h.hexdigest()[:16]


def stage_code_files(root: str | Path = ".") -> dict[str, dict]:
    """``{"code/<kind>.json": stage_code(kind)}`` for every kind of stage (written by the sources stage)."""
    return {f"code/{kind}.json": stage_code(kind, root) for kind in STAGE_ENTRIES}
