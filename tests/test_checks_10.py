"""Notebook 10: its self-check (right passes, wrong raises with a hint, None only prints), against a real chunk."""
from __future__ import annotations

import numpy as np
import pytest

from dqn_course.distributed import Chunk
from dqn_course.lab import checks

FRAME = 84 * 84
RIGHT = (4 + checks.CHUNK_STEPS) * FRAME


def test_chunk_bytes_right(capsys):
    assert checks.check_chunk_bytes(RIGHT) is True
    assert checks.check_chunk_bytes(float(RIGHT)) is True
    assert capsys.readouterr().out.startswith("✓")


@pytest.mark.parametrize("answer, hint", [
    (100 * FRAME, "whole stack to rebuild the first transition"),
    (101 * FRAME, "a stack of frames, not one frame"),
    (100 * 2 * 4 * FRAME, "s and s' as full stacks"),
    (100 * 4 * FRAME, "one full stack per step"),
    (100 * 5 * FRAME, "folded 5-frame"),
    (4 * RIGHT, "not float32"),
    (8 * RIGHT, "bits"),
    (12345, "its first full stack, then one new frame per step"),
    ("733824", "should be a number"),
    (True, "should be a number"),
])
def test_chunk_bytes_wrong(answer, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_chunk_bytes(answer)


def test_chunk_bytes_unanswered(capsys):
    assert checks.check_chunk_bytes(None) is None
    assert "Not answered yet" in capsys.readouterr().out


def test_the_answer_is_what_a_real_chunk_carries():
    """The arithmetic matches ``Chunk``'s own pixel arrays for 100 chained mid-game transitions."""
    frames = np.random.default_rng(0).integers(0, 256, (104, 84, 84), dtype=np.uint8)
    stacks = [frames[i:i + 4] for i in range(101)]
    transitions = [(stacks[i], 0, 0.0, stacks[i + 1], False, False) for i in range(100)]
    chunk = Chunk.from_transitions(0, transitions)
    assert chunk.first_state.nbytes + chunk.frames.nbytes + chunk.reset_states.nbytes == RIGHT


def test_solution_cell_passes_its_checks():
    """The solution cell (committed without outputs, skipped by nbval) passes every check it calls."""
    from _solutions import run_solutions

    out = run_solutions("10_scaling_out_with_ray", {"checks": checks})
    assert out.count("✓") == 3, out


def test_quiet_ray_sets_plain_output_before_ray(monkeypatch):
    """quiet_ray (notebook 10's set-up) turns Ray's colour codes and start-up notices off, keeping user settings."""
    import logging
    import warnings

    from dqn_course.lab import scaling

    monkeypatch.delenv("RAY_COLOR_PREFIX", raising=False)
    monkeypatch.setenv("NO_COLOR", "")
    with warnings.catch_warnings():
        scaling.quiet_ray()
        import os

        assert os.environ["RAY_COLOR_PREFIX"] == "0" and os.environ["NO_COLOR"] == ""
        assert all(logging.getLogger(n).level == logging.ERROR for n in scaling._NOISY_LOGGERS)
        with warnings.catch_warnings(record=True) as caught:
            warnings.warn("IProgress not found. Please update jupyter and ipywidgets.", stacklevel=2)
        assert not caught
