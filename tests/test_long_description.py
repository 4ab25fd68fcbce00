"""The README is the package's long description (pyproject's ``readme``): the package index shows it
away from the repository, so every link in it is absolute, and each link into the documentation site
names a page (and a heading) that exists. setuptools ships README.md as it is (tests/test_package.py
checks the built wheel's METADATA against it)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

from tests.helpers import ROOT

#: Most lines the README may have: the rest belongs in the documentation.
MAX_README_LINES = 300

#: Inline links and images ``[text](target)``, reference definitions ``[id]: target`` and HTML
#: ``href``/``src`` attributes: every way Markdown names a target.
_LINK_TARGETS = re.compile(r"\]\(\s*<?([^)\s>]+)|^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)|(?:href|src)=[\"']([^\"']+)",
                           re.M)
_ABSOLUTE = re.compile(r"^(https?|mailto):", re.I)


def link_targets(markdown: str) -> list[str]:
    """Every link target of a Markdown text, outside its code blocks and code spans."""
    text = re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [next(g for g in m.groups() if g) for m in _LINK_TARGETS.finditer(text)]


def relative_links(markdown: str) -> list[str]:
    return [t for t in link_targets(markdown) if not _ABSOLUTE.match(t)]


def _site() -> str:
    url = re.search(r'^Documentation = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    return url if url.endswith("/") else url + "/"


def _slug(heading: str) -> str:
    """The anchor mkdocs' table of contents gives a heading (python-markdown's default slugify)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    return {_slug(h) for h in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.M)}


def _page_of(url: str) -> tuple[Path, str]:
    """The docs/ source of a URL of the site and the anchor it names. mkdocs.yml sets
    ``use_directory_urls: false``: ``docs/x/y.md`` is ``<site>/x/y.html``."""
    path, _, anchor = url.removeprefix(_site()).partition("#")
    path = path or "index.html"
    assert path.endswith(".html"), f"{url}: a page of the site ends in .html (use_directory_urls is false)"
    return ROOT / "docs" / (path.removesuffix(".html") + ".md"), anchor


def test_the_site_maps_pages_to_html_files():
    assert re.search(r"^use_directory_urls: false$", (ROOT / "mkdocs.yml").read_text(), re.M)


def test_the_long_description_has_no_relative_link():
    readme = (ROOT / "README.md").read_text()
    assert len(link_targets(readme)) > 20
    assert not relative_links(readme), "make these absolute (the site's pages, or GitHub): " \
        f"{relative_links(readme)}"


def test_every_link_into_the_site_names_a_page_and_heading_that_exist():
    broken = []
    for url in link_targets((ROOT / "README.md").read_text()):
        if not url.startswith(_site()):
            continue
        page, anchor = _page_of(url)
        if not page.is_file():
            broken.append(f"{url}: no {page.relative_to(ROOT)}")
        elif anchor and anchor not in _anchors(page):
            broken.append(f"{url}: {page.relative_to(ROOT)} has no heading #{anchor}")
    assert not broken, "\n".join(broken)


def test_the_readme_fits_in_its_budget():
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move detail into a page of docs/"


@pytest.mark.parametrize("markdown,expected", [
    ("see [the docs](docs/x.md) and ![a](img.png)", ["docs/x.md", "img.png"]),
    ("[top](#install)", ["#install"]),
    ("[ref]: ../other.md\n", ["../other.md"]),
    ('<a href="docs/x.md">x</a>', ["docs/x.md"]),
    ("[ok](https://example.org/a) `[not](a link)`\n```md\n[nor](this)\n```\n", []),
])
def test_relative_links_finds_every_kind(markdown, expected):
    assert relative_links(markdown) == expected


def test_the_slug_is_mkdocs_one():
    assert _slug("Sizing: which partition, which layout, how many instances") == \
        "sizing-which-partition-which-layout-how-many-instances"
    assert _slug("The `gpu-share` command") == "the-gpu-share-command"
