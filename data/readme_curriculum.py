"""README's blocks read off the notebooks: the curriculum (each notebook's question and what its committed outputs
say) and the memory guard's refusal as a notebook printed it."""
from __future__ import annotations

import sys
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


SUMMARY = re.compile(r"^(?:Rung|Notebook) \w+: ")  # a summary line: "Rung 05: ..." (a rung of the memory ladder) or
#                                                    "Notebook 06: ..." (a chapter that takes no rung off it)
LADDER = re.compile(r"^memory ladder \| ")  # a rung of the memory ladder: "memory ladder | what | bytes | 1M"
NO_SUMMARY = "(no summary line)"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
MAX_LINES = 8


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else (value or "")


def stdout_lines(cell: dict) -> list[str]:
    """What a code cell printed to stdout, as non-empty lines with runs of spaces collapsed."""
    text = "".join(_text(o.get("text")) for o in cell.get("outputs", [])
                   if o.get("output_type") == "stream" and o.get("name") == "stdout")
    return [re.sub(r"\s+", " ", ANSI.sub("", line)).strip() for line in text.splitlines() if line.strip()]


def _is_exercise_or_solution(cell: dict) -> bool:
    tags = cell.get("metadata", {}).get("tags", [])
    lines = stdout_lines(cell)
    return ("solution" in tags or _text(cell.get("source")).lstrip().startswith("# Solution")
            or bool(lines) and lines[0].startswith(("✓", "Not answered yet", "Answer both")))


def notebook_question(nb: dict) -> str:
    """The title cell's heading without its number: ``# 05 · Why is the deque slow and fat?`` -> the question."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            for line in _text(cell.get("source")).splitlines():
                if line.startswith("#"):
                    heading = line.lstrip("#").strip()
                    return heading.split("·", 1)[1].strip() if "·" in heading else heading
            break
    return "(no title cell)"


def notebook_answer(nb: dict) -> tuple[str, list[str]]:
    """``(kind, lines)``: what a notebook's committed outputs answer, from the first of

    * ``"summary"``: the last cell that printed a summary line (``Rung NN: ...`` or ``Notebook NN: ...``):
      everything that cell printed, the prefix dropped;
    * ``"ladder"``: the last cell that printed a memory-ladder line (``memory ladder | ...``): everything it printed;
    * ``"last output"``: no such line: the last cell that printed anything (exercises and solutions left out);
    * ``"none"``: nothing printed at all.
    """
    cells = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    for kind, pattern in (("summary", SUMMARY), ("ladder", LADDER)):
        for cell in reversed(cells):
            lines = stdout_lines(cell)
            if any(pattern.match(line) for line in lines):
                return kind, [SUMMARY.sub("", line) for line in lines]
    for cell in reversed(cells):
        lines = stdout_lines(cell)
        if lines and not _is_exercise_or_solution(cell):
            return "last output", lines
    return "none", []


def _cell_text(line: str) -> str:
    """One printed line as Markdown table-cell text."""
    if LADDER.match(line):
        parts = [p.strip() for p in line.split("|")[1:]]
        line = f"{parts[0]}: {', '.join(parts[1:])}"
    return line.replace("|", r"\|").replace("*", r"\*").replace("<", "&lt;")


def notebook_paths(root: Path = ROOT) -> list[Path]:
    return sorted((root / "notebooks").glob("*.ipynb"))


def curriculum_rows(root: Path = ROOT) -> list[tuple[str, str, str]]:
    """``(notebook, question, answer)`` for every notebook, the answer as Markdown (lines joined by ``<br>``)."""
    rows = []
    for path in notebook_paths(root):
        nb = json.loads(path.read_text(encoding="utf-8"))
        kind, lines = notebook_answer(nb)
        cut = lines[:MAX_LINES] + (["…"] if len(lines) > MAX_LINES else [])
        answer = "<br>".join(_cell_text(line) for line in cut)
        if kind in ("last output", "none"):
            answer = NO_SUMMARY + (f"; its last printed output:<br>{answer}" if answer else "")
        rows.append((path.stem, notebook_question(nb).replace("|", r"\|"), answer))
    return rows


def executions_line(root: Path = ROOT) -> str:
    """Where and when the committed outputs were made, from ``data/executions.json`` (``make execute``)."""
    path = root / "data" / "executions.json"
    records = json.loads(path.read_text(encoding="utf-8"))["executions"] if path.is_file() else {}
    if not records:
        return "No notebook execution is recorded yet (`make execute` records them in `data/executions.json`)."
    if str(ROOT) not in sys.path:  # dqn_course.lab.figures needs only the standard library: no set-up either
        sys.path.insert(0, str(ROOT))
    from dqn_course.lab.figures import describe  # the records' machine is figures.machine(): described the same way

    machines = sorted({f"{describe(r['machine'])}, {r['machine']['torch_threads']} torch threads"
                       for r in records.values()})
    starts = sorted(r["start"] for r in records.values())
    ends = sorted(r["end"] for r in records.values())
    most = max(r["others_cores"] for r in records.values())
    return (f"Executed by `make execute`, one notebook at a time, in default mode, on {' and on '.join(machines)}, "
            f"between {starts[0][:16].replace('T', ' ')} and {ends[-1][:16].replace('T', ' ')} UTC; other processes "
            f"used at most {most:.0%} of a core while a notebook ran (`data/executions.json`).")


def curriculum_body(root: Path = ROOT) -> str:
    lines = [executions_line(root), "",
             "| notebook | the question | what its committed outputs answer (summary line) |", "|---|---|---|"]
    lines += [f"| [`{name}`](notebooks/{name}.ipynb) | {question} | {answer} |"
              for name, question, answer in curriculum_rows(root)]
    return "\n".join(lines)


def guard_body(root: Path = ROOT) -> str:
    """The first refusal of a ``FrameSharingMemory`` by the memory guard that a notebook printed."""
    for path in notebook_paths(root):
        nb = json.loads(path.read_text(encoding="utf-8"))
        for cell in nb.get("cells", []):
            for line in stdout_lines(cell) if cell.get("cell_type") == "code" else []:
                if line.startswith("InsufficientMemoryError: "):
                    return (f"What notebook `{path.stem}` printed when it asked for more than the machine has:\n\n"
                            f"```text\n{line}\n```")
    return "(no notebook printed a memory-guard refusal)"
