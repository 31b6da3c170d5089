"""README's module tables: one row per module of the library and of the lab, its name and its docstring's first
line."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PACKAGE = "dqn_course"
LAB = "lab"
BEGIN, END = "<!-- modules:begin -->", "<!-- modules:end -->"


def first_docstring_line(path: Path) -> str:
    """The first line of a module's docstring, as Markdown (``code`` becomes `code`, pipes escaped)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    if not doc or not doc.strip():
        raise ValueError(f"{path.relative_to(ROOT)} has no module docstring: its first line is the module's "
                         "row in README.md's module tables")
    line = doc.strip().splitlines()[0].strip()
    return re.sub(r"``(.+?)``", r"`\1`", line).replace("|", r"\|")


def _modules_of(folder: Path, name: str) -> list[tuple[str, Path]]:
    """``(dotted name, file)`` of a package folder's modules, sorted: ``.py`` files (not ``__init__``), then
    each sub-package (its ``__init__.py``) followed by its own modules."""
    rows = []
    for path in sorted(folder.iterdir()):
        if path.suffix == ".py" and path.name != "__init__.py":
            rows.append((f"{name}.{path.stem}", path))
        elif path.is_dir() and (path / "__init__.py").is_file():
            rows.append((f"{name}.{path.name}", path / "__init__.py"))
            rows += _modules_of(path, f"{name}.{path.name}")
    return sorted(rows)


def module_rows(root: Path = ROOT) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """``(module, first docstring line)`` rows for the library and for the lab."""
    package = root / PACKAGE
    lab_name = f"{PACKAGE}.{LAB}"
    library, lab = [], []
    for name, path in _modules_of(package, PACKAGE):
        in_lab = name == lab_name or name.startswith(lab_name + ".")
        if name == lab_name:
            continue  # the lab package itself is described by the text above its table
        (lab if in_lab else library).append((name, first_docstring_line(path)))
    return library, lab


def _table(rows: list[tuple[str, str]]) -> list[str]:
    return ["| module | what it holds |", "|---|---|"] + [f"| `{name}` | {line} |" for name, line in rows]


def modules_body(root: Path = ROOT) -> str:
    library, lab = module_rows(root)
    lines = [f"**The library** ({len(library)} modules): what training and the distributed run are built from.", ""]
    lines += _table(library)
    lines += ["", (f"**The lab** (`{PACKAGE}.{LAB}`, {len(lab)} modules): the notebooks' and benchmarks' helpers, "
                   "which the library never imports."), ""]
    lines += _table(lab)
    return "\n".join(lines)


def readme_block(root: Path = ROOT) -> str:
    """README's module block, its markers included."""
    return f"{BEGIN}\n{modules_body(root)}\n{END}"
