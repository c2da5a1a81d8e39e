"""The README and docs/*.md: every relative link resolves, and the README stays a five-minute read.

A link resolves when its file exists (relative to the Markdown file that holds it) and, for ``#anchor``, when
the target Markdown file has a heading whose GitHub slug is that anchor. Links inside code blocks and inline
code are not links; absolute URLs (``http:``, ``https:``, ``mailto:``) are not checked.
"""

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO = Path(__file__).resolve().parents[1]
# a guide, not a budget to squeeze (issue #67 §3): 240 since the install block (#68, #65 §1) joined the first screen
README_MAX_LINES = 240
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "benchmarks").glob("*.md"))]

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"(`+).*?\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(text: str):
    """The lines of ``text`` outside fenced code blocks, inline code removed."""
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield INLINE_CODE.sub("", line)


def github_slug(heading: str) -> str:
    """GitHub's anchor of a heading: link text kept, formatting and punctuation dropped, spaces -> hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # [text](url) -> text
    text = re.sub(r"<[^>]+>", "", text).lower()
    text = re.sub(r"[^\w\- ]", "", text)  # \w keeps letters, digits and "_", as GitHub does
    return text.replace(" ", "-")


def anchors(path: Path) -> set:
    """Every heading's slug in ``path``, with GitHub's -1, -2 … suffixes for repeated headings."""
    seen: dict = {}
    out = set()
    for line in prose_lines(path.read_text(encoding="utf-8")):
        m = HEADING.match(line)
        if not m:
            continue
        slug = github_slug(m.group(2))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links(path: Path):
    for line in prose_lines(path.read_text(encoding="utf-8")):
        for m in LINK.finditer(line):
            yield m.group(1)


def test_github_slug():
    assert github_slug("PT-BERT") == "pt-bert"
    assert github_slug("Reading the tables: seeds, confidence intervals, significance") == \
        "reading-the-tables-seeds-confidence-intervals-significance"
    assert github_slug("Transfer (SentEval) agreement (issue #39)") == "transfer-senteval-agreement-issue-39"
    assert github_slug("What a failed `dvc repro` leaves") == "what-a-failed-dvc-repro-leaves"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page):
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto: …
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / unquote(file_part)).resolve() if file_part else page
        if not dest.exists():
            broken.append(f"{target}: {dest} does not exist")
            continue
        if anchor and dest.suffix == ".md" and unquote(anchor).lower() not in anchors(dest):
            broken.append(f"{target}: no heading with the anchor #{anchor} in {dest.relative_to(REPO)}")
    assert not broken, f"{page.relative_to(REPO)}: broken links:\n" + "\n".join(broken)


def test_readme_is_short():
    n = len((REPO / "README.md").read_text(encoding="utf-8").splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines (at most {README_MAX_LINES}): move detail into docs/"


CODE = [p for d in ("src", "pipeline", "benchmarks", "scripts", "tests") for p in sorted((REPO / d).rglob("*.py"))]
CODE += [REPO / "params.yaml", REPO / "dvc.yaml"]
DOCS_REF = re.compile(r"(?<![\w/.])docs/([\w-]+\.md)(?:#([\w-]+))?")


def test_code_links_to_the_docs_resolve():
    """The code cites the docs pages (``docs/methods.md#pt-bert``): each page and anchor exists."""
    broken = []
    for path in CODE:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in DOCS_REF.finditer(line):
                page = REPO / "docs" / m.group(1)
                if not page.exists() or (m.group(2) and m.group(2) not in anchors(page)):
                    broken.append(f"{path.relative_to(REPO)}:{n}: {m.group(0)}")
    assert not broken, "references to docs pages that do not resolve:\n" + "\n".join(broken)


def test_code_cites_no_specification_outside_the_repository():
    """The specification the project was built from is not in the repository: the code cites docs/ instead."""
    spec = re.compile(r"\bSPEC\b")
    hits = [f"{p.relative_to(REPO)}:{n}" for p in CODE if p.name != "test_docs.py"
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if spec.search(line)]
    assert not hits, "cite the docs pages (docs/evaluation.md, docs/methods.md#…) instead of SPEC:\n" + "\n".join(hits)


def test_results_start_with_the_current_figures():
    """benchmarks/RESULTS.md opens with one table of the figures in force, each with its command, machine and date
    (issue #57 §6); the stage-time script's markers wrap the current table; dated preflight logs are not in docs/."""
    text = (REPO / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Current figures"
    section = text.split("## Current figures", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    assert rows[0] == "| figure | value | command | machine | date |"
    for row in rows[2:]:
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert len(cells) == 5 and all(cells), row
        assert re.fullmatch(r"20\d\d-\d\d-\d\d", cells[4]), row
    assert len(rows) - 2 >= 8
    current = text.split("### Current:", 1)[1].split("\n## ", 1)[0]
    assert "<!-- stage-times:begin -->" in current and "<!-- stage-times:end -->" in current
    assert not list((REPO / "docs").glob("preflight-*.md"))
