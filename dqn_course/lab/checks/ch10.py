"""Notebook 10 (scaling out with Ray): its exercise (the bytes of pixels a chunk carries) and questions.
"""
from __future__ import annotations

from typing import Any

from dqn_course.contracts import check_module
from dqn_course.lab.checks.core import (QUESTIONS, _call_learner, _not_answered_yet, _passed, _require_learners_code,
                                        _require_number)

_CHUNKS = "section 1, *What travels: chunks of frames*"
_CALL = "chunk_pixel_bytes(episode_ends, stack, frame_shape, dtype)"

# The chunks the check builds, none of them the page's (its chunks are 84 x 84 uint8 4-stacks of 300 and 50 steps):
# (steps, the steps at which an episode ends, stack, frame shape, dtype).
CHUNK_CASES = (
    (64, (), 4, (96, 96), "uint8"),  # another game's frames, no episode end
    (20, (7,), 4, (84, 84), "float32"),  # frames kept as float32, one restart inside
    (30, (9, 19), 3, (64, 64, 3), "uint8"),  # colour frames, 3-stacks, two restarts
    (10, (9,), 4, (84, 84), "uint8"),  # an episode ends on the chunk's last step: nothing restarts inside it
    (1, (0,), 2, (105, 80), "uint16"),  # one step, which ends its episode
    (40, (0, 39), 4, (84, 84), "float16"),  # an end on the first step (a restart) and on the last (none)
)


def real_chunk(steps: int, ends: tuple, stack: int, frame_shape: tuple, dtype: str):
    """A real ``Chunk`` (``dqn_course.distributed``) of ``steps`` chained transitions of random frames of
    ``frame_shape`` and ``dtype`` in ``stack``-frame states, an episode ending after each step in ``ends`` (a new
    episode's state is a fresh stack). What ``check_chunk_bytes`` measures a learner's answer against."""
    import numpy as np

    from dqn_course.distributed import Chunk

    frames = np.random.default_rng(steps).integers(0, 200, (steps + stack * (len(ends) + 1), *frame_shape))
    frames, k = frames.astype(dtype), stack
    state, transitions = frames[:stack], []
    for i in range(steps):
        next_state = np.concatenate([state[1:], frames[k:k + 1]])
        k += 1
        transitions.append((state, 0, 0.0, next_state, i in ends, i in ends))
        state = next_state
        if i in ends:
            state, k = frames[k:k + stack], k + stack
    return Chunk.from_transitions(0, transitions)


def _wrong_answers(steps: int, ends: tuple, stack: int, frame_shape: tuple, dtype: str) -> list[tuple[int, str]]:
    """What typical slips give for one chunk, each with its hint (the concept and the section, not the code)."""
    import numpy as np

    pixel = np.dtype(dtype).itemsize
    frame = int(np.prod(frame_shape)) * pixel
    restarts = sum(1 for i in ends if i < steps - 1)
    wrong = [
        ((stack + steps + len(ends) * stack) * frame,
         "an episode that ends on the chunk's last step restarts nothing inside the chunk: the state after it "
         f"travels with the next chunk, so only the ends before the last step add a stack ({_CHUNKS})"),
        ((stack + steps) * frame,
         "after an episode ends inside the chunk, the next step starts from a new game's state, which no earlier "
         f"frame contains: its full stack travels too ({_CHUNKS})"),
        ((stack + steps + restarts) * frame,
         f"a new episode's first state is a full stack of frames, not one frame ({_CHUNKS})"),
        ((stack + steps + restarts * stack) * int(np.prod(frame_shape)),
         f"a frame of this dtype takes {pixel} bytes per pixel, not 1: count bytes, not pixels (section 1 counts "
         "uint8 frames, one byte per pixel)"),
        ((stack + steps + restarts * stack) * int(np.prod(frame_shape[:2])) * pixel,
         "a frame's pixels are the product of its whole shape, colour channels included (the frame shape you are "
         f"given; {_CHUNKS})"),
        ((steps + restarts * stack) * frame,
         f"the replay also needs the first state's whole stack to rebuild the first transition ({_CHUNKS})"),
        ((1 + steps + restarts * stack) * frame, f"the first state is a stack of frames, not one frame ({_CHUNKS})"),
        (steps * 2 * stack * frame, "that is s and s' as full stacks for every transition; a chunk sends one new "
                                    f"frame per step ({_CHUNKS})"),
        (steps * stack * frame, "that is one full stack per step; consecutive stacks share all but one of their "
                                f"frames, so each step adds only one new frame ({_CHUNKS})"),
        (steps * (stack + 1) * frame, "that is a folded state per transition; within a chunk the frames chain, so "
                                      f"each step adds only one new frame ({_CHUNKS})"),
    ]
    right = (stack + steps + restarts * stack) * frame
    return [(value, hint) for value, hint in wrong if value != right]  # a slip that changes nothing in this chunk


