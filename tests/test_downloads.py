"""The real download code against a local upstream (issue #54 §1; tests/upstream.py serves the upstream layout on
127.0.0.1): a cut transfer resumes with an HTTP Range request, a wrong size or line count is refused and nothing
counts as present, archives unpack member by member, and every asset's URL follows SENTLAB_UPSTREAM."""

from __future__ import annotations

import pytest
from upstream import SIMCSE, senteval_tar, serve, zip_of

from sentlab.errors import SentlabError


@pytest.fixture
def offline_off(monkeypatch, tmp_path):
    monkeypatch.setenv("SENTLAB_OFFLINE", "0")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("SENTLAB_DATA_MIRROR", raising=False)
    monkeypatch.setenv("SENTLAB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_transfer_cut_mid_file_resumes_with_a_range_request(tmp_path, monkeypatch):
    from sentlab.assets.download import fetch

    body = bytes(range(256)) * 4000                          # 1,024,000 bytes
    with serve() as up:
        monkeypatch.setenv("SENTLAB_UPSTREAM", up.url)
        up.files[f"{SIMCSE}/big.bin"] = body
        up.cut_once[f"{SIMCSE}/big.bin"] = 300_000          # the first transfer stops after 300,000 bytes
        dest = fetch(f"https://huggingface.co{SIMCSE}/big.bin", tmp_path / "big.bin", progress=False)
        assert dest.read_bytes() == body
        assert up.requests == [(f"{SIMCSE}/big.bin", ""), (f"{SIMCSE}/big.bin", "bytes=300000-")]
    assert not (tmp_path / ".big.bin.part").exists()


def test_a_part_left_by_an_earlier_run_is_resumed_not_restarted(tmp_path, monkeypatch):
    from sentlab.assets.download import fetch

    body = b"line\n" * 50_000
    (tmp_path / ".w.txt.part").write_bytes(body[:123_456])   # what a killed run received
    with serve() as up:
        monkeypatch.setenv("SENTLAB_UPSTREAM", up.url)
        up.files["/data/w.txt"] = body
        fetch("https://nlp.stanford.edu/data/w.txt", tmp_path / "w.txt", progress=False, expected_lines=50_000)
        assert up.requests == [("/data/w.txt", "bytes=123456-")]
    assert (tmp_path / "w.txt").read_bytes() == body


@pytest.mark.parametrize("fault", ["wrong_announced_size", "wrong_line_count"])
def test_a_wrong_size_or_line_count_is_refused_and_nothing_counts_as_present(tmp_path, monkeypatch, fault):
    from sentlab.assets.download import fetch

    path = f"{SIMCSE}/wiki1m_for_simcse.txt"
    with serve() as up:
        monkeypatch.setenv("SENTLAB_UPSTREAM", up.url)
        up.files[path] = b"one sentence.\n" * 1000                  # 14,000 bytes, 1,000 lines
        if fault == "wrong_announced_size":
            up.announce[path] = 14_001                               # a byte more than the file has
        with pytest.raises(SentlabError) as e:
            fetch(f"https://huggingface.co{path}", tmp_path / "wiki1m_for_simcse.txt", progress=False)
    msg = str(e.value)
    if fault == "wrong_line_count":   # wiki1m has 1,000,000 lines (sentlab.assets.download.EXPECTED_LINES)
        assert "1,000 lines where the file has 1,000,000" in msg
    else:                             # the resumed request's Content-Range total says 14,000
        assert "announced 14,001 bytes, then 14,000" in msg
    assert not list(tmp_path.iterdir())                       # neither the file nor a part to resume


def test_senteval_downloads_from_the_upstream_and_unpacks_into_the_cache(offline_off, monkeypatch):
    from sentlab.assets.resolve import resolve_data

    with serve() as up:
        monkeypatch.setenv("SENTLAB_UPSTREAM", up.url)
        up.files[f"{SIMCSE}/senteval.tar"] = senteval_tar()
        up.cut_once[f"{SIMCSE}/senteval.tar"] = 2_000
        r = resolve_data("senteval_sts")
        assert r.source == "download" and r.root == offline_off
        assert (offline_off / "STS/STSBenchmark/sts-test.csv").is_file()
        assert [rng for _, rng in up.requests] == ["", "bytes=2000-"]
        assert resolve_data("sick").source == "cache"            # the same tar: no second download
        assert len(up.requests) == 2


def test_a_zip_asset_unpacks_atomically_and_an_unsafe_member_writes_nothing(offline_off, tmp_path, monkeypatch):
    from sentlab.assets.resolve import resolve_data
    from sentlab.assets.download import extract_zip

    vectors = b"the 0.1 0.2 0.3\ncat 0.4 0.5 0.6\n"
    with serve() as up:
        monkeypatch.setenv("SENTLAB_UPSTREAM", up.url)
        up.files["/data/glove.840B.300d.zip"] = zip_of({"glove.840B.300d.txt": vectors})
        r = resolve_data("glove")
    assert r.source == "download" and (offline_off / "glove/glove.840B.300d.txt").read_bytes() == vectors
    assert not list(offline_off.glob("*.zip")) and not list(offline_off.rglob(".*.tmp"))
    bad = tmp_path / "bad.zip"
    bad.write_bytes(zip_of({"ok.txt": b"fine", "../escape.txt": b"no"}))
    with pytest.raises(SentlabError, match="would land outside"):
        extract_zip(bad, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not (tmp_path / "escape.txt").exists()


def test_a_missing_nltk_resource_is_fetched_with_nltks_own_downloader(tmp_path, monkeypatch):
    """NLTK's downloader refuses loopback hosts (its SSRF guard) and reads local files only under its data folders,
    so the upstream is laid out as files inside NLTK_DATA here (SENTLAB_UPSTREAM=file://...: the same path rewrite
    as for http)."""
    import hashlib

    import nltk

    from sentlab.assets.nltk_resources import require_nltk

    data = zip_of({"wordnet/README": b"WordNet 3.0 (stand-in: the package layout, not the data)\n",
                   "wordnet/lexnames": b"00\tadj.all\t3\n"})
    up = tmp_path / "nltk_data" / "upstream"
    pkg = up / "nltk/nltk_data/gh-pages/packages/corpora/wordnet.zip"
    pkg.parent.mkdir(parents=True)
    pkg.write_bytes(data)
    (up / "nltk/nltk_data/gh-pages/index.xml").write_text(
        f'<?xml version="1.0"?><nltk_data><packages><package id="wordnet" name="WordNet" subdir="corpora" '
        f'url="{pkg.as_uri()}" size="{len(data)}" unzipped_size="100" '
        f'checksum="{hashlib.md5(data).hexdigest()}" unzip="1" /></packages>'   # noqa: S324 - NLTK's index field
        f'<collections></collections></nltk_data>')
    monkeypatch.setenv("SENTLAB_OFFLINE", "0")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("NLTK_DATA", str(tmp_path / "nltk_data"))
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "nltk_data")])   # nothing found where NLTK looks
    monkeypatch.setenv("SENTLAB_UPSTREAM", up.as_uri())
    require_nltk("wordnet")
    assert (tmp_path / "nltk_data" / "corpora" / "wordnet.zip").is_file()


