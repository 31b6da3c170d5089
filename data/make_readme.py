"""README's module tables, made from the package's own files (nothing typed by hand).

    python data/make_readme.py           # rewrite README's module block from dqn_course/
    python data/make_readme.py --check   # exit 1 if README's block differs from dqn_course/

README.md, between ``<!-- modules:begin -->`` and ``<!-- modules:end -->``, holds two tables: the library
(``dqn_course/*.py`` and every sub-package but the lab, each sub-package followed by its modules) and the
lab (``dqn_course/lab/*.py``), one row per module: its name and the first line of its docstring. The
files are read, not imported, so no heavy dependency loads; a module without a docstring is an error.
"""
from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

DATA = Path(__file__).resolve().parent
ROOT = DATA.parent
README = ROOT / "README.md"
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


def readme_block(root: Path = ROOT) -> str:
    """README's module block, its markers included."""
    library, lab = module_rows(root)
    lines = [BEGIN, f"**The library** ({len(library)} modules): what training and the distributed run are built from.",
             ""]
    lines += _table(library)
    lines += ["", (f"**The lab** (`{PACKAGE}.{LAB}`, {len(lab)} modules): the notebooks' and benchmarks' helpers, "
                   "which the library never imports."), ""]
    lines += _table(lab)
    return "\n".join(lines + [END])


def block_span(text: str) -> tuple[int, int]:
    """Where README's module block starts and ends, its markers included."""
    return text.index(BEGIN), text.index(END) + len(END)


def write_readme_block(block: str) -> bool:
    """Replace README's block; returns whether anything changed."""
    text = README.read_text(encoding="utf-8")
    start, end = block_span(text)
    new = text[:start] + block + text[end:]
    README.write_text(new, encoding="utf-8")
    return new != text


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="only compare README's block with dqn_course/")
    args = p.parse_args()
    if args.check:
        text = README.read_text(encoding="utf-8")
        if text[slice(*block_span(text))] != readme_block():
            raise SystemExit("README.md's module tables differ from dqn_course/: run python data/make_readme.py")
        print("README.md's module tables match dqn_course/")
        return
    print("README.md " + ("updated" if write_readme_block(readme_block()) else "unchanged"))


if __name__ == "__main__":
    main()
