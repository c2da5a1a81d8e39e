"""``sentlab fetch --profile P`` against the local upstream (tests/upstream.py on 127.0.0.1, issue #65 §6; the
hub's API too, ``HF_ENDPOINT``): in a scratch copy of the repository, with empty caches and no mirror, it downloads
what the profile's stages read into the places they read them from and says what, with sizes; afterwards the
profile's ``sources`` stage (pipeline/sources.py) and PaSeR's EDA run with downloads off (``SENTLAB_OFFLINE=1
HF_HUB_OFFLINE=1``) and nothing listening at the upstream's address. A source the upstream does not have is one
paragraph, exit 2, and no "needs no network" line. Both commands run as processes of their own, as on a login node
and a compute node (huggingface_hub reads HF_ENDPOINT and HF_HUB_OFFLINE when it is imported)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import NLTK_DATA
from synthetic_upstream import stopwords_zip, wordnet_zip
from upstream import SIMCSE, senteval_tar, serve, tar_of, zip_of

HUB_ID = "sentlab-test/tiny-bert"
# what a hub repository holds besides what transformers loads: never downloaded (sentlab.assets.download.hub_patterns)
OTHER_FORMATS = ("pytorch_model.bin", "tf_model.h5", "flax_model.msgpack", "onnx/model.onnx", "rust_model.ot")

REPO = Path(__file__).resolve().parents[1]
WORDS = [f"w{chr(97 + i)}{chr(97 + j)}" for i in range(26) for j in range(26)]   # 676 made-up words
CR_COUNTS = {"custrev.pos": 2407, "custrev.neg": 1368}   # SentEval's CR (the loader checks the record counts)
PROFILE = {"extends": "quick", "model": {"backbone": HUB_ID},
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


def _hub_files() -> dict[str, bytes]:
    import torch
    from safetensors.torch import save

    files = {"config.json": json.dumps({"model_type": "bert", "hidden_size": 8, "num_hidden_layers": 1,
                                        "num_attention_heads": 1, "intermediate_size": 16,
                                        "vocab_size": 600}).encode(),
             "tokenizer_config.json": b'{"do_lower_case": true}', "vocab.txt": b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n"
             b"[MASK]\nthe\n", "model.safetensors": save({"embeddings.word_embeddings.weight": torch.zeros(600, 8)})}
    return {**files, **{f: b"another weight format\n" * 1000 for f in OTHER_FORMATS}}


@pytest.fixture
def workspace(tmp_path):
    """A scratch copy of the repository (sentlab.preflight.scratch) with profiles/offline.yaml (:data:`PROFILE`);
    its environment: empty caches, no mirror, downloads on; NLTK's packages (stop words, the tagger, WordNet)
    already in its NLTK folder: NLTK's downloader refuses loopback hosts (its SSRF guard), and
    tests/test_downloads.py covers that download."""
    from sentlab.preflight.scratch import make_scratch, scratch_env

    tagger = NLTK_DATA / "taggers" / "averaged_perceptron_tagger_eng.zip"
    if not tagger.is_file():
        pytest.skip(f"needs NLTK's averaged_perceptron_tagger_eng.zip at {tagger} (../shared/nltk_data)")
    ws = make_scratch(REPO, tmp_path / "ws")
    (ws / "profiles" / "offline.yaml").write_text(yaml.safe_dump(PROFILE))
    nltk_dir = tmp_path / "nltk_data"
    for rel, data in (("corpora/stopwords.zip", stopwords_zip(WORDS)), ("corpora/wordnet.zip", wordnet_zip(WORDS)),
                      ("taggers/averaged_perceptron_tagger_eng.zip", tagger.read_bytes())):
        (nltk_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (nltk_dir / rel).write_bytes(data)
    env = scratch_env(ws)
    for k in ("SENTLAB_DATA_MIRROR", "TRANSFORMERS_OFFLINE", "SENTLAB_PARENT_RUN_ID"):
        env.pop(k, None)
    env.update(SENTLAB_OFFLINE="0", HF_HUB_OFFLINE="0", SENTLAB_CACHE=str(tmp_path / "cache"),
               HF_HOME=str(tmp_path / "hf"), HF_HUB_CACHE=str(tmp_path / "hf" / "hub"), NLTK_DATA=str(nltk_dir),
               HF_HUB_DISABLE_TELEMETRY="1", PYTHONPATH=str(ws / "src"))
    return ws, env


def _run(ws: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ws, env=env, capture_output=True, text=True, timeout=600)


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_fetch_downloads_what_the_profile_reads_and_then_its_sources_stage_runs_offline(workspace):
    ws, env = workspace
    files, hub = _upstream_files(), _hub_files()
    with serve() as up:
        up.files.update(files)
        commit = up.hub_repo(HUB_ID, hub)
        fetch = _run(ws, {**env, "SENTLAB_UPSTREAM": up.url, "HF_ENDPOINT": up.url},
                     "-m", "sentlab.cli", "fetch", "--profile", "offline")
        served = sorted({p for p, rng in up.requests if rng != "HEAD"})
    assert fetch.returncode == 0, fetch.stderr
    # the hub: only the files transformers loads, never the other weight formats; the data files: each once
    assert {p for p in served if p.startswith(f"/{HUB_ID}/")} == {f"/{HUB_ID}/resolve/{commit}/{f}"
                                                               for f in hub if f not in OTHER_FORMATS}
    assert {p for p in served if not p.startswith((f"/{HUB_ID}/", "/api/"))} == set(files)
    cache = ws.parent / "cache"
    wiki = len(files[f"{SIMCSE}/wiki1m_for_simcse.txt"])
    lines = fetch.stdout.splitlines()
    assert lines[0] == "sentlab fetch --profile offline: 10 sources"
    row = next(x for x in lines if " wiki1m " in x)
    assert row.split()[0] == "fetched" and f"{wiki / 1e6:.1f} MB" in row
    assert str(cache / "wiki" / "wiki1m_for_simcse.txt") in row
    fetched = {x.split()[2] for x in lines[1:-1] if x.split()[0] == "fetched"}
    here = {x.split()[2] for x in lines[1:-1] if x.split()[0] == "here"}
    assert fetched == {"senteval_sts", "sick", "wiki1m", "nli", HUB_ID, "senteval_cr", "WNLI"}
    assert here == {"stopwords", "averaged_perceptron_tagger_eng", "wordnet"}
    hub_row = next(x for x in lines if f" {HUB_ID} " in x)
    hub_bytes = sum(len(b) for f, b in hub.items() if f not in OTHER_FORMATS)
    assert f"{hub_bytes / 1e3:.1f} KB" in hub_row and str(ws.parent / "hf" / "hub") in hub_row
    assert "it needs no network now" in lines[-1]

    # the compute node: downloads off, nothing listening where the upstream was
    dead = f"http://127.0.0.1:{_dead_port()}"
    offline = {**env, "SENTLAB_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "SENTLAB_UPSTREAM": dead, "HF_ENDPOINT": dead}
    for args in (("-m", "sentlab.cli", "profile", "offline"), ("pipeline/sources.py",)):
        r = _run(ws, offline, *args)
        assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads((ws / "data" / "sources" / "data.json").read_text())["files"]
    assert set(data) == {"senteval_sts", "sick", "wiki1m", "nli"} and data["nli"]["source"] == "simcse"
    model = json.loads((ws / "data" / "sources" / "model.json").read_text())
    assert model["backbone"] == HUB_ID and set(model["files"]) == {f for f in hub if f not in OTHER_FORMATS}
    assert list(json.loads((ws / "data" / "sources" / "transfer.json").read_text())) == ["senteval_cr"]
    glue = json.loads((ws / "data" / "sources" / "glue.json").read_text())
    assert list(glue) == ["glue_wnli"] and "missing" not in glue["glue_wnli"]
    eda = _run(ws, offline, "-c", "from sentlab.augment.eda import EDA; from sentlab.assets.nltk_resources import "
               "require_nltk; require_nltk('averaged_perceptron_tagger_eng'); print(EDA('sr+rd').synonyms.__name__)")
    assert eda.returncode == 0 and eda.stdout.strip() == "wordnet_synonyms", eda.stderr


def test_a_source_the_upstream_lacks_is_one_paragraph_and_the_others_are_fetched(workspace):
    ws, env = workspace
    files = _upstream_files()
    del files[f"{SIMCSE}/nli_for_simcse.csv"]
    with serve() as up:
        up.files.update(files)
        up.hub_repo(HUB_ID, _hub_files())
        r = _run(ws, {**env, "SENTLAB_UPSTREAM": up.url, "HF_ENDPOINT": up.url},
                 "-m", "sentlab.cli", "fetch", "--profile", "offline")
    assert r.returncode == 2
    assert "needs no network" not in r.stdout
    errors = [x for x in r.stderr.splitlines() if x.startswith("sentlab: error: ")]   # beside the progress bars
    assert len(errors) == 1 and "1 of the 10 sources" in errors[0]
    paragraph = errors[0]
    assert "data nli (prepare.nli: simcse)" in paragraph and "nli_for_simcse.csv" in paragraph
    assert (ws.parent / "cache" / "wiki" / "wiki1m_for_simcse.txt").is_file()   # the others stay fetched


def test_the_paper_profiles_sources_are_what_its_stages_read():
    """paper: SimCSE's corpus and NLI triples, the GloVe baseline, every suite's data; bert-base-uncased and the models
    the lines load besides it (POS/BOW's roberta-base, DiffCSE's generator); WordNet for PaSeR's synonym replacement,
    the stop words and tagger of the annotate stage."""
    from sentlab.config.profile_files import profile_values
    from sentlab.preflight.fetch import profile_needs

    needs = {(n.kind, n.name) for n in profile_needs(profile_values("paper", REPO / "profiles"))}
    assert {(k, n) for k, n in needs if k in ("hub", "nltk")} == {
        ("hub", "bert-base-uncased"), ("hub", "roberta-base"), ("hub", "distilbert-base-uncased"),
        ("nltk", "stopwords"), ("nltk", "averaged_perceptron_tagger_eng"), ("nltk", "wordnet")}
    assert {n for k, n in needs if k == "data"} == {
        "senteval_sts", "sick", "wiki1m", "nli", "glove", "qqp", "askubuntu_text", "askubuntu_test",
        *(f"senteval_{t}" for t in ("mr", "cr", "subj", "mpqa", "sst2", "trec", "mrpc"))}
    assert {n for k, n in needs if k == "glue"} == {"WNLI", "QNLI", "QQP", "SST-2", "STS-B"}
