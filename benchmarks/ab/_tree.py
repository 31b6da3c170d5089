"""Running one side of an A/B in a fresh interpreter under a given source tree (the before or the after)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def rate_in(tree: Path, script: str, *args: str, one_thread: bool = False) -> float:
    """The number ``script --child *args`` prints last, run with ``tree`` first on the import path (and as the
    working folder), so the code measured is that tree's. ``one_thread``: OpenMP limited to one thread."""
    env = {**os.environ, "PYTHONPATH": str(tree), **({"OMP_NUM_THREADS": "1"} if one_thread else {})}
    out = subprocess.run([sys.executable, script, "--child", *args], env=env, check=True, capture_output=True,
                         text=True, cwd=tree).stdout
    return float(out.strip().splitlines()[-1])
