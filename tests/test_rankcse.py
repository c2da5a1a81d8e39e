"""RankCSE (sentlab.methods.rankcse): ListNet / ListMLE / JS consistency against hand computations, teachers (sentlab
and sentence-transformers folders, frozen, no_grad), training, the teachers as DVC deps of the train stage."""

from __future__ import annotations

import json
import math
import pickle

import pytest
import torch

from sentlab.config import TrainParams
from sentlab.errors import SentlabError
from sentlab.methods import get_method
from sentlab.methods.base import Batch
from sentlab.methods.rankcse import (community_consistency, js_consistency, listmle_loss, listnet_loss, off_diagonal,
                                     teacher_info)
from tiny import sentences, tiny_bert


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _sentlab_teacher(tok, folder, seed, pooling="cls"):
    model = tiny_bert(tok, seed=seed, initializer_range=0.2, max_position_embeddings=128)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    (folder / "sentlab.json").write_text(json.dumps({"status": "trained", "pooling": pooling, "method": "simcse"}))
    return folder


def _st_teacher(tok, folder, seed):
    """A sentence-transformers layout: the transformer in 0_Transformer, mean Pooling in 1_Pooling."""
    (folder / "0_Transformer").mkdir(parents=True)
    tiny_bert(tok, seed=seed, initializer_range=0.2, max_position_embeddings=128).save_pretrained(
        folder / "0_Transformer")
    tok.save_pretrained(folder / "0_Transformer")
    (folder / "0_Transformer" / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 32}))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 32, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True}))
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "0_Transformer", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    return folder


@pytest.fixture(scope="module")
def teachers(tok, tmp_path_factory):
    root = tmp_path_factory.mktemp("teachers")
    return [str(_sentlab_teacher(tok, root / "sentlab_teacher", seed=7)), str(_st_teacher(tok, root / "st", seed=8))]


def _make(tok, teachers, **kw):
    cls = get_method("rankcse")
    params = cls.Params(teachers=teachers, teacher_weights=[0.33, 0.67][:len(teachers)] if len(teachers) == 2
                        else [1.0], **kw).resolved(TrainParams(max_length=16))
    return cls(tiny_bert(tok, seed=0, initializer_range=0.2, max_position_embeddings=128), tok, params, seed=0)


def test_registered_with_its_settings():
    cls = get_method("rankcse")
    p = cls.Params()
    assert (p.teachers, p.teacher_weights, p.distillation, p.teacher_temperature, p.student_temperature) == (
        ["models/diffcse", "models/simcse"], [0.33, 0.67], "listmle", 0.05, 0.05)
    # run_rankcse.sh: --distillation_loss listmle, whose community ListMLE ranks the whole row (the positive first);
    # the consistency term and ListMLE stay the paper's exact ones
    assert (p.rank_positive, p.consistency, p.listmle_eps) == (True, "js", 0.0)
    assert (p.distill_weight, p.consistency_weight, p.temperature) == (1.0, 1.0, 0.05)
    assert p.model_deps() == ["models/diffcse", "models/simcse"]
    assert cls.Params(teachers=["/abs/teacher"], teacher_weights=[1.0]).model_deps() == []
    assert "ACL 2023" in cls.paper and "liu2023rankcse" in cls.citation
    with pytest.raises(ValueError, match="one weight per teacher"):
        cls.Params(teachers=["models/simcse"], teacher_weights=[0.5, 0.5])


TEACHER = torch.tensor([[2.0, 0.5, -1.0], [0.0, 1.0, 3.0]])
STUDENT = torch.tensor([[1.0, 1.5, 0.0], [-0.5, 2.0, 0.5]])


