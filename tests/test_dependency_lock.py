"""The dependency lock (issue #68): requirements/lock.txt pins every package `make env` installs, with hashes; an
environment that differs from it is reported at a stage's start, in each run's fingerprint and in the report."""

from __future__ import annotations

import logging
import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from sentlab.provenance import lock as lock_mod
from sentlab.provenance.lock import Drift, locked_versions, outside_lock

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "requirements" / "lock.txt"
TORCH_FAMILY = re.compile(r"^(torch|triton|nvidia-.*|cuda-.*)$")


def _declared() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = [*project["dependencies"], *project["optional-dependencies"]["test"],
            *project["optional-dependencies"]["ray"]]
    return [r for r in map(Requirement, reqs) if r.marker is None or r.marker.evaluate()]


def test_the_lock_pins_every_declared_dependency_with_hashes_and_leaves_torch_to_make_env():
    text = LOCK.read_text()
    pinned = locked_versions(text)
    for req in _declared():
        name = canonicalize_name(req.name)
        if name == "torch":
            continue
        assert name in pinned, f"{req.name} is declared in pyproject.toml but not pinned in requirements/lock.txt"
        assert req.specifier.contains(pinned[name], prereleases=True), (req, pinned[name])
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
    for block in blocks:
        head = block.split()[0]
        assert "--hash=sha256:" in block, f"{head} has no hash"
        assert not TORCH_FAMILY.match(head.split("==")[0]), f"{head}: torch is installed by make env, not the lock"
    assert pinned["transformers"] == "5.24.0"      # requirements/pins.txt: the README's numbers (docs/methods.md)


def test_make_env_installs_exactly_the_lock():
    make = (REPO / "Makefile").read_text()
    env = make[make.index("$(VENV)/.installed:"):]
    env = env[:env.index("\n\n")]
    assert "requirements/lock.txt" in env.splitlines()[0]      # a new lock re-installs
    assert re.search(r"pip install .*--require-hashes --no-deps -r requirements/lock\.txt", env)
    assert re.search(r"pip install .*--no-deps -e \.", env)
    assert "pip check" in env


def test_this_environment_is_the_lock():
    """CI's environment comes from `make env`: nothing in it may differ from the lock (else its numbers and the
    golden values are another day's)."""
    drift = outside_lock(LOCK)
    assert drift == [], f"installed packages differ from requirements/lock.txt: {drift}; run `make env`"


def test_an_install_outside_the_lock_is_reported(tmp_path, monkeypatch, caplog):
    numpy_now, pytest_now = metadata.version("numpy"), metadata.version("pytest")
    fake = tmp_path / "lock.txt"
    fake.write_text(
        "# a lock\n"
        f"numpy=={numpy_now} \\\n    --hash=sha256:00\n"
        "pytest==0.0.1 \\\n    --hash=sha256:00\n    # via sentlab\n"
        "colorama==0.0.1 ; python_full_version < '3.0' \\\n    --hash=sha256:00\n"   # not for this Python
        "Not_Installed.Pkg==1.0 \\\n    --hash=sha256:00\n")                         # an extra not installed
    assert outside_lock(fake) == [Drift("pytest", "0.0.1", pytest_now)]
    assert outside_lock(tmp_path / "absent.txt") is None

    monkeypatch.setattr(lock_mod, "LOCK", fake)
    with caplog.at_level(logging.WARNING):
        lock_mod.warn_outside_lock(logging.getLogger("sentlab.lock"))
    assert f"pytest {pytest_now} (lock 0.0.1)" in caplog.text and "make env" in caplog.text

    from sentlab.provenance.environment import environment_fingerprint
    from sentlab.report.build import environment_lines

    fp = environment_fingerprint()
    assert fp["outside_lock"] == f"pytest {pytest_now} (lock 0.0.1)"
    line = environment_lines({"m": {"fingerprint": fp}})[0]
    assert f"outside_lock `pytest {pytest_now} (lock 0.0.1)`" in line


def test_a_stage_warns_at_its_start_when_the_install_is_outside_the_lock(tmp_path, monkeypatch, capsys):
    from sentlab.stages.entry import run_stage

    fake = tmp_path / "lock.txt"
    fake.write_text("pytest==0.0.1 \\\n    --hash=sha256:00\n")
    monkeypatch.setattr(lock_mod, "LOCK", fake)
    monkeypatch.delenv("DVC_STAGE", raising=False)
    seen = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    logging.getLogger("sentlab.lock").addHandler(handler)
    try:
        assert run_stage(lambda: seen.append("stage body")) == 0
    finally:
        logging.getLogger("sentlab.lock").removeHandler(handler)
    assert "differ from requirements/lock.txt" in seen[0] and seen[1] == "stage body"


@pytest.mark.parametrize("line, want", [
    ("numpy==2.4.6 ; python_full_version < '3.12' \\", {"numpy": "2.4.6"} ),
    ("numpy==2.5.5 ; python_full_version >= '3.99' \\", {}),
    ("ruamel-yaml-clib==0.2.15 ; platform_python_implementation == 'CPython' \\", {"ruamel-yaml-clib": "0.2.15"}),
    ("    # via torch", {}),
])
def test_lock_lines_and_their_markers(line, want):
    assert locked_versions(line) == want
