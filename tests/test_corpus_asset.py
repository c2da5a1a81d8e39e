"""No silent sample (issue #54 §2): a profile's corpus is the asset it names; a smaller file fails unless the profile
states the exact smaller size; the 11,913-line sample never stands in for wiki1m; the report names the corpus."""

from __future__ import annotations

import hashlib
import json
import runpy
import shutil
from pathlib import Path

import pytest

from sentlab.assets import resolve as assets
from sentlab.config import validate
from sentlab.data.corpus import sample_corpus
from sentlab.errors import AssetMissingError, SentlabError
from sentlab.config.profile_files import profile_values

REPO = Path(__file__).resolve().parents[1]
HEAD_SHA256 = "626175d8bf7d77e323f6d74bed023563abe2123b1b7990ccfcd958880ea71f5b"   # the mirror's wiki/wiki1m_head.txt


@pytest.fixture
def sample_only(mirror, tmp_path, monkeypatch):
    """A mirror holding STS, SICK and only the sample of wiki1m (as ../shared/data does), and an empty cache."""
    m = tmp_path / "mirror"
    for d in ("STS", "SICK", "wiki"):
        shutil.copytree(mirror / d, m / d)
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(m))
    monkeypatch.setenv("SENTLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SENTLAB_OFFLINE", "1")
    return m


def test_the_sample_never_resolves_as_wiki1m(sample_only):
    with pytest.raises(AssetMissingError) as e:
        assets.resolve_data("wiki1m")
    msg = str(e.value)
    assert "'wiki1m'" in msg and "wiki1m_head" in msg and "never stands in" in msg and "\n" not in msg
    r = assets.resolve_data("wiki1m_head")
    assert r.path == sample_only / "wiki" / "wiki1m_head.txt" and "head" in r.note


def test_a_full_wiki1m_in_the_cache_wins_over_the_mirrors_sample(sample_only, tmp_path):
    full = tmp_path / "cache" / "wiki" / "wiki1m_for_simcse.txt"
    full.parent.mkdir(parents=True)
    full.write_text("one sentence .\nanother one .\n")
    r = assets.resolve_data("wiki1m")
    assert (r.source, r.path) == ("cache", full)


def test_a_smaller_corpus_fails_unless_its_exact_size_is_stated(tmp_path):
    f = tmp_path / "c.txt"
    f.write_text("a b\nc d\ne f\n")
    with pytest.raises(SentlabError, match=r"3 usable sentences.*prepare.accept_size: 3"):
        sample_corpus(f, size=10, seed=1)
    with pytest.raises(SentlabError, match="accept_size is 4, not 3"):
        sample_corpus(f, size=10, seed=1, accept_size=4)
    assert sample_corpus(f, size=10, seed=1, accept_size=3)[0] == [0, 1, 2]


def test_allow_smaller_is_refused_with_the_replacement_named():
    raw = profile_values("quick", REPO / "profiles")
    raw["prepare"]["allow_smaller"] = True
    with pytest.raises(SentlabError, match=r"allow_smaller.*accept_size"):
        validate(raw)


@pytest.mark.parametrize("profile", ["paper", "paper-lite"])
def test_the_paper_profiles_train_on_wiki1m_and_accept_no_smaller_file(profile):
    p = validate(profile_values(profile, REPO / "profiles")).prepare
    assert (p.corpus, p.size, p.accept_size) == ("wiki1m", 1_000_000, None)
    assert assets.ASSETS["wiki1m"].lines == 1_000_000
    assert all("head" not in alt for alt in assets.ASSETS["wiki1m"].alternatives + assets.ASSETS["wiki1m"].paths)


@pytest.mark.parametrize("size, digest", [  # computed with the code before #54 (wiki1m resolving to the sample)
    (11000, "2f954e17aa5832e6ef68532724758ec8d46188185ac92686aa22110b18af25fd"),   # quick
    (400, "55ad4126e28c7ae2673b7539750553402ea75e44c78b45900705260c0e06c943"),     # smoke
])
def test_quick_and_smoke_train_on_the_sample_as_before(mirror, monkeypatch, size, digest):
    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(mirror))
    for name in ("quick", "smoke"):
        assert validate(profile_values(name, REPO / "profiles")).prepare.corpus == "wiki1m_head"
    p = validate(profile_values("quick", REPO / "profiles")).prepare
    r = assets.resolve_data(p.corpus)
    ids, texts, _ = sample_corpus(r.path, size, 42, p.min_words, p.max_words, p.dedupe, p.accept_size)
    assert hashlib.sha256(json.dumps([ids, texts]).encode()).hexdigest() == digest


@pytest.mark.parametrize("script", ["prepare", "sources"])
def test_a_mirror_with_only_the_sample_stops_the_paper_profile_naming_wiki1m(sample_only, tmp_path, monkeypatch,
                                                                          capsys, script):
    from conftest import stage_workspace

    from sentlab.stages.entry import report_errors

    paper = profile_values("paper", REPO / "profiles")["prepare"]
    work = stage_workspace(tmp_path / "work", lambda r: r["prepare"].update({**paper, "nli": "none"}))
    monkeypatch.chdir(work)
    main = runpy.run_path(str(REPO / "pipeline" / f"{script}.py"), run_name=script)["main"]
    assert report_errors(main) == 2
    err = capsys.readouterr().err.strip()
    assert "'wiki1m'" in err and "wiki1m_head" in err and len(err.splitlines()) == 1
    assert not (work / "data").exists() or not any(p.is_file() for p in (work / "data").rglob("*"))


def test_the_report_names_the_corpus_in_its_first_lines(mirror, tmp_path, monkeypatch):
    from conftest import stage_workspace

    from sentlab.stages.entry import report_errors
    from sentlab.report.build import build_report

    monkeypatch.setenv("SENTLAB_DATA_MIRROR", str(mirror))
    monkeypatch.setenv("SENTLAB_OFFLINE", "1")
    work = stage_workspace(tmp_path / "work", lambda r: r["prepare"].update(size=50, nli="none"))
    monkeypatch.chdir(work)
    assert report_errors(runpy.run_path(str(REPO / "pipeline" / "prepare.py"), run_name="prepare")["main"]) == 0
    build_report(work, "tiny", "quick")
    first = (work / "reports" / "index.md").read_text().splitlines()[2]
    assert ("asset `wiki1m_head`" in first and "`wiki/wiki1m_head.txt`" in first and "11,913 lines" in first
            and HEAD_SHA256 in first and "50 sentences sampled" in first)


def test_the_paper_preflight_slices_on_the_sample_and_flags_wiki1m(sample_only):
    """The preflight (a few hundred sentences) may train on the sample; its prepare row says wiki1m is missing and
    how to fetch it; with wiki1m here it uses wiki1m."""
    from sentlab.preflight.standins import corpus_shortfall, corpus_standin

    real = validate(profile_values("paper", REPO / "profiles"))
    assert corpus_standin(real) == "wiki1m_head"
    asset, fetch = corpus_shortfall(real, "wiki1m_head")
    assert asset.startswith("wiki1m (only ") and "11,913-line sample" in asset and "wiki1m_for_simcse.txt" in fetch
    full = sample_only / "wiki" / "wiki1m_for_simcse.txt"
    full.write_text("a b\n")
    assert corpus_standin(real) is None and corpus_shortfall(real, None) is None
