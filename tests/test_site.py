"""The course's website as HTML (``make site`` builds it into build/site/html; site/build.py): every notebook has a
page, no internal link or image is broken, no solution's code shows outside a folded block, every figure of a
notebook is an image on its page, and the Colab links open this repository's notebooks.

These tests read the last build and are skipped when there is none, or when the notebooks, READMEs or package
changed since (``make site`` again); CI (``.ci/run``) builds the site before ``make test`` and sets
``DQN_COURSE_SITE_REQUIRED=1``, which turns those skips into failures. Each check is a function
that returns what it found wrong, also run on a planted breach so that it is seen to fail.
"""
from __future__ import annotations

import html
import json
import os
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from _notebook_text import as_text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "site"))
import build as site_build  # noqa: E402  (site/build.py: where the site's pages and stamp are)

HTML = site_build.HTML
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def built() -> None:
    """Skip (fail where DQN_COURSE_SITE_REQUIRED=1, as in CI) unless the site was built from what is checked out."""
    miss = pytest.fail if os.environ.get("DQN_COURSE_SITE_REQUIRED") == "1" else pytest.skip
    if not site_build.STAMP.exists():
        miss("no website built: `make site` builds it (CI does, before make test)")
    if json.loads(site_build.STAMP.read_text())["sources"] != site_build.sources_hash():
        miss("the website was built from other notebooks, READMEs or code: `make site` again")


class Page(HTMLParser):
    """What the checks need of an HTML page: its links, images and ids, and its text inside and outside
    ``<details>`` (folded) blocks."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.images: list[str] = []
        self.ids: set[str] = set()
        self.title = ""
        self._in_title = False
        self._folded = 0
        self._hidden = 0  # <script> and <style>: not shown
        self.shown, self.folded = [], []
        self.feed(text)
        self.shown_text, self.folded_text = "".join(self.shown), "".join(self.folded)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        elif tag == "img" and a.get("src"):
            self.images.append(a["src"])
        elif tag == "link" and a.get("href"):
            self.links.append(a["href"])
        elif tag == "script" and a.get("src"):
            self.links.append(a["src"])
        if tag == "details":
            self._folded += 1
        if tag in ("script", "style"):
            self._hidden += 1
        if tag == "title":
            self._in_title = True

    def handle_endtag(self, tag):
        if tag == "details":
            self._folded -= 1
        if tag in ("script", "style"):
            self._hidden -= 1
        if tag == "title":
            self._in_title = False

    def handle_data(self, data):
        if self._in_title:
            self.title += data
        if not self._hidden:
            (self.folded if self._folded else self.shown).append(data)


def page(path: Path) -> Page:
    return Page(path.read_text(encoding="utf-8"))


def broken_links(root: Path, pages: dict[Path, Page]) -> list[str]:
    """Each relative link or image of ``pages`` (HTML files under ``root``) whose file is missing, or whose
    ``#anchor`` names no id in the page it points at."""
    wrong = []
    for path, p in pages.items():
        for ref in p.links + p.images:
            parts = urlsplit(ref)
            if parts.scheme or ref.startswith("//"):
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if not target.is_relative_to(root.resolve()) or not target.exists():
                wrong.append(f"{path.relative_to(root)}: {ref} (no such file)")
                continue
            if parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else page(target).ids
                if unquote(parts.fragment) not in ids:
                    wrong.append(f"{path.relative_to(root)}: {ref} (no such anchor)")
    return wrong


def cells(notebook: Path) -> list[dict]:
    return json.loads(notebook.read_text(encoding="utf-8"))["cells"]


def solution_lines_shown(notebook: Path, p: Page) -> list[str]:
    """Lines of the notebook's solution cells (those with a few words of code, and not also in a cell for the
    learner, such as the call of the exercise's check) that the page shows unfolded."""
    shown = " ".join(p.shown_text.split())
    solution, elsewhere = set(), []
    for c in cells(notebook):
        if "solution" in c["metadata"].get("tags", []):
            solution |= {" ".join(line.split()) for line in as_text(c["source"]).splitlines()}
        else:  # the page's own text and cells, where a line may stand in prose or as a comment to uncomment
            elsewhere.append(" ".join(as_text(c["source"]).split()))
    page = " ".join(elsewhere)
    return sorted(line for line in solution if len(line) >= 25 and line in shown and line not in page)


def image_outputs(notebook: Path) -> int:
    return sum(1 for c in cells(notebook) for o in c.get("outputs", []) if any(k.startswith("image/")
                                                                                 for k in o.get("data", {})))


def colab_links(p: Page) -> list[str]:
    """The page's links that open a notebook of a GitHub repository in Colab."""
    return [link for link in p.links if link.startswith("https://colab.research.google.com/github/")]


