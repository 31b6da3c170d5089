"""The notebooks' rules that a reader checks by eye, checked here (notebooks/README.md states them):

* ``nbval-ignore-output`` only where an output varies, and the cell says why on its first line (``# varies: ...``);
  an ``answer`` cell (a prediction's measurement) says so instead (``# answer: ...``);
* ``answer`` and ``solution`` cells are committed without outputs, and solutions are skipped by nbval;
* a prediction's check names its question (``checks.check_prediction_of``): its likely mistakes and their hints
  live in ``checks.PREDICTIONS``, not on the page;
* no test-harness chatter, colour codes or paths of the machine that executed them on the page.
* a notebook opens with its title, the question it answers (``# NN · ...?``), before any code;
* it ends with its further reading.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _notebook_text import as_text, output_text

from dqn_course.lab import checks

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CHATTER = re.compile(r"compared by the tests|nbval|not compared", re.IGNORECASE)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
NAMED_PREDICTION = re.compile(r"check_prediction_of\(\s*[\"']([^\"']+)[\"']")
MACHINE_PATHS = re.compile(r"(/\.venv/|/site-packages/|/work/|/home/\w+|/tmp/pytest|/root/)")


def problems(nb: dict) -> list[str]:
    """Every breach of the rules above in one notebook, as readable lines (empty when it keeps them)."""
    found = []
    for i, cell in enumerate(nb["cells"]):
        tags = set(cell.get("metadata", {}).get("tags", []))
        source = as_text(cell.get("source"))
        first = source.lstrip().split("\n", 1)[0]
        if cell["cell_type"] == "markdown":
            if CHATTER.search(source):
                found.append(f"cell {i}: markdown talks about the test harness")
            continue
        if first.startswith("# varies:") and "nbval-ignore-output" not in tags:
            found.append(f"cell {i}: says its output varies but is not tagged nbval-ignore-output")
        if "nbval-ignore-output" in tags:
            if "answer" in tags:
                if not first.startswith("# answer:"):
                    found.append(f"cell {i}: an answer cell must start with '# answer: ...'")
            elif not first.startswith("# varies:"):
                found.append(f"cell {i}: ignored by nbval without a first line '# varies: <why>'")
        if tags & {"answer", "solution"} and cell.get("outputs"):
            found.append(f"cell {i}: an {'answer' if 'answer' in tags else 'solution'} cell committed with outputs")
        if "answer" in tags and "nbval-ignore-output" not in tags:
            found.append(f"cell {i}: an answer cell (committed empty) must be tagged nbval-ignore-output")
        if "solution" in tags and "nbval-skip" not in tags:
            found.append(f"cell {i}: a solution cell without nbval-skip")
        if "forgot=" in source or "checks.check_prediction(" in source:
            found.append(f"cell {i}: a prediction checked with its hints on the page (name it in checks.PREDICTIONS)")
        for key in NAMED_PREDICTION.findall(source):
            if key not in checks.PREDICTIONS:
                found.append(f"cell {i}: no prediction called {key!r} in checks.PREDICTIONS")
        text = output_text(cell)
        if ANSI.search(text):
            found.append(f"cell {i}: colour codes in the output")
        if MACHINE_PATHS.search(text):
            found.append(f"cell {i}: a path of the executing machine in the output ({MACHINE_PATHS.search(text)[0]})")
        if CHATTER.search(text) or CHATTER.search(re.sub(r"#.*nbval.*", "", source)):
            found.append(f"cell {i}: talks about the test harness")
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_keeps_the_rules(path):
    assert problems(json.loads(path.read_text(encoding="utf-8"))) == []


def _cell(source: str, tags=(), outputs=()) -> dict:
    return {"cell_type": "code", "metadata": {"tags": list(tags)}, "source": source, "outputs": list(outputs)}


OUT = [{"output_type": "stream", "name": "stdout", "text": "7,056\n"}]


@pytest.mark.parametrize("cell, expected", [
    (_cell("print(t)", ["nbval-ignore-output"], OUT), "without a first line '# varies"),
    (_cell("m = measure()", ["answer", "nbval-ignore-output"]), "must start with '# answer"),
    (_cell("# answer: run this after\nm = 1", ["answer", "nbval-ignore-output"], OUT), "answer cell committed"),
    (_cell("# answer: run this after\nm = 1", ["answer"]), "must be tagged nbval-ignore-output"),
    (_cell("# Solution\ncheck(1)", ["solution"]), "solution cell without nbval-skip"),
    (_cell("# varies: timing\nprint(t)", [], OUT), "not tagged nbval-ignore-output"),
    (_cell("print(1)", [], [{"output_type": "stream", "name": "stderr", "text": "\x1b[36mray\x1b[0m\n"}]),
     "colour codes"),
    (_cell("print(p)", [], [{"output_type": "stream", "name": "stdout", "text": "/work/main/.venv/lib\n"}]),
     "a path of the executing machine"),
    ({"cell_type": "markdown", "metadata": {}, "source": "This cell is not compared by the tests."},
     "test harness"),
    (_cell('checks.check_prediction(prediction, n, "the frames", rel=0, forgot={30: "no padding"})'),
     "its hints on the page"),
    (_cell('checks.check_prediction_of("04.frames", prediction, n)'), "no prediction called '04.frames'"),
])
def test_each_breach_is_found(cell, expected):
    found = problems({"cells": [cell]})
    assert len(found) == 1 and expected in found[0], found


def test_a_cell_that_keeps_the_rules_passes():
    assert problems({"cells": [_cell("# varies: timing\nprint(t)", ["nbval-ignore-output"], OUT),
                               _cell("# answer: run this after your prediction\nm = 1",
                                     ["answer", "nbval-ignore-output"]),
                               _cell("# Solution\ncheck(1)", ["solution", "nbval-skip"]),
                               _cell('checks.check_prediction_of("04.frames_stored", prediction, n)'),
                               _cell("print(7056)", [], OUT)]}) == []


def reading_problems(nb: dict) -> list[str]:
    """Where a notebook breaks the rule that it ends with its papers: one markdown cell ``## Further reading`` with
    links, after which comes no other text but the ``## Solution`` section (which may hold anything)."""
    cells = nb["cells"]
    at = [i for i, c in enumerate(cells) if c["cell_type"] == "markdown"
          and as_text(c["source"]).lstrip().startswith("## Further reading")]
    if len(at) != 1:
        return [f"{len(at)} '## Further reading' cells (one is the rule)"]
    found = [] if "](http" in as_text(cells[at[0]]["source"]) else ["'## Further reading' links nothing"]
    later = [as_text(c["source"]).lstrip().split("\n", 1)[0] for c in cells[at[0] + 1:] if c["cell_type"] == "markdown"]
    before_solution = later[:later.index("## Solution")] if "## Solution" in later else later
    found += [f"text after the further reading: {line!r}" for line in before_solution]
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_ends_with_its_further_reading(path):
    assert reading_problems(json.loads(path.read_text(encoding="utf-8"))) == []


