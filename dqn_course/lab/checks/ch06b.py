"""Notebook 06b (the whole ladder): its exercise, a memory's bytes per transition read in a fresh process.

The fills it is checked on are module-level, so that a freshly spawned interpreter can import them.

The questions and the prediction of 06b are registered with notebook 06's (``ch06``).
"""
from __future__ import annotations

import gc
from typing import Any

import numpy as np

from dqn_course.contracts import check_module
from dqn_course.lab.checks.core import (_call_learner, _not_answered_yet, _passed, _require_learners_code,
                                        _require_number)
from dqn_course.profiling import rss_bytes

_FRESH = "the *How* under the title: why each rung is measured in a fresh process"
_COLUMNS = "section 1, the *measured B/tr* column"
_CALL = "bytes_per_transition(fill, *args)"
_BY_NAME = dict.fromkeys(("pickle", "Can't get attribute", "non-zero exit status", "No module named"),
                         "a new interpreter knows nothing of this notebook: it imports what it runs by name, and fill "
                         "is importable where it is defined (section 3, the exercise's tools)")

# The check's fills: (frames, bytes per frame, steps per episode). Each is tens of MB of small arrays, the kind the
# C allocator keeps for reuse once freed; an episode's last frame starts no transition, so each holds fewer
# transitions than frames, as the bottom rung does.
FILL_CASES = ((6_000, 5_000, 4), (3_000, 12_000, 5), (20_000, 1_500, 3))
REL = 0.15  # RSS adds each array's header and the allocator's chunk headers; a start-up's freed memory takes a little


class Filled:
    """A memory as the check's fills leave it: its frames, and ``transitions``, what ``len()`` gives, the
    transitions they hold (the page's n)."""

    def __init__(self, frames: list, transitions: int) -> None:
        self.frames = frames
        self.transitions = transitions

    def __len__(self) -> int:
        return self.transitions


def fill_frames(frames: int, frame_bytes: int, episode: int) -> Filled:
    """A memory of ``frames`` uint8 arrays of ``frame_bytes`` each, every byte written (so each page costs RSS);
    every ``episode``-th frame ends an episode and starts no transition. Raises ``ValueError`` for a count below 1."""
    if min(frames, frame_bytes, episode) < 1:
        raise ValueError(f"frames, frame_bytes and episode must be at least 1, got {frames}, {frame_bytes}, {episode}")
    return Filled([np.full(frame_bytes, i % 251, np.uint8) for i in range(frames)], frames - frames // episode)


_PINNED: list = []  # one live array per freed block, so the allocator cannot hand the block back to the OS


def _leave_freed_memory(total_bytes: int, frame_bytes: int) -> None:
    """Leave this process as an earlier measurement leaves it: ``total_bytes`` of small arrays written, then freed
    below an array that stays alive, so the C allocator keeps their memory and hands it to the next requests."""
    freed = [np.full(frame_bytes, 1, np.uint8) for _ in range(total_bytes // frame_bytes + 1)]
    _PINNED.append(np.full(frame_bytes, 2, np.uint8))
    del freed
    gc.collect()


def _same_process_reading(frames: int, frame_bytes: int, episode: int) -> float:
    """What a reading in this process gives right after ``_leave_freed_memory``: the contrast the pass prints."""
    _leave_freed_memory(frames * frame_bytes * 3 // 2, frame_bytes)
    before = rss_bytes()
    memory = fill_frames(frames, frame_bytes, episode)
    return (rss_bytes() - before) / len(memory)


def _hint(got: float, truth: float, frames: int, held: int) -> str:
    """The likely slip behind a wrong figure, as a hint naming the concept and the section."""
    if got < 0.5 * truth:
        return ("the fill took memory the process had already freed and kept, so RSS hardly grew: this check freed "
                "as much just before calling you, as an earlier measurement would. Read it where nothing was freed "
                f"before: a new interpreter, not this process nor a copy of it ({_FRESH})")
    if abs(got - truth * held / frames) <= REL * truth * held / frames:
        return (f"divide by n, the transitions the memory holds (its len()), not by its frames: an episode's last "
                f"frame starts no transition ({_COLUMNS})")
    if got > 2 * truth:
        return f"take the growth of RSS while the memory fills, not the whole process's RSS ({_COLUMNS})"
    return f"the RSS growth while the memory fills, over the transitions it holds, read in a fresh process ({_FRESH})"


def check_bytes_per_transition(bytes_per_transition: Any) -> bool | None:
    """Notebook 06b: ``bytes_per_transition(fill, *args)``, the bytes per transition of the memory ``fill(*args)``
    builds and returns, read as section 1 reads a rung: the growth of RSS while the memory fills, over the
    transitions it holds (``len()``), in a process where no memory was freed before (a fresh interpreter).

    Run on the fills of ``FILL_CASES`` (``fill_frames``: small arrays, the kind the C allocator keeps once freed),
    each called right after this process freed as much memory as the fill takes (``_leave_freed_memory``), so a
    reading in this process, or in a fork of it (a copy that starts with its memory), grows too little. Right when
    each answer is within ``REL`` of the fill's frame bytes over its transitions. The learner's function may read
    ``rss_bytes``; the course's other code (``measure_in_subprocess`` included: starting the fresh process is the
    exercise) is refused (``_require_learners_code``).
    ``None``, or a function that returns ``None``, is "not answered yet". Raises ``AssertionError`` with a hint
    naming the concept and the section.
    """
    if bytes_per_transition is None:
        return _not_answered_yet("write bytes_per_transition(fill, *args)")
    _require_learners_code(bytes_per_transition, _CALL, f"a def of {_CALL} in the notebook that starts the fresh "
                                                        f"process and reads the memory fill(*args) builds there "
                                                        f"({_FRESH})", allowed=(rss_bytes,))
    readings = []
    for frames, frame_bytes, episode in FILL_CASES:
        _leave_freed_memory(frames * frame_bytes * 3 // 2, frame_bytes)
        got = _call_learner(bytes_per_transition, (fill_frames, frames, frame_bytes, episode), _CALL, _BY_NAME)
        if got is None:
            return _not_answered_yet("bytes_per_transition returns None yet; return the bytes per transition")
        _require_number(got, "bytes_per_transition should return a number of bytes per transition")
        held = frames - frames // episode
        truth = frames * frame_bytes / held
        if abs(got - truth) > REL * truth:
            raise AssertionError(
                f"fill_frames({frames:,}, {frame_bytes:,}, {episode}) writes {frames:,} frames of {frame_bytes:,} "
                f"bytes holding {held:,} transitions, {truth:,.0f} bytes of frames per transition; "
                f"bytes_per_transition gave {got:,.0f}: {_hint(got, truth, frames, held)}.")
        readings.append(f"{got:,.0f} (frames: {truth:,.0f})")
    same = _same_process_reading(*FILL_CASES[0])
    return _passed(f"{len(FILL_CASES)} memories measured, bytes per transition: {', '.join(readings)}. Read in this "
                   f"process right after a free, the first grew by {same:,.0f} bytes per transition")


check_module(globals())
