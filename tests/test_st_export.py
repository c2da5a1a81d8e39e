"""Every sentlab model folder loads with sentence-transformers and gives sentlab's embeddings.

Tiny models go through the real export path (``export_model`` then ``publish``, as a train stage
does) for each pooling, template and channel; ``SentenceTransformer(path)`` must then agree with
:class:`SentenceEncoder` to 1e-5 on the STS-B dev sentences. A second test does the same for the
model trained here by the training code, and for the trained models under ``models/`` when a pipeline has produced
them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from sentlab.nn.encoder import SentenceEncoder
from sentlab.export import load_sentence_transformer, st_pooling_info
from sentlab.train.checkpoint import export_model, publish

REPO = Path(__file__).resolve().parents[1]
CASES = {  # name: sentlab.json pooling record
    "cls": {"pooling": "cls"},
    "mean": {"pooling": "mean"},
    "first_last": {"pooling": "first_last"},
    "top2_mean": {"pooling": "top2_mean"},
    "prompt": {"pooling": "mask", "template": 'This sentence : "{sentence}" means {mask} .'},
    "prompt_mask_first": {"pooling": "mask", "template": '{mask} is what "{sentence}" says .'},
    "prompt_end_period": {"pooling": "mask", "template": 'This sentence of "{sentence}" means {mask} .',
                          "end_period": True},   # PromptBERT's test input (methods.prompt.end_period)
    "posbow_channels": {"pooling": "cls", "channels": {"bow": [0, 16], "pos": [16, 32]}},
}
ST_ONLY = {"cls", "mean"}  # written with sentence-transformers' own modules only


@pytest.fixture(scope="module")
def dev_sentences():
    from conftest import MIRROR

    path = MIRROR / "STS" / "STSBenchmark" / "sts-dev.csv"
    if not path.is_file():
        pytest.skip(f"needs the STS-B dev file of the data mirror at {path} (set SENTLAB_DATA_MIRROR)")
    from sentlab.data.sts import parse_stsb

    rows = parse_stsb(path, "dev")
    return sorted({s for r in rows for s in (r["sentence1"], r["sentence2"])})


def _export(tmp: Path, name: str, info: dict, tok, seed: int = 0) -> Path:
    """A tiny BERT saved as a train stage saves a model: best checkpoint, then the published copy."""
    from tiny import tiny_bert

    model = tiny_bert(tok, seed=seed, initializer_range=0.2, max_position_embeddings=512)
    info = dict(info, method=name, name=name, status="trained")
    export_model(tmp / "best", SimpleNamespace(encoder=model, tokenizer=tok), info)
    publish(tmp / "best", tmp / name, {"run_key": "test"})
    return tmp / name


def _sentlab_encoders(folder: Path) -> dict[str | None, SentenceEncoder]:
    """sentlab's encoders of a model folder as the evaluate stage builds them: {channel: encoder}."""
    from sentlab.evaluate.sts.runner import build_encoders

    encs = build_encoders(str(folder), precision="fp32", device="cpu", name="m")
    return {None if k == "m" else k[2:]: e for k, e in encs.items()}


def _max_diff(folder: Path, sentences: list[str]) -> dict:
    st = load_sentence_transformer(folder)
    out = {}
    for channel, enc in _sentlab_encoders(folder).items():
        ours = enc.encode(sentences, batch_size=256)
        kw = {"channel": channel} if channel else {}
        theirs = st.encode(sentences, batch_size=256, convert_to_numpy=True, **kw)
        assert theirs.shape == ours.shape, (channel, theirs.shape, ours.shape)
        out[channel] = float(np.abs(theirs - ours).max())
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_exported_tiny_model_matches_sentlab_encoder(case, tmp_path, tok, one_thread, dev_sentences):
    folder = _export(tmp_path, case, CASES[case], tok)
    diffs = _max_diff(folder, dev_sentences)
    assert set(diffs) == {None, *CASES[case].get("channels", {})}
    assert max(diffs.values()) <= 1e-5, diffs
    modules = json.loads((folder / "modules.json").read_text())
    assert modules[0]["path"] == ""    # transformers' AutoModel still loads the folder root
    uses_sentlab = any(m["type"].startswith("sentlab.") for m in modules)
    # the import path of sentlab's module classes is part of every published folder (and of its card's text): the
    # layering keeps them at sentlab.export.modules (docs/architecture.md), a move would break those folders
    assert all(m["type"].startswith(("sentence_transformers.", "sentlab.export.modules.")) for m in modules), modules
    assert uses_sentlab == (case not in ST_ONLY)
    assert (folder / "config_sentence_transformers.json").is_file()
    info = json.loads((folder / "sentlab.json").read_text())
    assert info["sentence_transformers"] is True and info["run_key"] == "test"
    # read back as `sentlab evaluate --model` reads a sentence-transformers folder
    back = st_pooling_info(folder)
    assert back["pooling"] == CASES[case]["pooling"]
    assert back["template"] == CASES[case].get("template")
    assert back["channels"] == CASES[case].get("channels")
    assert back.get("end_period", False) == CASES[case].get("end_period", False)


