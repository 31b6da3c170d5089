"""Module-level functions for ``measure_in_subprocess`` (a "spawn" child must import what it runs)."""
from __future__ import annotations

import numpy as np

from dqn_course.replay import FrameSharingMemory, StackedRingMemory  # imported before the child measures

_KEEP: list = []  # what the functions allocate stays alive until the child measures its RSS


def allocate_and_keep(megabytes: int) -> int:
    """Write ``megabytes`` MB into a fresh array and keep it; returns its size in bytes."""
    arr = np.ones(megabytes * 1_000_000, dtype=np.uint8)
    _KEEP.append(arr)
    return arr.nbytes


def raise_value_error(message: str = "boom from the child") -> None:
    raise ValueError(message)


def make_frame_sharing(capacity: int, prefault: bool, obs_shape=(4, 84, 84)) -> int:
    """Build a FrameSharingMemory and keep it; returns its planned size in bytes (``nbytes``)."""
    memory = FrameSharingMemory(capacity, obs_shape, prefault=prefault)
    _KEEP.append(memory)
    return memory.nbytes


def make_stacked(capacity: int, prefault: bool, obs_shape=(4, 84, 84)) -> int:
    memory = StackedRingMemory(capacity, obs_shape, prefault=prefault)
    _KEEP.append(memory)
    return memory.nbytes


def sleep_for(seconds: float) -> float:
    import time

    time.sleep(seconds)
    return seconds


def die_hard(code: int = 3) -> None:
    """Exit without reporting, as an OOM-killed child would (no exception, no result)."""
    import os

    os._exit(code)