@pytest.mark.parametrize("cells, expected", [
    ([], "0 '## Further reading' cells"),
    ([{"cell_type": "markdown", "source": "## Further reading\nSutton & Barto"}], "links nothing"),
    ([{"cell_type": "markdown", "source": "## Further reading\n[a](https://arxiv.org/abs/1)"},
      {"cell_type": "markdown", "source": "## Summary\nmore"}, {"cell_type": "markdown", "source": "## Solution"}],
     "text after the further reading"),
])
def test_each_further_reading_breach_is_found(cells, expected):
    found = reading_problems({"cells": cells})
    assert len(found) == 1 and expected in found[0], found


TITLE = re.compile(r"# (?P<number>\d\d[a-z]?) · \S.*\?$")


def opening_problems(nb: dict, stem: str) -> list[str]:
    """Where a notebook breaks the rule that it opens with its title, a question, before any code: the first cell is
    markdown whose first line is ``# NN · <the question>?`` with the notebook's own number."""
    cells = nb["cells"]
    if not cells or cells[0]["cell_type"] != "markdown":
        return ["the first cell is not the title (markdown)"]
    first = as_text(cells[0]["source"]).lstrip().split("\n", 1)[0].rstrip()
    title = TITLE.fullmatch(first)
    if not title:
        return [f"the first line is not a title '# NN · <question>?': {first!r}"]
    if title["number"] != stem.split("_", 1)[0]:
        return [f"the title's number {title['number']} is not the notebook's ({stem})"]
    return []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_opens_with_its_title_and_question(path):
    assert opening_problems(json.loads(path.read_text(encoding="utf-8")), path.stem) == []


@pytest.mark.parametrize("cells, expected", [
    ([], "not the title"),
    ([_cell("# On Colab: get the course"), {"cell_type": "markdown", "source": "# 04 · Why?"}], "not the title"),
    ([{"cell_type": "markdown", "source": "# 04 · Frame sharing\n\ntext"}], "not a title"),
    ([{"cell_type": "markdown", "source": "Some introduction first.\n# 04 · Why?"}], "not a title"),
    ([{"cell_type": "markdown", "source": "# 05 · Why store each frame 8 times?"}], "number 05"),
])
def test_each_opening_breach_is_found(cells, expected):
    found = opening_problems({"cells": cells}, "04_frame_sharing")
    assert len(found) == 1 and expected in found[0], found
