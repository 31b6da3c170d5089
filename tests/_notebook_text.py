"""What a reader sees of a committed notebook's cell, as text: its source and its outputs (images are not read)."""
from __future__ import annotations


def as_text(value) -> str:
    """A notebook field as one string (nbformat stores text as a string or a list of lines)."""
    return "".join(value) if isinstance(value, list) else (value or "")


def output_text(cell: dict) -> str:
    """Every text output of ``cell``: streams, plain-text results and tracebacks."""
    parts = []
    for out in cell.get("outputs", []):
        parts.append(as_text(out.get("text")))
        parts.append(as_text(out.get("data", {}).get("text/plain")))
        parts += [as_text(line) for line in out.get("traceback", [])]
    return "".join(parts)
