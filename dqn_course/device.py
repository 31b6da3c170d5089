"""The one place the course picks its ``torch.device``, and how host arrays get onto it without waiting.

Also what a CUDA device has free, the refusal of an allocation it cannot hold (``check_fits_on_device``), and
the capture of a function as a CUDA graph (``GraphCapture``).
"""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import numpy as np
import torch

from dqn_course.contracts import Count, Fraction, check_module
from dqn_course.profiling import InsufficientMemoryError, format_bytes

FIT_FRACTION = 0.9  # the share of a device's free memory a planned allocation may take (as for host RAM)


def pick_device(prefer: str | None = None) -> torch.device:
    """``prefer`` or $DQN_COURSE_DEVICE if set, else CUDA when available, else the CPU."""
    choice = prefer or os.environ.get("DQN_COURSE_DEVICE")
    if choice:
        return torch.device(choice)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def free_memory(device: torch.device | str) -> int | None:
    """Bytes free on a CUDA ``device`` now, as its driver reports them (other processes' use included), or None
    for a device without that query: the CPU (``profiling.available_bytes`` tells its RAM) and MPS."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    free, _ = torch.cuda.mem_get_info(device)
    return int(free)


def check_fits_on_device(needed: int, device: torch.device | str, what: str, fixes: str,
                         fraction: Fraction = FIT_FRACTION) -> None:
    """Refuse, before allocating, ``needed`` bytes on a CUDA ``device`` beyond ``fraction`` of its free memory.

    Raises ``InsufficientMemoryError`` naming ``what``, the bytes needed, the free memory and ``fixes`` (what to
    change). Devices without a free-memory query (``free_memory`` is None) pass: the host RAM guard covers the CPU.
    """
    free = free_memory(device)
    if free is not None and needed > fraction * free:
        raise InsufficientMemoryError(
            f"{what} needs {format_bytes(needed)} on {device}, which has {format_bytes(free)} free "
            f"(limit: {fraction:.0%} of that = {format_bytes(fraction * free)}). {fixes}")


class Uploader:
    """Copies host numpy arrays to ``device`` without making the host wait.

    On CUDA each array goes through a pinned (page-locked) buffer, grown on demand, with a non-blocking copy on
    the device's current stream. There are ``depth`` sets of buffers, used in turn, each with a CUDA event
    recorded after its copies: a set is written again only once its last copies have finished, so callers may
    reuse their arrays at once, and the host can run up to ``depth`` uploads ahead of the device before it
    waits. Elsewhere the tensors may share memory with the arrays: do not change those arrays while the tensors
    are in use.
    """

    def __init__(self, device: torch.device | str, depth: Count = 4):
        self.device = torch.device(device)
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ValueError(f"depth must be a whole number >= 1 (sets of pinned buffers), got {depth!r}")
        self._sets: list[dict[int, torch.Tensor]] = [{} for _ in range(depth)]
        self._copied: list = [None] * depth  # per set: the CUDA event recorded after its last copies
        self._turn = 0

    def __call__(self, *arrays: np.ndarray) -> list[torch.Tensor]:
        if self.device.type != "cuda":
            return [torch.from_numpy(np.ascontiguousarray(a)).to(self.device) for a in arrays]
        turn, self._turn = self._turn, (self._turn + 1) % len(self._sets)
        if self._copied[turn] is not None:
            self._copied[turn].synchronize()  # this set's last copies have left its buffers: safe to overwrite
        buffers, out = self._sets[turn], []
        for i, a in enumerate(arrays):
            dtype = torch.from_numpy(np.empty(0, a.dtype)).dtype
            buf = buffers.get(i)
            if buf is None or buf.numel() < a.size or buf.dtype != dtype:
                size = max(a.size, 2 * buf.numel() if buf is not None and buf.dtype == dtype else 0)
                buf = buffers[i] = torch.empty(size, dtype=dtype).pin_memory()
            staged = buf[:a.size].view(a.shape)
            staged.numpy()[...] = a
            out.append(staged.to(self.device, non_blocking=True))
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(self.device))  # the copies above ran on this stream of the device
        self._copied[turn] = event
        return out


@runtime_checkable
class Capture(Protocol):
    """What a learner needs of a graph capture (``GraphCapture``'s interface): a CPU stand-in can keep it too."""

    def warm_up(self, fn: Callable[[], None], times: Count) -> None: ...

    def record(self, fn: Callable[[], None]) -> Callable[[], None]: ...

    def synchronize(self) -> None: ...


class GraphCapture:
    """What the device learner asks of CUDA to run its update as one CUDA graph on ``device``: warm it up, record it,
    wait for the device. Each call makes ``device`` current while it works (and puts the current device back), so
    its streams and graph belong to ``device`` whatever device the caller has current.

    ``optimizer_on_device``: an optimizer stepped inside the graph keeps its step counts on the device (Adam's
    ``capturable=True``). Raises ``ValueError`` for a device that is not CUDA.
    """

    optimizer_on_device = True

    def __init__(self, device: torch.device | str):
        self.device = torch.device(device)
        if self.device.type != "cuda":
            raise ValueError(f"a CUDA graph needs a CUDA device, got {self.device}")

    def warm_up(self, fn: Callable[[], None], times: Count) -> None:
        """Run ``fn`` ``times`` times on a side stream, as a capture needs, then make the device's current stream
        wait for them (also when one raises)."""
        with torch.cuda.device(self.device):
            side = torch.cuda.Stream(device=self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            try:
                with torch.cuda.stream(side):
                    for _ in range(times):
                        fn()
            finally:
                torch.cuda.current_stream(self.device).wait_stream(side)

    def record(self, fn: Callable[[], None]) -> Callable[[], None]:
        """``fn`` captured as a CUDA graph (recorded, not run); returns the graph's ``replay``, which runs it.
        Raises ``RuntimeError`` where the GPU, its driver or the torch build cannot capture what ``fn`` does."""
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.device(self.device), torch.cuda.graph(graph):
            fn()
        return graph.replay

    def synchronize(self) -> None:
        """Wait until all work queued on ``device`` has finished."""
        torch.cuda.synchronize(self.device)


def check_device(device, shown: str | None = None) -> None:
    """Refuse a ``device`` torch cannot use here (``ConfigError`` saying what to use instead); "" / None pass.

    ``shown`` is how the message names the setting (``--device cuda`` for the CLI, ``device='cuda'`` for
    the Python API).
    """
    from dqn_course import ConfigError

    if device is None or device == "":
        return
    if not isinstance(device, (str, torch.device)):
        raise ConfigError(f"{shown or 'device'} must be a torch device or its name ('cpu', 'cuda', 'cuda:0', "
                          f"'mps'), got {device!r}")
    shown = shown or f"--device {device}"
    cpu, leave_out = ("--device cpu", "leave --device out") if shown.startswith("--") else ("device='cpu'",
                                                                                          "pass device=None")
    try:
        dev = torch.device(device)
    except RuntimeError as e:
        raise ConfigError(f"{shown}: {str(device)!r} is not a torch device ({e}); use cpu, cuda, cuda:N or "
                          f"mps") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        build = f"a CUDA {torch.version.cuda} build of torch" if torch.version.cuda else "a CPU-only build of torch"
        raise ConfigError(f"{shown} asks for a CUDA GPU, but this is {build} and it sees no GPU: "
                          f"use {cpu} (or {leave_out}: the GPU is used when there is one), "
                          f"or install a CUDA build of torch on a machine with an NVIDIA GPU")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ConfigError(f"{shown}: this machine has {torch.cuda.device_count()} CUDA device(s), numbered from 0")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"{shown}: Apple's MPS backend is not available here; use {cpu}")
    if dev.type not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"{shown}: the course runs on cpu, cuda or mps")


check_module(globals())
