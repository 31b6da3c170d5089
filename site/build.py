"""Build the course's website (``make site``): stage the committed notebooks and READMEs, then run Sphinx on them.

Nothing is executed: each chapter page shows the outputs the notebook was committed with. The staged tree
(``build/site/src``) mirrors the repository, so a page's Colab and download links name the repository's own file:

- ``index.md``: README.md, the landing page, with the sidebar's table of contents;
- ``notebooks/NN_name.ipynb``: each notebook as committed, with tags added for the page: ``hide-input`` on the first
  code cell (the Colab set-up), ``hide-cell`` on the cells tagged ``solution`` (folded until clicked) and
  ``hide-output`` on outputs longer than ``LONG_OUTPUT`` lines;
- ``recorded/<run>.md``: each recorded run's README (``data/<run>/README.md``); ``benchmarks.md``: the benchmarks'
  README; ``api/``: one page per module of ``dqn_course`` from its docstrings (``lab.capstone_solution`` left out:
  it is the capstone's worked answer).

A relative link to a page of the site is rewritten to point at that page; one to an image is kept and the image
copied; one to any other file of the repository points at that file on the repository's web page.
The HTML lands in ``build/site/html`` (``index.html`` is the landing page); ``build/site/stamp.json`` records the
hash of everything the site was built from, which ``tests/test_site.py`` compares with the checkout.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "site"
SRC, HTML, STAMP = OUT / "src", OUT / "html", OUT / "stamp.json"
LONG_OUTPUT = 40  # lines of text output above which a cell's output is folded on its page
IMAGE = re.compile(r"\.(png|gif|jpe?g|svg)$", re.I)
LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s]+)(\))")
LEFT_OUT = {"dqn_course.lab.capstone_solution", "dqn_course.distributed.__main__"}


def repository() -> str:
    """The repository's web address, written once in pyproject.toml (``[project.urls] Repository``)."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["urls"]["Repository"].rstrip("/")


def recorded_runs() -> list[Path]:
    """The recorded runs' folders under data/ that have a README, in name order."""
    return sorted(p.parent for p in ROOT.glob("data/*/README.md"))


def page_of(target: Path) -> Path | None:
    """The staged page (relative to SRC) that shows the repository file ``target``, or None."""
    rel = target.relative_to(ROOT)
    if rel == Path("README.md"):
        return Path("index.md")
    if rel.parent == Path("notebooks") and rel.suffix == ".ipynb":
        return rel
    if rel == Path("benchmarks/README.md"):
        return Path("benchmarks.md")
    if len(rel.parts) == 3 and rel.parts[0] == "data" and rel.name == "README.md":
        return Path("recorded") / f"{rel.parts[1]}.md"
    return None


def rewrite_links(text: str, source: Path, staged: Path, repo: str) -> str:
    """``text`` (markdown from repository file ``source``, staged at ``SRC/staged``) with its relative links
    pointing at site pages, copied images, or the repository's web page."""
    def fix(match: re.Match) -> str:
        head, target, tail = match.groups()
        if re.match(r"^[a-z]+:|^#|^/", target):
            return match.group(0)
        path, _, anchor = target.partition("#")
        resolved = (source.parent / path).resolve()
        if not resolved.is_relative_to(ROOT) or not resolved.exists():
            return match.group(0)  # left for the link check to report
        page = page_of(resolved)
        if page is not None:
            new = os.path.relpath(SRC / page, (SRC / staged).parent)
        elif IMAGE.search(path):
            copy = SRC / resolved.relative_to(ROOT)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(resolved, copy)
            new = os.path.relpath(copy, (SRC / staged).parent)
        else:
            kind = "tree" if resolved.is_dir() else "blob"
            new = f"{repo}/{kind}/main/{resolved.relative_to(ROOT).as_posix()}"
        return f"{head}{new}{'#' + anchor if anchor else ''}{tail}"

    return LINK.sub(fix, text)


def text_lines(output: dict) -> int:
    """Lines of text an output shows (a stream's text, or a result's text/plain when it has no image or HTML)."""
    if output.get("output_type") == "stream":
        text = output.get("text", "")
    else:
        data = output.get("data", {})
        if any(k.startswith("image/") or k == "text/html" for k in data):
            return 0
        text = data.get("text/plain", "")
    return len("".join(text).splitlines()) if isinstance(text, list) else len(text.splitlines())


def stage_notebook(path: Path, repo: str) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    first_code = next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code")
    for i, cell in enumerate(nb["cells"]):
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        if i == first_code and "hide-input" not in tags:
            tags.append("hide-input")  # the Colab set-up (notebooks/README.md, rule 1): for Colab, not for reading
        elif "solution" in tags and "hide-cell" not in tags:
            tags.append("hide-cell")
        elif sum(text_lines(o) for o in cell.get("outputs", [])) > LONG_OUTPUT and "hide-output" not in tags:
            tags.append("hide-output")
        if cell["cell_type"] == "markdown":
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            cell["source"] = rewrite_links(source, path, path.relative_to(ROOT), repo)
    staged = SRC / path.relative_to(ROOT)
    staged.parent.mkdir(parents=True, exist_ok=True)
    staged.write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")


