"""Replay memories: the library's frame-sharing memory, its multi-stream form, and the teaching rungs.

- ``base``           ``Batch``, the API every memory keeps, input checks, the preallocated ring
- ``rungs``          the blog's deque, full stacks in a ring, folded stacks: the ladder's upper rungs
- ``frame_sharing``  ``FrameSharingMemory``: one frame per step, stacks by index (its invariants are there)
- ``multi_stream``   ``MultiStreamMemory``: one ring per env of a vector env, sampled as one
- ``stores``         where the frames live: RAM, a torch device, lz4/zstd bytes, a memory-mapped file

Prioritized replay (``dqn_course.per``) is a sampler over a memory's slots that the memory notifies.
"""
from dqn_course.replay.base import Batch, ReplayMemory
from dqn_course.replay.frame_sharing import FrameSharingMemory
from dqn_course.replay.multi_stream import MultiStreamMemory
from dqn_course.replay.rungs import FoldedRingMemory, NaiveDequeMemory, StackedRingMemory, held_bytes, root_buffer

MEMORY_CLASSES = {
    "naive": NaiveDequeMemory,
    "stacked": StackedRingMemory,
    "folded": FoldedRingMemory,
    "frame_sharing": FrameSharingMemory,
}

__all__ = [
    "Batch",
    "ReplayMemory",
    "NaiveDequeMemory",
    "StackedRingMemory",
    "FoldedRingMemory",
    "FrameSharingMemory",
    "MultiStreamMemory",
    "MEMORY_CLASSES",
    "held_bytes",
    "root_buffer",
]
