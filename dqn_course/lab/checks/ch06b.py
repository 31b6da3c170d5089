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

# The check's fills: (frames, bytes per frame, steps per episode). Each is tens of MB of small arrays, the kind the C
# allocator keeps for reuse once freed; an episode's last frame starts no transition, so each holds fewer transitions
# than frames, as the bottom rung does. Each also keeps bytes beside its frames, as a real memory keeps bookkeeping and
# Python objects: how many, the check draws at random for each call and hands to the fill in the environment variable
# KEPT_VARIABLE (a child process inherits it), so that no arithmetic on the arguments gives them, only a reading of
# the process. The first case is filled twice, keeping few bytes, then many (KEPT_FACTORS, x the frame's bytes): a
# figure worked out from the arguments comes out the same for both.
FILL_CASES = ((6_000, 5_000, 4), (3_000, 12_000, 5), (20_000, 1_500, 3))
# One range per call (cases 0, 1, 2, then 0 again), each at least 0.8: so that a figure of the frames alone, or one
# divided by the frames instead of the transitions, lies outside REL of the truth and of each other (their hints).
KEPT_FACTORS = ((0.8, 1.0), (0.8, 2.8), (0.8, 2.8), (1.8, 2.8))
KEPT_VARIABLE = "DQN_COURSE_06B_KEPT_BYTES"
REL = 0.15  # RSS adds each array's header and the allocator's chunk headers; a start-up's freed memory takes a little

_IN_THE_CHECK: list = []  # set in the checking process: a fork copies it, a new interpreter starts without it
_KEPT: list = []  # what a fill keeps beside its memory, alive as long as its process


class Filled:
    """A memory as the check's fills leave it: its frames, and ``transitions``, what ``len()`` gives, the
    transitions they hold (the page's n)."""

    def __init__(self, frames: list, transitions: int) -> None:
        self.frames = frames
        self.transitions = transitions

    def __len__(self) -> int:
        return self.transitions


