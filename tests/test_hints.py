"""Hints teach; they do not hand over the code (notebooks/README.md, rule 8).

Every hint a check in ``dqn_course.lab.checks`` can give (its string constants, f-strings included, but not the
docstrings nor what a check prints once the answer is right) and every exercise text in the notebooks (the markdown
of each ``## Exercise`` section) is read for code to type: a library call with arguments (``np.zeros(n, dtype)``,
``q.gather(1, a)``), a method call (``.squeeze(1)``, ``.mean()``), an expression assigned to a name
(``updates = (total - starts) / every``), a modulo after a bracket, "multiply by (...)". Naming a function (the one
to write, or an API in the form ``run.resume(...)``), a library function without its arguments, a constant or a
formula in mathematical notation is fine."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECKS = ROOT / "dqn_course" / "lab" / "checks.py"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

CODE = {
    "a library call with arguments": re.compile(r"\b(?:np|numpy|torch|F|nn|cv2|math)\.[\w.]+\((?!\)|\.\.\.\))"),
    "a method call with arguments": re.compile(r"\w\.\w+\((?!\)|\.\.\.\))"),
    "a method to type": re.compile(r"(?<![\w)\]])\.\w+\("),
    "an expression assigned to a name": re.compile(
        r"\b[A-Za-z_]\w*\s*(?:[-+*/%]|//)?=\s*[\w().,\s]*?(?:\*\*|[-+*/%])\s*[A-Za-z_(]"),
    "a modulo after a bracket": re.compile(r"\)\s*%\s*\w"),
    "multiply by (...)": re.compile(r"\bmultiply (?:[\w']+ )*by \("),
}


def code_in(text: str) -> list[str]:
    return [kind for kind, pattern in CODE.items() if pattern.search(text)]


def _shown_after_a_right_answer(node: ast.AST) -> bool:
    """The message of ``_passed(...)`` or a ``right=`` argument: the learner has answered by then."""
    return isinstance(node, ast.Call) and (
        getattr(node.func, "id", None) == "_passed" or any(k.arg == "right" for k in node.keywords))


def check_hints(source: str) -> list[tuple[int, str]]:
    """(line, text) of every hint in the checks' source: its strings, less docstrings, right-answer messages and
    the "why it is right" of each quiz question."""
    tree = ast.parse(source)
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value,
                                                                                             ast.Constant):
            skip.add(id(body[0].value))  # a docstring
        if _shown_after_a_right_answer(node):
            kept = [k.value for k in node.keywords if k.arg == "right"] or node.args
            skip.update(id(n) for arg in kept for n in ast.walk(arg))
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "QUESTIONS" for t in node.targets):
            for entry in node.value.values:  # (right letter, why it is right, {wrong letter: hint})
                skip.update(id(n) for n in ast.walk(entry.elts[1]))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and id(node) not in skip:
            skip.update(id(v) for v in node.values)
            found.append((node.lineno, "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)))
    found += [(node.lineno, node.value) for node in ast.walk(tree) if isinstance(node, ast.Constant)
              and isinstance(node.value, str) and id(node) not in skip]
    return found


def exercise_texts(nb: dict) -> list[tuple[int, str]]:
    """(cell, text) of the markdown in each ``## Exercise...`` section, quiz questions left out (a question may ask
    about a line of code)."""
    found, inside = [], False
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        text = "".join(cell["source"])
        if text.startswith("## "):
            inside = text.startswith("## Exercise")
        if (inside or text.startswith("**Exercise")) and not text.startswith("**Question"):
            found.append((i, text))
    return found


def test_no_check_hint_hands_over_code():
    hints = check_hints(CHECKS.read_text(encoding="utf-8"))
    assert len(hints) > 200  # the checks' hints were found, not nothing
    assert [f"line {line}: {code_in(text)}: {text[:100]}" for line, text in hints if code_in(text)] == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_exercise_text_hands_over_code(path):
    texts = exercise_texts(json.loads(path.read_text(encoding="utf-8")))
    assert [f"cell {i}: {code_in(line)}: {line.strip()[:100]}" for i, text in texts for line in text.splitlines()
            if code_in(line)] == []


def test_the_exercises_are_read():
    read = {p.stem.split("_")[0] for p in NOTEBOOKS if exercise_texts(json.loads(p.read_text(encoding="utf-8")))}
    assert {"01", "02", "04", "05", "06", "07", "08"} <= read


@pytest.mark.parametrize("text", [
    "use `q.gather(1, actions)` and then `.squeeze(1)`",
    "multiply the next state's value by (1 - dones)",
    "preallocate with np.zeros((capacity, *item_shape), dtype)",
    "updates = (total_steps - learning_starts) / train_every",
    "the write head wraps: (head + 1) % capacity",
    "average them over the batch (.mean())",
    "convert with cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)",
])
def test_a_planted_code_hint_is_found(text):
    assert code_in(text)


@pytest.mark.parametrize("text", [
    "write td_targets(rewards, dones, next_states, online, target, gamma, double=False)",
    "carry on from the step run.resume(...) returns (section 4, step 1)",
    "compute the targets under `torch.no_grad()`: a target is a constant",
    "the screen is RGB, not BGR: OpenCV's RGB-to-gray conversion, cv2.COLOR_RGB2GRAY",
    "use β = 0.5, not β = 1 (β is annealed towards 1 over the run)",
    "y = r + γ (1 − done) maxₐ′ Q_target(s′, a′), the TD target of section 2",
    "1 GB here is 10^9 bytes, not 2^30; at most 90% of the RAM",
])
def test_naming_a_function_or_a_formula_is_fine(text):
    assert code_in(text) == []


def test_hints_shown_only_after_a_right_answer_are_not_read():
    source = '''
def check(x):
    """Docstring with q.gather(1, a)."""
    if x == 1:
        return _passed("right: q.gather(1, a).squeeze(1)")
    _check_number(x, 1, right="that is (a - b) / c = d", otherwise="think of the axis")
    raise AssertionError("use q.gather(1, a)")
'''
    assert sorted(text for _, text in check_hints(source)) == ["think of the axis", "use q.gather(1, a)"]
