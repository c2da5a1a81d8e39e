"""A stage reads exactly the params.yaml keys its dvc.yaml entry declares (sentlab.config.stage_params): an edit DVC
does not see cannot reach it, and a read of an undeclared key fails, naming the key to declare."""

from __future__ import annotations

import pytest
from conftest import stage_workspace

from sentlab.methods.blocks import method_params
from sentlab.config.stage_params import UndeclaredParam, stage_params


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.delenv("DVC_STAGE", raising=False)
    monkeypatch.chdir(stage_workspace(tmp_path))
    return tmp_path


def _edit(work, edit):
    stage_workspace(work, edit)


def test_a_training_gets_its_declared_values(work):
    p = stage_params("train@moco")
    assert p.model.backbone == "sentence-transformers/all-MiniLM-L6-v2" and p.train.lr == 3e-5
    assert method_params(p, "moco").queue_size == 256 and p.evaluate.batch_size == 128
    assert list(p.methods) == ["moco"] and p.methods_from == {}        # its own line, no other
    assert p.train.checkpoint_every is None                            # runtime: read, never declared
    assert p.train.num_threads == 2                                    # declared: the bits depend on it


@pytest.mark.parametrize("read, key", [
    (lambda p: p.prepare, "`prepare`"),                  # a section the stage does not declare
    (lambda p: p.train.methods, "`train.methods`"),      # a key of a section it declares in part
    (lambda p: p.evaluate.max_pairs, "`evaluate.max_pairs`"),
    (lambda p: p.seed, "`seed`"),                        # its seed is in its command, not the global one
])
def test_reading_an_undeclared_key_fails_naming_it(work, read, key):
    p = stage_params("train@simcse")
    with pytest.raises(UndeclaredParam, match=f"stage `train@simcse` reads {key}.*dvc.yaml"):
        read(p)


def test_an_undeclared_edit_cannot_reach_a_training(work):
    """Edits of keys train@simcse does not declare (another method's line, the evaluation's pairs, the corpus size,
    the ablation registry) leave everything it reads as it was; an edit of its own line reaches it."""
    before = stage_params("train@simcse")
    seen = (method_params(before, "simcse").model_dump(), before.train.model_dump(), before.model.model_dump())

    def others(r):
        r["methods"]["moco"]["queue_size"] = 512
        r["evaluate"]["max_pairs"] = 10
        r["prepare"]["size"] = 100
        r["ablations"]["variants"]["simcse_len64"]["set"]["max_length"] = 16
        r["train"]["methods"] = ["simcse"]

    _edit(work, others)
    after = stage_params("train@simcse")
    assert (method_params(after, "simcse").model_dump(), after.train.model_dump(), after.model.model_dump()) == seen
    _edit(work, lambda r: r["methods"]["simcse"].update(temperature=0.07))
    assert method_params(stage_params("train@simcse"), "simcse").temperature == 0.07


def test_an_ablation_variant_reads_its_method_line_and_its_own(work):
    _edit(work, lambda r: r["ablations"].update(enabled=True))
    from sentlab.cli import main

    assert main(["stages"]) == 0
    p = stage_params("train@ptbert_m64")
    assert p.ablations.variants["ptbert_m64"].model_dump() == {"method": "ptbert", "set": {"pseudo_len": 64}}
    assert list(p.methods) == ["ptbert"] and list(p.ablations.variants) == ["ptbert_m64"]


def test_a_script_outside_a_dvc_project_is_one_paragraph(tmp_path, monkeypatch):
    from sentlab.errors import SentlabError

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DVC_STAGE", raising=False)
    with pytest.raises(SentlabError, match="not a sentlab DVC project"):
        stage_params("prepare")


def test_a_params_file_dvc_cannot_read_is_named_not_called_a_missing_stage(work):
    from sentlab.errors import SentlabError

    params = work / "params.yaml"
    params.write_text(params.read_text() + "\nseed: 7\n")             # `seed` twice: DVC's YAML refuses it
    with pytest.raises(SentlabError) as e:
        stage_params("train@simcse")
    assert "sets `seed` twice" in str(e.value) and "has no stage" not in str(e.value)


def test_an_unknown_stage_is_still_named_as_one(work):
    from sentlab.errors import SentlabError

    with pytest.raises(SentlabError, match="dvc.yaml has no stage `train@nope`"):
        stage_params("train@nope")


def test_a_trainings_thread_count_changes_its_bits():
    """Why ``train.num_threads`` is a declared train key, not ``runtime``: PyTorch splits a large reduction by
    thread, so one and two threads give other last bits for a sum of 10^6 values (a training sums everywhere:
    losses, LayerNorm statistics, gradient norms); MKL's matrix products may too, by CPU (a weight gradient over
    4,096 token vectors did on the Intel Xeon of this workplace, not on its AMD EPYC). A serial smoke run at
    2 threads and a ``--jobs 2`` run at 1 thread trained SimCSE to STS12 69.2050 and 69.2052. If this ever stops
    holding, the key could go back to ``runtime`` (test_a_training_gets_its_declared_values pins the
    declaration)."""
    import torch

    values = torch.randn(1_000_000, generator=torch.Generator().manual_seed(1))
    before = torch.get_num_threads()
    try:
        sums = []
        for n in (1, 2):
            torch.set_num_threads(n)
            sums.append(values.sum().item())
    finally:
        torch.set_num_threads(before)
    assert sums[0] != sums[1]


def test_the_profile_name_is_read_though_no_stage_declares_it(work):
    """#65 §2: the profile's name is a label every stage records (sentlab.config.stage_params.RECORDS), not a param
    DVC compares: renaming or widening a profile re-runs nothing that ran (tests/test_widening.py)."""
    assert stage_params("train@simcse").profile == "quick" and stage_params("evaluate@simcse").profile == "quick"
