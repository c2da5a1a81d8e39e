"""A GLUE stage killed mid-way (a preemption) and run again fine-tunes only the (task, seed) pairs it had not
finished, and writes the same bytes as an uninterrupted run (#65 §5); a result kept with other inputs is never
read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import stage_workspace
from tiny import glue_mirror


class Preempted(Exception):
    pass


@pytest.fixture
def glue_env(tmp_path, monkeypatch, tok):
    """Two GLUE workspaces on a tiny backbone (2 tasks × 2 seeds, 3 steps each) and a counter of fine-tunings
    (``calls``; ``fail_at``: the call that raises, as a SIGTERM/SIGKILL would end the stage there)."""
    from tiny import tiny_bert

    from sentlab.evaluate.suites import glue

    backbone = tmp_path / "tiny"
    tiny_bert(tok, 0, initializer_range=0.2).save_pretrained(backbone)
    tok.save_pretrained(backbone)
    monkeypatch.delenv("DVC_STAGE", raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(glue_mirror(tmp_path / "mirror", train=24, dev=8)))
    monkeypatch.setenv("SENTLAB_CACHE", str(tmp_path / "cache"))

    def edit(r, lr=3e-3):
        r["model"]["backbone"] = str(backbone)
        r["glue"]["tasks"] = ["SST-2", "STS-B"]
        r["glue"]["seeds"] = [1, 2]
        r["glue"]["finetune"].update(lr=lr, batch_size=8, max_length=16, max_steps=3, max_train=16, max_dev=8)

    state = {"calls": [], "fail_at": None}
    real = glue.finetune

    def counted(encoder, tok, task, splits, cfg, seed=42, **kw):
        state["calls"].append((task, seed))
        if state["fail_at"] == len(state["calls"]):
            raise Preempted(f"killed during {task} seed {seed}")
        return real(encoder, tok, task, splits, cfg, seed=seed, **kw)

    monkeypatch.setattr(glue, "finetune", counted)
    works = [stage_workspace(tmp_path / w, edit) for w in ("a", "b")]
    return works, state, edit


def test_a_killed_glue_stage_reruns_only_what_it_had_not_finished(glue_env, monkeypatch):
    from sentlab.evaluate.suites.glue_stage import run_glue_stage

    (a, b), state, edit = glue_env
    out = Path("reports/metrics/glue/base-cls.json")

    monkeypatch.chdir(b)                      # uninterrupted: 4 fine-tunings
    run_glue_stage("base-cls")
    assert state["calls"] == [("SST-2", 1), ("SST-2", 2), ("STS-B", 1), ("STS-B", 2)]
    uninterrupted = (b / out).read_bytes()

    monkeypatch.chdir(a)                      # killed during its second fine-tuning: the first one is kept
    state.update(calls=[], fail_at=2)
    with pytest.raises(Preempted):
        run_glue_stage("base-cls")
    assert not (a / out).exists()

    state.update(calls=[], fail_at=None)      # run again: only the three it had not finished
    run_glue_stage("base-cls")
    assert state["calls"] == [("SST-2", 2), ("STS-B", 1), ("STS-B", 2)]
    assert len(list((a / "checkpoints/glue@base-cls").glob("*.json"))) == 4
    assert (a / out).read_bytes() == uninterrupted

    state["calls"] = []                       # all kept: none runs, the same bytes
    (a / out).unlink()
    run_glue_stage("base-cls")
    assert state["calls"] == [] and (a / out).read_bytes() == uninterrupted

    # another fine-tuning setting: every result kept is for other inputs, so all four run; the old ones go
    stage_workspace(a, lambda r: edit(r, lr=1e-3))
    run_glue_stage("base-cls")
    assert len(state["calls"]) == 4 and json.loads((a / out).read_text())["config"]["lr"] == 1e-3
    assert len(list((a / "checkpoints/glue@base-cls").glob("*.json"))) == 4


def test_a_kept_result_whose_inputs_differ_from_its_name_stops_the_stage(glue_env, monkeypatch):
    from sentlab.errors import SentlabError
    from sentlab.evaluate.suites.glue_stage import run_glue_stage

    (a, _), state, _ = glue_env
    monkeypatch.chdir(a)
    run_glue_stage("base-cls")
    kept = sorted((a / "checkpoints/glue@base-cls").glob("STS-B.s2.*.json"))[0]
    doc = json.loads(kept.read_text())
    doc["inputs"]["seed"] = 1
    kept.write_text(json.dumps(doc))
    with pytest.raises(SentlabError, match=rf"{kept.name} holds a GLUE fine-tuning of other inputs.*Delete it"):
        run_glue_stage("base-cls")
