"""One unit system on every page a reader sees: decimal (SI) bytes, 1 kB = 10^3, 1 MB = 10^6, 1 GB = 10^9 bytes
(notebooks/README.md says why). A binary unit (KiB, MiB, GiB, TiB) may appear only on a line that names its power of
two (``2^20``, ``2**30``...): a line that explains the other system, such as reading memory-profiler's 2^20-byte
units. Checked in every notebook (markdown, code and text outputs) and in the READMEs."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _notebook_text import as_text, output_text

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
PAGES = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "notebooks" / "README.md",
         ROOT / "benchmarks" / "README.md", *sorted((ROOT / "data").glob("*/README.md"))]
BINARY = re.compile(r"\b(KiB|MiB|GiB|TiB)\b")
NAMES_ITS_POWER = re.compile(r"2(\^|\*\*)\d\d")


def binary_units(where: str, text: str) -> list[str]:
    """Each line of ``text`` that uses a binary unit without naming its power of two."""
    return [f"{where}: {line.strip()[:120]}" for line in text.splitlines()
            if BINARY.search(line) and not NAMES_ITS_POWER.search(line)]


def notebook_texts(nb: dict):
    """(where, text) for every cell's source and every text output (images are not read)."""
    for i, cell in enumerate(nb["cells"]):
        yield f"cell {i} ({cell['cell_type']})", as_text(cell.get("source"))
        yield f"cell {i} output", output_text(cell)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_speaks_decimal_units(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert [hit for where, text in notebook_texts(nb) for hit in binary_units(where, text)] == []


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_readme_speaks_decimal_units(path):
    assert binary_units(path.name, path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("text, breaches", [
    ("a 1M-slot ring needs 6.6 GiB", 1),
    ("RSS growth (MiB)\nfine: 7.1 GB\n16 KiB pages", 2),
    ("7,056 bytes per frame = 7.1 GB per million; 16.8 MB of tree", 0),
    ("memory-profiler reports MiB, units of 2^20 bytes", 0),
    ("MIB_IN_MB = 2**20 / MB  # MiB to MB", 0),
])
def test_each_binary_unit_is_found(text, breaches):
    assert len(binary_units("page", text)) == breaches


def test_a_planted_binary_output_in_a_notebook_is_found():
    nb = {"cells": [{"cell_type": "code", "source": "print(x)", "outputs": [
        {"output_type": "stream", "name": "stdout", "text": "replay 6,744 MiB\n"}]}]}
    assert binary_units(*next(t for t in notebook_texts(nb) if "output" in t[0])) != []
