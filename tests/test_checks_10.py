"""Notebook 10: its exercise check (the learner's chunk_pixel_bytes: right passes, each typical slip raises with its
hint, the course's code and the page's imports are refused, None only prints), against real chunks."""
from __future__ import annotations

import numpy as np
import pytest

from dqn_course.distributed import Chunk, worker_epsilons
from dqn_course.lab import checks
from dqn_course.lab.checks.ch10 import CHUNK_CASES, real_chunk

def chunk_right(episode_ends, stack, frame_shape, dtype):
    frame = int(np.prod(frame_shape)) * np.dtype(dtype).itemsize
    restarts = sum(bool(e) for e in episode_ends[:-1])  # an end on the last step restarts nothing in this chunk
    return (stack + len(episode_ends) + restarts * stack) * frame


def chunk_every_end_restarts(episode_ends, stack, frame_shape, dtype):
    frame = int(np.prod(frame_shape)) * np.dtype(dtype).itemsize
    return (stack + len(episode_ends) + sum(episode_ends) * stack) * frame


def chunk_no_restarts(episode_ends, stack, frame_shape, dtype):
    return (stack + len(episode_ends)) * int(np.prod(frame_shape)) * np.dtype(dtype).itemsize


def chunk_restart_one_frame(episode_ends, stack, frame_shape, dtype):
    restarts = sum(bool(e) for e in episode_ends[:-1])
    return (stack + len(episode_ends) + restarts) * int(np.prod(frame_shape)) * np.dtype(dtype).itemsize


def chunk_pixels_not_bytes(episode_ends, stack, frame_shape, dtype):
    return chunk_right(episode_ends, stack, frame_shape, "uint8")


def chunk_no_channels(episode_ends, stack, frame_shape, dtype):
    return chunk_right(episode_ends, stack, frame_shape[:2], dtype)


def chunk_no_first_state(episode_ends, stack, frame_shape, dtype):
    return chunk_right(episode_ends, stack, frame_shape, dtype) - stack * int(np.prod(frame_shape)) * np.dtype(
        dtype).itemsize


def chunk_stacks(episode_ends, stack, frame_shape, dtype):
    return len(episode_ends) * 2 * stack * int(np.prod(frame_shape)) * np.dtype(dtype).itemsize


def chunk_full_stack_per_step(episode_ends, stack, frame_shape, dtype):
    return len(episode_ends) * stack * int(np.prod(frame_shape)) * np.dtype(dtype).itemsize


def chunk_off(episode_ends, stack, frame_shape, dtype):
    return 12345


def chunk_text(episode_ends, stack, frame_shape, dtype):
    return "733824"


def chunk_crashes(episode_ends, stack, frame_shape, dtype):
    return episode_ends.count()


def chunk_unanswered(episode_ends, stack, frame_shape, dtype):
    pass


def chunk_of_the_course(episode_ends, stack, frame_shape, dtype):
    """Builds a real Chunk with the course's own code: refused, however right its figure."""
    chunk = real_chunk(len(episode_ends), tuple(i for i, e in enumerate(episode_ends) if e), stack, frame_shape, dtype)
    return chunk.first_state.nbytes + chunk.frames.nbytes + chunk.reset_states.nbytes


def test_chunk_bytes_right(capsys):
    assert checks.check_chunk_bytes(chunk_right) is True
    assert capsys.readouterr().out.startswith("✓")


@pytest.mark.parametrize("answer, hint", [
    (chunk_every_end_restarts, "last step restarts nothing"),
    (chunk_no_restarts, "its full stack travels too"),
    (chunk_restart_one_frame, "a full stack of frames, not one frame"),
    (chunk_pixels_not_bytes, "bytes per pixel, not 1"),
    (chunk_no_channels, "colour channels included"),
    (chunk_no_first_state, "first state's whole stack"),
    (chunk_stacks, "s and s' as full stacks"),
    (chunk_full_stack_per_step, "one full stack per step"),
    (chunk_off, "its first full stack, one new frame per step"),
    (chunk_text, "should return a number"),
    (chunk_crashes, "raised TypeError"),
])
def test_chunk_bytes_wrong(answer, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_chunk_bytes(answer)


@pytest.mark.parametrize("answer", [Chunk, Chunk.from_transitions, real_chunk, chunk_of_the_course, np.prod, len,
                                    worker_epsilons])
def test_chunk_bytes_refuses_the_course_and_the_pages_imports(answer):
    with pytest.raises(AssertionError, match="course's own|not yours|not a function of yours"):
        checks.check_chunk_bytes(answer)


def test_chunk_bytes_unanswered(capsys):
    assert checks.check_chunk_bytes(None) is None
    assert checks.check_chunk_bytes(chunk_unanswered) is None
    assert capsys.readouterr().out.count("Not answered yet") == 2


@pytest.mark.parametrize("case", CHUNK_CASES)
def test_the_cases_are_what_a_real_chunk_carries(case):
    """Each case's real Chunk rebuilds its transitions, and its pixel arrays hold what the arithmetic says."""
    steps, ends, stack, frame_shape, dtype = case
    chunk = real_chunk(*case)
    assert len(chunk) == steps and len(list(chunk.transitions())) == steps
    assert chunk.frames.dtype == np.dtype(dtype) and chunk.first_state.shape == (stack, *frame_shape)
    flags = [i in ends for i in range(steps)]
    assert chunk.first_state.nbytes + chunk.frames.nbytes + chunk.reset_states.nbytes == chunk_right(
        flags, stack, frame_shape, dtype)


def test_no_case_is_the_pages():
    """The check runs the learner's function on chunks the page never shows (its own: 84 x 84 uint8 4-stacks)."""
    assert all((stack, frame_shape, dtype) != (4, (84, 84), "uint8") or steps not in (50, 100, 300)
               for steps, _, stack, frame_shape, dtype in CHUNK_CASES)


def test_solution_cell_passes_its_checks():
    """The solution cell (committed without outputs, skipped by nbval) passes every check it calls."""
    from _solutions import run_solutions

    out = run_solutions("10_scaling_out_with_ray", {"checks": checks, "np": np})
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
