"""Issue #35: `sentlab_dirty` says whether code or params differ from the commit; a run's own rewrite of
dvc.lock does not count (a fresh clone's first `make repro` used to report dirty)."""

from __future__ import annotations

import subprocess

import pytest

from sentlab.provenance.environment import git_state


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


def _repo_copy(tmp_path):
    """A git repository with this checkout's profiles/, params.yaml and models.yaml committed (the quick profile)."""
    import shutil
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    dest = tmp_path / "clone"
    shutil.copytree(repo / "profiles", dest / "profiles")
    for f in ("params.yaml", "models.yaml", "dvc.lock"):
        shutil.copy(repo / f, dest / f)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init")
    return dest


def test_params_written_from_a_committed_profile_are_not_dirty_but_a_hand_edit_is(tmp_path):
    """Issue #55: `make repro PROFILE=smoke` in a fresh clone rewrites params.yaml and models.yaml from the committed
    profiles/: the run's fingerprint said `sentlab_dirty true`."""
    from sentlab.stages.profiles import set_profile

    clone = _repo_copy(tmp_path)
    set_profile(clone / "params.yaml", "smoke")                         # what `make repro PROFILE=smoke` does
    assert git_state(clone)["dirty"] == "false"
    text = (clone / "params.yaml").read_text()
    (clone / "params.yaml").write_text(text.replace("seed: 42", "seed: 7", 1))   # a hand edit
    assert "seed: 7" in (clone / "params.yaml").read_text()
    assert git_state(clone)["dirty"] == "true"


def test_the_profile_record_does_not_outlive_a_change_of_the_profile_files(tmp_path):
    """#57: the dirty check no longer writes the profile again (fingerprint imports nothing of the pipeline wing); it
    compares params.yaml and models.yaml with what `sentlab profile` recorded it wrote. A profile file committed since
    (the written files no longer what it gives) or a record missing is dirty, never hidden."""
    import json

    from sentlab.provenance.environment import PROFILE_MARK
    from sentlab.stages.profiles import set_profile

    clone = _repo_copy(tmp_path)
    set_profile(clone / "params.yaml", "smoke")
    mark = clone / ".git" / PROFILE_MARK
    recorded = json.loads(mark.read_text())
    assert set(recorded) == {"commit", "profiles", "params.yaml", "models.yaml"}
    assert git_state(clone)["dirty"] == "false"
    smoke = clone / "profiles" / "smoke.yaml"
    smoke.write_text(smoke.read_text() + "\nseed: 7\n")
    _git(clone, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "smoke's seed", "profiles/smoke.yaml")
    assert git_state(clone)["dirty"] == "true"          # params.yaml is the old smoke's
    set_profile(clone / "params.yaml", "smoke", force=True)
    assert git_state(clone)["dirty"] == "false"
    mark.unlink()
    assert git_state(clone)["dirty"] == "true"
