"""Notebook 06b (the whole ladder): its exercise, the bytes of frames a rung stores per transition from its settings.

The questions and the prediction of 06b are registered with notebook 06's (``ch06``).
"""
from __future__ import annotations

from typing import Any

from dqn_course.contracts import check_module
from dqn_course.lab.checks.core import (_call_learner, _not_answered_yet, _passed, _require_learners_code,
                                        _require_number)

_RUNGS = "section 1, the *expected* column, and *The arithmetic behind the ticks*"
_CALL = "rung_bytes(rung, stack, frame_shape, dtype)"
RUNG_NAMES = ("copies", "shared", "folded", "one_frame")

# The page's own rungs, as the course measured them (data/measured/06b_the_whole_ladder.json): the figure's name,
# then (rung, stack, frame shape, dtype).
MEASURED_RUNGS = {
    "raw_rgb_stack4_copies_bytes_per_transition": ("copies", 4, (210, 160, 3), "uint8"),
    "gray_float32_copies_bytes_per_transition": ("copies", 4, (84, 84), "float32"),
    "gray_uint8_copies_bytes_per_transition": ("copies", 4, (84, 84), "uint8"),
    "folded_ring_bytes_per_transition": ("folded", 4, (84, 84), "uint8"),
    "gray_uint8_shared_bytes_per_transition": ("shared", 4, (84, 84), "uint8"),
    "frame_sharing_bytes_per_transition": ("one_frame", 4, (84, 84), "uint8"),
}
MEASURED_REL = 0.05  # RSS moves in pages and the bottom rung adds its bookkeeping and episode ends (section 1)

# Settings the page does not show, priced against the course's memories built with them.
RUNG_CASES = (
    ("copies", 3, (96, 96), "float16"),
    ("shared", 4, (64, 64, 3), "uint8"),
    ("folded", 2, (105, 80), "float32"),
    ("one_frame", 3, (96, 96), "uint8"),
    ("folded", 4, (84, 84), "float16"),
    ("copies", 2, (210, 160, 3), "uint8"),
    ("shared", 3, (42, 42), "float32"),
    ("one_frame", 6, (64, 64), "uint8"),
)


def memory_bytes(rung: str, stack: int, frame_shape: tuple, dtype: str) -> float:
    """The bytes of frames per transition of the course's memory for ``rung`` built with these settings: the
    frame arrays a ``StackedRingMemory`` (``copies``), ``FoldedRingMemory`` (``folded``) or ``FrameSharingMemory``
    (``one_frame``, uint8 only) allocates, over its capacity; for ``shared``, the distinct stacks a
    ``NaiveDequeMemory`` keeps for 200 chained transitions (s' the next s), over 200. Raises ``ValueError`` for
    another rung name."""
    import numpy as np

    from dqn_course.replay import FoldedRingMemory, FrameSharingMemory, NaiveDequeMemory, StackedRingMemory

    shape, n = (stack, *frame_shape), 200
    if rung == "copies":
        memory = StackedRingMemory(n, shape, dtype)
        return (memory.states.nbytes + memory.next_states.nbytes) / n
    if rung == "folded":
        return FoldedRingMemory(n, shape, dtype).folded.nbytes / n
    if rung == "one_frame":
        return FrameSharingMemory(n, shape).frames.nbytes / n
    if rung == "shared":
        memory = NaiveDequeMemory(n, shape, dtype)
        states = [np.full(shape, i % 200, dtype) for i in range(n + 1)]
        for i in range(n):
            memory.add(states[i], 0, 0.0, states[i + 1], False)
        held = {id(a): a.nbytes for row in memory.memory for a in (row[0], row[3])}
        return sum(held.values()) / n
    raise ValueError(f"rung must be one of {RUNG_NAMES}, got {rung!r}")