def check_chunk_bytes(chunk_pixel_bytes: Any) -> bool | None:
    """Notebook 10: ``chunk_pixel_bytes(episode_ends, stack, frame_shape, dtype)``, the bytes of pixels in a chunk
    of ``len(episode_ends)`` consecutive steps of one worker (``episode_ends[i]`` true when the game was reset after
    step i), with ``stack``-frame states of frames of ``frame_shape`` and ``dtype``.

    Right when, on every chunk of ``CHUNK_CASES`` (other frame sizes, colour frames, other stacks and dtypes, restarts
    inside the chunk and on its last step: none of them the page's), it returns the bytes of the pixel arrays of a
    real ``Chunk`` of those transitions: the first state's stack, one new frame per step, and a full stack after
    each episode end but one on the last step. The course's code and anything the page imports are refused
    (``_require_learners_code``). ``None`` as the answer, or a function that returns ``None``, is "not answered yet".
    Raises ``AssertionError`` with a hint naming the concept and the section.
    """
    if chunk_pixel_bytes is None:
        return _not_answered_yet("write chunk_pixel_bytes(episode_ends, stack, frame_shape, dtype)")
    _require_learners_code(chunk_pixel_bytes, _CALL,
                           f"a def of {_CALL} in the notebook that counts the frames a chunk carries ({_CHUNKS})")
    for steps, ends, stack, frame_shape, dtype in CHUNK_CASES:
        flags = [i in ends for i in range(steps)]
        got = _call_learner(chunk_pixel_bytes, (list(flags), stack, frame_shape, dtype), _CALL)
        if got is None:
            return _not_answered_yet("chunk_pixel_bytes returns None yet; return the chunk's bytes of pixels")
        _require_number(got, f"chunk_pixel_bytes should return a number of bytes (an int) for {steps} steps")
        chunk = real_chunk(steps, ends, stack, frame_shape, dtype)
        right = chunk.first_state.nbytes + chunk.frames.nbytes + chunk.reset_states.nbytes
        if got == right:
            continue
        where = (f"{steps} step(s) of {'x'.join(map(str, frame_shape))} {dtype} frames in {stack}-frame states, "
                 f"episode end(s) after step(s) {list(ends) or 'none'}")
        hint = next((h for value, h in _wrong_answers(steps, ends, stack, frame_shape, dtype) if got == value),
                    "count the frames a chunk stores: its first full stack, one new frame per step and a full stack "
                    "after each episode restart inside it, each frame its shape's pixels times the dtype's bytes "
                    f"({_CHUNKS})")
        raise AssertionError(f"{where}: a real chunk carries {right:,} bytes of pixels, chunk_pixel_bytes gave "
                             f"{got:,}: {hint}.")
    return _passed(f"{len(CHUNK_CASES)} chunks of other sizes, stacks and dtypes, each what a real Chunk carries: "
                   "the first state's stack, one new frame per step, a full stack after each restart inside the "
                   "chunk, each frame its pixels times the dtype's bytes")


QUESTIONS.update({
    "10.samples_per_step": ("b", "the single process ties one update to every 4 agent steps, so a faster game brings "
                                 "its updates along and samples per step stay 32 / 4 = 8; Ray's worker steps without "
                                 "waiting for the learner, so the same updates/s meet more steps",
                            {"a": "the gradient step does cost what it did, but notebook 07's loop learns once every "
                                  "4 agent steps: count updates per agent step, not per second (*The shape*, the "
                                  "replay ratio, and section 4, samples/step)",
                             "c": "a learner at its own pace draws as many batches per second as before: compare that "
                                  "with the transitions per second the faster worker sends. And what ties notebook "
                                  "07's updates to its steps? (*The shape*, the learner's line, and section 4, "
                                  "samples/step)"}),
    "10.second_worker": ("b", "a worker needs a core: four workers, the replay actor and the learner's process are "
                              "six busy processes on four cores, so the added workers take turns with the rest",
                         {"a": "a chunk travels once, from its worker to the replay actor, through the object store "
                               "(section 2, *The replay actor*): count the busy processes against the cores instead "
                               "(section 4, *How to read it*)",
                          "c": "Ray places actors by the logical CPUs it was told, not by the real cores: all four "
                               "workers start (the cell that starts Ray, before section 1)"}),
})


check_module(globals())
