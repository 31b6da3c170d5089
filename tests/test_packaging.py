"""Packaging stays consistent: pip and conda install the same things; the README and CI agree on commands."""
from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def pyproject() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def conda_pip_list() -> list[str]:
    """The ``- pip:`` list of environment.yml's dependencies (read with PyYAML)."""
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    blocks = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(blocks) == 1, "environment.yml should have exactly one pip block"
    return [str(item) for item in blocks[0]]


def normalise(req: str) -> str:
    return re.sub(r"\s+", "", req)


def test_conda_and_pip_install_the_same_requirements():
    project = pyproject()["project"]
    extras = project["optional-dependencies"]
    from_pyproject = {normalise(r) for r in project["dependencies"]}
    for name, reqs in extras.items():
        if name not in ("all", "site"):  # site: the website's tools, which the conda environment leaves out
            from_pyproject |= {normalise(r) for r in reqs}
    pip_list = conda_pip_list()
    assert "-e ." in pip_list, "environment.yml should install the course package itself"
    from_conda = [normalise(r) for r in pip_list if r != "-e ."]
    assert len(from_conda) == len(set(from_conda)), "environment.yml lists a requirement twice"
    missing, extra = from_pyproject - set(from_conda), set(from_conda) - from_pyproject
    assert not missing and not extra, (f"in pyproject.toml but not environment.yml: {sorted(missing)}; "
                                       f"in environment.yml but not pyproject.toml: {sorted(extra)}")


def test_floors_are_the_lower_bounds_of_pyproject():
    """``make floors`` installs tests/floors.txt: each pin there is a dependency's lower bound in pyproject.toml
    (``>=`` that very version), and every dependency with a lower bound, extras included, is pinned there (the
    development tools excepted)."""
    project = pyproject()["project"]
    extras = project["optional-dependencies"]
    tools = ("all", "dev", "lab", "site")
    reqs = project["dependencies"] + [r for name, rs in extras.items() if name not in tools for r in rs]
    bounds = {m.group(1): m.group(2) for r in reqs if (m := re.match(r"([A-Za-z0-9_.-]+)\s*>=\s*([\d.]+)", r))}
    lines = (ROOT / "tests" / "floors.txt").read_text().splitlines()
    pins = dict(line.split("==") for line in lines if line and not line.startswith("#"))
    assert pins == bounds, f"floors.txt {pins} != pyproject.toml's lower bounds {bounds}"


def test_all_extra_pulls_in_every_other_extra():
    project = pyproject()["project"]
    extras = project["optional-dependencies"]
    assert "all" in extras
    (spec,) = extras["all"]
    m = re.fullmatch(r"(.+)\[(.+)\]", normalise(spec))
    assert m and m.group(1) == project["name"], spec
    assert set(m.group(2).split(",")) == set(extras) - {"all", "site"}  # site: make site installs it


def test_python_version_agrees():
    env_text = (ROOT / "environment.yml").read_text()
    (conda_python,) = re.findall(r"-\s*python\s*=\s*([\d.]+)", env_text)
    low = re.fullmatch(r">=\s*([\d.]+)", pyproject()["project"]["requires-python"]).group(1)
    as_tuple = lambda v: tuple(int(x) for x in v.split("."))  # noqa: E731
    assert as_tuple(conda_python) >= as_tuple(low)


def test_dev_extra_has_what_the_tests_use():
    dev = " ".join(pyproject()["project"]["optional-dependencies"]["dev"])
    for name in ("pytest", "hypothesis", "nbval", "PyYAML", "import-linter"):
        assert re.search(rf"\b{name}\b", dev), f"tests need {name}: add it to the dev extra"


def test_readme_gives_the_two_commands():
    readme = ROOT / "README.md"
    assert readme.exists(), "README.md is missing"
    text = readme.read_text()
    assert "make lab" in text and "make test" in text


def test_makefile_has_the_two_targets():
    text = (ROOT / "Makefile").read_text()
    for target in ("lab", "test", "setup"):
        assert re.search(rf"^{target}:", text, re.M), f"Makefile has no {target!r} target"
    assert re.search(r"^test:.*\n(\t.*\n)*\t.*pytest tests", text, re.M), "make test should run pytest on tests/"
    assert re.search(r"^test:.*\blint\b", text, re.M) and re.search(r"^lint:.*\n\t.*ruff check", text, re.M), (
        "make test should run the linter (make lint: ruff check) first")
    assert re.search(r"^lint:.*\n(\t.*\n)*\t.*lint-imports", text, re.M), (
        "make lint should check the import contracts (lint-imports)")


def test_ci_runs_make_test():
    ci = ROOT / ".ci" / "run"
    assert ci.exists()
    lines = [line.strip() for line in ci.read_text().splitlines()]
    commands = [line for line in lines if line and not line.startswith("#")]
    assert "make test" in commands, commands
    assert os.access(ci, os.X_OK), ".ci/run must be executable"