def test_export_keeps_the_weights_and_tokenizer_limit(tmp_path, tok, one_thread):
    """The sentence-transformers save rewrites no weight (same bytes as the best checkpoint) and keeps the
    token limit sentlab evaluates with, so adding the files changes no number of the pipeline."""
    folder = _export(tmp_path, "first_last", CASES["first_last"], tok)
    digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
    assert digest(folder / "model.safetensors") == digest(tmp_path / "best" / "model.safetensors")
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["output_hidden_states"] is True       # what makes sentence-transformers return every layer
    enc = _sentlab_encoders(folder)[None]
    assert enc.effective_max_length == 512


def test_template_prompt_is_the_default_prompt(tmp_path, tok, one_thread):
    folder = _export(tmp_path, "prompt", CASES["prompt"], tok)
    cfg = json.loads((folder / "config_sentence_transformers.json").read_text())
    assert cfg["default_prompt_name"] == "sentlab_template"
    assert cfg["prompts"]["sentlab_template"] == 'This sentence : "'
    st = load_sentence_transformer(folder)
    feats = st.preprocess(["a b"], prompt=st.prompts["sentlab_template"])
    text = tok.decode(feats["input_ids"][0], skip_special_tokens=False)
    assert text == '[CLS] this sentence : " a b " means [MASK]. [SEP]'


def test_truncated_mask_raises_in_sentence_transformers_too(tmp_path, tok, one_thread):
    """A [MASK] cut off by truncation is an error in both encoders, never another token's vector."""
    from sentlab.errors import SentlabError

    folder = _export(tmp_path, "prompt", CASES["prompt"], tok)
    st = load_sentence_transformer(folder)
    st.max_seq_length = 8
    with pytest.raises(SentlabError, match="no \\[MASK\\] token left"):
        st.encode(["alpha bravo charlie delta echo foxtrot golf hotel india"])


def test_unknown_channel_names_the_channels(tmp_path, tok, one_thread):
    folder = _export(tmp_path, "posbow", CASES["posbow_channels"], tok)
    st = load_sentence_transformer(folder)
    assert st.encode(["alpha bravo"]).shape == (1, 32)
    with pytest.raises(ValueError, match="unknown channel 'srl'; this model has: bow, pos"):
        st.encode(["alpha bravo"], channel="srl")


def _trained_models() -> list[Path]:
    root = REPO / "models"
    return sorted(p for p in root.glob("*") if (p / "sentlab.json").is_file()
                  and json.loads((p / "sentlab.json").read_text()).get("status") == "trained") if root.is_dir() else []


@pytest.mark.slow
def test_every_trained_model_loads_with_sentence_transformers(dev_sentences, tmp_path, tok, one_thread):
    """A model trained here by the training code (`train_method`: the loop, the export, the publish a train stage
    runs), and every trained model under models/ (the quick profile's after `make repro`), give sentlab's
    embeddings through `SentenceTransformer(path)`."""
    from _support.training import factory, fake_dev_eval, make_root, params

    from sentlab.train.run import train_method

    root = make_root(tmp_path)
    train_method(params(), "simcse", root=root, dev_eval=fake_dev_eval(), encoder_factory=factory(tok),
                 tracking=False, progress=False)
    models = [root / "models" / "simcse", *_trained_models()]   # a fresh clone has no models/: the first is there
    sample = dev_sentences[:300]
    bad = {}
    for folder in models:
        if not (folder / "modules.json").is_file():
            bad[folder.name] = ("no modules.json (trained before the sentence-transformers export: "
                                "re-run its train stage)")
            continue
        diffs = _max_diff(folder, sample)
        if max(diffs.values()) > 1e-5:
            bad[folder.name] = diffs
    assert not bad, bad


def test_evaluate_reads_a_published_sentence_transformers_folder():
    """`sentlab evaluate --model PATH` on a published model (all-MiniLM-L6-v2: Transformer, mean Pooling,
    Normalize) pools as its modules say and truncates at its max_seq_length."""
    from sentlab.assets.resolve import resolve_model
    from sentlab.evaluate.sts.runner import build_encoders

    path = resolve_model("sentence-transformers/all-MiniLM-L6-v2")
    encs = build_encoders(str(path), precision="fp32", device="cpu", name="minilm")
    enc = encs["minilm"]
    assert list(encs) == ["minilm"]
    assert (enc.pooling, enc.template, enc.max_length) == ("mean", None, 256)
    assert build_encoders(str(path), pooling="cls", precision="fp32", device="cpu")["model"].pooling == "cls"


def test_evaluate_refuses_a_module_it_cannot_reproduce(tmp_path, tok):
    from sentlab.errors import SentlabError

    folder = tmp_path / "dense"
    folder.mkdir()
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}]))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    with pytest.raises(SentlabError, match="sentence_transformers.models.Dense.*2_Dense.*pass --pooling"):
        st_pooling_info(folder)
