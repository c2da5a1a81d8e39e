"""The synthetic upstream of the dress rehearsal (issue #54 §8): files in the real upstream formats and layout, made
here, served by :mod:`upstream` (one module for ``tests/test_rehearsal.py`` and ``benchmarks/rehearsal.py``).

What :func:`populate` puts on the server (paths as the real hosts have them, so ``SENTLAB_UPSTREAM`` reaches them):

- SimCSE's ``wiki1m_for_simcse.txt``: exactly 1,000,000 lines (the download refuses another count,
  ``sentlab.assets.download.EXPECTED_LINES``), each a sentence of 4-12 words drawn (seeded) from the vocabulary of the
  mirror's head sample ``/work/shared/data/wiki/wiki1m_head.txt`` (its words, never its lines);
- SimCSE's ``nli_for_simcse.csv``: the header ``sent0,sent1,hard_neg`` and synthetic triples;
- SimCSE's ``senteval.tar``: ``downstream/STS/...`` (STS12-16 every subset, STS-B's three splits) and
  ``downstream/SICK/...`` in SentEval's formats, ``pairs`` scored pairs a file, made of the same vocabulary;
- SentEval's transfer tasks in the same tar (the release's record counts, which the loader checks), GLUE's
  per-task zips, Quora's QQP tsv, AskUbuntu's two files, GloVe's zip (its 300-d text format, the vocabulary's words);
- NLTK's index (``/nltk_data/gh-pages/index.xml`` at the path of NLTK's default index URL) naming packages on this
  server: ``stopwords`` (its zip layout ``stopwords/english``) and ``wordnet`` (:func:`wordnet_zip`) generated
  here; the tagger and treebank packages are
  the bytes of ``/work/shared/nltk_data``'s zips (a perceptron's weights cannot be made up and still tag).

:func:`hf_cache_standins` puts tiny hub-shaped stand-ins (``sentlab standin`` with small dims: the real
architecture, key names and tokenizer files) into a Hugging Face cache in the hub's cache layout
(``models--<id>/refs/main``, ``snapshots/<rev>/``; roberta-base's stand-in BPE learns on the text of
``/work/shared/data``, as ``sentlab standin`` does), which :func:`sentlab.assets.resolve.resolve_model` reads through
``huggingface_hub.snapshot_download``; they are not served over HTTP.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import random
import re
from pathlib import Path

from upstream import SIMCSE, tar_of, zip_of

SHARED = Path("/work/shared")
NLTK_INDEX = "/nltk/nltk_data/gh-pages/index.xml"   # the path of nltk.downloader.Downloader.DEFAULT_URL
NLTK_PACKAGES = "/nltk/nltk_data/gh-pages/packages"
WIKI_LINES = 1_000_000
# the tiny dims of the backbones' stand-ins (every other config key is the hub's)
TINY = {"bert": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64},
        "roberta": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64},
        "distilbert": {"dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 64}}


def vocabulary(limit: int = 5000) -> list[str]:
    """The ``limit`` most frequent lower-case words of the mirror's head sample, most frequent first."""
    from collections import Counter

    text = (SHARED / "data" / "wiki" / "wiki1m_head.txt").read_text(encoding="utf-8")
    counts = Counter(re.findall(r"[a-z]{2,12}", text.lower()))
    return [w for w, _ in counts.most_common(limit)]


def sentences(n: int, seed: int, words: list[str]) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(words, k=rng.randint(4, 12))).capitalize() + "." for _ in range(n)]


def wiki1m(words: list[str], lines: int = WIKI_LINES) -> bytes:
    return ("\n".join(sentences(lines, 1, words)) + "\n").encode()


def nli_csv(words: list[str], rows: int = 2000) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["sent0", "sent1", "hard_neg"])
    s = sentences(3 * rows, 2, words)
    for i in range(rows):
        w.writerow(s[3 * i: 3 * i + 3])
    return buf.getvalue().encode()


