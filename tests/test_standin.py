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
    from sentlab.assets import resolve as assets

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

    from sentlab.assets.resolve import resolve_model

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


# --- roberta-base's stand-in tokenizer (issue #53 §4) -------------------------------------------------------------
SPECIALS = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 50264}


@pytest.fixture(scope="module")
def bpe_files(tmp_path_factory):
    """The stand-in BPE's two files, built twice in separate folders (needs the data mirror's wiki sample and STS)."""
    from conftest import MIRROR

    if not (MIRROR / "STS").is_dir():
        pytest.skip(f"needs the data mirror at {MIRROR}")
    import os

    from sentlab.backbones.bpe import bpe_standin_files

    old = os.environ.get("SENTLAB_DATA_MIRROR")
    os.environ["SENTLAB_DATA_MIRROR"] = str(MIRROR)
    try:
        root = tmp_path_factory.mktemp("bpe")
        return bpe_standin_files(root / "a"), bpe_standin_files(root / "b")
    finally:
        if old is None:
            os.environ.pop("SENTLAB_DATA_MIRROR")
        else:
            os.environ["SENTLAB_DATA_MIRROR"] = old


def test_roberta_standin_bpe_files_have_roberta_base_layout(bpe_files):
    """vocab.json: 50,265 ids 0..50264, <s> 0, <pad> 1, </s> 2, <unk> 3, <mask> last, the 256 byte symbols, Ġ-prefixed
    words; merges.txt: the `#version: 0.2` header, one `a b` merge per line, each merge's result in the vocabulary;
    two builds write the same bytes."""
    from tokenizers.pre_tokenizers import ByteLevel

    (vocab_a, merges_a), (vocab_b, merges_b) = bpe_files
    assert vocab_a.read_bytes() == vocab_b.read_bytes() and merges_a.read_bytes() == merges_b.read_bytes()
    vocab = json.loads(vocab_a.read_text(encoding="utf-8"))
    assert len(vocab) == 50265 and sorted(vocab.values()) == list(range(50265))
    assert {k: vocab[k] for k in SPECIALS} == SPECIALS
    assert set(ByteLevel.alphabet()) <= set(vocab) and "Ġ" in vocab
    assert {"Ġthe", "Ġof", "Ġand", "The"} <= set(vocab)
    lines = merges_a.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "#version: 0.2"
    merges = [line.split(" ") for line in lines[1:]]
    assert len(merges) == 50265 - 4 - 256 - 1 and all(len(m) == 2 for m in merges)
    assert all(a + b in vocab for a, b in merges)


def test_roberta_standin_bpe_loads_as_roberta_tokenizers(bpe_files):
    """RobertaTokenizer and RobertaTokenizerFast read the two files as the real roberta-base folder: the same ids,
    <s> X </s> and <s> A </s></s> B </s>, a Ġ word prefix after the first word, no token_type_ids, 50,265 ids."""
    from transformers import RobertaTokenizer, RobertaTokenizerFast

    folder = bpe_files[0][0].parent
    slow, fast = RobertaTokenizer.from_pretrained(folder), RobertaTokenizerFast.from_pretrained(folder)
    sents = ["Hello world!", "A man is playing a guitar.", "Café déjà vu — naïve résumé", "Tokyo 東京 don't"]
    enc = fast(sents)
    assert set(enc) == {"input_ids", "attention_mask"}
    assert enc["input_ids"] == slow(sents)["input_ids"]
    assert (len(fast), fast.pad_token_id, fast.mask_token_id, fast.cls_token_id, fast.sep_token_id) == (
        50265, 1, 50264, 0, 2)
    assert fast.convert_ids_to_tokens(enc["input_ids"][1]) == ["<s>", "A", "Ġman", "Ġis", "Ġplaying", "Ġa", "Ġguitar",
                                                               ".", "</s>"]
    assert fast.decode(enc["input_ids"][2], skip_special_tokens=True) == sents[2]
    pair = fast("Hello world!", "A man.")["input_ids"]
    assert pair[0] == 0 and pair.count(2) == 3 and pair[pair.index(2) + 1] == 2 and pair[-1] == 2


def test_roberta_standin_folder_holds_the_bpe_files_and_loads(tmp_path, mirror, monkeypatch):
    """`sentlab standin roberta-base` without --tokenizer-from: vocab.json + merges.txt + tokenizer.json beside the
    weights, AutoTokenizer gives the stand-in's ids, the model reads them; the marker says the ids are not real."""
    from transformers import AutoModel, AutoTokenizer

    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(mirror))
    folder = write_standin("roberta-base", tmp_path / "rb", config=SMALL)
    assert {"vocab.json", "merges.txt", "tokenizer.json", "config.json"} <= {p.name for p in folder.iterdir()}
    assert "not its ids" in json.loads((folder / "sentlab_standin.json").read_text())["tokenizer"]
    tok = AutoTokenizer.from_pretrained(folder)
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    enc = tok(["A man is playing a guitar."], return_tensors="pt")
    assert enc["input_ids"][0].tolist() == [0, vocab["A"], vocab["Ġman"], vocab["Ġis"], vocab["Ġplaying"], vocab["Ġa"],
                                            vocab["Ġguitar"], vocab["."], 2]
    model = AutoModel.from_pretrained(folder)
    assert model(**enc).last_hidden_state.shape == (1, 9, 32)


def test_writing_a_standin_leaves_the_callers_random_state(tmp_path):
    """Issue #68: a stand-in written in the middle of a seeded computation reseeded torch's global generator, so the
    released-code golden case ``simcse_mlm`` gave another loss (1.14356 against 1.12648) on a fresh machine, where
    the stand-in was not yet on disk, and the golden loss where it was. The values come from ``seed`` alone."""
    small = {"num_hidden_layers": 1, "hidden_size": 16, "num_attention_heads": 2, "intermediate_size": 32}
    torch.manual_seed(1234)
    want = torch.rand(5)                                # what the caller draws next, with no stand-in written
    torch.manual_seed(1234)
    write_standin("bert-base-uncased", tmp_path / "a", config=small)
    assert torch.equal(torch.rand(5), want)
    torch.manual_seed(99)                               # another caller state: the same stand-in values
    write_standin("bert-base-uncased", tmp_path / "b", config=small)
    a = (tmp_path / "a" / "model.safetensors").read_bytes()
    assert a == (tmp_path / "b" / "model.safetensors").read_bytes()
