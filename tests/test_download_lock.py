"""Concurrent fetchers of one missing file (issue #65 §6): PaSeR's chains each build EDA, which loads WordNet
(:func:`sentlab.assets.nltk_resources.require_nltk`), and under ``sentlab run --jobs N`` several run at once; two stages
can
miss the same data file. With :func:`sentlab.assets.download.download_lock` the file is fetched once, and no caller
reads a
copy another is still writing or unpacking."""

from __future__ import annotations

import threading
import time
import zipfile

from upstream import SIMCSE, senteval_tar, serve

WORDNET = {f"wordnet/{name}": f"{name} of a stand-in WordNet\n".encode()
           for name in ("lexnames", "data.noun", "index.noun", "noun.exc", "data.verb", "index.verb", "verb.exc",
                        "data.adj", "index.adj", "adj.exc", "data.adv", "index.adv", "adv.exc", "index.sense")}


def test_two_concurrent_wordnet_fetchers_download_once_and_neither_reads_a_half_unpacked_copy(tmp_path, monkeypatch):
    """The fake downloader does what NLTK 3.10's does (nltk/downloader.py ``_download_package``): the archive renamed
    into place whole, then, when run as root or into a folder outside the home (a cluster's shared NLTK_DATA),
    unpacked into ``corpora/wordnet/`` member by member, which NLTK finds before the archive. Without a lock the
    second caller found the archive, returned at once and read the half-unpacked folder; both could download."""
    import nltk
    import nltk.downloader

    from sentlab.assets.nltk_resources import require_nltk

    target = tmp_path / "nltk_data"
    monkeypatch.setenv("NLTK_DATA", str(target))
    for k in ("SENTLAB_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(k, "0")
    monkeypatch.setattr(nltk.data, "path", [str(target)])
    downloads, archive_in_place = [], threading.Event()

    class SlowDownloader:
        DEFAULT_URL = nltk.downloader.Downloader.DEFAULT_URL

        def __init__(self, server_index_url=None):
            pass

        def download(self, resource, download_dir, quiet=True, raise_on_error=True):
            downloads.append(resource)
            corpora = target / "corpora"
            corpora.mkdir(parents=True, exist_ok=True)
            with zipfile.ZipFile(corpora / "wordnet.zip.tmp", "w") as z:
                for name, data in WORDNET.items():
                    z.writestr(name, data)
            (corpora / "wordnet.zip.tmp").replace(corpora / "wordnet.zip")
            archive_in_place.set()
            for name, data in WORDNET.items():       # unpacked after, one member at a time
                (corpora / name).parent.mkdir(exist_ok=True)
                (corpora / name).write_bytes(data)
                time.sleep(0.02)
            return True

    monkeypatch.setattr(nltk.downloader, "Downloader", SlowDownloader)
    seen, errors = {}, []

    def fetcher(key, wait):
        try:
            if wait:
                assert archive_in_place.wait(10)
            require_nltk("wordnet")
            seen[key] = sorted(p.name for p in (target / "corpora" / "wordnet").iterdir())
        except BaseException as e:   # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=fetcher, args=("first", False)),
               threading.Thread(target=fetcher, args=("second", True))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    whole = sorted(name.split("/")[1] for name in WORDNET)
    assert seen == {"first": whole, "second": whole}     # the second waited until the folder was whole
    assert downloads == ["wordnet"]                       # fetched once


def test_two_concurrent_fetchers_of_one_tar_download_it_once(tmp_path, monkeypatch):
    """STS and SICK come in one tar: two stages that miss them at once fetched it twice, into the same ``.part``
    file (the second resuming from the first's bytes while the first still wrote)."""
    from sentlab.assets.resolve import resolve_data

    for k in ("SENTLAB_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(k, "0")
    monkeypatch.delenv("SENTLAB_DATA_MIRROR", raising=False)
    monkeypatch.setenv("SENTLAB_CACHE", str(tmp_path / "cache"))
    tar = senteval_tar()
    got, errors = {}, []

    def fetcher(name):
        try:
            got[name] = resolve_data(name)
        except BaseException as e:   # noqa: BLE001 - reported below
            errors.append(e)

    with serve() as up:
        monkeypatch.setenv("SENTLAB_UPSTREAM", up.url)
        up.files[f"{SIMCSE}/senteval.tar"] = tar
        up.delay_s = 0.5                                  # both miss it before either has it
        threads = [threading.Thread(target=fetcher, args=(n,)) for n in ("senteval_sts", "sick")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        requests = list(up.requests)
    assert not errors, errors
    assert requests == [(f"{SIMCSE}/senteval.tar", "")]   # one download
    assert sorted(r.source for r in got.values()) == ["cache", "download"]
    assert [p.read_bytes() == tar for p in (tmp_path / "cache").glob("*.tar")] == [True]   # one archive, whole