def senteval_tar(words: list[str], pairs: int = 60) -> bytes:
    """SentEval's ``senteval.tar`` (``downstream/STS/…``, ``downstream/SICK/…``) with ``pairs`` pairs a file."""
    from sentlab.assets.resolve import ASSETS

    rng = random.Random(3)
    files = {}
    for k, rel in enumerate(ASSETS["senteval_sts"].paths + ASSETS["sick"].paths):
        s = sentences(2 * pairs, 100 + k, words)
        a, b = s[::2], s[1::2]
        scores = [round(rng.uniform(0, 5), 3) for _ in range(pairs)]
        if "/STS.gs." in rel:
            data = "".join(f"{x}\n" for x in scores)
        elif "/STS.input." in rel:
            data = "".join(f"{x}\t{y}\n" for x, y in zip(a, b))
        elif rel.endswith(".csv"):   # STS-B: genre, file, year, id, score, s1, s2
            data = "".join(f"main-captions\tMSRvid\t2012test\t{i:04d}\t{sc:.3f}\t{x}\t{y}\n"
                           for i, (sc, x, y) in enumerate(zip(scores, a, b)))
        else:   # SICK
            labels = ("ENTAILMENT", "NEUTRAL", "CONTRADICTION")
            data = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n" + "".join(
                f"{i + 1}\t{x}\t{y}\t{1 + sc * 0.8:.1f}\t{labels[i % 3]}\n"
                for i, (sc, x, y) in enumerate(zip(scores, a, b)))
        files[f"downstream/{rel}"] = data.encode()
    files.update(transfer_files(words))
    return tar_of(files)


def transfer_files(words: list[str]) -> dict[str, bytes]:
    """SentEval's transfer tasks (``downstream/MR/rt-polarity.pos``, …) with the release's record counts
    (:data:`sentlab.evaluate.suites.transfer_data.LAYOUT`: the loader checks them) in each file's format."""
    from sentlab.evaluate.suites.transfer_data import LAYOUT, TREC_CLASSES

    files = {}
    for k, (task, (folder, counts)) in enumerate(sorted(LAYOUT.items())):
        for j, (name, n) in enumerate(counts.items()):
            s = sentences(2 * n, 1000 + 10 * k + j, words)
            if task == "SST2":
                lines = [f"{x}\t{i % 2}" for i, x in enumerate(s[:n])]
            elif task == "TREC":
                coarse = sorted(TREC_CLASSES)
                lines = [f"{coarse[i % len(coarse)]}:other {x}" for i, x in enumerate(s[:n])]
            elif task == "MRPC":
                lines = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"] + [
                    f"{i % 2}\t{2 * i}\t{2 * i + 1}\t{s[2 * i]}\t{s[2 * i + 1]}" for i in range(n)]
            else:
                lines = s[:n]
            files[f"downstream/{folder}/{name}"] = ("\n".join(lines) + "\n").encode()
    return files


GLUE_HEADERS = {"WNLI": ["index", "sentence1", "sentence2", "label"],
                "QNLI": ["index", "question", "sentence", "label"],
                "QQP": ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
                "SST-2": ["sentence", "label"],
                "STS-B": ["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1",
                          "sentence2", "score"]}


def glue_zip(task: str, words: list[str], rows: int = 200) -> bytes:
    """GLUE's ``<TASK>.zip`` (``<TASK>/train.tsv``, ``dev.tsv``: a header row, tab-separated, no quoting)."""
    head = GLUE_HEADERS[task]
    files = {}
    for j, split in enumerate(("train", "dev")):
        s = sentences(2 * rows, 2000 + 10 * sorted(GLUE_HEADERS).index(task) + j, words)
        out = ["\t".join(head)]
        for i in range(rows):
            a, b = s[2 * i], s[2 * i + 1]
            label = ("entailment", "not_entailment")[i % 2] if task == "QNLI" else str(i % 2)
            row = {"index": str(i), "id": str(i), "qid1": str(2 * i), "qid2": str(2 * i + 1), "sentence1": a,
                   "sentence2": b, "question": a, "sentence": a if task == "SST-2" else b, "question1": a,
                   "question2": b, "label": label, "is_duplicate": str(i % 2), "genre": "main-captions",
                   "filename": "MSRvid", "year": "2012test", "old_index": str(i), "source1": "none",
                   "source2": "none", "score": f"{(i * 7) % 50 / 10:.3f}"}
            out.append("\t".join(row[c] for c in head))
        files[f"{task}/{split}.tsv"] = ("\n".join(out) + "\n").encode()
    return zip_of(files)


def qqp_tsv(words: list[str], rows: int = 400) -> bytes:
    """Quora's ``quora_duplicate_questions.tsv`` (``id qid1 qid2 question1 question2 is_duplicate``)."""
    s = sentences(rows + 1, 3000, words)
    out = ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate"]
    for i in range(rows):   # question i+1 duplicates question i on every other row
        out.append(f"{i}\t{i}\t{i + 1}\t{s[i]}\t{s[i + 1]}\t{i % 2}")
    return ("\n".join(out) + "\n").encode()


