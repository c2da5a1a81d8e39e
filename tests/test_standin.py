"""sentlab standin (sentlab.backbones.standin): hub-shaped stand-ins loaded through the hub's code path."""

from __future__ import annotations

import json

import pytest
import torch

from sentlab.backbones.standin import ORIGINAL, standin_state, write_standin

# a scaled-down bert-base-uncased / roberta-base: the same key names, the real vocabulary
SMALL = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 37}


@pytest.fixture
def standin_mirror(tmp_path, monkeypatch):
    """A mirror whose models/bert-base-uncased is the scaled-down stand-in (original layout: gamma/beta)."""
    folder = write_standin("bert-base-uncased", tmp_path / "mirror" / "models" / "bert-base-uncased", config=SMALL)
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(tmp_path / "mirror"))
    return folder


def _file_state(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_full_shape_bert_keys_are_the_original_files():
    """bert-base-uncased's original file: BertForPreTraining's keys, LayerNorms gamma/beta, no position_ids
    (shapes and dtypes on the meta device: no 440 MB in a test)."""
    from sentlab import backbones

    with torch.device("meta"):
        state = standin_state(backbones.architecture_config("bert-base-uncased"))
    assert len(state) == 207  # 12 x 16 layer tensors + 5 embeddings + 2 pooler + 6 cls.predictions + 2 NSP
    assert state["bert.embeddings.word_embeddings.weight"].shape == (30522, 768)
    assert state["cls.predictions.transform.LayerNorm.gamma"].shape == (768,)
    assert "cls.seq_relationship.weight" in state and "bert.pooler.dense.weight" in state
    assert not [k for k in state if k.endswith(("LayerNorm.weight", "LayerNorm.bias", "position_ids"))]
    assert "cls.predictions.decoder.bias" not in state
    assert {v.dtype for v in state.values()} == {torch.float32}
    with torch.device("meta"):
        r = standin_state(backbones.architecture_config("roberta-base"))
    assert {k.split(".")[0] for k in r} == {"roberta", "lm_head"}
    assert {k for k in r if k.startswith("lm_head")} == {
        "lm_head.dense.weight", "lm_head.dense.bias", "lm_head.layer_norm.weight", "lm_head.layer_norm.bias",
        "lm_head.decoder.weight", "lm_head.bias"}
    assert r["roberta.embeddings.word_embeddings.weight"].shape == (50265, 768)


def test_standin_loads_through_the_mirror_like_a_hub_download(standin_mirror):
    """The hub id resolves to the mirror's folder; from_pretrained renames gamma/beta; every file tensor
    lands in the model; the tokenizer is bert-base-uncased's id for id."""
    from sentlab import assets

    assert assets.resolve_model("bert-base-uncased") == standin_mirror
    info = json.loads((standin_mirror / "sentlab_standin.json").read_text())
    assert info["layer_norm_names"] == "gamma_beta" and info["weights"] == "model.safetensors"
    state = _file_state(standin_mirror)
    assert "bert.encoder.layer.1.output.LayerNorm.gamma" in state and "cls.predictions.decoder.weight" not in state
    model, tok = assets.load_model("bert-base-uncased")
    assert model.sentlab_init == "checkpoint"
    gamma = state["bert.encoder.layer.1.output.LayerNorm.gamma"]
    assert torch.equal(model.encoder.layer[1].output.LayerNorm.weight, gamma)
    assert torch.equal(model.embeddings.LayerNorm.bias, state["bert.embeddings.LayerNorm.beta"])
    assert not torch.equal(model.embeddings.LayerNorm.weight, torch.ones(32))  # spread, as a trained model's
    assert tok("Hello world!")["input_ids"] == [101, 7592, 2088, 999, 102]


@pytest.mark.parametrize("names,fmt", [("weight_bias", "safetensors"), ("gamma_beta", "bin")])
def test_variants_load_the_same_weights(tmp_path, names, fmt):
    """The renamed variant and the pytorch_model.bin variant (the tied decoder an alias, weights_only-loadable)."""
    from transformers import AutoModelForMaskedLM

    a = write_standin("bert-base-uncased", tmp_path / "a", config=SMALL)
    b = write_standin("bert-base-uncased", tmp_path / "b", config=SMALL, layer_norm_names=names, fmt=fmt)
    if fmt == "bin":
        sd = torch.load(b / "pytorch_model.bin", weights_only=True)
        assert "cls.predictions.decoder.weight" in sd and "cls.predictions.transform.LayerNorm.gamma" in sd
    ma, ia = AutoModelForMaskedLM.from_pretrained(a, output_loading_info=True)
    mb, ib = AutoModelForMaskedLM.from_pretrained(b, output_loading_info=True)
    assert not ia["missing_keys"] and not ib["missing_keys"]
    for (k, va), (_, vb) in zip(ma.state_dict().items(), mb.state_dict().items()):
        assert torch.equal(va, vb), k


def test_roberta_standin_keys_load_into_masked_lm(tmp_path, tok):
    """roberta-base's layout (roberta.* + lm_head.*) loads without a missing key; its BPE is not here, so the
    tokenizer comes from --tokenizer-from (here MiniLM's, for the shape only)."""
    from transformers import AutoModelForMaskedLM

    from sentlab.assets import resolve_model

    folder = write_standin("roberta-base", tmp_path / "rb", config=SMALL,
                           tokenizer_from=resolve_model("sentence-transformers/all-MiniLM-L6-v2"))
    state = _file_state(folder)
    assert "lm_head.layer_norm.weight" in state and "roberta.embeddings.LayerNorm.weight" in state
    model, info = AutoModelForMaskedLM.from_pretrained(folder, output_loading_info=True)
    assert type(model).__name__ == "RobertaForMaskedLM" and not info["missing_keys"]
    assert torch.equal(model.lm_head.layer_norm.weight, state["lm_head.layer_norm.weight"])
    assert ORIGINAL["roberta"][0] == "RobertaForMaskedLM"


def test_standin_cli(tmp_path, capsys):
    from sentlab.cli import main

    with pytest.raises(SystemExit) as e:
        main(["standin", "--help"])
    assert e.value.code == 0
    assert "--layer-norm-names" in capsys.readouterr().out