def test_listnet_is_the_cross_entropy_of_the_two_softmaxes():
    def row(t, s):
        zt, zs = sum(math.exp(x) for x in t), sum(math.exp(x) for x in s)
        return -sum(math.exp(a) / zt * (b - math.log(zs)) for a, b in zip(t, s))

    want = (row(TEACHER[0].tolist(), STUDENT[0].tolist()) + row(TEACHER[1].tolist(), STUDENT[1].tolist())) / 2
    assert listnet_loss(TEACHER, STUDENT).item() == pytest.approx(want, rel=1e-6)
    assert listnet_loss(TEACHER, STUDENT).item() == pytest.approx(1.346342, abs=1e-6)   # pinned
    # the minimum over the student is at the teacher's distribution: a lower loss there
    assert listnet_loss(TEACHER, TEACHER).item() < listnet_loss(TEACHER, STUDENT).item()


def test_listmle_is_the_plackett_luce_likelihood_of_the_teachers_order():
    """Row 1: the teacher orders (0, 1, 2), so −log P = [log(e^1 + e^1.5 + e^0) − 1] + [log(e^1.5 + e^0) − 1.5] + 0;
    row 2: the order (2, 1, 0) over scores (0.5, 2.0, −0.5)."""
    def pl(scores):
        return sum(math.log(sum(math.exp(x) for x in scores[k:])) - scores[k] for k in range(len(scores)))

    want = (pl([1.0, 1.5, 0.0]) + pl([0.5, 2.0, -0.5])) / 2
    assert listmle_loss(TEACHER, STUDENT).item() == pytest.approx(want, rel=1e-6)
    # pinned: (1.30601 + 1.84479) / 2
    assert listmle_loss(TEACHER, STUDENT).item() == pytest.approx(1.575401, abs=1e-6)
    # the student that ranks as the teacher does has a higher likelihood
    assert listmle_loss(TEACHER, TEACHER).item() < listmle_loss(TEACHER, STUDENT).item()


def test_listmle_with_the_community_eps_by_hand():
    """The community ListMLE: Σ_k [log(Σ_{j≥k} exp(s_j − M) + ε) − (s_k − M)], M the row's maximum, ε 1e-7. With
    scores 20, 0, −20 in the teacher's order, the last term is log(e^-40 + 1e-7) + 40 ≈ 23.88 where the exact
    likelihood has 0: the ε caps the tail."""
    def guarded(scores, eps=1e-7):
        m = max(scores)
        return sum(math.log(sum(math.exp(x - m) for x in scores[k:]) + eps) - (scores[k] - m)
                   for k in range(len(scores)))

    teacher, student = torch.tensor([[3.0, 2.0, 1.0]]), torch.tensor([[20.0, 0.0, -20.0]])
    assert listmle_loss(teacher, student, eps=1e-7).item() == pytest.approx(guarded([20.0, 0.0, -20.0]), rel=1e-5)
    assert listmle_loss(teacher, student, eps=1e-7).item() == pytest.approx(27.7842, abs=1e-3)   # pinned: 3.90 + 23.88
    assert listmle_loss(teacher, student).item() == pytest.approx(2.06e-9 + 2.06e-9, abs=1e-6)  # exact: ≈ 0
    want = (guarded([1.0, 1.5, 0.0]) + guarded([0.5, 2.0, -0.5])) / 2     # small gaps: ε changes ~1e-7
    assert listmle_loss(TEACHER, STUDENT, eps=1e-7).item() == pytest.approx(want, rel=1e-6)


def test_community_consistency_is_half_the_negative_entropies_not_a_divergence():
    """The community Divergence clamps log((p + q)/2) at 1e-7 from below: every entry becomes 1e-7, and its two
    batch-mean KLs give ½ Σ [p (log p − 1e-7) + q (log q − 1e-7)] / N, nonzero for equal lists (where JS is 0)."""
    a, b = [0.0, 1.0, 2.0], [1.0, 0.0, 0.5]
    p = [math.exp(x) / sum(math.exp(y) for y in a) for x in a]
    q = [math.exp(x) / sum(math.exp(y) for y in b) for x in b]
    want = 0.5 * (sum(x * (math.log(x) - 1e-7) for x in p) + sum(y * (math.log(y) - 1e-7) for y in q))
    assert community_consistency(torch.tensor([a]), torch.tensor([b])).item() == pytest.approx(want, rel=1e-6)
    assert community_consistency(torch.tensor([a]), torch.tensor([a])).item() == pytest.approx(
        sum(x * math.log(x) for x in p), rel=1e-6)   # −H(p), where the JS divergence is 0