def askubuntu(words: list[str], queries: int = 20, pool: int = 200) -> tuple[bytes, bytes]:
    """``text_tokenized.txt.gz`` (``id TAB title TAB body``) and ``test.txt`` (``qid TAB similar ids TAB 20
    candidate ids TAB bm25 scores``) of taolei87/askubuntu."""
    import gzip

    s = sentences(2 * pool, 4000, words)
    text = "".join(f"{i}\t{s[2 * i]}\t{s[2 * i + 1]}\n" for i in range(pool))
    rng = random.Random(5)
    test = []
    for q in range(queries):
        cands = rng.sample([i for i in range(pool) if i != q], 20)
        test.append(f"{q}\t{' '.join(map(str, cands[:2]))}\t{' '.join(map(str, cands))}\t"
                    + " ".join(f"{rng.uniform(0, 50):.2f}" for _ in cands))
    return gzip.compress(text.encode(), mtime=0), ("\n".join(test) + "\n").encode()


def glove_zip(words: list[str], dim: int = 300) -> bytes:
    """GloVe's ``glove.840B.300d.zip``: ``glove.840B.300d.txt``, ``word v1 … v300`` a line (seeded values)."""
    rng = random.Random(6)
    lines = [w + " " + " ".join(f"{rng.gauss(0, 0.4):.4f}" for _ in range(dim)) for w in words + ["."]]
    return zip_of({"glove.840B.300d.txt": ("\n".join(lines) + "\n").encode()})


def stopwords_zip(words: list[str]) -> bytes:
    return zip_of({"stopwords/english": ("\n".join(words[:50]) + "\n").encode(),
                   "stopwords/README": b"synthetic stop word list (sentlab rehearsal)\n"})


def nltk_index(url: str, packages: dict[str, tuple[str, bytes]]) -> bytes:
    """NLTK's ``index.xml`` listing ``packages`` ({id: (subdir, zip bytes)}) at ``url``'s packages folder."""
    rows = []
    for pid, (subdir, data) in packages.items():
        rows.append(f'<package id="{pid}" name="{pid}" subdir="{subdir}" unzip="0" size="{len(data)}" '
                    f'unzipped_size="{len(data)}" checksum="{hashlib.md5(data).hexdigest()}" '  # noqa: S324 - NLTK's
                    f'url="{url}{NLTK_PACKAGES}/{subdir}/{pid}.zip" />')
    return ('<?xml version="1.0"?>\n<nltk_data>\n<packages>\n' + "\n".join(rows)
            + "\n</packages>\n<collections>\n</collections>\n</nltk_data>\n").encode()


def populate(up, *, wiki_lines: int = WIKI_LINES, pairs: int = 60) -> dict:
    """Fill the running :class:`upstream.Upstream` ``up`` (see the module docstring); returns
    {"wiki1m_sha256": ..., "wiki1m_lines": ..., "paths": [...]}."""
    words = vocabulary()
    wiki = wiki1m(words, wiki_lines)
    up.files[f"{SIMCSE}/wiki1m_for_simcse.txt"] = wiki
    up.files[f"{SIMCSE}/nli_for_simcse.csv"] = nli_csv(words)
    up.files[f"{SIMCSE}/senteval.tar"] = senteval_tar(words, pairs)
    from urllib.parse import urlsplit

    from sentlab.assets.resolve import GLOVE_URL
    from sentlab.evaluate.suites.glue import GLUE_URL, TASKS
    from sentlab.evaluate.suites.retrieval import assets as _registered   # noqa: F401 - registers qqp / askubuntu_*
    from sentlab.assets.resolve import ASSETS

    for task, (folder, _, _) in TASKS.items():
        up.files[f"{urlsplit(GLUE_URL).path}/{folder}.zip"] = glue_zip(task, words)
    up.files[urlsplit(ASSETS["qqp"].url).path] = qqp_tsv(words)
    text, test = askubuntu(words)
    up.files[urlsplit(ASSETS["askubuntu_text"].url).path] = text
    up.files[urlsplit(ASSETS["askubuntu_test"].url).path] = test
    up.files[urlsplit(GLOVE_URL).path] = glove_zip(words)
    packages = {"stopwords": ("corpora", stopwords_zip(words)), "wordnet": ("corpora", wordnet_zip(words))}
    for subdir, pid in (("taggers", "averaged_perceptron_tagger_eng"), ("corpora", "treebank")):
        src = SHARED / "nltk_data" / subdir / f"{pid}.zip"
        if src.is_file():
            packages[pid] = (subdir, src.read_bytes())
    for pid, (subdir, data) in packages.items():
        up.files[f"{NLTK_PACKAGES}/{subdir}/{pid}.zip"] = data
    up.files[NLTK_INDEX] = nltk_index(up.url, packages)
    return {"wiki1m_sha256": hashlib.sha256(wiki).hexdigest(), "wiki1m_lines": wiki_lines,
            "paths": sorted(up.files)}


