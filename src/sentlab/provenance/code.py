"""What produced an output: the code that ran.

:func:`training_code_fingerprint` hashes the code a training run executes (comments and docstrings
left out). The resume key of a training run includes it, so a fix to the training code followed by
``dvc repro`` starts afresh instead of resuming a checkpoint written by the code before the fix, while
a comment, or an edit of a module training never runs, keeps the checkpoint.
"""

from __future__ import annotations

import hashlib
import sys
from functools import lru_cache
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]   # src/sentlab


# --- the code each pipeline stage executes ----------------------------------------------------
# The entry point of each kind of stage (dvc.yaml's cmd). The sources stage writes, for each, the
# sha256 of the code (comments, formatting and docstrings left out) of every file it can execute
# (data/sources/code/<kind>.json; for training, data/sources/code/train/<method>.json); the stages
# of that kind depend on that one file, so DVC re-runs a stage exactly when code it runs changed,
# with a dvc.lock entry of one line instead of one per module.
STAGE_ENTRIES = {"sources": "pipeline/sources.py", "prepare": "pipeline/prepare.py",
                 "annotate": "pipeline/annotate.py", "train": "pipeline/train.py",
                 "evaluate": "pipeline/evaluate.py", "evaluate_baseline": "pipeline/evaluate_baseline.py",
                 "evaluate_transfer": "pipeline/evaluate_transfer.py",
                 "evaluate_glue": "pipeline/evaluate_glue.py",
                 "evaluate_retrieval": "pipeline/evaluate_retrieval.py",
                 "report": "pipeline/report.py",
                 "export": "pipeline/export.py"}

