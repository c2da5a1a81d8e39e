"""The layout a newcomer draws from docs/architecture.md (issue #67 §3): the map names every top-level package of
src/sentlab, the ground floor's utilities are grouped in packages (``errors.py`` the one loose module), and every
``sentlab`` command is one module of ``sentlab/cli/`` named for the command it registers."""

from __future__ import annotations

import argparse
import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "sentlab"
CLI = SRC / "cli"


def top_level_names() -> set[str]:
    return {p.name + ("/" if p.is_dir() else "") for p in SRC.iterdir()
            if p.name not in ("__init__.py", "__pycache__") and (p.suffix == ".py" or (p / "__init__.py").is_file())}


def test_the_map_names_every_top_level_package():
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    floors = text.split("## The floors", 1)[1].split("## How the map", 1)[0]
    on_map = set(re.findall(r"`([a-z_]+/|[a-z_]+\.py)`", floors))
    here = top_level_names()
    assert here - on_map == set(), f"in src/sentlab but not on docs/architecture.md's map: {sorted(here - on_map)}"
    gone = sorted(n for n in on_map - here if not any(SRC.rglob(n.rstrip("/"))))
    assert gone == [], f"on the map but not in src/sentlab: {gone}"


def test_the_ground_floor_is_grouped():
    loose = sorted(p.name for p in SRC.glob("*.py") if p.name != "__init__.py")
    assert loose == ["errors.py"], f"a loose module: put it in the package of what it serves ({loose})"


def _registers(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(n, ast.FunctionDef) and n.name == "register_cli" for n in tree.body)


def test_every_command_lives_in_cli():
    outside = sorted(p.relative_to(SRC).as_posix() for p in SRC.rglob("*.py") if CLI not in p.parents
                     and _registers(p))
    assert outside == [], f"commands outside sentlab/cli/: {outside}"


COMMANDS = sorted(p.stem for p in CLI.glob("*.py") if _registers(p))


@pytest.mark.parametrize("stem", COMMANDS)
def test_a_command_module_is_named_for_its_command(stem):
    sub = argparse.ArgumentParser(prog="sentlab").add_subparsers(dest="command")
    importlib.import_module(f"sentlab.cli.{stem}").register_cli(sub)
    assert stem in sub.choices, f"sentlab/cli/{stem}.py registers {sorted(sub.choices)}: name it for its command"


def test_the_sentlab_command_registers_every_command_module():
    from sentlab.cli import PLUGINS

    assert sorted(PLUGINS) == [f"sentlab.cli.{s}" for s in COMMANDS]


def test_python_m_sentlab_cli_runs_the_command():
    out = subprocess.run([sys.executable, "-m", "sentlab.cli", "--help"], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    listed = re.search(r"\{([a-z,-]+)\}", out.stdout).group(1).split(",")
    assert set(COMMANDS) <= set(listed), (COMMANDS, listed)
