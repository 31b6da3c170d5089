"""Hints teach; they do not hand over the code (notebooks/README.md, rule 8).

Every hint a check in ``dqn_course.lab.checks`` can give (its string constants, f-strings included, but not the
docstrings nor what a check prints once the answer is right), every likely cause the capstone's gate names
(``capstone.diagnose`` and ``gate_verdict``) and every exercise text and hint in the notebooks (the markdown under a
heading that names an exercise, a paragraph that opens an exercise, any paragraph that gives a hint) is read for
code to type: a library call with arguments (``np.zeros(n, dtype)``, ``q.gather(1, a)``), a method call
(``.squeeze(1)``, ``.mean()``), a call whose arguments hold a number or an expression (``gather(1, actions)``), an
expression in brackets (``(1 - dones)``), a comparison (``k <= t``), an expression assigned to a name (``updates =
(total - starts) / every``, ``epsilon *= 0.995``), a name assigned another (``resume = run_dir``), an indexing with
an expression in it (``frames[[...]]``, ``first[:t + 1]``), a backticked expression (`` `a + b` ``), "multiply by
(...)". Naming a function (the one to write, with its parameters: ``td_targets(rewards, dones, ..., double=False)``,
or an API in the form ``run.resume(...)``), a library function without its arguments, a concept in backticks (``
`done` ``), a flag's value (``done=False``), a constant or a formula in mathematical notation (γ, −, ×, ′) is
fine."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECKS = sorted((ROOT / "dqn_course" / "lab" / "checks").glob("*.py"))  # a module per chapter
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

IDENT = r"[A-Za-z_]\w*"
# A function named with its parameters (``stack_at(frames, first, t, stack=4)``) or as ``name(...)``: not code to
# type, so taken out before the patterns below that would read its ``=`` or its default as an expression.
SIGNATURE = re.compile(rf"\b\w+\(\s*(?:{IDENT}(?:\s*=\s*\w+)?(?:\s*,\s*{IDENT}(?:\s*=\s*\w+)?)*)?\s*\)|\b\w+\(\.\.\.\)",
                       re.ASCII)
OPERATOR = r"(?:\*\*|//|==|!=|<=|>=|[-+*/%<>])"  # ASCII only: −, ×, ≤ are the page's mathematical notation


class _Backticked:
    """A backticked span that holds an expression: a binary operator between spaces, or a comparison."""
    inside = re.compile(rf"\s{OPERATOR}\s|\w(?:==|!=)\w", re.ASCII)

    def search(self, text: str) -> bool:
        return any(self.inside.search(span) for span in re.findall(r"`([^`\n]+)`", text))


CODE = {
    "a library call with arguments": re.compile(r"\b(?:np|numpy|torch|F|nn|cv2|math)\.[\w.]+\((?!\)|\.\.\.\))"),
    "a method call with arguments": re.compile(r"\w\.\w+\((?!\)|\.\.\.\))"),
    "a method to type": re.compile(r"(?<![\w)\]])\.\w+\("),
    "a call with a number or an expression for an argument": re.compile(
        rf"\b\w+\([^()]*?(?:\b\d|\w\s*{OPERATOR}\s*[\w(]|\[)[^()]*\)", re.ASCII),
    "an expression in brackets": re.compile(rf"\(\s*[\w.]+\s*{OPERATOR}\s*[\w.]+\s*\)", re.ASCII),
    "an expression assigned to a name": re.compile(
        r"\b[A-Za-z_]\w*\s*(?:[-+*/%]|//)?=\s*[\w().,\s]*?(?:\*\*|[-+*/%])\s*[A-Za-z_(]"),
    "a comparison between names": re.compile(r"\b[A-Za-z_]\w*\s*(?:==|!=|<=|>=|<|>)\s*[A-Za-z_]", re.ASCII),
    "an augmented assignment": re.compile(r"\b[A-Za-z_]\w*\s*(?:\*\*|//|[-+*/%])=\s*[\w(]", re.ASCII),
    "a name assigned another": re.compile(r"\b[A-Za-z_]\w+\s*=\s*(?!(?:True|False|None)\b)[A-Za-z_]\w*", re.ASCII),
    "an indexing with an expression": re.compile(r"\w\[\[|\w\[[^\]\n]*(?:[-+*/%<>:]|\w\s*,)[^\]\n]*\]", re.ASCII),
    "a backticked expression": _Backticked(),
    "a modulo after a bracket": re.compile(r"\)\s*%\s*\w"),
    "multiply by (...)": re.compile(r"\bmultiply (?:[\w']+ )*by \("),
}


MARKUP = re.compile(r"</?(?:details|summary)>")  # a collapsed block's HTML tags: page layout, not code to type


def code_in(text: str) -> list[str]:
    text = MARKUP.sub(" ", text)
    named = SIGNATURE.sub("f()", text)
    return [kind for kind, pattern in CODE.items() if pattern.search(text if kind.startswith("a library") or
                                                                      kind.startswith("a method") else named)]


def _shown_after_a_right_answer(node: ast.AST) -> bool:
    """The message of ``_passed(...)`` or a ``right=`` argument: the learner has answered by then."""
    return isinstance(node, ast.Call) and (
        getattr(node.func, "id", None) == "_passed" or any(k.arg == "right" for k in node.keywords))


def _adds_questions(node: ast.AST) -> bool:
    """A chapter's ``QUESTIONS.update({...})``: its quiz keys."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update"
            and getattr(node.func.value, "id", None) == "QUESTIONS" and len(node.args) == 1
            and isinstance(node.args[0], ast.Dict))


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
        if _adds_questions(node):
            for entry in node.args[0].values:  # (right letter, why it is right, {wrong letter: hint})
                skip.update(id(n) for n in ast.walk(entry.elts[1]))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and id(node) not in skip:
            skip.update(id(v) for v in node.values)
            found.append((node.lineno, "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)))
    found += [(node.lineno, node.value) for node in ast.walk(tree) if isinstance(node, ast.Constant)
              and isinstance(node.value, str) and id(node) not in skip]
    return found


def gate_hints(source: str) -> list[tuple[int, str]]:
    """(line, text) of every hint in the capstone's gate: the strings of ``diagnose`` and ``gate_verdict``."""
    tree = ast.parse(source)
    parts = [ast.get_source_segment(source, node) for node in tree.body
             if isinstance(node, ast.FunctionDef) and node.name in ("diagnose", "gate_verdict")]
    assert len(parts) == 2, "capstone.diagnose or capstone.gate_verdict is gone: update gate_hints"
    return [hint for part in parts for hint in check_hints(part)]


HEADING = re.compile(r"^#{2,6} ")
QUESTION = re.compile(r"^\*\*(?:Question|\d+\. \w+ questions)|^\([a-c]\) ")  # a quiz may quote a line of code


def exercise_texts(nb: dict) -> list[tuple[int, str]]:
    """(cell, paragraph) of the markdown an exercise or a hint is written in: every paragraph under a heading that
    names an exercise (``## Exercise``, ``### Exercise``, ``## 4. Exercise: the loop``), a paragraph that opens one
    (``**Exercise: ...**``) and any paragraph that gives a hint; quiz questions are left out."""
    found, inside = [], False
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        for paragraph in re.split(r"\n\s*\n", "".join(cell["source"])):
            if HEADING.match(paragraph):
                inside = "Exercise" in paragraph.splitlines()[0]
            if QUESTION.match(paragraph):
                continue
            if inside or paragraph.startswith("**Exercise") or re.search(r"(?i)\bhints?\b", paragraph):
                found.append((i, paragraph))
    return found


def test_no_check_hint_hands_over_code():
    hints = [(f"{path.name} line {line}", text) for path in CHECKS
             for line, text in check_hints(path.read_text(encoding="utf-8"))]
    assert len(hints) > 200  # the checks' hints were found, not nothing
    assert [f"{where}: {code_in(text)}: {text[:100]}" for where, text in hints if code_in(text)] == []


def test_no_gate_hint_hands_over_code():
    hints = gate_hints((ROOT / "dqn_course" / "lab" / "capstone.py").read_text(encoding="utf-8"))
    assert len(hints) > 5
    assert [f"line {line}: {code_in(text)}: {text[:100]}" for line, text in hints if code_in(text)] == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_exercise_text_hands_over_code(path):
    texts = exercise_texts(json.loads(path.read_text(encoding="utf-8")))
    assert [f"cell {i}: {code_in(line)}: {line.strip()[:100]}" for i, text in texts for line in text.splitlines()
            if code_in(line)] == []


def test_the_exercises_are_read():
    read = {p.stem.split("_")[0] for p in NOTEBOOKS if exercise_texts(json.loads(p.read_text(encoding="utf-8")))}
    assert {"00", "01", "02", "03", "04", "05", "06", "07", "07c", "08", "09", "09b", "10"} <= read


def test_an_exercise_under_any_heading_is_read():
    nb = {"cells": [{"cell_type": "markdown", "source": ["## 2. Sizes\n\nProse with `a + b`."]},
                    {"cell_type": "markdown", "source": ["### Exercise\n\nType `a + b`.\n\n**Question 1.** `a + b`?"]},
                    {"cell_type": "markdown", "source": ["## 4. Exercise: the loop\n\nStep 1."]},
                    {"cell_type": "markdown", "source": ["## 5. After\n\nMore `a + b`.\n\n(Hint: `a + b`.)"]}]}
    assert exercise_texts(nb) == [(1, "### Exercise"), (1, "Type `a + b`."), (2, "## 4. Exercise: the loop"),
                                  (2, "Step 1."), (3, "(Hint: `a + b`.)")]


@pytest.mark.parametrize("text", [
    "use `q.gather(1, actions)` and then `.squeeze(1)`",
    "multiply the next state's value by (1 - dones)",
    "preallocate with np.zeros((capacity, *item_shape), dtype)",
    "updates = (total_steps - learning_starts) / train_every",
    "the write head wraps: (head + 1) % capacity",
    "average them over the batch (.mean())",
    "convert with cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)",
    "pick each action's value with gather(1, actions)",
    "multiply by (1 - dones)",
    "then call `.squeeze(1)` on it",
    "the mask is the wrong way round: (1 - dones) keeps the next value",
    "killed at step (available_bytes - baseline_bytes) / bytes_per_step",
    "a memory that does not grow (bytes_per_step <= 0) is never killed",
    "multiplicative decay (epsilon *= 0.995 per step)",
    "set resume = run_dir before you call it",
    "Index the frames as frames[[...]] with `stack` indices",
    "stop at the latest k <= t with first[k] True, then frames[max(k, t - 3):t + 1]",
    "average the two frames as `a + b` first",
    "keep the stack only where `first[k] == False`",
    "stop at the latest k <= t with first[k] True",
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
    "write `bytes_per_transition(step_a, rss_a, step_b, rss_b)` and pass the function",
    "write stack_at(frames, first, t, stack=4)",
    "write my_dqn(cfg, folder, td_targets, td_loss, epsilon_schedule, minutes=None)",
    "a truncated episode has done=False, yet the stream restarts",
    "*Why (1 − done)*, above section 1; the largest return is 1 / (1 - γ)",
    "return the state whose newest frame is `frames[t]`; `done` is not `episode_end`",
    "one update per train_every = 4 agent steps, not one per step",
    "Q(s, a) of shape (B, 1) against targets of shape (B,); with `double` on, Q_target(s', a*)",
    "(Python's `try` / `finally`); `--time-limit 60` and `breakout-cpu`",
    "the mask for endings is the wrong way round (*Why (1 − done)*)",
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
