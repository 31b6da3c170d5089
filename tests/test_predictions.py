"""No answer on the page before the learner answers (notebooks/README.md, rule 6), checked by the numbers.

``make execute`` keeps what each ``answer`` cell printed in ``data/executions.json`` before it empties the cell; an
answer cell prints its measured value last (or after ``measured:``). That value is looked for in everything on the
page above the answer cell (markdown, code and outputs as committed): a number there that the prediction's check
would accept as the prediction (within the check's ``rel``) gives the answer away. Answers below 10 are not looked
for: such counts are on any page (they are guarded by the rule that the measurement sits in the answer cell)."""
from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest
from _notebook_text import as_text, output_text

from dqn_course.lab import checks

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
MANIFEST = ROOT / "data" / "executions.json"
NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.])\d+(?:\.\d+)?")
REL = re.compile(r"\brel\s*=\s*([0-9.e-]+)")
NAMED = re.compile(r"check_prediction_of\(\s*[\"']([^\"']+)[\"']")
DEFAULT_REL = inspect.signature(checks.check_prediction).parameters["rel"].default
SMALLEST = 10


def numbers(text: str) -> list[float]:
    return [float(m.replace(",", "")) for m in NUMBER.findall(text)]


def page_text(cell: dict) -> str:
    """What a reader sees of a cell: its source and its text outputs (images are not read)."""
    return as_text(cell.get("source")) + "\n" + output_text(cell)


def measured_value(answer_text: str) -> float | None:
    """The answer's measured value: the first number after the last ``measured:``, else the last number printed."""
    tail = answer_text.rsplit("measured:", 1)[1] if "measured:" in answer_text else None
    found = numbers(tail)[:1] if tail is not None else numbers(answer_text)[-1:]
    return found[0] if found else None


def tolerance(cells: list[dict], answer_at: int) -> float:
    """The ``rel`` of the first check after the answer cell: a named prediction's (``checks.PREDICTIONS``), else the
    one the call writes (the check's default when it names none)."""
    for cell in cells[answer_at + 1:]:
        source = as_text(cell.get("source"))
        if "checks.check_" in source:
            named = NAMED.search(source)
            if named:
                return checks.PREDICTIONS[named.group(1)].rel
            found = REL.search(source)
            return float(found.group(1)) if found else DEFAULT_REL
    return DEFAULT_REL


def given_away(cells: list[dict], answer_at: int, answer_text: str) -> list[str]:
    """Each place above the answer cell that states a number the prediction's check would accept."""
    rel = tolerance(cells, answer_at)
    value = measured_value(answer_text)
    wanted = [value] if value is not None and abs(value) >= SMALLEST else []
    found = []
    for i, cell in enumerate(cells[:answer_at]):
        for x in numbers(page_text(cell)):
            for a in wanted:
                if abs(x - a) <= rel * abs(a):
                    found.append(f"cell {i} states {x:g}, the answer of cell {answer_at} ({a:g}, within {rel:g})")
    return sorted(set(found))


def answer_cells(nb: dict) -> list[int]:
    return [i for i, c in enumerate(nb["cells"])
            if c["cell_type"] == "code" and "answer" in c.get("metadata", {}).get("tags", [])]


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if answer_cells(json.loads(p.read_text(encoding="utf-8")))],
                         ids=lambda p: p.stem)
def test_nothing_above_a_prediction_states_its_answer(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    record = json.loads(MANIFEST.read_text(encoding="utf-8"))["executions"].get(path.stem, {})
    recorded = record.get("answers")
    assert recorded is not None, f"no recorded answers: re-execute it (make execute NB={path.stem.split('_')[0]})"
    # The record is keyed by where each answer cell was when it ran; markdown edits since may have moved them, so
    # the answers are matched in order (the code cells, answers included, are those of the recorded execution:
    # tests/test_executions.py).
    at = answer_cells(nb)
    printed = [recorded[k] for k in sorted(recorded, key=int)]
    assert len(printed) == len(at), "the recorded answers are not this notebook's answer cells: re-execute"
    assert all(measured_value(text) is not None for text in printed), "an answer cell printed no number"
    assert [hit for i, text in zip(at, printed) for hit in given_away(nb["cells"], i, text)] == []


def _md(text: str) -> dict:
    return {"cell_type": "markdown", "source": text}


def _code(source: str, out: str = "", tags=()) -> dict:
    outputs = [{"output_type": "stream", "name": "stdout", "text": out}] if out else []
    return {"cell_type": "code", "source": source, "metadata": {"tags": list(tags)}, "outputs": outputs}


CHECK = _code('checks.check_prediction(prediction, factor, "the factor", rel=0.05)')


@pytest.mark.parametrize("above, expected", [
    ([_code("print(top / bottom)", "114.3x less than the top\n")], 1),      # an output within the check's 5%
    ([_md("The bottom rung needs 113 times less.")], 1),                     # the text
    ([_code("factor = 806_400 / 7_056  # 114.3")], 1),                       # a comment in the code
    ([_md("Predict the factor from 806,400 bytes down to 7,056 bytes.")], 0),  # the inputs, not the answer
    ([_code("print(n)", "121.0\n")], 0),                                     # outside the check's tolerance
])
def test_a_planted_answer_above_its_prediction_is_found(above, expected):
    cells = [*above, _md("Predict the factor."), _code("prediction = None"),
             _code("# answer: run this after your prediction\nprint(f'measured: {factor:.0f}x')", tags=["answer"]),
             CHECK]
    assert len(given_away(cells, len(above) + 2, "measured: 113x\n")) == expected


def test_a_named_prediction_is_held_to_its_own_tolerance():
    key = "07b.state_file"  # within 2%
    cells = [_md("Some rung is 111 times smaller."), _md("The factor is 150."), _code("# answer", tags=["answer"]),
             _code(f'checks.check_prediction_of("{key}", prediction, measured_factor)')]
    assert tolerance(cells, 2) == checks.PREDICTIONS[key].rel
    assert given_away(cells, 2, "measured: 113x\n") == ["cell 0 states 111, the answer of cell 2 (113, within 0.02)"]


def test_an_exact_check_flags_only_the_exact_number():
    cells = [_md("A batch holds 32 transitions."), _code("# answer: ...", tags=["answer"]),
             _code('checks.check_prediction(prediction, calls, "the calls", rel=0)')]
    assert given_away(cells, 1, "one replay of 32 transitions called predict 33 times\n") == []
    assert given_away(cells, 1, "one replay of 16 transitions called predict 32 times\n") != []


@pytest.mark.parametrize("text, value", [
    ("one replay() of 32 sampled transitions called predict 64 times\n", 64),
    ("A.L.E banner 0.12.1\nmeasured: 113x\n", 113),
    ("transitions 0..99: 100 transitions\nmeasured: 733,824 bytes of pixels (4-frame state + 100 frames)\n", 733_824),
    ("nothing to see\n", None),
])
def test_the_measured_value_is_read_from_what_the_answer_printed(text, value):
    assert measured_value(text) == value