def install_nltk(up, nltk_data: Path) -> list[Path]:
    """The upstream's NLTK packages unpacked-as-zips into ``nltk_data`` (``<subdir>/<id>.zip``, where NLTK looks).
    Not through NLTK's downloader: NLTK 3.10's SSRF filter (``nltk.pathsec.validate_network_url``) refuses every
    loopback address, so its downloader cannot be pointed at a server on 127.0.0.1 without switching that filter
    off; :func:`sentlab.assets.nltk_resources.require_nltk` then finds them present."""
    out = []
    for path, data in up.files.items():
        if path.startswith(NLTK_PACKAGES + "/"):
            dest = Path(nltk_data) / path[len(NLTK_PACKAGES) + 1:]
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            out.append(dest)
    return out


@contextlib.contextmanager
def _env(**values):
    import os

    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def hf_cache_standins(cache: Path, hub_ids, *, tiny: bool = True, layers: int = 2) -> list[Path]:
    """Tiny hub-shaped stand-ins of ``hub_ids`` in the Hugging Face cache ``cache`` (``HF_HUB_CACHE``): each
    written by :func:`sentlab.backbones.standin.write_standin` (dims :data:`TINY`, ``layers`` transformer layers),
    then laid out as the hub's cache (``models--<id>/snapshots/<rev>/`` and ``refs/main``)."""
    import shutil

    from sentlab.backbones import spec
    from sentlab.backbones.standin import write_standin

    out = []
    for hub_id in hub_ids:
        model_type = spec(hub_id)["config"]["model_type"]
        repo = Path(cache) / ("models--" + hub_id.replace("/", "--"))
        rev = hashlib.sha1(hub_id.encode()).hexdigest()   # noqa: S324 - a revision name, as the hub's
        snap = repo / "snapshots" / rev
        if snap.is_dir():
            out.append(snap)
            continue
        tmp = repo / "tmp-standin"
        shutil.rmtree(tmp, ignore_errors=True)
        with _env(SENTLAB_DATA_MIRROR=str(SHARED / "data"), SENTLAB_OFFLINE="1"):   # roberta's BPE learns its text
            depth = {"n_layers" if model_type == "distilbert" else "num_hidden_layers": layers}
            write_standin(hub_id, tmp, config={**TINY[model_type], **depth} if tiny else None)
        snap.parent.mkdir(parents=True, exist_ok=True)
        tmp.rename(snap)
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text(rev)
        out.append(snap)
    return out


# --- the rehearsal's workdir: a scratch copy, its profile, its environment --------------------------------------
PROFILE = "rehearsal"


def rehearsal_profile(values: dict, base: str, slice_overrides: dict | None = None) -> str:
    """The rehearsal's profile file: ``extends: base`` and the preflight's slice of ``values`` (the values of
    ``base``: :func:`sentlab.preflight.slice_edits`, a few steps, small batches and pair counts, each method line's
    own caps, GLUE one seed) and nothing else."""
    import yaml

    from sentlab.preflight import SLICE, slice_edits

    edits = slice_edits(values, {**SLICE, **(slice_overrides or {})}, device="cpu")
    return (f"# the dress rehearsal's profile (benchmarks/rehearsal.py, issue #54 §8): {base} on a CPU slice\n"
            f"# runtime.device: cpu, stated: {base} asks for cuda, the stand-ins train on the CPU on purpose\n"
            + yaml.safe_dump({"extends": base, **edits}, sort_keys=False, width=120))


def workdir_env(scratch: Path, upstream_url: str) -> dict:
    """The stages' environment: every download through the upstream (``SENTLAB_UPSTREAM``; ``HF_ENDPOINT`` too, so a
    hub call never leaves the machine), caches in the scratch folder, NLTK's folder empty, no mirror, online."""
    from sentlab.preflight.scratch import scratch_env

    env = scratch_env(scratch)
    for key in ("SENTLAB_DATA_MIRROR", "SENTLAB_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
                "SENTLAB_PARENT_RUN_ID"):
        env.pop(key, None)
    env.update(SENTLAB_UPSTREAM=upstream_url, HF_ENDPOINT=upstream_url,
               SENTLAB_CACHE=str(scratch / ".cache" / "sentlab"), HF_HOME=str(scratch / ".cache" / "hf"),
               HF_HUB_CACHE=str(scratch / ".cache" / "hf" / "hub"), NLTK_DATA=str(scratch / ".cache" / "nltk_data"),
               HF_HUB_DISABLE_TELEMETRY="1", SENTLAB_SHARED=str(scratch / ".no-shared"),
               PYTHONUNBUFFERED="1")   # dvc's "Running stage" lines as they happen (the stage table's times)
    return env