def fill_frames(frames: int, frame_bytes: int, episode: int, report: str) -> Filled:
    """A memory of ``frames`` uint8 arrays of ``frame_bytes`` each, every byte written (so each page costs RSS);
    every ``episode``-th frame ends an episode and starts no transition. Beside each frame the fill keeps as many
    bytes more as the environment variable ``KEPT_VARIABLE`` says (0 when it is not set), in its process but not in
    the memory it returns: its arguments do not tell them. It appends to the file ``report`` a line for the check:
    its process id, whether it ran in the checking process or a copy of it, and the bytes it kept per frame. Raises
    ``ValueError`` for a count below 1, or a ``KEPT_VARIABLE`` that is no whole number of bytes."""
    import os

    if min(frames, frame_bytes, episode) < 1:
        raise ValueError(f"frames, frame_bytes and episode must be at least 1, got {frames}, {frame_bytes}, {episode}")
    setting = os.environ.get(KEPT_VARIABLE, "0")
    if not setting.isdigit():
        raise ValueError(f"the environment variable {KEPT_VARIABLE} must be a whole number of bytes, got {setting!r}")
    kept_bytes = int(setting)
    with open(report, "a", encoding="utf-8") as f:
        f.write(f"{os.getpid()} {int(bool(_IN_THE_CHECK))} {kept_bytes}\n")
    memory = []
    for i in range(frames):
        memory.append(np.full(frame_bytes, i % 251, np.uint8))
        if kept_bytes:
            _KEPT.append(np.full(kept_bytes, 7, np.uint8))
    return Filled(memory, frames - frames // episode)


_PINNED: list = []  # one live array per freed block, so the allocator cannot hand the block back to the OS


def _leave_freed_memory(total_bytes: int, frame_bytes: int) -> None:
    """Leave this process as an earlier measurement leaves it: ``total_bytes`` of small arrays written, then freed
    below an array that stays alive, so the C allocator keeps their memory and hands it to the next requests."""
    freed = [np.full(frame_bytes, 1, np.uint8) for _ in range(total_bytes // frame_bytes + 1)]
    _PINNED.append(np.full(frame_bytes, 2, np.uint8))
    del freed
    gc.collect()


def _kept(kept_bytes: int):
    """A context in which ``KEPT_VARIABLE`` hands a fill the bytes to keep beside each frame (a child process started
    inside it inherits the variable); the environment is put back as it was after."""
    import os
    from unittest import mock

    return mock.patch.dict(os.environ, {KEPT_VARIABLE: str(kept_bytes)})


def _same_process_reading(frames: int, frame_bytes: int, episode: int, kept_bytes: int, report: str) -> float:
    """What a reading in this process gives right after ``_leave_freed_memory``: the contrast the pass prints."""
    _leave_freed_memory(frames * (frame_bytes + kept_bytes) * 3 // 2, frame_bytes)
    with _kept(kept_bytes):
        before = rss_bytes()
        memory = fill_frames(frames, frame_bytes, episode, report)
        grown = (rss_bytes() - before) / len(memory)
    _KEPT.clear()
    return grown


def _where_it_ran(report, kept_bytes: int) -> str | None:
    """Why the fill's run does not count as a fresh process's, or did not keep the ``kept_bytes`` the check handed
    it (its report: one line per run), or None."""
    import os

    runs = [line.split() for line in report.read_text(encoding="utf-8").splitlines()] if report.exists() else []
    if not runs:
        return ("fill(*args) never ran: the figure must be read from the memory it builds, not worked out from its "
                f"arguments ({_COLUMNS})")
    if any(int(pid) == os.getpid() for pid, _, _ in runs):
        return ("the fill ran in this process, which freed as much memory just before calling you, as an earlier "
                "measurement would: the allocator hands that memory to the fill. Read it where nothing was freed "
                f"before: a new interpreter ({_FRESH})")
    if any(marked == "1" for _, marked, _ in runs):
        return ("the fill ran in a fork, a copy of this process that begins with its memory, the allocator's kept "
                f"blocks included. Read it where nothing was freed before: a new interpreter ({_FRESH})")
    if any(int(kept) != kept_bytes for _, _, kept in runs):
        return ("the fill ran without this process's environment variables, which tell it what to keep beside its "
                "frames: start the new interpreter with them, as a child process is started by default (section 3, "
                "the exercise's tools)")
    return None


def _same_figure(readings: list, frames: int, frame_bytes: int, held: int) -> str | None:
    """Why the two fills of the first case, which kept different bytes, got one figure, or None. A figure equal to
    the frames' own bytes per transition is left to ``_hint`` (the frames were counted, not RSS read)."""
    (low, _), (high, _) = readings[0], readings[-1]
    frames_only = frames * frame_bytes / held
    if abs(high - low) > 0.05 * abs(low) or abs(low - frames_only) <= REL * frames_only:
        return None
    return ("bytes_per_transition gave the same figure for two fills of the same arguments, though the second kept "
            "more bytes beside its frames: a figure worked out from the arguments cannot see what a fill keeps. Read "
            f"the growth of the process's RSS while the memory fills ({_COLUMNS})")


def _hint(got: float, truth: float, frames: int, held: int) -> str:
    """The likely slip behind a wrong figure, as a hint naming the concept and the section (no target value)."""
    if abs(got - truth * held / frames) <= REL * truth * held / frames:
        return (f"divide by n, the transitions the memory holds (its len()), not by its frames: an episode's last "
                f"frame starts no transition ({_COLUMNS})")
    if got > 2 * truth:
        return f"far too high: take the growth of RSS while the memory fills, not the whole process's RSS ({_COLUMNS})"
    return (f"too {'low' if got < truth else 'high'}: the growth of the process's RSS while the memory fills counts "
            f"everything the fill keeps, over the transitions the memory holds ({_COLUMNS})")


def check_bytes_per_transition(bytes_per_transition: Any) -> bool | None:
    """Notebook 06b: ``bytes_per_transition(fill, *args)``, the bytes per transition of the memory ``fill(*args)``
    builds and returns, read as section 1 reads a rung: the growth of RSS while the memory fills, over the
    transitions it holds (``len()``), in a process where no memory was freed before (a fresh interpreter).

    Run on the fills of ``FILL_CASES`` (``fill_frames``: small arrays, the kind the C allocator keeps once freed,
    and bytes kept beside the memory, drawn at random for each call within ``KEPT_FACTORS`` and handed over in
    ``KEPT_VARIABLE``, which only a reading of the process sees), the first case twice, keeping few bytes, then
    many; each call comes right after this process freed more memory than the fill takes
    (``_leave_freed_memory``). Behaviour first: the fill must have run (its report file), in another process, not in
    a fork (a copy that starts with this process's memory), and with the bytes to keep that it was handed. Then the
    two fills of one case must not give one figure (a figure worked out from the arguments does), and each answer
    must be within ``REL`` of the bytes the fill wrote (frames and kept bytes) over its transitions; a wrong one is
    told its direction, not the target. The learner's function may read ``rss_bytes``; the course's
    other code (``measure_in_subprocess`` included: starting the fresh process is the exercise) is refused
    (``_require_learners_code``). ``None``, or a function that returns ``None``, is "not answered yet". Raises
    ``AssertionError`` with a hint naming the concept and the section.
    """
    import tempfile
    from pathlib import Path

    if bytes_per_transition is None:
        return _not_answered_yet("write bytes_per_transition(fill, *args)")
    _require_learners_code(bytes_per_transition, _CALL, f"a def of {_CALL} in the notebook that starts the fresh "
                                                        f"process and reads the memory fill(*args) builds there "
                                                        f"({_FRESH})", allowed=(rss_bytes,))
    _IN_THE_CHECK[:] = [True]
    rng = np.random.default_rng()
    calls = [*FILL_CASES, FILL_CASES[0]]
    readings = []  # (the learner's figure, the bytes the fill wrote per transition), one per call
    with tempfile.TemporaryDirectory(prefix="fill-") as folder:
        for call, ((frames, frame_bytes, episode), factors) in enumerate(zip(calls, KEPT_FACTORS)):
            kept_bytes = int(frame_bytes * rng.uniform(*factors))
            report = Path(folder) / f"fill-{call}.txt"
            _leave_freed_memory(frames * (frame_bytes + kept_bytes) * 3 // 2, frame_bytes)
            args = (frames, frame_bytes, episode, str(report))
            with _kept(kept_bytes):
                got = _call_learner(bytes_per_transition, (fill_frames, *args), _CALL, _BY_NAME)
            _KEPT.clear()
            if got is None:
                return _not_answered_yet("bytes_per_transition returns None yet; return the bytes per transition")
            _require_number(got, "bytes_per_transition should return a number of bytes per transition")
            where = _where_it_ran(report, kept_bytes)
            assert where is None, f"fill_frames{args[:3]}: {where}."
            readings.append((got, frames * (frame_bytes + kept_bytes) / (frames - frames // episode)))
        frames, frame_bytes, episode = FILL_CASES[0]
        same_figure = _same_figure(readings, frames, frame_bytes, frames - frames // episode)
        assert same_figure is None, f"fill_frames{FILL_CASES[0]}, twice: {same_figure}."
        for (frames, frame_bytes, episode), (got, truth) in zip(calls, readings):
            held = frames - frames // episode
            assert abs(got - truth) <= REL * truth, (
                f"fill_frames{(frames, frame_bytes, episode)} ran in a new interpreter; bytes_per_transition gave "
                f"{got:,.0f}: {_hint(got, truth, frames, held)}.")
        same = _same_process_reading(*FILL_CASES[0], FILL_CASES[0][1], str(Path(folder) / "same.txt"))
    shown = ", ".join(f"{got:,.0f} (written: {truth:,.0f})" for got, truth in readings)
    return _passed(f"{len(calls)} memories measured in a new interpreter, bytes per transition: {shown}. Read in this "
                   f"process right after a free, the first memory grew by {same:,.0f}")


check_module(globals())
