"""The repository's scripts under ``data/`` (make_readme, make_figures, execute_notebooks), loaded as modules.

They are scripts, not a package, so the tests that check them load each by path.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

DATA = Path(__file__).resolve().parents[1] / "data"


def load_script(name: str) -> ModuleType:
    """``data/<name>.py`` as a fresh module."""
    spec = importlib.util.spec_from_file_location(name, DATA / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