def prepare_workdir(workspace: Path, scratch: Path, up, *, base: str = "paper-lite",
                    hub_ids=None, slice_overrides: dict | None = None) -> dict:
    """The scratch copy of ``workspace`` (:func:`sentlab.preflight.scratch.make_scratch`) with
    ``profiles/rehearsal.yaml``, the backbones' stand-ins in its HF cache, the NLTK packages of the upstream ``up``
    in its NLTK folder (:func:`install_nltk`); returns the stages' environment."""
    from sentlab.config import validate
    from sentlab.preflight.scratch import make_scratch
    from sentlab.config.profile_files import profile_values

    make_scratch(workspace, scratch)
    values = profile_values(base, scratch / "profiles")
    (scratch / "profiles" / f"{PROFILE}.yaml").write_text(rehearsal_profile(values, base, slice_overrides))
    env = workdir_env(scratch, up.url)
    install_nltk(up, Path(env["NLTK_DATA"]))
    if hub_ids is None:
        from sentlab.preflight.standins import method_hub_models

        real = validate(values, source=base)
        hub_ids = sorted({real.model.backbone, *method_hub_models(real)})
    hf_cache_standins(Path(env["HF_HUB_CACHE"]), hub_ids, layers=deepest_layers(values))
    return env


def deepest_layers(values: dict, floor: int = 2) -> int:
    """The most encoder layers any model the profile trains asks for (a ``layers`` key in its method line or its
    own block: L2P-CSR's perturbed layers, e.g. the paper profile's ``l2p_layers_6`` ablation), at least
    ``floor``: the stand-ins' depth."""
    from sentlab.config import validate
    from sentlab.stages.stage_list import models_for

    def scan(block) -> int:
        if isinstance(block, dict):
            own = [v for k, v in block.items() if k == "layers" and type(v) is int]
            return max([floor, *own, *(scan(v) for v in block.values())])
        return floor

    def at(path: str):
        block = values
        for key in path.split("."):
            block = block.get(key, {}) if isinstance(block, dict) else {}
        return block

    return max([floor, *(scan(at(key)) for e in models_for(validate(values)).values() for key in (e.line, e.own))])



def wordnet_zip(words: list[str]) -> bytes:
    """NLTK's ``wordnet.zip`` in WordNet 3.0's database format (``wordnet/lexnames``, ``index.<pos>``,
    ``data.<pos>`` with each synset at its byte offset, ``<pos>.exc``): synsets of two words of the vocabulary each,
    so EDA's synonym replacement finds synonyms."""
    header = "  1 WordNet 3.0 Copyright 2006 by Princeton University.  All rights reserved. (synthetic)\n"
    files = {"wordnet/lexnames": b"00\tadj.all\t3\n01\tadj.pert\t3\n02\tadv.all\t4\n03\tnoun.Tops\t1\n"
                                 b"04\tnoun.act\t1\n05\tnoun.animal\t1\n"}
    sense = []
    for k, (pos, name, lexfile) in enumerate((("n", "noun", 3), ("v", "verb", 0), ("a", "adj", 0),
                                              ("r", "adv", 2))):
        pool = words[200 + 400 * k: 600 + 400 * k]
        data, offsets = header, {}
        for i in range(0, len(pool) - 1, 2):
            off = len(data.encode())
            data += f"{off:08d} {lexfile:02d} {pos} 02 {pool[i]} 0 {pool[i + 1]} 0 000 | synthetic sense  \n"
            for w in pool[i:i + 2]:
                offsets[w] = off
        index = header + "".join(f"{w} {pos} 1 0 1 0 {off:08d}  \n" for w, off in sorted(offsets.items()))
        files[f"wordnet/data.{name}"] = data.encode()
        files[f"wordnet/index.{name}"] = index.encode()
        files[f"wordnet/{name}.exc"] = b""
        sense += [f"{w}%{k + 1}:{lexfile:02d}:00:: {off:08d} 1 0\n" for w, off in offsets.items()]
    files["wordnet/index.sense"] = "".join(sorted(sense)).encode()
    return zip_of(files)
