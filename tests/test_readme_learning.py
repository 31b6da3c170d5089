"""README's learning table is made from data/ by data/make_figures.py: it must say what the recorded files say."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_learning_table_matches_the_recorded_runs():
    proc = subprocess.run([sys.executable, "data/make_figures.py", "--check"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_readme_shows_the_figures_the_script_makes():
    text = (ROOT / "README.md").read_text()
    for figure in ("data/figures/learning_curve.png", "data/figures/agent.gif"):
        assert f"({figure})" in text and (ROOT / figure).is_file(), figure
