"""Every notebook runs on its own in a fresh copy of the tree, under strict nbval (what `make test` runs).

Nothing a notebook reads may come from another notebook having run before it: a figure one notebook takes from
another is read from the committed file in ``data/`` (notebooks/README.md, rule 4). So each notebook gets its
own copy of the repository's files (tracked, plus new files git does not ignore; no ``runs/``, no build output)
and its kernel imports that copy's package (``PYTHONPATH``), whose ``data/`` is the copy's. Whatever the
notebook writes stays in the copy, so the checkout is left as it was.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SKIPPED = ("__pycache__", ".venv", "runs", ".pytest_cache", ".hypothesis", ".ipynb_checkpoints", ".git")


def tree_files(root: Path = ROOT) -> list[Path]:
    """The files a fresh clone of ``root`` would hold, plus new files git does not ignore (outside git: every file
    but caches, virtual environments and runs)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                            capture_output=True)
    if listed.returncode == 0:
        names = [Path(n) for n in listed.stdout.decode().split("\0") if n]
    else:
        names = [p.relative_to(root) for p in root.rglob("*") if not set(p.relative_to(root).parts) & set(SKIPPED)]
    return [n for n in names if (root / n).is_file()]  # a tracked file deleted in the working tree is left out


def fresh_copy(destination: Path, root: Path = ROOT) -> Path:
    for name in tree_files(root):
        (destination / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, destination / name)
    return destination


def test_the_copy_holds_what_a_clone_would_plus_new_files_and_nothing_ignored(tmp_path):
    root = tmp_path / "repo"
    (root / "runs").mkdir(parents=True)
    (root / ".gitignore").write_text("runs/\n")
    (root / "tracked.txt").write_text("a")
    (root / "gone.txt").write_text("b")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(root)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
    (root / "gone.txt").unlink()  # tracked, deleted in the working tree
    (root / "new.txt").write_text("c")  # not committed yet, not ignored
    (root / "runs" / "log.csv").write_text("step\n")  # ignored: what a training run leaves
    assert sorted(map(str, tree_files(root))) == [".gitignore", "new.txt", "tracked.txt"]
    copy = fresh_copy(tmp_path / "copy", root)
    assert sorted(p.name for p in copy.rglob("*")) == [".gitignore", "new.txt", "tracked.txt"]


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_notebook_runs_alone_in_a_fresh_copy_of_the_tree(path, tmp_path):
    copy = fresh_copy(tmp_path / "tree")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(copy),
               "--nbval", str(copy / "notebooks" / path.name),
               "--nbval-sanitize-with", str(copy / "tests" / "nbval_sanitize.cfg")]
    env = {**os.environ, "PYTHONPATH": str(copy)}
    done = subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"{path.name} failed on its own in a fresh copy:\n{done.stdout[-6000:]}"
