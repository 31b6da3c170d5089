"""README's learning table is made from data/ by data/make_figures.py: it must say what the recorded files say."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from _data_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]


def test_readme_learning_table_matches_the_recorded_runs():
    proc = subprocess.run([sys.executable, "data/make_figures.py", "--check"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_readme_shows_the_figures_the_script_makes():
    text = (ROOT / "README.md").read_text()
    for figure in ("data/figures/learning_curve.png", "data/figures/agent.gif"):
        assert f"({figure})" in text and (ROOT / figure).is_file(), figure


def test_the_headline_is_the_committed_policy_measured_on_fresh_games():
    """evaluation.json measured the very checkpoint.pt committed beside it, on seeds the run never used."""
    from dqn_course.evaluate import run_seeds
    from dqn_course.lab import playback

    make_figures = load_script("make_figures")
    for run in playback.recorded_runs() + playback.capstone_runs():
        result = make_figures.checked_evaluation(run)
        assert result["policy"]["games"] >= 30 and result["random"]["games"] == result["policy"]["games"]
        low, high = run_seeds(playback.run_config(run).__dict__)
        assert not low <= result["protocol"]["seed"] <= high


def test_an_evaluation_of_another_file_is_refused(tmp_path):
    import json
    import shutil

    import pytest

    make_figures = load_script("make_figures")
    run = tmp_path / "breakout-cpu"
    shutil.copytree(ROOT / "data" / "breakout-cpu", run)
    make_figures.checked_evaluation(run)  # the committed pair agrees
    doc = json.loads((run / "evaluation.json").read_text())
    (run / "evaluation.json").write_text(json.dumps({**doc, "sha256": "0" * 64}))
    with pytest.raises(SystemExit, match="measured another checkpoint.pt"):
        make_figures.checked_evaluation(run)
    (run / "evaluation.json").unlink()
    with pytest.raises(SystemExit, match="has no evaluation.json"):
        make_figures.checked_evaluation(run)