def toctree(caption: str, pages: list[str]) -> str:
    return "\n".join(["", "```{toctree}", ":hidden:", f":caption: {caption}", "", *pages, "```", ""])


def api_pages() -> list[str]:
    """One page per public module of dqn_course (its docstring and members), and the API index listing them."""
    import dqn_course

    names = ["dqn_course"] + sorted(m.name for m in pkgutil.walk_packages(dqn_course.__path__, "dqn_course.")
                                    if m.name not in LEFT_OUT and not m.name.rsplit(".", 1)[-1].startswith("_"))
    (SRC / "api").mkdir(parents=True, exist_ok=True)
    for name in names:
        (SRC / "api" / f"{name}.md").write_text(
            f"# `{name}`\n\n```{{eval-rst}}\n.. automodule:: {name}\n   :members:\n```\n", encoding="utf-8")
    (SRC / "api.md").write_text(
        "# API reference\n\nEvery module of the `dqn_course` package, from its docstrings: what each function and "
        "class does, takes, returns and raises. README's *The package* says how the modules fit together.\n"
        + toctree("Modules", [f"api/{n}" for n in names]), encoding="utf-8")
    return names


def source_files() -> list[Path]:
    """Everything the site is built from: its notebooks, READMEs, figures, package and these settings."""
    files = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted(ROOT.glob("notebooks/*.ipynb")),
             *sorted(ROOT.glob("data/*/README.md")), *sorted(ROOT.glob("data/figures/*")),
             *sorted(ROOT.glob("dqn_course/**/*.py")), *sorted((ROOT / "site").glob("*.py")),
             ROOT / "pyproject.toml"]
    return [f for f in files if f.is_file()]


def sources_hash() -> str:
    digest = hashlib.sha256()
    for f in source_files():
        digest.update(f.relative_to(ROOT).as_posix().encode() + b"\0" + f.read_bytes())
    return digest.hexdigest()


def stage(repo: str) -> list[str]:
    """Write the staged tree; returns the chapter pages in curriculum order."""
    shutil.rmtree(SRC, ignore_errors=True)
    SRC.mkdir(parents=True)
    chapters = []
    for nb in sorted(ROOT.glob("notebooks/*.ipynb")):
        stage_notebook(nb, repo)
        chapters.append(f"notebooks/{nb.stem}")
    runs = []
    for run in recorded_runs():
        staged = Path("recorded") / f"{run.name}.md"
        (SRC / "recorded").mkdir(exist_ok=True)
        text = (run / "README.md").read_text(encoding="utf-8")
        (SRC / staged).write_text(rewrite_links(text, run / "README.md", staged, repo), encoding="utf-8")
        runs.append(staged.with_suffix("").as_posix())
    bench = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    (SRC / "benchmarks.md").write_text(rewrite_links(bench, ROOT / "benchmarks" / "README.md",
                                                     Path("benchmarks.md"), repo), encoding="utf-8")
    api_pages()
    readme = rewrite_links((ROOT / "README.md").read_text(encoding="utf-8"), ROOT / "README.md", Path("index.md"),
                           repo)
    readme += toctree("Chapters", chapters) + toctree("Recorded runs", runs)
    readme += toctree("Reference", ["benchmarks", "api"])
    (SRC / "index.md").write_text(readme, encoding="utf-8")
    return chapters


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", default="auto", help="Sphinx's -j (processes)")
    args = parser.parse_args()
    t0 = time.perf_counter()
    repo = repository()
    chapters = stage(repo)
    env = {**os.environ, "DQN_COURSE_SITE": json.dumps({"repository": repo})}
    shutil.rmtree(HTML, ignore_errors=True)
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-j", args.jobs, "-c", str(ROOT / "site"),
           str(SRC), str(HTML)]
    warnings_file = OUT / "warnings.txt"
    result = subprocess.run(cmd + ["-w", str(warnings_file)], env=env, cwd=ROOT)
    if result.returncode:
        print(f"error: Sphinx failed (exit {result.returncode}); see {warnings_file}", file=sys.stderr)
        return 1
    STAMP.write_text(json.dumps({"sources": sources_hash(), "chapters": chapters, "repository": repo,
                                 "seconds": round(time.perf_counter() - t0, 1)}, indent=1) + "\n")
    print(f"site: {HTML / 'index.html'} ({len(chapters)} chapters, {time.perf_counter() - t0:.0f} s; "
          f"Sphinx's warnings in {warnings_file})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