def straight_quotes(text: str) -> str:
    """``text`` with the curly quotes Sphinx's smartquotes makes of straight ones turned back (’‘ to ', “” to ")."""
    return text.translate(str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"'}))


# -- the built site --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pages() -> dict[Path, Page]:
    built()  # the theme's own templates under _static are not pages
    return {path.resolve(): page(path) for path in HTML.rglob("*.html") if "_static" not in path.parts}


def test_every_notebook_has_a_page_under_its_title(pages):
    for nb in NOTEBOOKS:
        path = (HTML / "notebooks" / f"{nb.stem}.html").resolve()
        assert path in pages, f"no page for {nb.name}"
        title = re.sub(r"[*_`]", "", as_text(cells(nb)[0]["source"]).splitlines()[0].lstrip("# ").strip())  # as text
        assert title in straight_quotes(pages[path].title), f"{nb.name}: page title {pages[path].title!r}"
    index = pages[(HTML / "index.html").resolve()]
    for nb in NOTEBOOKS:
        assert any(link.split("#")[0].endswith(f"notebooks/{nb.stem}.html") for link in index.links), \
            f"the landing page does not link {nb.name}"


def test_no_internal_link_or_image_is_broken(pages):
    assert broken_links(HTML, pages) == []


def test_no_solution_code_is_shown_outside_a_folded_block(pages):
    for nb in NOTEBOOKS:
        assert solution_lines_shown(nb, pages[(HTML / "notebooks" / f"{nb.stem}.html").resolve()]) == [], nb.name
    assert not any("capstone_solution" in str(path) for path in pages), "the capstone's worked answer has a page"


def test_every_figure_of_a_notebook_is_an_image_on_its_page(pages):
    for nb in NOTEBOOKS:
        p = pages[(HTML / "notebooks" / f"{nb.stem}.html").resolve()]
        on_page = [src for src in p.images if "_images/" in src]
        assert len(on_page) >= image_outputs(nb), f"{nb.name}: {image_outputs(nb)} figures, {len(on_page)} images"


def test_colab_and_download_links_open_this_repositorys_notebooks(pages):
    repo = urlsplit(site_build.repository()).path.strip("/")
    for nb in NOTEBOOKS:
        p = pages[(HTML / "notebooks" / f"{nb.stem}.html").resolve()]
        assert colab_links(p) == [f"https://colab.research.google.com/github/{repo}/blob/main/notebooks/{nb.name}"]
        downloads = [link for link in p.links if link.endswith(f"_sources/notebooks/{nb.name}")]
        assert downloads, f"{nb.name}: no download link"


def test_the_recorded_runs_the_benchmarks_and_the_api_have_pages(pages):
    for run in site_build.recorded_runs():
        assert (HTML / "recorded" / f"{run.name}.html").resolve() in pages, run.name
    assert (HTML / "benchmarks.html").resolve() in pages
    api = pages[(HTML / "api.html").resolve()]
    assert any("dqn_course.replay.frame_sharing" in link for link in api.links)
    assert (HTML / "search.html").exists() and (HTML / "searchindex.js").exists()


# -- each check fails on a planted breach ------------------------------------------------------------------------

def test_the_link_check_finds_a_missing_file_and_a_missing_anchor(tmp_path):
    (tmp_path / "a.html").write_text('<a href="b.html#there">b</a><img src="gone.png"><a href="b.html#here">ok</a>'
                                     '<a href="https://example.org/x">out</a>')
    (tmp_path / "b.html").write_text('<h1 id="here">b</h1>')
    found = broken_links(tmp_path, {p.resolve(): page(p) for p in tmp_path.glob("*.html")})
    assert found == ["a.html: b.html#there (no such anchor)", "a.html: gone.png (no such file)"]


def test_the_solution_check_sees_code_outside_a_folded_block(tmp_path):
    nb = tmp_path / "n.ipynb"
    line = "answer = compute_the_worked_answer(frames, capacity)"
    nb.write_text(json.dumps({"cells": [{"cell_type": "code", "metadata": {"tags": ["solution"]}, "source": line}]}))
    folded = Page(f"<p>text</p><details><summary>Show</summary><pre>{html.escape(line)}</pre></details>")
    shown = Page("<p>text</p><pre><span>answer</span> = compute_the_worked_answer(frames, capacity)</pre>")
    assert solution_lines_shown(nb, folded) == [] and solution_lines_shown(nb, shown) == [line]


def test_the_colab_check_reads_the_links_of_a_page():
    p = Page('<a href="https://colab.research.google.com/github/o/r/blob/main/notebooks/x.ipynb">Colab</a>'
             '<a href="https://colab.research.google.com/notebooks/io.ipynb">Colab\'s own</a>')
    assert colab_links(p) == ["https://colab.research.google.com/github/o/r/blob/main/notebooks/x.ipynb"]
    assert Page("<title>A &amp; B</title>").title == "A & B"


def test_a_title_with_an_apostrophe_matches_its_smart_quoted_page_title():
    page_title = Page("<title>07c · Does the course’s “own” loop learn?</title>").title
    assert "the course's \"own\" loop" in straight_quotes(page_title)
    assert "the course's" not in page_title
