"""The package's shape, read from its source (nothing is imported): the library never imports the lab, the
package has no import cycle, every import of it names a module it has, and README's module tables are the
ones data/make_readme.py makes.

Every import counts: module level or inside a function, ``import x`` or ``from x import y``, absolute or
relative, and ``importlib.import_module("x")`` with a literal name. A package (``dqn_course/foo/__init__.py``)
is the module ``dqn_course.foo``; ``from dqn_course.foo import bar`` is an import of ``dqn_course.foo.bar``
when that is a module, else of ``dqn_course.foo``.
"""
from __future__ import annotations

import ast
import importlib.util
import itertools
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "dqn_course"
LAB = f"{PACKAGE}.lab"


@dataclass(frozen=True)
class Import:
    """One import in a module: the module it loads, where, and whether it sits inside a function."""
    target: str
    path: Path
    line: int
    in_function: bool

    def where(self, root: Path) -> str:
        return f"{self.path.relative_to(root)}:{self.line}" + (" (inside a function)" if self.in_function else "")


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


def _function_lines(tree: ast.AST) -> set[int]:
    """Line numbers of the statements inside functions (lambdas included), for the "inside a function" flag."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            body = node.body if isinstance(node.body, list) else [node.body]
            for stmt in body:
                lines.update(n.lineno for n in ast.walk(stmt) if hasattr(n, "lineno"))
    return lines


def imports_of(name: str, path: Path, modules: dict[str, Path], package: str = PACKAGE) -> list[Import]:
    """The package's modules that ``name`` (at ``path``) imports, each resolved as the module docstring says."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    in_function = _function_lines(tree)
    is_package = path.name == "__init__.py"

    def ours(module: str) -> bool:
        return module == package or module.startswith(package + ".")

    def found(target: str, node: ast.AST) -> Import:
        return Import(target, path, node.lineno, node.lineno in in_function)

    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [found(alias.name, node) for alias in node.names if ours(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's package, one level up per extra dot
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if not ours(module):
                continue
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                out.append(found(sub if sub in modules else module, node))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = (func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name)
                      else None)
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str) \
                    and ours(node.args[0].value):
                out.append(found(node.args[0].value, node))
    return out


def import_graph(modules: dict[str, Path], package: str = PACKAGE) -> dict[str, dict[str, list[Import]]]:
    """module -> {imported module of the package -> the imports that load it}; a module importing itself is left
    out (``from dqn_course.replay import X`` inside ``dqn_course/replay/__init__.py`` is no cycle)."""
    graph = {}
    for name, path in modules.items():
        edges: dict[str, list[Import]] = {}
        for imp in imports_of(name, path, modules, package):
            if imp.target != name:
                edges.setdefault(imp.target, []).append(imp)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str] | dict]) -> list[str] | None:
    """One cycle of a directed graph as ``[a, b, ..., a]`` (each node imports the next), or None when there is none.

    Depth-first, nodes and edges in sorted order, so the same graph always reports the same cycle.
    """
    WHITE, GREY, BLACK = 0, 1, 2
    colour = {node: WHITE for node in graph}
    for start in sorted(graph):
        if colour[start] != WHITE:
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        colour[start] = GREY
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                colour[path.pop()] = BLACK
                stack.pop()
            elif colour.get(nxt, WHITE) == GREY:
                return path[path.index(nxt):] + [nxt]
            elif colour.get(nxt, WHITE) == WHITE and nxt in graph:
                colour[nxt] = GREY
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def describe_cycle(cycle: list[str], graph: dict[str, dict[str, list[Import]]], root: Path = ROOT) -> str:
    steps = []
    for a, b in itertools.pairwise(cycle):
        steps.append(f"  {a} -> {b}   ({', '.join(dict.fromkeys(imp.where(root) for imp in graph[a][b]))})")
    return "import cycle:\n" + "\n".join(steps)


def lab_imports(modules: dict[str, Path], root: Path = ROOT, package: str = PACKAGE) -> list[str]:
    """Every import of the lab by a module outside it, as ``module imports target at file:line``."""
    lab = f"{package}.lab"

    def in_lab(module: str) -> bool:
        return module == lab or module.startswith(lab + ".")

    return list(dict.fromkeys(f"{name} imports {imp.target} at {imp.where(root)}"
                              for name, path in modules.items() if not in_lab(name)
                              for imp in imports_of(name, path, modules, package) if in_lab(imp.target)))


# --- the real package ------------------------------------------------------------------------------------------

def test_the_package_is_found():
    modules = package_modules()
    assert PACKAGE in modules and LAB in modules, sorted(modules)
    assert any(m.startswith(LAB + ".") for m in modules), "dqn_course/lab/ holds no module"
    assert len([m for m in modules if not m.startswith(LAB)]) > 5, sorted(modules)


def test_the_library_never_imports_the_lab():
    found = lab_imports(package_modules())
    assert not found, ("the library must not import dqn_course.lab (the notebooks' and benchmarks' helpers); move "
                       "what it needs into the library:\n  " + "\n  ".join(found))


def test_the_package_has_no_import_cycle():
    graph = import_graph(package_modules())
    cycle = find_cycle({a: set(edges) for a, edges in graph.items()})
    assert cycle is None, describe_cycle(cycle, graph)


