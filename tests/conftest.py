"""Shared fixtures. Real resources come from ../shared (the mirror beside the checkout)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SENTLAB_SHARED", REPO.parent / "shared"))
MIRROR = Path(os.environ.get("SENTLAB_DATA_MIRROR", SHARED / "data"))
NLTK_DATA = Path(os.environ.get("NLTK_DATA", SHARED / "nltk_data"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if NLTK_DATA.is_dir():
    os.environ.setdefault("NLTK_DATA", str(NLTK_DATA))


# `make test` runs the suite on every core (pytest-xdist, `--dist loadfile --no-loadscope-reorder`: a file stays on
# one worker, and files go to the workers in this collection order). The longest files start first, so the other
# workers run the many short ones meanwhile; then the other `slow` tests, then the rest. The order is CI's
# slowest-30 list (`make test` prints it; the figures: benchmarks/RESULTS.md, "Test suite").
LONGEST_FIRST = ("test_pipeline_smoke.py", "test_posbow_quick.py", "test_preflight.py", "test_parallel_toy.py",
                 "test_mteb_agreement.py")


def _order(item) -> tuple[int, bool]:
    name = item.path.name
    rank = LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)
    return rank, item.get_closest_marker("slow") is None


def pytest_collection_modifyitems(config, items):
    items.sort(key=_order)   # stable: a file's tests keep their order


@pytest.fixture(autouse=True)
def _tracking_not_degraded(request, tmp_path_factory):
    """A test whose tracking store fails degrades tracking for its process (sentlab.tracking.degrade): undo it, so
    the next test on this worker tracks again; the verdict a test's tracking server gets is shared (through
    sentlab.tracking.budget's marker) only within that test. An MLflow run a test leaves active in this process (a
    stage's process would end it by exiting) is ended with a warning naming the test: the next test's ``start_run``
    would fail on it (seen once in CI, order-dependent, leaker not yet found)."""
    import os

    # set by hand, not with the test's own monkeypatch (undone only after this fixture's teardown)
    before = os.environ.get("SENTLAB_TRACKING_MARKER")
    os.environ["SENTLAB_TRACKING_MARKER"] = str(tmp_path_factory.mktemp("tracking") / "tracking.json")
    yield
    if before is None:
        os.environ.pop("SENTLAB_TRACKING_MARKER", None)
    else:
        os.environ["SENTLAB_TRACKING_MARKER"] = before
    import sys
    import warnings

    from sentlab import tracking

    tracking._DEGRADED.clear()
    mlflow = sys.modules.get("mlflow")
    if mlflow is not None and mlflow.active_run() is not None:
        warnings.warn(f"{request.node.nodeid} left the MLflow run {mlflow.active_run().info.run_id} active; ended it")
        mlflow.end_run()


def mirror_with(monkeypatch, *files: str) -> Path:
    """The data mirror, when it holds ``files`` (paths inside it), as ``SENTLAB_DATA_MIRROR`` for the test; else a
    skip naming the files that are missing and where they were looked for (never an environment variable)."""
    missing = [f for f in files if not (MIRROR / f).exists()]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} in the data mirror at {MIRROR} (../shared/data beside the checkout, "
                    f"or SENTLAB_DATA_MIRROR)")
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(MIRROR))
    return MIRROR


def nltk_with(*resources: str) -> None:
    """A skip naming the NLTK resources that cannot be found (``sentlab.assets.nltk_resources.require_nltk`` looks them
    up), so
    that a sentlab error of any other kind fails the test instead of skipping it."""
    from sentlab.assets.nltk_resources import require_nltk
    from sentlab.errors import AssetMissingError

    missing = []
    for r in resources:
        try:
            require_nltk(r)
        except AssetMissingError:
            missing.append(r)
    if missing:
        pytest.skip(f"needs NLTK resource(s) {', '.join(missing)} (../shared/nltk_data beside the checkout, or "
                    f"NLTK_DATA)")


@pytest.fixture
def mirror() -> Path:
    if not (MIRROR / "STS").is_dir():
        pytest.skip(f"needs the data mirror (STS/, SICK/, wiki/) at {MIRROR} (set SENTLAB_DATA_MIRROR)")
    return MIRROR


@pytest.fixture(scope="session")
def tok():
    """The MiniLM tokenizer (BERT uncased vocabulary), from the installed package."""
    from transformers import AutoTokenizer

    from sentlab.assets.resolve import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model("sentence-transformers/all-MiniLM-L6-v2"))


@pytest.fixture(scope="module")
def one_thread():
    """Tiny tensors on a shared machine: one intra-op thread is much faster than contended ones."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def tiny_bert(tok):
    """A tiny random BERT with the MiniLM tokenizer: (model, tokenizer)."""
    from tiny import tiny_bert as make

    return make(tok, max_position_embeddings=128), tok


def stage_workspace(work: Path, edit=None) -> Path:
    """A folder where a stage's script runs as under `dvc repro`: dvc.yaml, models.yaml, pipeline/ and params.yaml (the
    committed values, ``edit(raw)`` applied) of the repository, and `dvc init`; what the script reads is what its stage
    declares there (sentlab.config.stage_params)."""
    import shutil
    import subprocess
    import sys

    import yaml

    work.mkdir(parents=True, exist_ok=True)
    for f in ("dvc.yaml", "models.yaml"):
        shutil.copy(REPO / f, work / f)
    shutil.copytree(REPO / "pipeline", work / "pipeline", dirs_exist_ok=True)
    raw = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    if edit:
        edit(raw)
    (work / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    if not (work / ".dvc").is_dir():
        subprocess.run([str(Path(sys.executable).with_name("dvc")), "init", "--no-scm", "-q"], cwd=work, check=True)
    return work
