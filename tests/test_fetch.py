"""``sentlab fetch --profile P`` against the local upstream (tests/upstream.py on 127.0.0.1, issue #65 §6): it
downloads what the profile's stages read into the places they read it from, says what with sizes, and afterwards
the ``sources`` stage's reads of that profile run with downloads off and no upstream listening; a source the
upstream does not have is one paragraph, exit 2, and no "needs no network" line."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest
import yaml
from conftest import NLTK_DATA
from synthetic_upstream import stopwords_zip, wordnet_zip
from upstream import SIMCSE, senteval_tar, serve, tar_of, zip_of

REPO = Path(__file__).resolve().parents[1]
WORDS = [f"w{chr(97 + i)}{chr(97 + j)}" for i in range(26) for j in range(26)]   # 676 made-up words
CR_COUNTS = {"custrev.pos": 2407, "custrev.neg": 1368}   # SentEval's CR (the loader checks the record counts)
PROFILE = {"extends": "quick",
           "prepare": {"corpus": "wiki1m", "size": 300, "nli": "simcse"},
           "train": {"methods": ["simcse", "paser"]},
           "methods": {"paser": {"eda": "sr+rd"}},                       # synonym replacement: WordNet
           "evaluate": {"baselines": ["cls"]},
           "transfer": {"models": ["base-cls"], "tasks": ["CR"]},
           "glue": {"models": ["base-cls"], "tasks": ["WNLI"]},
           "retrieval": {"models": [], "tasks": ["QQP"]}}


def _wiki() -> bytes:
    return b"".join(f"Sentence number {i} of the synthetic corpus is here.\n".encode() for i in range(1_000_000))


def _upstream_files() -> dict[str, bytes]:
    from sentlab.evaluate.suites.glue import GLUE_URL

    import io
    import tarfile

    members = {}
    with tarfile.open(fileobj=io.BytesIO(senteval_tar())) as t:
        for m in t.getmembers():
            members[m.name] = t.extractfile(m).read()
    for name, n in CR_COUNTS.items():
        members[f"downstream/CR/{name}"] = "".join(f"review {i} of {name} is fine .\n" for i in range(n)).encode()
    wnli = {f"WNLI/{s}.tsv": ("index\tsentence1\tsentence2\tlabel\n" + "".join(
        f"{i}\tA man {i} sits.\tA person {i} sits.\t{i % 2}\n" for i in range(20))).encode() for s in ("train", "dev")}
    nli = "sent0,sent1,hard_neg\n" + "".join(f"A man {i} runs.,A person {i} moves.,Nobody {i} moves.\n"
                                             for i in range(50))
    from urllib.parse import urlsplit

    return {f"{SIMCSE}/senteval.tar": tar_of(members), f"{SIMCSE}/wiki1m_for_simcse.txt": _wiki(),
            f"{SIMCSE}/nli_for_simcse.csv": nli.encode(), f"{urlsplit(GLUE_URL).path}/WNLI.zip": zip_of(wnli)}


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A workspace with profiles/quick.yaml and profiles/offline.yaml (:data:`PROFILE`), empty caches, no mirror,
    downloads on; NLTK's packages (stop words, the tagger, WordNet) already in its NLTK folder: NLTK's downloader
    refuses loopback hosts (its SSRF guard), and tests/test_downloads.py covers that download."""
    import nltk

    tagger = NLTK_DATA / "taggers" / "averaged_perceptron_tagger_eng.zip"
    if not tagger.is_file():
        pytest.skip(f"needs NLTK's averaged_perceptron_tagger_eng.zip at {tagger} (../shared/nltk_data)")
    ws = tmp_path / "ws"
    (ws / "profiles").mkdir(parents=True)
    shutil.copy(REPO / "profiles" / "quick.yaml", ws / "profiles" / "quick.yaml")
    (ws / "profiles" / "offline.yaml").write_text(yaml.safe_dump(PROFILE))
    nltk_dir = tmp_path / "nltk_data"
    for rel, data in (("corpora/stopwords.zip", stopwords_zip(WORDS)), ("corpora/wordnet.zip", wordnet_zip(WORDS)),
                      ("taggers/averaged_perceptron_tagger_eng.zip", tagger.read_bytes())):
        (nltk_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (nltk_dir / rel).write_bytes(data)
    for k in ("SENTLAB_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(k, "0")
    monkeypatch.delenv("SENTLAB_DATA_MIRROR", raising=False)
    monkeypatch.setenv("SENTLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("NLTK_DATA", str(nltk_dir))
    monkeypatch.setattr(nltk.data, "path", [str(nltk_dir)])
    return ws


def _sources_step_offline(ws: Path, monkeypatch) -> None:
    """What the ``sources`` stage reads of the profile (pipeline/sources.py's calls) and the NLTK resources its
    stages load, with downloads off and the upstream address pointing at a port nothing listens on."""
    from sentlab.augment.eda import EDA
    from sentlab.config import load_params
    from sentlab.nltk_resources import require_nltk
    from sentlab.pipeline.sources import (data_sources, glue_sources, model_sources, parse_sources,
                                          retrieval_sources, transfer_sources)

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for k in ("SENTLAB_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(k, "1")
    monkeypatch.setenv("SENTLAB_UPSTREAM", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    params = load_params(ws / "params.yaml", profile="offline")
    data = data_sources(params.prepare.corpus, params.prepare.nli)
    assert set(data) == {"senteval_sts", "sick", "wiki1m", "nli"} and data["nli"]["source"] == "simcse"
    parsed = parse_sources(params)
    assert len(parsed.sample.ids) == 300 and parsed.nli_source == "simcse" and parsed.nli_table.num_rows == 50
    assert model_sources(params.model.backbone)["files"]
    assert set(transfer_sources(params.transfer.tasks, params.transfer.models)) == {"senteval_cr"}
    glue = glue_sources(params.glue.tasks, params.glue.models)
    assert list(glue) == ["glue_wnli"] and "missing" not in glue["glue_wnli"]
    assert retrieval_sources(params.retrieval.tasks, params.retrieval.models) == {}
    for res in ("stopwords", "averaged_perceptron_tagger_eng", "wordnet"):
        require_nltk(res)
    assert EDA("sr+rd").synonyms is not None    # PaSeR's EDA with synonym replacement builds offline


def test_fetch_downloads_what_the_profile_reads_and_then_its_sources_run_offline(workspace, monkeypatch, capsys):
    from sentlab.cli import main

    files = _upstream_files()
    with serve() as up:
        monkeypatch.setenv("SENTLAB_UPSTREAM", up.url)
        monkeypatch.setenv("HF_ENDPOINT", up.url)       # a hub call never leaves the machine
        up.files.update(files)
        rc = main(["fetch", "--profile", "offline", "--params", str(workspace / "params.yaml")])
        served = sorted({p for p, _ in up.requests})
    out = capsys.readouterr().out
    assert rc == 0, out
    assert served == sorted(files)                       # each upstream file fetched, nothing else asked for
    cache = Path(workspace.parent / "cache")
    wiki = len(files[f"{SIMCSE}/wiki1m_for_simcse.txt"])
    lines = out.splitlines()
    assert lines[0] == "sentlab fetch --profile offline: 10 sources"
    row = next(x for x in lines if " wiki1m " in x)
    assert row.split()[0] == "fetched" and f"{wiki / 1e6:.1f} MB" in row
    assert str(cache / "wiki" / "wiki1m_for_simcse.txt") in row
    fetched = {x.split()[2] for x in lines[1:-1] if x.split()[0] == "fetched"}
    here = {x.split()[2] for x in lines[1:-1] if x.split()[0] == "here"}
    assert fetched == {"senteval_sts", "sick", "wiki1m", "nli", "senteval_cr", "WNLI"}
    assert here == {"stopwords", "averaged_perceptron_tagger_eng", "wordnet", "sentence-transformers/all-MiniLM-L6-v2"}
    assert "it needs no network now" in lines[-1]
    assert (cache / "wiki" / "wiki1m_for_simcse.txt").stat().st_size == wiki
    _sources_step_offline(workspace, monkeypatch)


def test_a_source_the_upstream_lacks_is_one_paragraph_and_the_others_are_fetched(workspace, monkeypatch, capsys):
    from sentlab.cli import main

    files = _upstream_files()
    del files[f"{SIMCSE}/nli_for_simcse.csv"]
    with serve() as up:
        monkeypatch.setenv("SENTLAB_UPSTREAM", up.url)
        monkeypatch.setenv("HF_ENDPOINT", up.url)
        up.files.update(files)
        rc = main(["fetch", "--profile", "offline", "--params", str(workspace / "params.yaml")])
    out, err = capsys.readouterr()
    assert rc == 2
    assert "needs no network" not in out
    paragraph = err.strip()
    assert "\n" not in paragraph and "1 of the 10 sources" in paragraph
    assert "data nli (prepare.nli: simcse)" in paragraph and "nli_for_simcse.csv" in paragraph
    assert (workspace.parent / "cache" / "wiki" / "wiki1m_for_simcse.txt").is_file()   # the others stay fetched
