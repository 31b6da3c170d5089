"""The one place the course picks its ``torch.device``, and how host arrays get onto it without waiting."""
from __future__ import annotations

import os

import numpy as np
import torch


def pick_device(prefer: str | None = None) -> torch.device:
    """``prefer`` or $DQN_COURSE_DEVICE if set, else CUDA when available, else the CPU."""
    choice = prefer or os.environ.get("DQN_COURSE_DEVICE")
    if choice:
        return torch.device(choice)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Uploader:
    """Copies host numpy arrays to ``device`` without making the host wait.

    On CUDA each array goes through its own pinned (page-locked) buffer, grown on demand, with a
    non-blocking copy; a buffer is written again only once the previous copy out of it has finished
    (one CUDA event), so callers may reuse their arrays at once. Elsewhere the tensors may share memory
    with the arrays: do not change those arrays while the tensors are in use.
    """

    def __init__(self, device: torch.device | str):
        self.device = torch.device(device)
        self._buffers: dict[int, torch.Tensor] = {}
        self._copied = None  # CUDA event recorded after the last copies

    def __call__(self, *arrays: np.ndarray) -> list[torch.Tensor]:
        if self.device.type != "cuda":
            return [torch.from_numpy(np.ascontiguousarray(a)).to(self.device) for a in arrays]
        if self._copied is not None:
            self._copied.synchronize()  # the last copies have left the buffers: safe to overwrite
        out = []
        for i, a in enumerate(arrays):
            dtype = torch.from_numpy(np.empty(0, a.dtype)).dtype
            buf = self._buffers.get(i)
            if buf is None or buf.numel() < a.size or buf.dtype != dtype:
                size = max(a.size, 2 * buf.numel() if buf is not None and buf.dtype == dtype else 0)
                buf = self._buffers[i] = torch.empty(size, dtype=dtype).pin_memory()
            staged = buf[:a.size].view(a.shape)
            staged.numpy()[...] = a
            out.append(staged.to(self.device, non_blocking=True))
        self._copied = torch.cuda.Event()
        self._copied.record()
        return out
