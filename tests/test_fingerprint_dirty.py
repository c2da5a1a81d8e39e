"""Issue #35: `sentlab_dirty` says whether code or params differ from the commit; a run's own rewrite of
dvc.lock does not count (a fresh clone's first `make repro` used to report dirty)."""

from __future__ import annotations

import subprocess

import pytest

from sentlab.fingerprint import git_state


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture()
def clone(tmp_path):
    _git(tmp_path, "init", "-q")
    for name, text in (("dvc.lock", "schema: '2.0'\n"), ("params.yaml", "seed: 42\n"), ("code.py", "x = 1\n")):
        (tmp_path / name).write_text(text)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub/mod.py").write_text("y = 2\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init")
    return tmp_path


def test_a_rewritten_dvc_lock_is_not_dirty(clone):
    assert git_state(clone)["dirty"] == "false"
    (clone / "dvc.lock").write_text("schema: '2.0'\nstages: {prepare: {}}\n")       # what `dvc repro` does
    assert git_state(clone)["dirty"] == "false"
    assert git_state(clone / "sub")["dirty"] == "false"                              # paths are the repo's


@pytest.mark.parametrize("path", ["params.yaml", "code.py", "sub/mod.py"])
def test_changed_code_or_params_are_dirty(clone, path):
    (clone / "dvc.lock").write_text("changed\n")
    (clone / path).write_text("changed = True\n")
    assert git_state(clone)["dirty"] == "true"
