"""Run a notebook's solution cells in a test.

Solution cells are committed without outputs (their outputs would give the answers away) and tagged
``nbval-skip``, so nbval does not run them; the tests of notebooks 07-10 run them here instead, with the names
they read from the notebook passed in, and check that every call to a ``check_…`` passed.
"""
from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def solution_sources(notebook: str) -> list[str]:
    """The code of the cells tagged ``solution`` in ``notebooks/<notebook>.ipynb``, after checking that each is
    committed without outputs and skipped by nbval."""
    cells = json.loads((NOTEBOOKS / f"{notebook}.ipynb").read_text())["cells"]
    found = []
    for cell in cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if "solution" in tags:
            assert cell["cell_type"] == "code"
            assert "nbval-skip" in tags, f"{notebook}: a solution cell without the nbval-skip tag"
            assert not cell.get("outputs"), f"{notebook}: a solution cell committed with its outputs"
            found.append("".join(cell["source"]))
    assert found, f"{notebook}: no cell tagged 'solution'"
    return found


def run_solutions(notebook: str, namespace: dict) -> str:
    """Execute every solution cell of ``notebook`` in ``namespace``; return what they printed. Each ``✓`` line
    is one check that passed; a wrong solution raises the check's AssertionError."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for source in solution_sources(notebook):
            exec(compile(source, f"<{notebook} solution>", "exec"), namespace)  # noqa: S102
    return out.getvalue()
