"""No test module imports another test module (issue #57 §5): shared helpers live in tests/_support/, tiny.py or
conftest.py fixtures, so a test file can be read, run and deleted on its own."""

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def imported_test_modules(path: Path) -> list[str]:
    """The ``test_*`` modules (or ``tests.test_*``) that ``path`` imports, at any depth of the file."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.ImportFrom) and node.level:   # from . import test_x / from .test_x import y
            names = [node.module] if node.module else [a.name for a in node.names]
        else:
            continue
        out += [n for n in names if n.split(".")[-1].startswith("test_") or n.startswith("tests.test_")]
    return out


def test_no_test_module_imports_another(tmp_path):
    offenders = {p.name: imported_test_modules(p) for p in sorted(TESTS.glob("test_*.py"))}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_check_sees_imports_at_any_depth(tmp_path):
    f = tmp_path / "test_x.py"
    f.write_text("import os\nfrom _support.training import factory\n\ndef test_a():\n"
                 "    from test_train_loop import make_root\n    import test_flow, json\n")
    assert imported_test_modules(f) == ["test_train_loop", "test_flow"]
