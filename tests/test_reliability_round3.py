"""Reliability round 3 (issue #56): what leaves the machine, temporary files, a hung test."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _repo(tmp_path):
    root = tmp_path / "ws"
    (root / ".dvc").mkdir(parents=True)
    (root / ".dvc" / ".gitignore").write_text("/config.local\n/tmp\n/cache\n")
    (root / ".dvc" / "config").write_text("[core]\n    remote = store\n")
    (root / ".dvc" / "config.local").write_text("['remote \"store\"']\n    secret_access_key = SECRET\n")
    (root / "params.yaml").write_text("seed: 1\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True, timeout=60)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, timeout=60)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"], cwd=root, check=True,
                   timeout=60)
    return root


def test_the_bundle_for_a_node_carries_no_dvc_credentials_and_no_temporary_file(tmp_path):
    import shutil

    from sentlab.parallel.worktree import bundle

    root = _repo(tmp_path)
    shutil.copy(REPO / ".gitignore", root / ".gitignore")            # the project's own ignore rules
    (root / ".exports.1234.tmp").mkdir()
    (root / ".exports.1234.tmp" / "model.safetensors").write_bytes(b"half")
    (root / "notes.txt").write_text("an untracked file git sees: it travels\n")
    names = tarfile.open(fileobj=io.BytesIO(bundle(root)), mode="r:gz").getnames()
    assert "notes.txt" in names and "params.yaml" in names
    assert ".dvc/config.local" not in names                          # credentials stay on this machine
    assert not [n for n in names if ".tmp" in n]                     # a killed writer's leftovers do not travel


def test_a_hung_test_fails_at_the_per_test_timeout(pytestconfig):
    assert pytestconfig.pluginmanager.hasplugin("timeout")           # pytest-timeout is installed and active
    assert float(pytestconfig.getini("timeout")) == 900