def test_every_import_of_the_package_names_one_of_its_modules():
    """An import of a module that is not there (moved or renamed) fails only when its line runs: in a function,
    perhaps never in the tests. Read them all instead."""
    modules = package_modules()
    missing = list(dict.fromkeys(f"{imp.where(ROOT)}: {imp.target}" for name, path in modules.items()
                                 for imp in imports_of(name, path, modules) if imp.target not in modules))
    assert not missing, "imports of modules dqn_course does not have:\n  " + "\n  ".join(missing)


def _make_readme():
    spec = importlib.util.spec_from_file_location("make_readme", ROOT / "data" / "make_readme.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_module_tables_match_the_package():
    make_readme = _make_readme()
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text[slice(*make_readme.block_span(text))] == make_readme.readme_block(), (
        "README.md's module tables differ from dqn_course/: run `make readme` (python data/make_readme.py)")


def test_readme_lists_every_module_once():
    library, lab = _make_readme().module_rows()
    names = [name for name, _ in library + lab]
    assert len(names) == len(set(names))
    expected = {m for m in package_modules() if m not in (PACKAGE, LAB)}
    assert set(names) == expected
    assert all(name.startswith(LAB + ".") for name, _ in lab)
    assert not any(name.startswith(LAB) for name, _ in library)


# --- the checks themselves can fail ----------------------------------------------------------------------------

def test_find_cycle_reports_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"x": {"y"}, "y": {"x"}}) == ["x", "y", "x"]
    assert find_cycle({"a": {"b", "c"}, "b": {"d"}, "c": {"d"}, "d": set()}) is None
    assert find_cycle({"a": {"outside"}}) is None  # an edge out of the graph is no cycle


@pytest.fixture
def fake_package(tmp_path):
    """A small dqn_course with the imports the real one must not have: the lab imported by the library
    (at module level, inside a function, relatively, by importlib) and a cycle through a sub-package."""
    files = {
        "dqn_course/__init__.py": '"""pkg."""\n',
        "dqn_course/train.py": ('"""train."""\nfrom dqn_course.replay import Batch\n\n\n'
                                'def demo():\n    from dqn_course.lab import checks\n    return checks\n'),
        "dqn_course/agent.py": '"""agent."""\nfrom . import lab\nimport dqn_course.lab.toy\n',
        "dqn_course/envs.py": '"""envs."""\nimport importlib\nimportlib.import_module("dqn_course.lab.toy")\n',
        "dqn_course/replay/__init__.py": ('"""replay."""\nfrom .base import Batch\n'
                                          'from dqn_course.replay import stores\n'),
        "dqn_course/replay/base.py": '"""base."""\nimport numpy\n',
        "dqn_course/replay/stores.py": ('"""stores."""\n\n\ndef measure():\n'
                                        '    from ..replay import Batch\n    return Batch\n'),
        "dqn_course/lab/__init__.py": '"""lab."""\n',
        "dqn_course/lab/checks.py": '"""checks."""\nfrom dqn_course.agent import lab\nfrom .toy import x\n',
        "dqn_course/lab/toy.py": '"""toy."""\nx = 1\n',
        "dqn_course/notapackage/orphan.py": '"""no __init__ beside it: not a module of the package."""\n',
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path, package_modules(tmp_path)


def test_imports_are_resolved_as_documented(fake_package):
    _, modules = fake_package
    assert set(modules) == {"dqn_course", "dqn_course.train", "dqn_course.agent", "dqn_course.envs",
                            "dqn_course.replay", "dqn_course.replay.base", "dqn_course.replay.stores",
                            "dqn_course.lab", "dqn_course.lab.checks", "dqn_course.lab.toy"}
    graph = import_graph(modules)
    assert set(graph["dqn_course.train"]) == {"dqn_course.replay", "dqn_course.lab.checks"}
    assert graph["dqn_course.train"]["dqn_course.lab.checks"][0].in_function
    assert not graph["dqn_course.train"]["dqn_course.replay"][0].in_function
    assert set(graph["dqn_course.agent"]) == {"dqn_course.lab", "dqn_course.lab.toy"}
    assert set(graph["dqn_course.replay"]) == {"dqn_course.replay.base", "dqn_course.replay.stores"}
    assert set(graph["dqn_course.replay.stores"]) == {"dqn_course.replay"}
    assert set(graph["dqn_course.lab.checks"]) == {"dqn_course.agent", "dqn_course.lab.toy"}


def test_lab_imports_are_caught(fake_package):
    root, modules = fake_package
    found = lab_imports(modules, root)
    assert len(found) == 4, found
    assert any("dqn_course.train imports dqn_course.lab.checks at dqn_course/train.py:6" in f for f in found), found
    assert any("dqn_course.agent imports dqn_course.lab at" in f for f in found), found
    assert any("dqn_course.envs imports dqn_course.lab.toy at" in f for f in found), found


def test_an_import_of_a_missing_module_is_caught(fake_package):
    root, modules = fake_package
    (root / "dqn_course" / "agent.py").write_text('"""agent."""\n\n\ndef f():\n    from dqn_course.bench import fill\n')
    targets = {imp.target for imp in imports_of("dqn_course.agent", modules["dqn_course.agent"], modules)}
    assert targets == {"dqn_course.bench"} and "dqn_course.bench" not in modules


def test_a_cycle_through_a_subpackage_is_caught(fake_package):
    root, modules = fake_package
    graph = import_graph(modules)
    cycle = find_cycle({a: set(edges) for a, edges in graph.items()})
    assert cycle == ["dqn_course.replay", "dqn_course.replay.stores", "dqn_course.replay"]
    assert "dqn_course/replay/stores.py:5 (inside a function)" in describe_cycle(cycle, graph, root)
