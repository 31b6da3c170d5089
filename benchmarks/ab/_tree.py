"""Running one side of an A/B in a fresh interpreter under a given source tree (the before or the after)."""
from __future__ import annotations

import argparse
import json
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


def ab_parser(description: str, rounds: int,
              before_help: str = "a checkout of the tree before the change (git worktree add ...)",
              loads: list[str] | None = None) -> argparse.ArgumentParser:
    """The options an A/B script takes: ``--before`` (a checkout of the tree before the change), ``--rounds``,
    ``--save`` (a JSON-lines file to append the result to) and the hidden ``--child`` (measure one side here: a
    flag, or the name of one of ``loads`` when the script measures several)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--before", type=Path, help=before_help)
    p.add_argument("--rounds", type=int, default=rounds)
    p.add_argument("--save", type=Path, help="append the result, with the command and machine, to this JSON-lines file")
    if loads:
        p.add_argument("--child", choices=sorted(loads), help=argparse.SUPPRESS)
    else:
        p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return p


def append_result(path: Path, script: str, row: dict) -> None:
    """``row`` as one more line of the JSON-lines file ``path``, after the command that made it and before the
    machine it ran on (``dqn_course.lab.bench.environment_info``)."""
    from dqn_course.lab.bench import environment_info

    line = {"command": " ".join([script] + sys.argv[1:]), **row, "environment": environment_info()}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
