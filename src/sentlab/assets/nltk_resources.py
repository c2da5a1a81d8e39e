"""NLTK resources (stopwords, the POS tagger, WordNet, ...): found where NLTK looks, else fetched with NLTK's own
downloader, else an error naming the three ways to provide them (the look-up order of :mod:`sentlab.assets.resolve`:
``NLTK_DATA`` or a standard NLTK folder, then the download, skipped offline).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from .resolve import offline
from ..errors import AssetMissingError

log = logging.getLogger(__name__)

NLTK_RESOURCES = {
    "stopwords": "corpora/stopwords",
    "averaged_perceptron_tagger_eng": "taggers/averaged_perceptron_tagger_eng",
    "wordnet": "corpora/wordnet",
    "treebank": "corpora/treebank",
    "punkt_tab": "tokenizers/punkt_tab",
}


def _nltk_found(loc: str) -> bool:
    import nltk

    for candidate in (loc, loc + ".zip"):
        try:
            nltk.data.find(candidate)
            return True
        except LookupError:
            continue
    return False


def nltk_download_dir() -> Path:
    """Where a missing NLTK resource is downloaded to: the first folder of ``NLTK_DATA``, else ``~/nltk_data``
    (both on NLTK's search path)."""
    first = os.environ.get("NLTK_DATA", "").split(os.pathsep)[0]
    return Path(first) if first else Path.home() / "nltk_data"


def require_nltk(resource: str) -> None:
    """Make sure an NLTK resource is loadable: found where NLTK looks, else (online) fetched with NLTK's own
    downloader into :func:`nltk_download_dir` (the index: ``$SENTLAB_UPSTREAM`` in place of NLTK's host when set;
    under :func:`sentlab.assets.download.download_lock`: concurrent callers fetch it once and wait until it is whole),
    else an error with the exact download command. A campaign never fails on a resource hours in for want of a
    download (PaSeR's WordNet, issue #54)."""
    from .download import download_lock

    loc = NLTK_RESOURCES.get(resource, resource)
    target = nltk_download_dir()
    # under the lock: the check too, so a resource another process is downloading or still unpacking (NLTK unzips
    # into corpora/wordnet/ file by file after the archive is in place, when run as root or into a shared folder,
    # and NLTK finds the folder before the archive) is read only once it is whole, and fetched once (issue #65 §6)
    with download_lock(target, "sentlab-nltk", create=not offline()):
        if _nltk_found(loc):
            return
        if not offline():
            from nltk.downloader import Downloader

            from .download import upstream_url

            try:
                target.mkdir(parents=True, exist_ok=True)
                log.info("downloading NLTK resource %s into %s", resource, target)
                Downloader(server_index_url=upstream_url(Downloader.DEFAULT_URL)).download(
                    resource, download_dir=str(target), quiet=True, raise_on_error=True)
            except Exception as e:  # noqa: BLE001 - NLTK's errors are plain exceptions: say so below
                log.warning("NLTK's downloader could not fetch %s into %s: %s", resource, target, e)
            if _nltk_found(loc):
                return
    raise AssetMissingError(
        f"NLTK resource '{resource}' ({loc}) is not installed"
        + (" and NLTK's downloader could not fetch it" if not offline() else " and downloads are off (offline)")
        + ". Provide it in one of three ways: (1) point NLTK_DATA at a "
        f"folder that holds it (here: `export NLTK_DATA=../shared/nltk_data`); "
        f"(2) put it in a standard NLTK folder such as "
        f"~/nltk_data; (3) download it with `python -m nltk.downloader {resource}` on a connected machine."
    )

# Penn-Treebank clitics: stopwords for RAKE beside NLTK's English list.
CLITICS = ("n't", "'s", "'re", "'ll", "'ve", "'d", "'m", "s", "t")


def stopwords_english() -> list[str]:
    """NLTK's English stop words and the clitic pieces (:data:`CLITICS`): RAKE's phrase delimiters
    (:mod:`sentlab.annotate`) and the words left out of the bag-of-words vocabulary (:mod:`sentlab.data.vocab`)."""
    require_nltk("stopwords")
    from nltk.corpus import stopwords

    return list(stopwords.words("english")) + list(CLITICS)
