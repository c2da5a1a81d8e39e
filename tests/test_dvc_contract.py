"""dvc.yaml declares every file a stage executes: the sentlab modules reachable from the stage's
entry point (every import, module-level or inside a function, followed transitively) must each be
covered by one of the stage's deps — the file itself, a folder holding it, or the stage kind's
code file ``data/sources/code/<kind>.json`` or ``code/train/<method>.json`` (the ``sources`` stage writes the
sha256 of every file that kind executes, found by :mod:`sentlab.provenance.code`; this test walks the imports on its
own, with the same rule for the method registry: :data:`sentlab.provenance.code.READS_EVERY_METHOD`)."""

from __future__ import annotations

import ast
import shlex
from functools import lru_cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"


def _module_file(name: str) -> Path | None:
    p = SRC.joinpath(*name.split("."))
    if (p / "__init__.py").is_file():
        return p / "__init__.py"
    if p.with_suffix(".py").is_file():
        return p.with_suffix(".py")
    return None


def _imports(path: Path, modname: str) -> set[str]:
    """sentlab modules named by the import statements of ``path`` (relative imports resolved)."""
    package = modname if path.name == "__init__.py" else modname.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "sentlab"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "sentlab":
                continue
            found.add(mod)
            found |= {f"{mod}.{a.name}" for a in node.names if _module_file(f"{mod}.{a.name}")}
    with_parents = set()
    for mod in found:
        parts = mod.split(".")
        with_parents |= {".".join(parts[: i + 1]) for i in range(len(parts))}
    return with_parents


@lru_cache(maxsize=None)
def executed_files(entry: str, method: str | None = None) -> frozenset[str]:
    """Repository-relative paths of the entry script and every sentlab module it can import.
    ``sentlab.methods`` imports every method module through its registry (pkgutil): a training counts its
    method's module, the kinds of :data:`~sentlab.provenance.code.READS_EVERY_METHOD` every method module, the others
    none (the evaluate stage meets the registry through the training code; the rest never import it). The walk is
    this test's own, on purpose: the expected files do not come from the code under test."""
    from sentlab.methods import get_method
    from sentlab.provenance.code import READS_EVERY_METHOD

    if method:
        registry = [get_method(method).__module__]
    elif Path(entry).stem in READS_EVERY_METHOD:
        registry = [f"sentlab.methods.{p.stem}" for p in (SRC / "sentlab" / "methods").glob("*.py")]
    else:
        registry = []
    seen: set[str] = set()
    todo = list(_imports(REPO / entry, "__main__"))
    while todo:
        mod = todo.pop()
        f = _module_file(mod)
        if mod in seen or f is None:
            continue
        seen.add(mod)
        todo += _imports(f, mod)
        if mod == "sentlab.methods":
            todo += registry
    return frozenset({entry} | {_module_file(m).relative_to(REPO).as_posix() for m in seen})


def _stages():
    from dvc.repo import Repo

    with Repo(str(REPO)) as repo:
        for stage in repo.index.stages:
            if stage.always_changed:   # `sources`: runs at every `dvc repro`, its deps decide nothing
                continue
            deps = [Path(d.def_path).as_posix().rstrip("/") for d in stage.deps]
            yield stage.addressing, stage.cmd, deps


STAGES = list(_stages())


@lru_cache(maxsize=None)
def code_file_lists() -> dict[str, tuple[str, frozenset[str]]]:
    """``{"data/sources/code/<kind>.json" or ".../code/train/<method>.json": (entry, files it hashes)}`` as the
    sources stage writes them."""
    from sentlab.provenance.code import stage_code_files

    return {f"data/sources/{rel}": (c["entry"], frozenset(c["files"])) for rel, c in stage_code_files(REPO).items()}


@pytest.mark.parametrize("name, cmd, deps", STAGES, ids=[s[0] for s in STAGES])
def test_every_executed_module_is_a_declared_dep(name, cmd, deps):
    argv = shlex.split(cmd)
    entry = next(a for a in argv if a.endswith(".py"))
    method = argv[argv.index("--method") + 1] if "--method" in argv else None
    covered = set()
    for d in deps:
        if d in code_file_lists():
            code_entry, files = code_file_lists()[d]
            assert code_entry == entry, f"stage {name} runs {entry} but declares the code file of {code_entry}"
            covered |= files
    missing = sorted(f for f in executed_files(entry, method)
                     if f not in covered and not any(f == d or f.startswith(d + "/") for d in deps))
    assert not missing, f"stage {name} executes {missing} without declaring them in dvc.yaml"


def test_the_walk_sees_function_level_imports():
    files = executed_files("pipeline/train.py", "paser_sup")
    assert "src/sentlab/train/run.py" in files  # imported in a function
    assert "src/sentlab/evaluate/sts/protocol.py" in files
    assert "src/sentlab/methods/paser_sup.py" in files  # through the registry
    assert "src/sentlab/methods/paser.py" in files  # paser_sup's module imports it
    assert "src/sentlab/methods/moco.py" not in files  # another method's module


def test_a_code_file_changes_exactly_when_a_module_its_stage_runs_changes():
    """Report code is in report.json only (editing it re-runs no training); the hashes are of the
    files' code without comments and docstrings (a comment re-runs nothing)."""
    import hashlib

    from sentlab.provenance import code as provenance

    assert "src/sentlab/report/build.py" in code_file_lists()["data/sources/code/report.json"][1]
    assert "src/sentlab/report/build.py" not in code_file_lists()["data/sources/code/train/simcse.json"][1]
    assert "src/sentlab/evaluate/sts/figures.py" not in code_file_lists()["data/sources/code/train/simcse.json"][1]
    code = provenance.stage_code("train", REPO, "simcse")
    f = "src/sentlab/train/loop.py"
    assert code["files"][f] == hashlib.sha256(provenance._semantic_source(REPO / f)).hexdigest()


def test_only_the_exports_stay_out_of_the_dvc_cache():
    """Issue 15: exports/ holds copies of the weights of models/<m>, which DVC caches; caching exports/ too
    copied ~1.1 GB into the cache and back (35 s of the quick run's 37 s export stage). Every other output,
    the trained models included, stays cached (`dvc checkout` / `dvc push` need them)."""
    import yaml

    stages = yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    uncached = sorted(next(iter(out)) for stage in stages.values() for out in stage.get("outs", [])
                      if isinstance(out, dict) and next(iter(out.values()), {}).get("cache") is False)
    assert uncached == ["exports"]


def test_provenance_reads_the_registry_from_the_source():
    """#57: provenance stands below the methods and imports none; the method ids and their modules it reads from
    the ``@register`` decorators are the registry's."""
    from sentlab.methods import registered
    from sentlab.provenance.code import registered_ids

    assert registered_ids() == {m: cls.__module__ for m, cls in registered().items()}
