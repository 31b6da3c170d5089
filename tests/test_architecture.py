"""The package's shape: the import contracts of pyproject.toml (``[tool.importlinter]``, which ``make lint`` checks
with import-linter) hold and fail when broken, every import of the package names a module it has, and README's
module tables are the ones data/make_readme.py makes.
"""
from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _data_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "dqn_course"
LAB = f"{PACKAGE}.lab"
LINT_IMPORTS = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def package_modules(root: Path = ROOT, package: str = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of the package (``__init__.py`` names its package)."""
    modules = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if "__pycache__" in parts:
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if all((root.joinpath(*parts[:i]) / "__init__.py").is_file() for i in range(1, len(parts))):
            modules[".".join(parts)] = path  # only folders that are packages all the way down
    return modules


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """import-linter over the ``dqn_course`` in ``root``, with ``root``'s pyproject.toml (what ``make lint`` runs)."""
    env = dict(os.environ, PYTHONPATH=str(root))  # root's package first, before the installed one
    return subprocess.run([sys.executable, "-c", LINT_IMPORTS, "--no-cache", "--no-logo", "--config",
                           str(root / "pyproject.toml")], cwd=root, env=env, capture_output=True, text=True,
                          timeout=300)


def test_the_package_is_found():
    modules = package_modules()
    assert PACKAGE in modules and LAB in modules, sorted(modules)
    assert any(m.startswith(LAB + ".") for m in modules), "dqn_course/lab/ holds no module"
    assert len([m for m in modules if not m.startswith(LAB)]) > 5, sorted(modules)


def test_the_import_contracts_hold():
    out = lint_imports(ROOT)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert " 0 broken" in out.stdout


def _plant(path: Path, code: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + "\n\n" + code, encoding="utf-8")


def test_the_contracts_fail_on_planted_violations(tmp_path):
    """A copy of the package with one violation of each contract: a lab import inside a function of the library,
    an import up a layer of dqn_course.distributed and one of dqn_course.replay that closes a cycle, and a module
    on no layer."""
    shutil.copytree(ROOT / PACKAGE, tmp_path / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    package = tmp_path / PACKAGE
    _plant(package / "train.py", "def planted():\n    from dqn_course.lab import checks\n    return checks\n")
    _plant(package / "distributed" / "config.py", "def planted():\n    from dqn_course.distributed import driver\n"
                                                   "    return driver\n")
    _plant(package / "replay" / "base.py", "def planted():\n    from dqn_course.replay import stores\n"
                                            "    return stores\n")
    (package / "planted.py").write_text('"""On no layer."""\n')
    out = lint_imports(tmp_path)
    assert out.returncode != 0, out.stdout[-6000:]
    text = " ".join(out.stdout.split())  # contract names wrap across lines
    assert "Contracts: 0 kept, 5 broken." in text, out.stdout[-6000:]
    assert "dqn_course.train is not allowed to import dqn_course.lab" in text
    assert "dqn_course.distributed.config is not allowed to import dqn_course.distributed.driver" in text
    assert "dqn_course.replay.base is not allowed to import dqn_course.replay.stores" in text
    assert "dqn_course.planted" in text


def missing_imports(root: Path = ROOT) -> list[str]:
    """Every ``import dqn_course.x`` and ``from dqn_course.x import y`` (absolute or relative, anywhere in a module)
    whose ``dqn_course.x`` is not a module of the package in ``root``, as ``file:line: dqn_course.x``."""
    modules = package_modules(root)
    missing = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
                targets = [".".join(base + ([node.module] if node.module else []))]
            else:
                continue
            missing += [f"{path.relative_to(root)}:{node.lineno}: {t}" for t in targets
                        if (t == PACKAGE or t.startswith(PACKAGE + ".")) and t not in modules]
    return missing


def test_every_import_of_the_package_names_one_of_its_modules():
    """An import of a module that is not there (moved or renamed) fails only when its line runs: in a function,
    perhaps never in the tests; import-linter's graph leaves such an import out. Read them all instead."""
    missing = missing_imports()
    assert not missing, "imports of modules dqn_course does not have:\n  " + "\n  ".join(missing)


@pytest.mark.parametrize("code, target", [("from dqn_course.bench import fill", "dqn_course.bench"),
                                          ("import dqn_course.replay.gone", "dqn_course.replay.gone"),
                                          ("from ..bench import fill", "dqn_course.bench")])
def test_an_import_of_a_missing_module_is_caught(tmp_path, code, target):
    package = tmp_path / PACKAGE
    (package / "replay").mkdir(parents=True)
    for rel in ("__init__.py", "replay/__init__.py"):
        (package / rel).write_text('"""pkg."""\n')
    (package / "replay" / "base.py").write_text(f'"""base."""\n\n\ndef f():\n    {code}\n')
    assert missing_imports(tmp_path) == [f"dqn_course/replay/base.py:5: {target}"]


def test_readme_module_tables_match_the_package():
    make_readme = load_script("make_readme")
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text[slice(*make_readme.block_span(text))] == make_readme.readme_modules.readme_block(), (
        "README.md's module tables differ from dqn_course/: run `make readme` (python data/make_readme.py)")


def test_readme_lists_every_module_once():
    library, lab = load_script("make_readme").readme_modules.module_rows()
    names = [name for name, _ in library + lab]
    assert len(names) == len(set(names))
    expected = {m for m in package_modules() if m not in (PACKAGE, LAB)}
    assert set(names) == expected
    assert all(name.startswith(LAB + ".") for name, _ in lab)
    assert not any(name.startswith(LAB) for name, _ in library)



# A path a docstring or comment names: folders, a file name and one of the repository's file kinds.
NAMED_PATH = re.compile(r"(?<![\w/.<{-])((?:[\w.-]+/)+[\w.*-]+\.(?:py|md|json|jsonl|csv|toml|yml|yaml|txt|ipynb|sh))")


def missing_paths(text: str, root: Path) -> list[str]:
    """The paths ``text`` names that match nothing under ``root`` (a ``*`` in a name is a glob)."""
    return sorted({p for p in NAMED_PATH.findall(text)
                   if not (any(root.glob(p)) if "*" in p else (root / p).exists())})


def test_the_package_cites_only_files_in_the_repository():
    """A docstring or comment that points the reader at a file points at one that is here (a design document kept
    elsewhere, or a script since removed, is a dead end for a newcomer)."""
    assert missing_paths("see docs/DESIGN.md and benchmarks/sampling.py, data/bench/*.json", ROOT) == ["docs/DESIGN.md"]
    dead = {str(p.relative_to(ROOT)): missing for p in sorted((ROOT / "dqn_course").rglob("*.py"))
            if (missing := missing_paths(p.read_text(encoding="utf-8"), ROOT))}
    assert not dead, f"files named in the package that the repository does not have: {dead}"


MAX_LINES = 600  # a module one can read in a sitting; past it, split it by what its parts do


def long_files(root: Path) -> list[str]:
    return [f"{path.relative_to(root)}: {n} lines" for folder in ("dqn_course", "benchmarks", "data")
            for path in sorted((root / folder).rglob("*.py"))
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES]


def test_no_python_file_of_the_package_benchmarks_or_data_is_over_600_lines(tmp_path):
    assert long_files(ROOT) == []
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1), encoding="utf-8")  # a planted one
    assert long_files(tmp_path) == [f"{Path('data/long.py')}: {MAX_LINES + 1} lines"]
