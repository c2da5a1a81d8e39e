"""The layer order (docs/architecture.md) and the independence contracts, checked by import-linter from the
contracts in pyproject.toml (``[tool.importlinter]``), and the circles between modules, counted with grimp.

An import that runs back up a layer fails here unless pyproject.toml's ``ignore_imports`` names it (each line there
is an arrow of today's tree with the #57 §2 move that removes it); a line that no longer matches an import fails
too (import-linter's default), so the list shrinks as the moves land."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp
import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]

# The circles between modules left today, each with the #57 §2 move that breaks it.
KNOWN_CIRCLES = {
    # the package's __init__ and its stand-in builder (standin imports the package's spec helpers)
    frozenset({"sentlab.backbones", "sentlab.backbones.standin"}),
}


def test_contracts_hold():
    # in a child process: import-linter configures logging with dictConfig, which would silence sentlab's loggers
    # for the tests that run after this one in the same process
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Contracts: 6 kept, 0 broken." in out.stdout


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph("sentlab", cache_dir=None)


def test_no_new_circles(graph):
    g = nx.DiGraph()
    for m in graph.modules:
        g.add_node(m)
        g.add_edges_from((m, i) for i in graph.find_modules_directly_imported_by(m))
    circles = {frozenset(c) for c in nx.strongly_connected_components(g) if len(c) > 1}
    assert circles == KNOWN_CIRCLES


@pytest.mark.parametrize("importer, imported", [
    ("sentlab.evaluate.sts.protocol", "sentlab.evaluate.sts.diagnostics"),
    ("sentlab.parallel.graph", "sentlab.parallel.worktree"),
    ("sentlab.report.significance", "sentlab.report.paper_tables"),
    ("sentlab.annotate.base", "sentlab.annotate.nltk_backend"),
    ("sentlab.annotate.base", "sentlab.annotate.spacy_backend"),
    ("sentlab.config", "sentlab.profiles"),
    ("sentlab.profile_files", "sentlab.config"),
])
def test_broken_circles_stay_broken(graph, importer, imported):
    """The circles #57 names, broken by moving a function (evaluate_dev to diagnostics, LOCK_ERRORS to graph,
    significance's ``extract`` from paper_tables.resolve, the backend look-up to annotate.runner) or a module: the
    circle config → profiles → stage_list → config by reading the profile files in core (``profile_files``, which
    reads YAML through ``yaml_files``, not through config)."""
    assert not graph.direct_import_exists(importer=importer, imported=imported)
