"""Every notebook's first code cell, from one template: on Colab it sets the course up, elsewhere it does nothing.

    python data/make_colab_cells.py           # rewrite the first code cell of each notebook where it differs
    python data/make_colab_cells.py --check   # exit 1 naming each notebook whose first code cell differs

(Only markdown, the notebook's title and introduction, may come before it.)
On Colab the cell makes a shallow clone of the repository (the package *and* ``data/``, which the notebooks read)
into ``/content/dqn-course``, installs it editable with the extras the notebook needs (pip keeps Colab's own torch:
``torch>=2.4,<3`` is already satisfied, and nothing asks it to upgrade), puts the clone first on ``sys.path`` (the
running kernel does not read the new install's path file) and changes into its ``notebooks/`` folder, so the
notebook's relative paths resolve as they do in a local checkout. Run again, it skips the clone.

The repository's address is read from ``pyproject.toml`` (``[project.urls] Repository``), the one place it is
written: a fork changes that line and runs this script. ``tests/test_colab.py`` fails while a first code cell
differs from the template. The file is read, not imported: no set-up needed.
"""
from __future__ import annotations

import argparse
import json
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
CLONE = "/content/dqn-course"  # Colab's working folder is /content
# The extras each notebook's imports need beyond "compress" (tests/test_notebook_imports.py checks them).
EXTRAS = {"10_scaling_out_with_ray": "compress,distributed"}
DEFAULT_EXTRAS = "compress"

TEMPLATE = """\
# On Colab: get the course (code and data), install it, work in its notebooks folder. Elsewhere: nothing.
import os, sys
if "google.colab" in sys.modules:
    if not os.path.isdir("{clone}"):
        !git clone -q --depth 1 {url} {clone}
    %pip install -q -e "{clone}[{extras}]"
    sys.path.insert(0, "{clone}")
    %cd {clone}/notebooks"""


def repository_url(root: Path = ROOT) -> str:
    """The address ``pyproject.toml`` gives the repository (``[project.urls] Repository``)."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return project["urls"]["Repository"]


def first_cell(notebook: str, url: str) -> str:
    """The first code cell's source for ``notebook`` (its file name without ``.ipynb``)."""
    return TEMPLATE.format(clone=CLONE, url=url, extras=EXTRAS.get(notebook, DEFAULT_EXTRAS))


def first_code_cell(nb: dict) -> dict:
    """The notebook's first code cell (a notebook without one has no set-up cell: an error)."""
    cell = next((c for c in nb["cells"] if c["cell_type"] == "code"), None)
    if cell is None:
        raise ValueError("the notebook has no code cell")
    return cell


def differing(url: str) -> list[Path]:
    """The notebooks whose first code cell is not the template's."""
    return [path for path in sorted(NOTEBOOKS.glob("*.ipynb"))
            if "".join(first_code_cell(json.loads(path.read_text(encoding="utf-8")))["source"])
            != first_cell(path.stem, url)]


def rewrite(path: Path, url: str) -> None:
    """Replace the first code cell's source (its outputs go: it prints nothing outside Colab)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    cell = first_code_cell(nb)
    cell.update(source=first_cell(path.stem, url).splitlines(keepends=True), outputs=[])
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a first cell differs; write nothing")
    args = parser.parse_args()
    url = repository_url()
    stale = differing(url)
    if args.check:
        for path in stale:
            print(f"{path.relative_to(ROOT)}: first code cell differs from the template (run make colab-cells)")
        raise SystemExit(1 if stale else 0)
    for path in stale:
        rewrite(path, url)
        print(f"rewrote the first code cell of {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
