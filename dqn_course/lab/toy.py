"""Toy transitions whose frames carry their own running number, so a stack can be read at a glance.

Notebook 04 and ``checks.check_stack_at`` use them: frame number j is an array filled with j, so
``frame_numbers(state)`` prints a 4-stack as e.g. ``[5, 5, 6, 7]`` (frame 5 starts an episode and
is repeated as padding). States are built the way gymnasium's ``FrameStackObservation`` builds them
(a queue of the last ``stack`` frames, filled with copies of the reset frame at an episode start),
independently of any replay memory, so they can serve as ground truth.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Collection, Sequence

import numpy as np

from dqn_course.contracts import Count, check_module
from dqn_course.replay import FrameSharingMemory

__all__ = ["numbered_transitions", "frame_numbers", "describe_ring"]


def numbered_transitions(episode_lengths: Sequence[int], stack: Count = 4, frame_shape: tuple[int, ...] = (1, 1),
                         life_lost: Collection[int] = (), truncated: Collection[int] = (),
                         start: int = 0) -> list[tuple]:
    """(state, action, reward, next_state, done, episode_end) for episodes of the given lengths.

    An episode of T transitions shows T+1 frames. Frames are numbered from ``start`` over the whole
    list (value ``j % 256`` in every pixel). ``life_lost`` holds running transition numbers that
    lose a life (``done`` without ``episode_end``); ``truncated`` holds episode numbers that end by
    a time limit (``episode_end`` without ``done``). Actions and rewards are 0.
    """
    out, j = [], start

    def frame(n):
        return np.full(frame_shape, n % 256, np.uint8)

    for e, length in enumerate(episode_lengths):
        if length < 1:
            raise ValueError(f"an episode needs at least one transition, got length {length}")
        queue = deque([frame(j)] * stack, maxlen=stack)  # reset: the first frame fills the stack
        state = np.stack(queue)
        for t in range(length):
            j += 1
            queue.append(frame(j))
            next_state = np.stack(queue)
            last = t == length - 1
            done = (last and e not in truncated) or (len(out) in life_lost)
            out.append((state, 0, 0.0, next_state, bool(done), last))
            state = next_state
        j += 1  # the next episode starts with a fresh frame number
    return out


def frame_numbers(stack_array: np.ndarray | Sequence[np.ndarray]) -> list[int]:
    """The running numbers of the frames in a stack (or a list of frames): one pixel of each."""
    a = np.asarray(stack_array)
    return [int(f.flat[0]) for f in a]


def describe_ring(memory: FrameSharingMemory) -> str:
    """A FrameSharingMemory's slots as a small table: frame number, episode start, valid, the write head."""
    C = memory.capacity
    filled = min(memory.written, C)
    cells = {
        "slot": [str(k) for k in range(C)],
        "frame": [str(int(memory.frames[k].flat[0])) if k < filled else "." for k in range(C)],
        "first": ["F" if memory.first[k] and k < filled else "." for k in range(C)],
        "valid": ["✓" if memory.valid[k] else "." for k in range(C)],
        "head": ["^" if k == memory.head else "" for k in range(C)],
    }
    w = max(3, max(len(c) for col in cells.values() for c in col) + 1)
    return "\n".join(f"{name:>6} " + "".join(f"{c:>{w}}" for c in col) for name, col in cells.items()).rstrip()


check_module(globals())
