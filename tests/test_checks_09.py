"""Notebook 09's self-check: right passes, each usual mistake raises with its hint, None only prints."""
from __future__ import annotations

import sys

import pytest

from dqn_course.lab import checks

PAYLOAD = 1_000 - 16 - 8 - sys.getsizeof(b"")  # bytes per slot left for the compressed frame
RIGHT = 7056 / PAYLOAD


@pytest.mark.parametrize("answer", [RIGHT, round(RIGHT, 2), 7.48, 7.5])
def test_min_compression_ratio_right(answer, capsys):
    assert checks.check_min_compression_ratio(answer) is True
    assert capsys.readouterr().out.startswith("✓")


@pytest.mark.parametrize("answer, hint", [
    (7.056, "subtract them from the 1,000 B"),
    (7056 / 984, "Python bytes object"),
    (7056 / (1000 - 8 - 33), "bookkeeping arrays"),
    (7056 / (1000 - 16 - 8), "33 B header"),
    (7056 / (1000 - 16 - 33), "8 B pointer"),
    (7056 / (2**30 / 1e6 - 57), "not 2\\^30"),
    (PAYLOAD / 7056, "greater than 1"),
    (PAYLOAD, "payload budget"),
    (17.0, "ratio = 7,056 /"),
])
def test_min_compression_ratio_wrong(answer, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_min_compression_ratio(answer)


@pytest.mark.parametrize("answer", ["7.48", True, [7.48]])
def test_min_compression_ratio_not_a_number(answer):
    with pytest.raises(AssertionError, match="should be a number"):
        checks.check_min_compression_ratio(answer)


def test_min_compression_ratio_unanswered(capsys):
    assert checks.check_min_compression_ratio(None) is None
    assert "Not answered yet" in capsys.readouterr().out


def test_overheads_match_the_memory():
    """The check's per-slot figures are what a compressed FrameSharingMemory really spends besides payloads."""
    from dqn_course.replay import FrameSharingMemory

    memory = FrameSharingMemory(100, (4, 84, 84), storage="lz4")
    o = checks._slot_overheads()
    bookkeeping = sum(getattr(memory, n).nbytes for n in memory.RING_ARRAYS)
    assert bookkeeping == 100 * o["bookkeeping"]
    assert sys.getsizeof(memory.frames._payloads) - sys.getsizeof([]) == 100 * o["list_slot"]
    assert o["bytes_header"] == sys.getsizeof(b"x") - 1


def test_solution_cell_passes_its_checks():
    """Notebook 09's solution cell (committed without outputs, skipped by nbval) passes every check it calls."""
    from _solutions import run_solutions

    out = run_solutions("09_compressed_and_disk", {"checks": checks})
    assert out.count("✓") == 3, out


def test_kill_resume_timeline_draws():
    from dqn_course.lab.pictures_late import draw_kill_resume

    fig = draw_kill_resume([180, 420], [250, 500], 500, [700, 1100], 2_000, killed_after=520)
    assert fig.axes[0].get_xlabel() == "agent step"
