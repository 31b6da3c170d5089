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

# The check's fills: (frames, bytes per frame, steps per episode, bytes kept beside each frame). Each is tens of MB of
# small arrays, the kind the C allocator keeps for reuse once freed; an episode's last frame starts no transition, so
# each holds fewer transitions than frames, as the bottom rung does; and each keeps bytes its frames do not show, as a
# real memory keeps bookkeeping and Python objects, so only a reading of the process counts them.
FILL_CASES = ((6_000, 5_000, 4, 5_000), (3_000, 12_000, 5, 12_000), (20_000, 1_500, 3, 1_500))
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


def fill_frames(frames: int, frame_bytes: int, episode: int, kept_bytes: int, report: str) -> Filled:
    """A memory of ``frames`` uint8 arrays of ``frame_bytes`` each, every byte written (so each page costs RSS);
    every ``episode``-th frame ends an episode and starts no transition. Beside each frame the fill keeps
    ``kept_bytes`` more, in its process but not in the memory it returns. It appends to the file ``report`` a line
    with its process id and whether it ran in the checking process or a copy of it. Raises ``ValueError`` for a
    count below 1 (``kept_bytes`` below 0)."""
    import os

    if min(frames, frame_bytes, episode) < 1 or kept_bytes < 0:
        raise ValueError(f"frames, frame_bytes and episode must be at least 1 and kept_bytes at least 0, got "
                         f"{frames}, {frame_bytes}, {episode}, {kept_bytes}")
    with open(report, "a", encoding="utf-8") as f:
        f.write(f"{os.getpid()} {int(bool(_IN_THE_CHECK))}\n")
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


def _same_process_reading(frames: int, frame_bytes: int, episode: int, kept_bytes: int, report: str) -> float:
    """What a reading in this process gives right after ``_leave_freed_memory``: the contrast the pass prints."""
    _leave_freed_memory(frames * (frame_bytes + kept_bytes) * 3 // 2, frame_bytes)
    before = rss_bytes()
    memory = fill_frames(frames, frame_bytes, episode, kept_bytes, report)
    grown = (rss_bytes() - before) / len(memory)
    _KEPT.clear()
    return grown


def _where_it_ran(report) -> str | None:
    """Why the fill's run does not count as a fresh process's (its report: one line per run), or None."""
    import os

    runs = [line.split() for line in report.read_text(encoding="utf-8").splitlines()] if report.exists() else []
    if not runs:
        return ("fill(*args) never ran: the figure must be read from the memory it builds, not worked out from its "
                f"arguments ({_COLUMNS})")
    if any(int(pid) == os.getpid() for pid, _ in runs):
        return ("the fill ran in this process, which freed as much memory just before calling you, as an earlier "
                "measurement would: the allocator hands that memory to the fill. Read it where nothing was freed "
                f"before: a new interpreter ({_FRESH})")
    if any(marked == "1" for _, marked in runs):
        return ("the fill ran in a fork, a copy of this process that begins with its memory, the allocator's kept "
                f"blocks included. Read it where nothing was freed before: a new interpreter ({_FRESH})")
    return None


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
    and bytes kept beside the memory, which only a reading of the process sees), each called right after this
    process freed more memory than the fill takes (``_leave_freed_memory``). Behaviour first: the fill must have run
    (its report file), in another process, and not in a fork (a copy that starts with this process's memory). Then
    each answer must be within ``REL`` of the bytes the fill wrote (frames and kept bytes) over its transitions; a
    wrong one is told its direction, not the target. The learner's function may read ``rss_bytes``; the course's
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
    readings = []
    with tempfile.TemporaryDirectory(prefix="fill-") as folder:
        for case, (frames, frame_bytes, episode, kept_bytes) in enumerate(FILL_CASES):
            report = Path(folder) / f"fill-{case}.txt"
            _leave_freed_memory(frames * (frame_bytes + kept_bytes) * 3 // 2, frame_bytes)
            args = (frames, frame_bytes, episode, kept_bytes, str(report))
            got = _call_learner(bytes_per_transition, (fill_frames, *args), _CALL, _BY_NAME)
            _KEPT.clear()
            if got is None:
                return _not_answered_yet("bytes_per_transition returns None yet; return the bytes per transition")
            _require_number(got, "bytes_per_transition should return a number of bytes per transition")
            where = _where_it_ran(report)
            assert where is None, f"fill_frames{args[:4]}: {where}."
            held = frames - frames // episode
            truth = frames * (frame_bytes + kept_bytes) / held
            assert abs(got - truth) <= REL * truth, (
                f"fill_frames{args[:4]} ran in a new interpreter; bytes_per_transition gave {got:,.0f}: "
                f"{_hint(got, truth, frames, held)}.")
            readings.append(f"{got:,.0f} (written: {truth:,.0f})")
        same = _same_process_reading(*FILL_CASES[0], str(Path(folder) / "same.txt"))
    return _passed(f"{len(FILL_CASES)} memories measured in a new interpreter, bytes per transition: "
                   f"{', '.join(readings)}. Read in this process right after a free, the first grew by {same:,.0f}")


check_module(globals())
