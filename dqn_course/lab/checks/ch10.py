"""Notebook 10 (scaling out with Ray): its check and questions.
"""
from __future__ import annotations

from typing import Any

from dqn_course.contracts import check_module
from dqn_course.lab.checks.core import (QUESTIONS, _check_number)


CHUNK_STEPS, FRAME_BYTES, STACK = 100, 84 * 84, 4  # notebook 10's exercise: a chunk from the middle of a game


_CHUNKS = "section 1, *What travels: chunks of frames*"


def check_chunk_bytes(answer: Any) -> bool | None:
    """Notebook 10: pixel bytes in a chunk of 100 transitions from the middle of a game (no episode start in it).

    A chunk carries its first state as a full 4-stack and then one new 84x84 uint8 frame per step:
    (4 + 100) x 7,056 = 733,824 bytes, against 100 x 2 x 4 x 7,056 = 5,644,800 for s and s' stacks.
    """
    expected = (STACK + CHUNK_STEPS) * FRAME_BYTES
    stacks = CHUNK_STEPS * 2 * STACK * FRAME_BYTES
    return _check_number(
        answer, expected, todo="set `predicted_bytes` to your prediction of the bytes of pixels in the chunk",
        should="predicted_bytes should be a number of bytes (an int)",
        right=(f"{expected:,} bytes: one 4-frame stack to start from, then one new frame per step; "
               f"{stacks / expected:.1f}x less than sending s and s' stacks ({stacks:,} bytes)."),
        hints=[
            (CHUNK_STEPS * FRAME_BYTES, "the replay also needs the first state's whole stack to rebuild the first "
                                        f"transition ({_CHUNKS})"),
            ((CHUNK_STEPS + 1) * FRAME_BYTES, f"the first state is a stack of frames, not one frame ({_CHUNKS})"),
            (stacks, "that is s and s' as full stacks for every transition; a chunk sends one new frame per step "
                     f"({_CHUNKS})"),
            (CHUNK_STEPS * STACK * FRAME_BYTES, "that is one full stack per step; consecutive stacks share 3 of "
                                                f"their 4 frames, so each step adds only one new frame ({_CHUNKS})"),
            (CHUNK_STEPS * (STACK + 1) * FRAME_BYTES, "that is a folded 5-frame state per transition; within a chunk "
                                                      f"the frames chain, so each step adds only one new frame "
                                                      f"({_CHUNKS})"),
            (4 * expected, f"pixels are uint8, 1 byte each, not float32 ({_CHUNKS}, the chunk's output)"),
            (8 * expected, f"that is bits; count bytes ({_CHUNKS}, the chunk's output)"),
        ],
        otherwise=("count the frames a chunk stores: its first full stack, then one new frame per step, each "
                   f"84 x 84 bytes ({_CHUNKS})"))


QUESTIONS.update({
    "10.samples_per_step": ("b", "the single process ties one update to every 4 agent steps, so a faster game brings "
                                 "its updates along and samples per step stay 32 / 4 = 8; Ray's worker steps without "
                                 "waiting for the learner, so the same updates/s meet more steps",
                            {"a": "the gradient step does cost what it did, but notebook 07's loop learns once every "
                                  "4 agent steps: count updates per agent step, not per second (*The question* at "
                                  "the top of the page, and section 4, samples/step)",
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