def test_an_unreachable_upstream_is_a_miss_at_once_and_the_callers_fallback_applies(tmp_path, monkeypatch):
    """A fresh clone's `make repro` online but without the hub's hosts: GLUE's SST-2 zip cannot be fetched; the
    download's error used to escape resolve_data (and was retried for ~30 s), so GLUE's fallback to the mirror's
    SentEval SST-2 never ran and the sources stage failed."""
    import socket
    import time

    from conftest import mirror_with

    from sentlab.evaluate.suites import glue as G

    mirror_with(monkeypatch, "SST/binary/sentiment-train", "SST/binary/sentiment-dev")
    for k in ("SENTLAB_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(k, "0")
    monkeypatch.setenv("SENTLAB_CACHE", str(tmp_path / "cache"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]                      # nothing listens there once closed
    monkeypatch.setenv("SENTLAB_UPSTREAM", f"http://127.0.0.1:{port}")
    t0 = time.monotonic()
    sst = G.load_glue("SST-2")
    assert time.monotonic() - t0 < 10
    assert (len(sst["train"].y), len(sst["dev"].y)) == (67349, 872)   # the mirror's SentEval SST-2


def test_a_hub_snapshot_of_only_the_files_transformers_loads_resolves_offline(tmp_path):
    """A snapshot taken with allow_patterns (sentlab.assets.download.hub_snapshot: safetensors, configs, tokenizer)
    lacks the
    repository's other weight formats; huggingface_hub 2.x's offline look-up without the same patterns called it
    incomplete (IncompleteSnapshotError), so resolve_model failed offline on the model it had just downloaded
    (issue #65 §6: a compute node). Each half runs in a process of its own: huggingface_hub reads HF_ENDPOINT and
    HF_HUB_OFFLINE when it is imported."""
    import os
    import subprocess
    import sys

    files = {"config.json": b'{"model_type": "bert"}', "vocab.txt": b"[PAD]\n[UNK]\n", "model.safetensors": b"w" * 64,
             "pytorch_model.bin": b"b" * 64, "tf_model.h5": b"t" * 64, "onnx/model.onnx": b"o" * 64}
    env = {k: v for k, v in os.environ.items() if k not in ("SENTLAB_DATA_MIRROR", "TRANSFORMERS_OFFLINE")}
    env.update(HF_HUB_CACHE=str(tmp_path / "hub"), HF_HUB_DISABLE_TELEMETRY="1", SENTLAB_OFFLINE="0",
               HF_HUB_OFFLINE="0")
    code = "import sys; from sentlab.assets.resolve import resolve_model; print(resolve_model(sys.argv[1]))"
    with serve() as up:
        up.hub_repo("sentlab-test/m", files)
        online = subprocess.run([sys.executable, "-c", code, "sentlab-test/m"], capture_output=True, text=True,
                                env={**env, "HF_ENDPOINT": up.url}, timeout=300)
    assert online.returncode == 0, online.stderr
    snapshot = online.stdout.strip().splitlines()[-1]
    assert sorted(os.listdir(snapshot)) == ["config.json", "model.safetensors", "vocab.txt"]
    offline = subprocess.run([sys.executable, "-c", code, "sentlab-test/m"], capture_output=True, text=True,
                             env={**env, "HF_HUB_OFFLINE": "1", "SENTLAB_OFFLINE": "1",
                                  "HF_ENDPOINT": "http://127.0.0.1:9"}, timeout=300)
    assert offline.returncode == 0, offline.stderr
    assert offline.stdout.strip().splitlines()[-1] == snapshot
