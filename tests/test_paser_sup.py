"""Supervised PaSeR end to end: the NLI corpus reader, a short run from models/paser, the pipeline wiring."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pyarrow as pa
import pytest
import torch

from sentlab.config import Params, TrainParams, load_params
from sentlab.methods.blocks import load_checked
from sentlab.data.nli import write_nli
from sentlab.errors import SentlabError
from sentlab.methods import get_method
from sentlab.train.checkpoint import write_marker
from sentlab.train.data import load_corpus
from sentlab.train.run import NOT_RUN, train_method

REPO = Path(__file__).resolve().parents[1]
TRIPLES = [
    ("A man is playing a large flute.", "A man plays music.", "Nobody is playing an instrument."),
    ("There are two options for you.", "You have a choice.", "You have no choice at all."),
    ("At least 89 dead in china earthquakes.", "People died in China.", "Nobody was hurt in China."),
    ("A woman is slicing an onion.", "An onion is being cut.", "The woman is not cutting anything."),
    ("Two dogs run across the field.", "Animals are running outside.", "The dogs are asleep indoors."),
    ("The boy kicks a red ball.", "A child plays with a ball.", "No ball is being kicked."),
    ("A chef cooks pasta in the kitchen.", "Someone is cooking food.", "The kitchen is empty."),
    ("Kids swim in the blue lake.", "Children are in the water.", "The kids are dry on the shore."),
]
IDS = list(range(100, 100 + len(TRIPLES)))

pytestmark = pytest.mark.usefixtures("one_thread")


def make_data(root: Path) -> Path:
    """data/corpus/nli.parquet (the stand-in's label) and the annotation stage's data/annotations/nli."""
    from sentlab.annotate import annotate_corpus

    path = root / "data" / "corpus" / "nli.parquet"
    a, p, n = (list(c) for c in zip(*TRIPLES))
    write_nli(pa.table({"id": pa.array(IDS, pa.int64()), "text": a, "positive": p, "hard_negative": n}), path,
              "sick_standin")
    annotate_corpus(IDS, a, root / "data" / "annotations" / "nli", backend="nltk", jobs=1, progress=False)
    return path


def test_corpus_reader_takes_positive_and_hard_negative_from_the_corpus_file(tmp_path):
    path = make_data(tmp_path)
    corpus = load_corpus(path, get_method("paser_sup").corpus_columns, tmp_path / "data" / "annotations" / "nli")
    assert list(corpus.extras) == ["positive", "hard_negative", "rake", "chunks"]
    assert corpus.extras["positive"] == [p for _, p, _ in TRIPLES]
    assert corpus.extras["hard_negative"] == [n for _, _, n in TRIPLES]
    assert corpus.extras["rake"][0][0]["text"] in TRIPLES[0][0]  # annotations of the anchors, joined on id
    assert corpus.meta == {"sentlab.nli_source": "sick_standin", "sentlab.nli_label": "NLI stand-in (SICK train)"}
    assert corpus.subset([1]).extras["positive"] == [TRIPLES[1][1]] and corpus.subset([1]).meta == corpus.meta
    with pytest.raises(SentlabError, match="neither the corpus"):
        load_corpus(path, ["nonexistent"], tmp_path / "data" / "annotations" / "nli")


def save_fake_paser(tok, folder: Path, seed: int = 5):
    from tiny import tiny_bert

    from sentlab.methods._paser_decoder import save_heads

    model = tiny_bert(tok, seed, max_position_embeddings=128)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    paser = get_method("paser")(model, tok, get_method("paser").Params(decoder_heads=2, decoder_layers=1, eda="none"))
    with torch.no_grad():
        paser.lm_head.bias.fill_(0.125)  # a head PaSeR trained: not what a fresh one starts from
    save_heads(paser, folder)
    (folder / "sentlab.json").write_text(json.dumps({"method": "paser", "name": "paser", "status": "trained"}))
    return model


def sup_params() -> Params:
    return Params(train=TrainParams(batch_size=4, max_steps=2, eval_every=1, lr=1e-3, max_length=32, device="cpu"),
                  methods={"paser_sup": {"decoder_heads": 2, "decoder_layers": 1, "top_k": 2, "recon_heldout": 0}})


def dev_eval(enc):
    return {"stsb_dev": 0.0, "alignment": 0.0, "uniformity": 0.0}


def test_paser_sup_trains_two_steps_from_models_paser(tok, tmp_path):
    from transformers import AutoModel

    make_data(tmp_path)
    paser = save_fake_paser(tok, tmp_path / "models" / "paser")
    info = train_method(sup_params(), "paser_sup", root=tmp_path, dev_eval=dev_eval, tracking=False, progress=False)
    assert info["steps"] == 2 and info["status"] == "trained"
    assert (info["nli_source"], info["nli_label"]) == ("sick_standin", "NLI stand-in (SICK train)")
    saved = json.loads((tmp_path / "models" / "paser_sup" / "sentlab.json").read_text())
    assert saved["nli_label"] == "NLI stand-in (SICK train)"
    # the encoder started from models/paser (a step of lr 1e-3 moves a weight by ~1e-3; another init is ~0.02 away)
    out = AutoModel.from_pretrained(tmp_path / "models" / "paser_sup").state_dict()
    diff = max(float((out[k] - v).abs().max()) for k, v in paser.state_dict().items() if k in out)
    assert 0 < diff < 5e-3


def test_paser_sup_starts_from_paser_s_trained_head(tok, tmp_path):
    """#34 defect 2: models/paser keeps the encoder only, so paser_sup's head was always a fresh one. It is
    PaSeR's trained head (paser_heads.safetensors); the decoder random as the paper's; sentlab.json says so."""
    from sentlab.assets.resolve import load_model

    make_data(tmp_path)
    save_fake_paser(tok, tmp_path / "models" / "paser")
    enc, tk = load_model(str(tmp_path / "models" / "paser"))
    sup = get_method("paser_sup")(enc, tk, get_method("paser_sup").Params(decoder_heads=2, decoder_layers=1))
    assert torch.all(sup.lm_head.bias == 0.125) and sup.lm_head_source == "paser"
    info = train_method(sup_params(), "paser_sup", root=tmp_path, dev_eval=dev_eval, tracking=False, progress=False)
    assert info["init"] == {"encoder": "paser", "decoder": "random", "lm_head": "paser", "mlp": "random"}
    saved = json.loads((tmp_path / "models" / "paser_sup" / "sentlab.json").read_text())
    assert saved["init"] == info["init"] and saved["lm_head"] == "paser"


def test_paser_sup_needs_a_trained_models_paser(tok, tmp_path):
    make_data(tmp_path)
    with pytest.raises(SentlabError, match="trained model of `paser`.*missing or was not trained"):
        train_method(sup_params(), "paser_sup", root=tmp_path, dev_eval=dev_eval, tracking=False, progress=False)
    write_marker(tmp_path / "models", tmp_path / "reports" / "curves", "paser", "paser", NOT_RUN)
    with pytest.raises(SentlabError, match="add paser to train.methods"):
        train_method(sup_params(), "paser_sup", root=tmp_path, dev_eval=dev_eval, tracking=False, progress=False)


def test_profiles_train_paser_sup_on_the_right_nli_data():
    quick, paper = (load_params(REPO / "params.yaml", profile=p) for p in ("quick", "paper"))
    assert "paser_sup" in quick.train.methods and "paser_sup" in paper.train.methods
    assert (quick.prepare.nli, paper.prepare.nli) == ("sick_standin", "simcse")
    assert quick.methods_from["paser_sup"]["from"] == "paser" and "paser_sup" not in quick.methods


def test_methods_from_must_name_the_methods_init_from(tmp_path):
    text = (REPO / "params.yaml").read_text(encoding="utf-8")
    assert "paser_sup: {from: paser," in text
    (tmp_path / "params.yaml").write_text(text.replace("paser_sup: {from: paser,", "paser_sup: {from: simcse,"))
    with pytest.raises(SentlabError, match=r"`paser_sup` starts from the trained model of `paser`.*from: simcse"):
        load_checked(tmp_path / "params.yaml")


def test_dvc_paser_sup_stage_reads_models_paser_and_others_do_not():
    from dvc.repo import Repo

    with Repo(str(REPO)) as repo:
        stages = {s.addressing: s for s in repo.index.stages}
    deps = {name: {Path(d.def_path).as_posix().rstrip("/") for d in s.deps} for name, s in stages.items()}
    assert stages["train@paser_sup"].cmd == "python pipeline/train.py paser_sup --method paser_sup --seed 42"
    assert {"models/paser", "data/annotations", "data/corpus"} <= deps["train@paser_sup"]
    assert "models/paser_sup" in deps["evaluate@paser_sup"]
    params = {name: {k for p in s.deps if hasattr(p, "params") for k in (p.params or [])} for name, s in stages.items()}
    assert "methods_from.paser_sup" in params["train@paser_sup"]
    for name, d in deps.items():  # no other stage depends on a model folder it does not read
        if name.startswith("train@") and name != "train@paser_sup":
            assert not any(x.startswith("models/") for x in d), name
            if "methods.paser" in params[name]:  # paser's params: only paser's own train stages (its seeds)
                assert name == "train@paser" or name.startswith("train@paser-s"), name
    assert "data/corpus" in deps["annotate"]


def test_annotate_stage_annotates_every_corpus_prepare_wrote(tmp_path):
    for name in ("train", "sts_unlabeled", "nli", "sts_all_sides"):
        (tmp_path / f"{name}.parquet").write_bytes(b"")
    (tmp_path / ".nli.parquet.abc.tmp").write_bytes(b"")  # an interrupted atomic write is not a corpus
    corpora = runpy.run_path(str(REPO / "pipeline" / "annotate.py"), run_name="annotate")["corpora"]
    assert sorted(corpora(tmp_path)) == ["nli", "sts_unlabeled", "train"]   # ConSERT's sts_all_sides: not annotated



def test_training_paser_sup_without_paser_is_refused_when_params_load(tmp_path):
    text = (REPO / "params.yaml").read_text(encoding="utf-8")
    line = next(ln for ln in text.splitlines() if ln.startswith("  methods: [") and "paser_sup" in ln)
    (tmp_path / "params.yaml").write_text(text.replace(line, line.replace(" paser,", "")))
    with pytest.raises(SentlabError, match=r"paser_sup \(starts from paser\)"):
        load_checked(tmp_path / "params.yaml")


def test_paser_sup_tests_without_its_mlp_unless_asked(tok, tmp_path):
    """Issue #53 §3.4: paser_sup keeps PaSeR's released test pooling (the pooled vector, no MLP: its eval.sh's
    cls_before_pooler; PaSeR's supervised code is unreleased) in the quick and paper profiles; ``test_mlp: true``
    tests it as SimCSE tests simcse_sup (tanh(W·[CLS] + b), exported as sentlab.json's ``head``)."""
    from sentlab.assets.resolve import load_model

    from sentlab.train.run import method_params

    for profile in ("quick", "paper"):
        assert method_params(load_params(REPO / "params.yaml", profile=profile), "paser_sup").test_mlp is False
    save_fake_paser(tok, tmp_path / "models" / "paser")
    enc, tk = load_model(str(tmp_path / "models" / "paser"))
    cls = get_method("paser_sup")
    sup = cls(enc, tk, cls.Params(decoder_heads=2, decoder_layers=1))
    assert sup.inference_head() is None and "head" not in sup.export_info()
    on = cls(enc, tk, cls.Params(decoder_heads=2, decoder_layers=1, test_mlp=True))
    assert on.export_info()["head"] == "head" and on.inference_head() is on.mlp
    a = ["a man plays a flute", "two dogs run in a field"]
    with torch.no_grad():
        h = enc(**on.encode_text(a), return_dict=True).last_hidden_state[:, 0]
        want = torch.tanh(on.mlp.dense(h)).numpy()
    assert on.sentence_encoder().encode(a) == pytest.approx(want, abs=1e-5)
    assert sup.sentence_encoder().encode(a) == pytest.approx(h.numpy(), abs=1e-5)
    with pytest.raises(ValueError, match="test_mlp"):
        cls.Params(mlp_head=False, test_mlp=True)