def test_js_consistency_by_hand_and_zero_for_equal_lists():
    a, b = [0.0, 1.0, 2.0], [1.0, 0.0, 0.5]
    p = [math.exp(x) / sum(math.exp(y) for y in a) for x in a]
    q = [math.exp(x) / sum(math.exp(y) for y in b) for x in b]
    m = [(x + y) / 2 for x, y in zip(p, q)]
    want = 0.5 * sum(x * math.log(x / z) for x, z in zip(p, m)) + 0.5 * sum(y * math.log(y / z) for y, z in zip(q, m))
    assert js_consistency(torch.tensor([a]), torch.tensor([b])).item() == pytest.approx(want, rel=1e-5)
    assert js_consistency(torch.tensor([a]), torch.tensor([a])).item() == pytest.approx(0.0, abs=1e-7)


def test_off_diagonal_drops_each_rows_own_entry():
    x = torch.arange(9.0).view(3, 3)
    assert off_diagonal(x).tolist() == [[1, 2], [3, 5], [6, 7]]


def test_teacher_poolings_come_from_the_folder(teachers):
    assert teacher_info(teachers[0])["pooling"] == "cls"
    st = teacher_info(teachers[1])
    assert st["pooling"] == "mean" and st["path"].endswith("0_Transformer")


def test_teacher_scores_are_the_weighted_cosines_of_each_teachers_embedding(tok, teachers):
    m = _make(tok, teachers).train()
    assert not any(t.training for t in m.teachers)
    sents = sentences(5, seed=2)
    f = m.prepared(m.prepare(Batch(sents)))
    got = m.teacher_scores(f)
    want = 0
    for w, model, pooling in zip([0.33, 0.67], m.teachers, ["cls", "mean"]):
        enc = tok(sents, padding=True, truncation=True, max_length=16, return_tensors="pt")
        with torch.no_grad():
            h = model(**enc).last_hidden_state
        e = h[:, 0] if pooling == "cls" else (h * enc["attention_mask"][..., None]).sum(1) / enc[
            "attention_mask"].sum(1, keepdim=True)
        e = torch.nn.functional.normalize(e, dim=-1)
        want = want + w * (e @ e.T) / 0.05
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)
    assert not got.requires_grad


@pytest.mark.parametrize("distillation", ["listnet", "listmle"])
def test_trains_with_the_frozen_teachers_unchanged(tok, teachers, distillation):
    torch.manual_seed(0)
    m = _make(tok, teachers, distillation=distillation).train()
    before = {k: v.clone() for k, v in m.teachers.state_dict().items()}
    assert not {id(p) for p in m.trainable_parameters()} & {id(p) for p in m.teachers.parameters()}
    assert not any(k.startswith("teachers.") for k in m.state_dict())
    assert m.init_sources()["teachers"].startswith("checkpoint")
    opt = m.configure_optimizers()
    pool = sentences(48, seed=3)
    losses, ranks = [], []
    for step in range(12):
        out = m(Batch(pool[(step % 6) * 8:(step % 6 + 1) * 8]))
        out["loss"].backward()
        opt.step()
        opt.zero_grad()
        losses.append(out["loss"].item())
        ranks.append(out["loss_rank"].item())
    assert all(math.isfinite(x) for x in losses) and abs(losses[-1] - losses[0]) > 1e-3
    assert sum(losses[-6:]) < sum(losses[:6]) and sum(ranks[-6:]) < sum(ranks[:6])
    for k, v in m.teachers.state_dict().items():
        assert torch.equal(v, before[k]), k
    m.load_state_dict(m.state_dict())
    assert m.sentence_encoder().pooling == "cls"
    pickle.loads(pickle.dumps(m))


