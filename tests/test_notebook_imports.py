"""Every import a notebook makes is declared: in the package's dependencies, or in an extra its first cell installs.

A notebook opened where only its first cell's install ran (Colab, a fresh environment) must find every module it
imports. The code cells are parsed (IPython's magics and shell lines turned into Python first), each top-level
module is traced to the distribution that provides it (``importlib.metadata.packages_distributions``) and looked
up among the requirements ``pyproject.toml`` declares for that install.
"""
from __future__ import annotations

import ast
import json
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from IPython.core.inputtransformer2 import TransformerManager

from _data_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
COLAB_CELLS = load_script("make_colab_cells")  # what the first code cell is, as the script that writes it says
# The kernel a notebook runs in brings these (ipykernel depends on IPython), wherever the notebook runs; "google"
# is Colab's own package (google.colab), which a notebook imports only when it runs there.
KERNEL = {"IPython"}
COLAB = {"google"}


def canonical(name: str) -> str:
    """A distribution's name as PEP 503 compares them: lower case, runs of -, _ and . as one -."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_names(requirements: list[str]) -> set[str]:
    return {canonical(re.match(r"[A-Za-z0-9_.\-]+", r).group(0)) for r in requirements}


def declared(extras: set[str]) -> set[str]:
    """The distributions installed by ``pip install dqn-course[<extras>]``: the dependencies and those extras'."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = requirement_names(project["dependencies"])
    for extra in extras:
        names |= requirement_names(project["optional-dependencies"][extra])
    return names


def first_cell_extras(nb: dict) -> set[str]:
    """The extras the notebook's first code cell installs (``dqn-course[a,b]``), none if it installs the bare
    package."""
    found = re.findall(r"dqn-course\[([^\]]*)\]", "".join(COLAB_CELLS.first_code_cell(nb)["source"]))
    return {e.strip() for group in found for e in group.split(",") if e.strip()}


def imported_modules(nb: dict) -> set[str]:
    """The top-level modules the notebook's code cells import (absolute imports; a cell magic's body, such as
    ``%%time``'s, is read as the Python it runs)."""
    modules = set()
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        if source.startswith("%%"):
            source = source.partition("\n")[2]
        tree = ast.parse(TransformerManager().transform_cell(source))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules.add(node.module.split(".")[0])
    return modules


def undeclared(nb: dict, providers: dict[str, list[str]] | None = None) -> list[str]:
    """Each module ``nb`` imports that neither Python, the course package, the kernel nor a declared requirement
    of its first cell's install provides, as "module (from distribution)"."""
    providers = packages_distributions() if providers is None else providers
    allowed = declared(first_cell_extras(nb))
    missing = []
    for module in sorted(imported_modules(nb)):
        if module in sys.stdlib_module_names or module == "dqn_course" or module in KERNEL | COLAB:
            continue
        dists = providers.get(module, [])
        if not any(canonical(d) in allowed for d in dists):
            missing.append(f"{module} (from {', '.join(dists) or 'no installed distribution'})")
    return missing


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_import_is_declared_for_the_install_the_first_cell_makes(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert undeclared(nb) == [], (f"{path.name} imports modules its first cell's install "
                                  f"(dqn-course[{','.join(sorted(first_cell_extras(nb)))}]) does not declare: add "
                                  "them to pyproject.toml's dependencies or to an extra that cell installs")


def _notebook(first: str, *cells: str) -> dict:
    return {"cells": [{"cell_type": "code", "source": source} for source in (first, *cells)]}


FIRST = 'import sys\nif "google.colab" in sys.modules:\n    %pip install -q -e "/content/dqn-course[compress]"'


def test_an_undeclared_import_is_found_and_magics_do_not_hide_imports():
    nb = _notebook(FIRST, "!nvidia-smi\nimport lz4.frame\nfrom mystery.sub import thing", "%%time\nimport pytest")
    providers = {"lz4": ["lz4"], "mystery": ["mystery-dist"], "pytest": ["pytest"]}
    assert first_cell_extras(nb) == {"compress"}
    assert undeclared(nb, providers) == ["mystery (from mystery-dist)", "pytest (from pytest)"]  # pytest: dev only


def test_an_extra_the_first_cell_does_not_install_does_not_count():
    bare = _notebook(FIRST.replace("[compress]", ""), "import lz4")
    assert first_cell_extras(bare) == set()
    assert undeclared(bare, {"lz4": ["lz4"]}) == ["lz4 (from lz4)"]
    assert undeclared(_notebook(FIRST, "import lz4, json, numpy"), {"lz4": ["lz4"], "numpy": ["numpy"]}) == []
