"""Notebook 06b: its exercise check (the learner's rung_bytes: right passes, each typical slip raises with its hint,
the course's code and the page's imports are refused, None only prints), against the course's memories and the
ladder the course measured."""
from __future__ import annotations

import numpy as np
import pytest

from dqn_course.lab import checks, figures, ladder
from dqn_course.lab.checks.ch06b import MEASURED_RUNGS, RUNG_CASES, memory_bytes
from dqn_course.lab.ladder_plots import course_order, plot_course_ladder
from dqn_course.replay import FrameSharingMemory

FRAMES = {"copies": lambda stack: 2 * stack, "shared": lambda stack: stack, "folded": lambda stack: stack + 1,
          "one_frame": lambda stack: 1}


def rung_right(rung, stack, frame_shape, dtype):
    return FRAMES[rung](stack) * int(np.prod(frame_shape)) * np.dtype(dtype).itemsize


def rung_pixels_not_bytes(rung, stack, frame_shape, dtype):
    return rung_right(rung, stack, frame_shape, "uint8")


def rung_no_channels(rung, stack, frame_shape, dtype):
    return rung_right(rung, stack, frame_shape[:2], dtype)


def rung_shared_as_copies(rung, stack, frame_shape, dtype):
    return rung_right("copies" if rung == "shared" else rung, stack, frame_shape, dtype)


def rung_folded_as_stack(rung, stack, frame_shape, dtype):
    return rung_right("shared" if rung == "folded" else rung, stack, frame_shape, dtype)


def rung_one_frame_as_stack(rung, stack, frame_shape, dtype):
    return rung_right("shared" if rung == "one_frame" else rung, stack, frame_shape, dtype)


def rung_copies_as_one_stack(rung, stack, frame_shape, dtype):
    return rung_right("shared" if rung == "copies" else rung, stack, frame_shape, dtype)


def rung_with_bookkeeping(rung, stack, frame_shape, dtype):
    """Right on the page's settings (5% of the measured figure), 16 bytes over on the check's own."""
    return rung_right(rung, stack, frame_shape, dtype) + (16 if rung == "one_frame" else 0)


def rung_off(rung, stack, frame_shape, dtype):
    return 1_000


def rung_text(rung, stack, frame_shape, dtype):
    return "7056"


def rung_crashes(rung, stack, frame_shape, dtype):
    return {"one_frame": 1}[rung] * 7_056


def rung_unanswered(rung, stack, frame_shape, dtype):
    pass


def rung_of_the_course(rung, stack, frame_shape, dtype):
    """Prices the rung with the course's own memories: refused, however right its figure."""
    return memory_bytes(rung, stack, frame_shape, dtype)


def test_rung_bytes_right(capsys):
    assert checks.check_rung_bytes(rung_right) is True
    assert capsys.readouterr().out.startswith("✓")


@pytest.mark.parametrize("answer, hint", [
    (rung_pixels_not_bytes, "bytes per pixel, not 1"),
    (rung_no_channels, "colour channels included"),
    (rung_shared_as_copies, "each stack is kept once"),
    (rung_folded_as_stack, "the one frame s' adds"),
    (rung_one_frame_as_stack, "one frame per step"),
    (rung_copies_as_one_stack, "each as its own stack"),
    (rung_with_bookkeeping, "bookkeeping are not pixels"),
    (rung_off, "count the frames the rung keeps per transition"),
    (rung_text, "should return a number"),
    (rung_crashes, "raised KeyError"),
])
def test_rung_bytes_wrong(answer, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_rung_bytes(answer)


@pytest.mark.parametrize("answer", [ladder.run_ladder, ladder.Stage, FrameSharingMemory, course_order,
                                    plot_course_ladder, memory_bytes, rung_of_the_course, np.prod, max])
def test_rung_bytes_refuses_the_course_and_the_pages_imports(answer):
    with pytest.raises(AssertionError, match="course's own|not yours|not a function of yours"):
        checks.check_rung_bytes(answer)


def test_rung_bytes_unanswered(capsys):
    assert checks.check_rung_bytes(None) is None
    assert checks.check_rung_bytes(rung_unanswered) is None
    assert capsys.readouterr().out.count("Not answered yet") == 2


def test_the_measured_rungs_are_the_ladders():
    """Each measured figure the check reads is a rung of the course's ladder, at that rung's settings."""
    for name, (rung, stack, frame_shape, dtype) in MEASURED_RUNGS.items():
        stage = ladder.STAGES_BY_NAME[name.removesuffix("_bytes_per_transition")]
        assert (stage.stack, stage.dtype) == (stack, dtype)
        assert frame_shape == (ladder.RAW_FRAME if stage.raw else ladder.GRAY_FRAME)
        assert stage.arithmetic_bytes == rung_right(rung, stack, frame_shape, dtype)
    assert set(MEASURED_RUNGS) <= set(figures.load("06b_the_whole_ladder")["figures"])


@pytest.mark.parametrize("case", RUNG_CASES)
def test_the_cases_are_the_memories_and_not_the_pages(case):
    """The course's memory for each case holds what the arithmetic says; none is a setting the page shows."""
    rung, stack, frame_shape, dtype = case
    assert case not in MEASURED_RUNGS.values()
    rel = 0.01 if rung == "shared" else 0.0
    assert memory_bytes(*case) == pytest.approx(rung_right(*case), rel=rel)


def test_solution_cell_passes_its_checks():
    """The solution cell (committed without outputs, skipped by nbval) passes every check it calls."""
    from _solutions import run_solutions

    out = run_solutions("06b_the_whole_ladder", {"checks": checks, "np": np})
    assert out.count("✓") == 4, out