def test_a_missing_teacher_names_the_param_and_the_fix(tok, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SentlabError) as e:
        _make(tok, ["models/diffcse"])
    msg = str(e.value)
    assert "methods.rankcse.teachers" in msg and "models/diffcse" in msg and "train.methods" in msg
    (tmp_path / "models" / "half").mkdir(parents=True)
    (tmp_path / "models" / "half" / "sentlab.json").write_text('{"status": "failed"}')
    with pytest.raises(SentlabError, match="not trained"):
        _make(tok, ["models/half"])


def test_the_teachers_are_dvc_deps_of_the_train_stage_and_must_be_trained():
    """Paper profile: RankCSE (its seeds, its ListNet variant) reads the teachers its block names, which its model
    description carries and dvc.yaml's one `train` group names in its teacher slots; the other models read none
    (their slots repeat their init); a profile that trains rankcse without its teachers, or a block naming more
    teachers than dvc.yaml has slots, is refused."""
    from conftest import REPO
    from sentlab.config import validate
    from sentlab.config.yaml_files import deep_merge
    from sentlab.config.profile_files import profile_values
    from sentlab.stages.stage_list import models_for

    values = profile_values("paper", REPO / "profiles")
    models = models_for(validate(values))
    distilled = {"rankcse", "rankcse-s43", "rankcse-s44", "rankcse-s45", "rankcse-s46", "rankcse_listnet"}
    assert {n for n, m in models.items() if m.teachers} == distilled
    assert all(models[n].teachers == ("models/diffcse", "models/simcse") == tuple(models[n].reads) for n in distilled)
    assert models["paser_sup"].init == "models/paser" and models["paser_sup"].reads == ["models/paser"] * 2
    assert models["paser_sup-s43"].init == "models/paser-s43"
    bad = deep_merge(values, {"train": {"methods": ["simcse", "rankcse"]}})
    with pytest.raises(SentlabError, match="add `diffcse` to train.methods"):
        models_for(validate(bad))
    three = deep_merge(values, {"methods": {"rankcse": {"teachers": ["models/simcse", "models/diffcse", "models/ct"],
                                                        "teacher_weights": [0.3, 0.3, 0.4]}}})
    with pytest.raises(SentlabError, match=r"reads 3 other models .*names 2 teacher slots"):
        models_for(validate(three))
    # one teacher: a slot of its own, the other repeats the init
    one = deep_merge(values, {"methods": {"rankcse": {"teachers": ["models/simcse"], "teacher_weights": [1.0]}}})
    assert models_for(validate(one))["rankcse"].reads == ["models/simcse", "data/sources/model.json"]
    # a profile that does not train rankcse nor its teachers (quick) with its ablations on: the ListNet variant
    # has no stage (it would read untrained teachers), the other variants do
    quick = deep_merge(profile_values("quick", REPO / "profiles"), {"ablations": {"enabled": True}})
    names = models_for(validate(quick))
    assert "rankcse_listnet" not in names and {"diffcse_paper_text", "ptbert_m64"} <= set(names)


def test_the_paper_profile_runs_listmle_and_listnet_is_its_ablation_row():
    """run_rankcse.sh ran --distillation_loss listmle: the paper profile's rankcse is ListMLE (its positive in the
    list, as the community ListMLE); ListNet (without the positive, as the community ListNet) is the ablation
    variant rankcse_listnet, with everything else the same (issue #53 §3.3)."""
    from conftest import REPO
    from sentlab.config import validate
    from sentlab.config.profile_files import profile_values
    from _support.ablations import trained_settings

    paper = validate(profile_values("paper", REPO / "profiles"))
    main = trained_settings(paper, "rankcse")
    ablation = trained_settings(paper, "rankcse_listnet")
    assert (main["distillation"], main["rank_positive"]) == ("listmle", True)
    assert (ablation["distillation"], ablation["rank_positive"]) == ("listnet", False)
    rest = lambda d: {k: v for k, v in d.items() if k not in ("distillation", "rank_positive")}  # noqa: E731
    assert rest(main) == rest(ablation)
    assert main["teachers"] == ["models/diffcse", "models/simcse"] and main["batch_size"] == 128