# The method registry (``sentlab.methods``) imports every method module. What a kind of stage does with
# them decides which count as its code: a training runs one method (its module and what that module
# imports: base classes, shared params); the sources stage (the stage list reads each method's Params),
# the report (a row per method) and the export (each model card's citation) read every method class; the
# evaluate stage of a trained model meets the registry through the training code (the method block it records)
# and counts none (it reads the model folder, whose sentlab.json holds the run key: any code change of that
# training re-runs it); the other kinds never import the registry (config, the schema, imports no method). So
# editing one method's module re-runs that method's trainings and the stages after them, not every training, the
# corpus and the baselines. (The ids and their modules are read from the source, :func:`registered_ids`: this
# module imports no method.)
READS_EVERY_METHOD = frozenset({"sources", "report", "export"})


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
    each of its kinds of stage and methods)."""
    found: set[str] = set()
    for level, module, names in _parsed(text)[0]:
        if level == 0 and module is None:   # import a, b.c
            found |= {n for n in names if n.split(".")[0] == "sentlab"}
            continue
        base = package.split(".")[: len(package.split(".")) - (level - 1)] if level else []
        mod = ".".join(base + ([module] if module else [])) if level else (module or "")
        if mod.split(".")[0] == "sentlab":
            found |= {mod} | {f"{mod}.{n}" for n in names if _module_file(f"{mod}.{n}")}
    return frozenset(".".join(m.split(".")[: i + 1]) for m in found for i in range(m.count(".") + 1))


@lru_cache(maxsize=None)
def _parsed(text: str) -> tuple[tuple[tuple[int, str | None, tuple[str, ...]], ...], bytes]:
    """One parse of a file's ``text``: its import statements, module-level or inside a function, as
    ``(level, module, names)`` (``module`` None for ``import a, b``), and its code without comments,
    formatting and docstrings (the AST, docstrings removed, dumped): what decides what the file does."""
    import ast

    tree = ast.parse(text)
    imports = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports.append((0, None, tuple(a.name for a in node.names)))
        elif isinstance(node, ast.ImportFrom):
            imports.append((node.level, node.module or "", tuple(a.name for a in node.names)))
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return tuple(imports), ast.dump(tree, annotate_fields=False, include_attributes=False).encode()


def executed_modules(entry: str | Path, methods: tuple[str, ...] | None = None) -> list[Path]:
    """The sentlab source files ``entry`` can execute: its imports followed transitively. At the method
    registry (``sentlab.methods``) the walk goes on into the modules of ``methods`` (method ids; None:
    every method module)."""
    return sorted(_module_file(m) for m in _walk(list(_imports(Path(entry), "__main__")), methods))


def method_modules(methods: tuple[str, ...] | None) -> list[str]:
    """The modules defining ``methods`` (ids of registered methods; None: every method module)."""
    if methods is None:
        return [f"sentlab.methods.{p.stem}" for p in sorted((PACKAGE_DIR / "methods").glob("*.py"))]
    known = registered_ids()
    unknown = sorted(set(methods) - set(known))
    if unknown:
        from ..errors import SentlabError

        raise SentlabError(f"Unknown method {unknown[0]!r}; allowed: {', '.join(sorted(known))}. "
                           f"Run `sentlab methods` for one line on each.")
    return sorted({known[m] for m in methods})


def registered_ids() -> dict[str, str]:
    """``{method id: the module that registers it}``, read from the ``@register("<id>")`` decorators of the method
    modules without importing them (this module stands below the methods, docs/architecture.md;
    ``tests/test_dvc_contract.py`` checks it against the registry). The modules are those of the registry's search
    path: ``sentlab.methods.__path__`` when the registry is loaded (read from ``sys.modules``, not imported), else
    ``src/sentlab/methods``."""
    loaded = sys.modules.get("sentlab.methods")
    return _registered_in(tuple(getattr(loaded, "__path__", None) or [str(PACKAGE_DIR / "methods")]))


@lru_cache(maxsize=None)
def _registered_in(folders: tuple[str, ...]) -> dict[str, str]:
    import ast

    out: dict[str, str] = {}
    for path in sorted(p for folder in folders for p in Path(folder).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for deco in getattr(node, "decorator_list", ()) if isinstance(node, ast.ClassDef) else ():
                func = getattr(deco, "func", None)
                name = getattr(func, "id", None) or getattr(func, "attr", None)
                if name == "register" and deco.args and isinstance(deco.args[0], ast.Constant):
                    out.setdefault(str(deco.args[0].value), f"sentlab.methods.{path.stem}")
    return out


def _walk(todo: list[str], methods: tuple[str, ...] | None = None) -> set[str]:
    """The sentlab modules reachable from ``todo`` by imports, the registry leading to ``methods``'s
    modules (:func:`method_modules`)."""
    seen: set[str] = set()
    while todo:
        mod = todo.pop()
        f = _module_file(mod)
        if mod in seen or f is None:
            continue
        seen.add(mod)
        todo += _imports(f, mod)
        if mod == "sentlab.methods":
            todo += method_modules(methods)
    return seen


def stage_code(kind: str, root: str | Path = ".", method: str | None = None) -> dict:
    """``{"entry", "files": {path: sha256}}`` of what a ``kind`` stage executes (paths as in the repository
    ``root``); for ``train``, the training of ``method`` (its id). Each hash is of the
    file's code without comments, formatting and docstrings (:func:`_semantic_source`): a comment never
    re-runs a stage, let alone a training. Which method modules count: :data:`READS_EVERY_METHOD`."""
    if (kind == "train") != (method is not None):
        raise ValueError(f"stage_code({kind!r}): a method id is given for the train kind and only for it")
    entry = Path(root).resolve() / STAGE_ENTRIES[kind]
    methods = (method,) if method else (None if kind in READS_EVERY_METHOD else ())
    # keyed by their place in the repository (src/sentlab/...) whichever copy of sentlab this process imports,
    # so a scratch copy run with another checkout's package writes the names a fresh clone writes
    files = {STAGE_ENTRIES[kind]: entry, **{f"src/{f.relative_to(PACKAGE_DIR.parent).as_posix()}": f
                                            for f in executed_modules(entry, methods)}}

    entry_info = {"entry": STAGE_ENTRIES[kind], **({"method": method} if method else {})}
    return {**entry_info, "files": {k: _code_sha(f.read_text(encoding="utf-8")) for k, f in files.items()}}


def _semantic_source(path: Path) -> bytes:
    """The code of ``path`` without comments, formatting and docstrings (:func:`_parsed`)."""
    return _parsed(path.read_text(encoding="utf-8"))[1]


@lru_cache(maxsize=None)
def _code_sha(text: str) -> str:
    """sha256 of :func:`_semantic_source` of a file's ``text``."""
    return hashlib.sha256(_parsed(text)[1]).hexdigest()


TRAINING_ENTRY = "sentlab.train.run"  # what pipeline/train.py and `sentlab train` run


@lru_cache(maxsize=None)
def training_code_fingerprint(method: str) -> str:
    """sha256 (16 hex digits) of the code a training of ``method`` executes (:data:`TRAINING_ENTRY` and every
    sentlab module it can import, as :func:`executed_modules` walks them for that method), comments,
    formatting and docstrings left out. The resume key of a training run includes it: a fix to the training
    code starts afresh; a comment, or an edit of a module this training never runs (report, the model card, another
    method), keeps the checkpoint resumable."""
    h = hashlib.sha256()
    for f in sorted(_module_file(m) for m in _walk([TRAINING_ENTRY], (method,))):
        h.update(f.relative_to(PACKAGE_DIR).as_posix().encode() + b"\0" + _semantic_source(f) + b"\0")
    return h.hexdigest()[:16]


def stage_code_files(root: str | Path = ".") -> dict[str, dict]:
    """``{"code/<kind>.json": stage_code(kind)}`` for every kind of stage but training, and
    ``{"code/train/<method>.json": ...}`` for every registered method (written by the sources stage)."""
    files = {f"code/{kind}.json": stage_code(kind, root) for kind in STAGE_ENTRIES if kind != "train"}
    return {**files, **{f"code/train/{m}.json": stage_code("train", root, m) for m in sorted(registered_ids())}}