def _wrong_answers(rung: str, stack: int, frame_shape: tuple, dtype: str) -> list[tuple[float, str]]:
    """What typical slips give for one rung, each with its hint (the concept and the section, not the code)."""
    import numpy as np

    pixel = np.dtype(dtype).itemsize
    frame = int(np.prod(frame_shape)) * pixel
    frames = {"copies": 2 * stack, "shared": stack, "folded": stack + 1, "one_frame": 1}[rung]
    wrong = [(frames * frame // pixel, f"a frame of {dtype} takes {pixel} bytes per pixel, not 1: count bytes "
                                       f"(notebook 03's rung; {_RUNGS})"),
             (frames * int(np.prod(frame_shape[:2])) * pixel,
              f"a frame's pixels are the product of its whole shape, colour channels included ({_RUNGS})")]
    if rung == "copies":
        wrong.append((stack * frame, f"s and s' are both kept, each as its own stack of frames ({_RUNGS})"))
    if rung == "shared":
        wrong.append((2 * stack * frame, "with the next state shared, a transition's s' is the next transition's s: "
                                         f"each stack is kept once, so a transition holds one stack ({_RUNGS})"))
    if rung == "folded":
        wrong += [(stack * frame, f"a folded state holds s and the one frame s' adds to it ({_RUNGS})"),
                  (2 * stack * frame, "s and s' overlap in all but one frame; the folded state keeps the overlap "
                                      f"once ({_RUNGS})")]
    if rung == "one_frame":
        wrong += [(stack * frame, f"the bottom rung keeps one frame per step and rebuilds stacks by index ({_RUNGS})"),
                  (frame + 16, "count the frames only: the 16 bytes of a slot's bookkeeping are not pixels (section 1, "
                               "the *expected* column)")]
    return [(value, hint) for value, hint in wrong if value != frames * frame]  # a slip that changes nothing here


def check_rung_bytes(rung_bytes: Any) -> bool | None:
    """Notebook 06b: ``rung_bytes(rung, stack, frame_shape, dtype)``, the bytes of frames a rung of the ladder
    stores per transition, for ``rung`` one of ``RUNG_NAMES``, ``stack``-frame states, frames of ``frame_shape`` and
    ``dtype`` (a numpy dtype or its name).

    Right when, at the page's own settings, each answer is within ``MEASURED_REL`` of the ladder the course measured
    (``data/measured/06b_the_whole_ladder.json``, read when present), and when, on every setting of ``RUNG_CASES``
    (other frame sizes, colour frames, other stacks and dtypes: none of them the page's), it equals the bytes of
    frames the course's memory for that rung holds per transition (``memory_bytes``; 1% for ``shared``, whose 200
    transitions keep 201 stacks). The course's code and anything the page imports are refused
    (``_require_learners_code``). ``None``, or a function that returns ``None``, is "not answered yet". Raises
    ``AssertionError`` with a hint naming the concept and the section.
    """
    if rung_bytes is None:
        return _not_answered_yet("write rung_bytes(rung, stack, frame_shape, dtype)")
    _require_learners_code(rung_bytes, _CALL, f"a def of {_CALL} in the notebook that prices a rung from its "
                                               f"settings ({_RUNGS})")
    from dqn_course.lab import figures

    measured = figures.load("06b_the_whole_ladder").get("figures", {})
    cases = [(args, measured[name], MEASURED_REL, "the course measured") for name, args in MEASURED_RUNGS.items()
             if name in measured]
    cases += [(args, None, 0.0, "the course's memory holds") for args in RUNG_CASES]
    for (rung, stack, frame_shape, dtype), expected, rel, source in cases:
        got = _call_learner(rung_bytes, (rung, stack, frame_shape, dtype), _CALL)
        if got is None:
            return _not_answered_yet("rung_bytes returns None yet; return the rung's bytes per transition")
        _require_number(got, f"rung_bytes should return a number of bytes for rung {rung!r}")
        if expected is None:
            expected = memory_bytes(rung, stack, frame_shape, dtype)
            rel = 0.01 if rung == "shared" else 0.0
        if abs(got - expected) <= rel * expected:
            continue
        where = f"rung {rung!r}, {stack}-frame states of {'x'.join(map(str, frame_shape))} {dtype} frames"
        hint = next((h for value, h in _wrong_answers(rung, stack, frame_shape, dtype)
                     if abs(got - value) <= rel * value),
                    f"count the frames the rung keeps per transition, times a frame's pixels, times the dtype's "
                    f"bytes ({_RUNGS})")
        raise AssertionError(f"{where}: {source} {expected:,.0f} bytes per transition, rung_bytes gave {got:,}: "
                             f"{hint}.")
    return _passed(f"{len(cases)} rungs priced: the page's as the course measured them, and {len(RUNG_CASES)} at "
                   "settings the page does not show, as the course's memories hold them")


check_module(globals())