def test_the_rankcse_and_diffcse_lines_named_in_the_profiles_and_docs_exist():
    """Every rankcse_* / diffcse_* name that profiles/paper.yaml, profiles/quick.yaml or docs/methods.md mentions is a
    line the pipeline trains (an ablation variant): rankcse_listmle was named and did not exist."""
    import re

    from conftest import REPO
    from sentlab.config import validate
    from sentlab.config.profile_files import profile_values

    variants = set(validate(profile_values("paper", REPO / "profiles")).ablations.variants)
    for f in ("profiles/paper.yaml", "profiles/quick.yaml", "docs/methods.md"):
        named = set(re.findall(r"\b((?:rankcse|diffcse)_[a-z0-9_]+)\b", (REPO / f).read_text()))
        assert named <= variants, (f, named - variants)
    assert {"rankcse_listnet", "diffcse_paper_text"} <= variants


def test_the_paper_numbers_and_the_teacher_substitution_are_stored():
    """RankCSE's BERT-base Avg (ListMLE 80.36, ListNet 80.05) and SimCSE++'s (SimCSE-BERTbase 76.25 + 1.8) are in the
    unsupervised table's paper numbers; the rankcse row's note states that its 0.67 teacher is SimCSE-BERT-base
    where the run script used SimCSE-BERT-large."""
    from sentlab.report import paper_numbers as P
    from sentlab.report.paper_tables.unsupervised import _row

    assert get_method("rankcse").paper_avg.avg == 80.36 and P.RANKCSE_AVG == {"listmle": 80.36, "listnet": 80.05}
    assert get_method("simcse_pp").paper_avg.avg == pytest.approx(78.05)
    row = _row("rankcse", get_method("rankcse"))
    assert row.paper == {"Avg": 80.36} and "SimCSE-BERT-base" in row.note and "SimCSE-BERT-large" in row.note
    from sentlab.report.paper_tables import followups

    rows = {r.models[0]: r for r in followups.table().rows}
    assert rows["rankcse"].paper["Avg"] == 80.36 and rows["rankcse_listnet"].paper["Avg"] == 80.05
    assert all("SimCSE-BERT-large" in rows[m].note for m in ("rankcse", "rankcse_listnet"))
    assert rows["rankcse"].paper["STS12"] == 75.66 and rows["diffcse"].paper["Avg"] == 78.49


def test_trains_through_the_loop_and_exports_the_bare_encoder(tok, teachers, tmp_path):
    from safetensors.torch import load_file

    from sentlab.config import Params
    from sentlab.train.run import train_method
    from _support.training import factory, fake_dev_eval, make_root

    p = Params(seed=3, train=TrainParams(batch_size=8, max_length=16, lr=3e-3, eval_every=2, max_steps=4,
                                         device="cpu"),
               methods={"rankcse": {"teachers": teachers, "teacher_weights": [0.33, 0.67]}})
    root = make_root(tmp_path)
    info = train_method(p, "rankcse", root=root, dev_eval=fake_dev_eval(), encoder_factory=factory(tok),
                        tracking=False, progress=False)
    assert info["steps"] == 4 and info["teachers"] == teachers and info["init"]["teachers"].startswith("checkpoint")
    w = load_file(root / "models/rankcse/model.safetensors")
    assert not any("teachers" in k or "mlp" in k for k in w)
