"""Frame stores: where a ``FrameSharingMemory`` keeps its frames, behind one small interface.

The memory keeps its slots and invariants; a store only holds frames::

    store[k] = frame                 # write one (H, W) uint8 frame into slot k (a host numpy array)
    store.gather(index, zero=None)   # frames at an int array of slots, shape (*index.shape, H, W);
                                     # positions where the bool mask ``zero`` is True read as zeros
    store.flush()                    # make every write so far visible to ``gather`` (device stores batch them)
    store.nbytes                     # bytes the store holds in RAM (or on its device)
    store.device                     # None for host stores, else the torch device ``gather`` returns on
    store.state_arrays() / check_state_arrays(arrays) / load_state_arrays(arrays)   # checkpoints

Stores (``make_store``):

* ``RamFrames``: a numpy array (``storage="ram"``, the default).
* ``TorchFrames``: a torch tensor on a device (``device="cuda"``): frames are gathered where the network
  runs; writes are staged and copied in one transfer per ``flush``.
* ``CompressedFrames``: each frame compressed on write, decompressed on read (``"lz4"``, ``"zstd"``).
* ``DiskFrames``: a memory-mapped file (``"disk"``): capacity beyond RAM.

``RamFrames`` and ``TorchFrames`` can be one *bank* shared by several memories (``region``): each memory
writes its own part, and a multi-stream memory gathers a batch of every stream with one ``gather``
on the bank.

To add a storage: a class with the calls above, a name in ``STORAGES``, a branch in ``make_store`` and
in ``planned_host_bytes`` (what it preallocates in host RAM, for the memory guard). The property tests
in ``tests/test_storage.py`` then check it samples exactly what ``"ram"`` samples.

Design choices (the measurements behind them are in ``benchmarks/README.md`` and notebook 09):

* **One frame per payload, not chunks**: a batch reads 5-frame windows at random slots, and a chunk
  must be decompressed whole to read one of its frames.
* **lz4 is the default codec, zstd the one for memory**: lz4 decompresses faster, zstd shrinks more.
* **Decompress straight into the batch**: a fresh joined ``bytes`` per batch costs page faults.
* **Disk files are reserved, not sparse** (``posix_fallocate``): a full disk is refused when the memory
  is built, not met as SIGBUS hours into a run; reads are declared random (``MADV_RANDOM``).
"""
from __future__ import annotations

import contextlib
import ctypes
import importlib
import mmap
import os
import shutil
import sys
import tempfile
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dqn_course.contracts import Count, Fraction, check_module
from dqn_course.profiling import format_bytes
from dqn_course.replay.base import check_array

if TYPE_CHECKING:  # torch is loaded only by the stores that keep frames on a device
    import torch

__all__ = [
    "STORAGES",
    "CODECS",
    "CompressedFrames",
    "DiskFrames",
    "InsufficientDiskError",
    "check_disk_space",
    "make_store",
    "planned_host_bytes",
    "RamFrames",
    "TorchFrames",
]

STORAGES = ("ram", "lz4", "zstd", "disk")
CODECS = ("lz4", "zstd")
ZSTD_LEVEL = 3
POINTER_BYTES = 8  # one list slot per frame: what a compressed store preallocates
_PACKAGES = {"lz4": "lz4.block", "zstd": "zstandard"}


class InsufficientDiskError(OSError):
    """A disk-backed memory was refused because its directory's disk lacks the space."""


def check_disk_space(needed: int, directory: str | Path, what: str = "this file", fraction: Fraction = 0.9) -> None:
    """Refuse, before creating anything, a file that needs more than ``fraction`` of the free disk space."""
    if not Path(directory).is_dir():
        raise FileNotFoundError(f"path must be an existing directory for the frames file, got {directory}")
    free = shutil.disk_usage(directory).free
    if needed > fraction * free:
        raise InsufficientDiskError(
            f"{what} needs {format_bytes(needed)} on disk but {directory} has {format_bytes(free)} free "
            f"(limit: {fraction:.0%} of that = {format_bytes(fraction * free)}). "
            f"Use a smaller capacity, another directory (path=...), or a compressed memory (storage='lz4')."
        )


def codec_functions(name: str):
    """(compress, decompress) for one codec, imported on first use (they are the ``compress`` extra).

    Both are the codec's own C functions, called with the payload alone: a Python wrapper or a
    keyword argument per call is measurable when a batch makes 160 calls.
    """
    if name not in CODECS:
        raise ValueError(f"codec must be one of {CODECS}, got {name!r}")
    try:
        module = importlib.import_module(_PACKAGES[name])
    except ImportError as exc:
        raise ImportError(f"storage={name!r} needs the {_PACKAGES[name].split('.')[0]} package, which is not "
                          f'installed: pip install "dqn-course[compress]"') from exc
    if name == "lz4":  # block format; each payload starts with the frame's size (4 bytes)
        return module.compress, module.decompress
    compress = module.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=False).compress

    def compress_exact(frame) -> bytes:
        # zstandard shrinks a worst-case-sized output in place; kept as is, every payload pinned a
        # ~7 KB heap hole and RSS grew by about a frame per frame (measured). A copy of the exact size fixes it.
        return memoryview(compress(frame)).tobytes()

    return compress_exact, module.ZstdDecompressor().decompress


class HostStore:
    """What the host stores share: writes land at once, ``gather`` returns numpy arrays."""

    device = None

    def gather(self, index: np.ndarray, zero: np.ndarray | None = None) -> np.ndarray:
        """Frames at ``index`` as a new array; positions where ``zero`` is True read as zeros."""
        frames = self[index]
        if zero is not None:
            frames[zero] = 0
        return frames

    def flush(self) -> None:
        """Writes go straight to the store: nothing to do."""

    def deferred(self):
        """Writes are never batched here: a context that does nothing."""
        return contextlib.nullcontext()


class ArrayStore(HostStore):
    """A host store whose frames are one numpy-indexable ``array`` (in RAM, or a view of a mapped file)."""

    STATE_KEYS = ("frames",)

    def __setitem__(self, k, frame) -> None:
        self.array[k] = frame

    def put(self, slots: np.ndarray, frames: np.ndarray) -> None:
        """Write ``frames``, shaped ``(n, *frame_shape)``, at ``slots`` (n distinct ints) in one go."""
        self.array[slots] = frames

    def __getitem__(self, index) -> np.ndarray:
        return self.array[index]

    def __len__(self) -> int:
        return self.capacity

    @property
    def shape(self) -> tuple[int, ...]:
        return self.array.shape

    def state_arrays(self) -> dict[str, np.ndarray]:
        """The frames themselves, no copy (a file's are read from the page cache): write them out before the
        next write."""
        return {"frames": self.array}

    def check_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        check_array("frames", arrays["frames"], (self.capacity, *self.frame_shape), np.uint8)

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        self.array[...] = arrays["frames"]


class RamFrames(ArrayStore):
    """Frames in a numpy array: the default store. ``region`` shares one array between several memories."""

    def __init__(self, capacity: Count, frame_shape: tuple[int, ...], prefault: bool = False,
                 array: np.ndarray | None = None):
        self.capacity, self.frame_shape = int(capacity), tuple(frame_shape)
        if array is None:
            array = np.zeros((self.capacity, *self.frame_shape), np.uint8)
            if prefault:  # write every page now: a RAM shortfall shows at start, not hours later
                array.fill(0)
        self.array = array
        self.bank, self.offset = self, 0  # the store this one is a region of, and where it starts there

    def region(self, offset: int, length: int) -> RamFrames:
        """Slots [offset, offset+length) of this store as a store of its own (a view: no copy)."""
        part = RamFrames(length, self.frame_shape, array=self.array[offset:offset + length])
        part.bank, part.offset = self, offset
        return part

    @property
    def nbytes(self) -> int:
        return int(self.array.nbytes)


class TorchFrames:
    """Frames in a torch tensor on ``device`` (a GPU): batches are gathered there, no frame crosses back.

    Writes are staged in host memory and copied to the device together at ``flush`` (one transfer,
    through a pinned buffer on CUDA: ``device.Uploader``, then one ``index_copy_``; on the CPU a copy into the
    tensor's memory); ``gather`` flushes
    first, so it always sees every write. The frames written must stay unchanged until the flush: the memories flush at
    the end of each ``add`` (``deferred()`` moves that to the end of a whole vector step). A CUDA
    store checks the GPU's free memory before allocating (``InsufficientMemoryError``).
    """

    STATE_KEYS = ("frames",)

    def __init__(self, capacity: Count, frame_shape: tuple[int, ...], device: torch.device | str,
                 what: str = "a frame store", tensor: torch.Tensor | None = None):
        import torch

        from dqn_course.device import Uploader, check_fits_on_device  # torch: loaded only by device memories

        self.capacity, self.frame_shape = int(capacity), tuple(frame_shape)
        self.device = torch.device(device)
        if tensor is None:
            check_fits_on_device(self.capacity * int(np.prod(self.frame_shape)), self.device, what,
                                 "Use a smaller capacity, or keep the frames in host RAM (device=None).")
            tensor = torch.zeros((self.capacity, *self.frame_shape), dtype=torch.uint8, device=self.device)
        self.tensor = tensor
        self.bank, self.offset = self, 0
        self._pending: dict[int, np.ndarray] = {}  # bank slot -> frame; a slot written twice keeps the last
        self._deferring = 0
        # Copies to a GPU go through pinned buffers; on the CPU the tensor's memory is written in place (numpy's
        # fancy assignment: a plain copy per frame)
        self._upload = None if self.device.type == "cpu" else Uploader(self.device)

    def region(self, offset: int, length: int) -> TorchFrames:
        """Slots [offset, offset+length) as a store of its own; its writes are flushed with the bank's."""
        part = TorchFrames(length, self.frame_shape, self.device, tensor=self.tensor[offset:offset + length])
        part.bank, part.offset = self, offset
        return part

    def __setitem__(self, k: int, frame: np.ndarray) -> None:
        self.bank._pending[self.offset + int(k)] = frame

    def put(self, slots: np.ndarray, frames: np.ndarray) -> None:
        """Stage ``frames``, shaped ``(n, *frame_shape)``, for ``slots`` (n distinct ints): copied at the next
        flush."""
        self.bank._pending.update(zip((self.offset + np.asarray(slots, np.int64)).tolist(), frames))

    @contextlib.contextmanager
    def deferred(self):
        """Hold every flush of the bank's regions until the block ends, then copy all their writes at once."""
        bank = self.bank
        bank._deferring += 1
        try:
            yield
        finally:
            bank._deferring -= 1
            bank.flush()

    def flush(self) -> None:
        """Copy the staged writes of the whole bank to the device (unless inside ``deferred``)."""
        bank = self.bank
        if bank is not self:
            return bank.flush()
        if not self._pending or self._deferring:
            return
        slots = np.fromiter(self._pending, np.int64, len(self._pending))
        frames = np.stack(list(self._pending.values()))
        self._pending.clear()
        self._write(slots, frames)

    def _write(self, slots: np.ndarray, frames: np.ndarray) -> None:
        """Copy ``frames`` into the tensor's ``slots``: one transfer to the device."""
        if self._upload is None:
            self.tensor.numpy()[slots] = frames
            return
        src, index = self._upload(frames, slots)
        self.tensor.index_copy_(0, index, src)

    def gather(self, index: np.ndarray, zero: np.ndarray | None = None):
        """Frames at ``index`` (numpy ints, local slots) as a tensor on the device; ``zero`` positions read 0."""
        import torch

        self.flush()
        frames = self.tensor[torch.from_numpy(np.ascontiguousarray(index)).to(self.device)]
        if zero is not None:
            frames[torch.from_numpy(np.ascontiguousarray(zero)).to(self.device)] = 0
        return frames

    def __len__(self) -> int:
        return self.capacity

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.tensor.shape)

    @property
    def nbytes(self) -> int:
        return self.tensor.numel() * self.tensor.element_size()

    def state_arrays(self) -> dict[str, np.ndarray]:
        """The frames copied to host memory."""
        self.flush()
        return {"frames": self.tensor.cpu().numpy()}

    def check_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        check_array("frames", arrays["frames"], (self.capacity, *self.frame_shape), np.uint8)

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        import torch

        self.flush()
        self.tensor.copy_(torch.from_numpy(np.ascontiguousarray(arrays["frames"])))


class CompressedFrames(HostStore):
    """Frames compressed one by one on write, decompressed straight into the output on read.

    Unwritten slots share one compressed all-zero frame, so they read as zeros, as ``np.zeros`` does.
    """

    STATE_KEYS = ("frames_blob", "frames_offsets")

    def __init__(self, capacity: Count, frame_shape: tuple[int, ...], codec: str = "lz4"):
        self.capacity, self.frame_shape, self.codec = int(capacity), tuple(frame_shape), codec
        self.frame_bytes = int(np.prod(self.frame_shape))
        self._compress, self._decompress = codec_functions(codec)
        self._empty = self._compress(bytes(self.frame_bytes))
        self._payloads: list[bytes] = [self._empty] * self.capacity
        self._held = 0  # sys.getsizeof of every written payload (the shared empty one counted once, in nbytes)

    def __setitem__(self, k: int, frame: np.ndarray) -> None:
        frame = np.ascontiguousarray(frame, dtype=np.uint8)
        if frame.shape != self.frame_shape:
            raise ValueError(f"frame has shape {frame.shape}, this store holds {self.frame_shape}")
        new, old = self._compress(frame), self._payloads[k]
        self._held += sys.getsizeof(new) - (0 if old is self._empty else sys.getsizeof(old))
        self._payloads[k] = new

    def __getitem__(self, index) -> np.ndarray:
        """Frames at ``index`` (an int, a slice or an int array of any shape), as a new writable array."""
        if isinstance(index, slice):
            index = np.arange(self.capacity)[index]
        index = np.asarray(index)
        if not np.issubdtype(index.dtype, np.integer):
            raise TypeError(f"index frames with integers, got dtype {index.dtype}")
        out = np.empty((*index.shape, *self.frame_shape), np.uint8)
        view, size = memoryview(out).cast("B"), self.frame_bytes
        frames = map(self._decompress, map(self._payloads.__getitem__, index.ravel().tolist()))
        for start, frame in zip(range(0, out.nbytes, size), frames):  # the loop body is one copy per frame
            view[start:start + size] = frame
        return out

    def __len__(self) -> int:
        return self.capacity

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.capacity, *self.frame_shape)

    @property
    def nbytes(self) -> int:
        """Bytes held: every payload with its object header, the shared empty payload, and the list."""
        return self._held + sys.getsizeof(self._empty) + sys.getsizeof(self._payloads)

    def payload_sizes(self) -> np.ndarray:
        """Compressed size of each written slot's frame (bytes, headers not included)."""
        return np.fromiter((len(p) for p in self._payloads if p is not self._empty), np.int64)

    def state_arrays(self) -> dict[str, np.ndarray]:
        """All payloads as one uint8 blob plus offsets (slot k = blob[offsets[k]:offsets[k+1]]; empty: unwritten)."""
        sizes = np.fromiter((0 if p is self._empty else len(p) for p in self._payloads), np.int64, self.capacity)
        offsets = np.zeros(self.capacity + 1, np.int64)
        np.cumsum(sizes, out=offsets[1:])
        blob = np.frombuffer(b"".join(p for p in self._payloads if p is not self._empty), np.uint8)
        return {"frames_blob": blob, "frames_offsets": offsets}

    def check_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """``ValueError`` unless the blob and offsets describe ``capacity`` payloads."""
        blob, offsets = np.asarray(arrays["frames_blob"]), np.asarray(arrays["frames_offsets"])
        if blob.dtype != np.uint8 or blob.ndim != 1 or offsets.shape != (self.capacity + 1,) \
                or not np.issubdtype(offsets.dtype, np.integer) or offsets[0] != 0 \
                or np.any(np.diff(offsets) < 0) or offsets[-1] != blob.size:
            raise ValueError(f"cannot load: frames_offsets must rise from 0 to the size of frames_blob (a 1-d uint8 "
                             f"array) in {self.capacity + 1} entries; got blob {blob.dtype}{list(blob.shape)}, "
                             f"offsets {offsets.dtype}{list(offsets.shape)}")

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        self.check_state_arrays(arrays)
        blob, offsets = np.asarray(arrays["frames_blob"]), np.asarray(arrays["frames_offsets"])
        data = memoryview(np.ascontiguousarray(blob))  # slices copy each payload once, no whole-blob copy first
        self._payloads = [self._empty if a == b else data[a:b].tobytes()
                          for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]
        self._held = sum(sys.getsizeof(p) for p in self._payloads if p is not self._empty)


class DiskFrames(ArrayStore):
    """Frames in a memory-mapped file (``np.memmap``) in ``directory``: capacity beyond RAM.

    The file is reserved in full when the store is built (after a free-space check) and deleted
    when the store is garbage-collected or ``close()``d. Its pages live in the kernel's page
    cache, which the kernel may evict, so they are not counted in ``nbytes`` (which counts RAM the
    memory owns); ``file_bytes`` is the file's size.
    """

    nbytes = 0

    def __init__(self, capacity: Count, frame_shape: tuple[int, ...], directory: str | Path, name: str = "frames",
                 what: str | None = None):
        directory = Path(directory)
        self.capacity, self.frame_shape = int(capacity), tuple(frame_shape)
        self.file_bytes = self.capacity * int(np.prod(self.frame_shape))
        check_disk_space(self.file_bytes, directory, what or f"a frames file of {self.capacity:,} frames")
        fd, file = tempfile.mkstemp(prefix=f"{name}-", suffix=".u8", dir=directory)
        self.path = Path(file)
        self._cleanup = weakref.finalize(self, _remove_file, file)
        try:
            os.posix_fallocate(fd, 0, self.file_bytes)
        except OSError as exc:
            self._cleanup()
            raise InsufficientDiskError(f"could not reserve {format_bytes(self.file_bytes)} for {file}: {exc}") from exc
        finally:
            os.close(fd)
        self.memmap = np.memmap(file, np.uint8, "r+", shape=(self.capacity, *self.frame_shape))
        self.array = self.memmap.view(np.ndarray)  # plain-ndarray indexing: gathers come back as ndarray
        if hasattr(mmap, "MADV_RANDOM"):
            # Sampling reads a few pages at random places; the kernel's default read-around fetched
            # far more around each one and made cold batches several times slower (measured).
            self.memmap.base.madvise(mmap.MADV_RANDOM)


    def drop_page_cache(self) -> None:
        """Make the next reads come from the disk: flush dirty pages, unmap ours, evict the file's cache.

        ``POSIX_FADV_DONTNEED`` alone leaves pages that a process still maps, so they are unmapped
        first (``MADV_DONTNEED`` on a shared file mapping keeps the data: it is in the file).
        """
        self.memmap.flush()
        self.memmap.base.madvise(mmap.MADV_DONTNEED)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)

    def cached_fraction(self) -> float | None:
        """Share of the file's pages in the page cache (``mincore``), or None where it cannot be asked."""
        if not sys.platform.startswith("linux"):
            return None
        page = mmap.PAGESIZE
        pages = -(-self.file_bytes // page)
        vec = (ctypes.c_ubyte * pages)()
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.mincore(ctypes.c_void_p(self.array.ctypes.data), ctypes.c_size_t(self.file_bytes), vec) != 0:
            return None
        return float(np.frombuffer(vec, np.uint8).__and__(1).mean())

    def close(self) -> None:
        """Delete the file now (the memory must not be used afterwards)."""
        self._cleanup()


def _remove_file(file: str) -> None:
    """Delete ``file``; one already gone is fine."""
    try:
        os.remove(file)
    except FileNotFoundError:
        pass


def planned_host_bytes(storage: str, capacity: Count, frame_shape: tuple[int, ...],
                       device: torch.device | str | None = None) -> int:
    """What a store preallocates in host RAM (the memory guard's share): frames, list slots, or nothing."""
    if storage == "ram":  # a torch tensor on the CPU is host RAM too
        on_host = device is None or str(device).startswith("cpu")
        return capacity * int(np.prod(frame_shape)) if on_host else 0
    return capacity * POINTER_BYTES if storage in CODECS else 0


def make_store(storage: str, capacity: Count, frame_shape: tuple[int, ...], path: str | Path | None = None,
               device: torch.device | str | None = None,
               prefault: bool = False, what: str | None = None):
    """The frame store for ``storage`` (one of ``STORAGES``); ``device`` (torch) puts "ram" frames there.

    Raises ``InsufficientMemoryError`` / ``InsufficientDiskError`` before allocating what does not fit.
    """
    what = what or f"a frame store of {capacity:,} frames"
    if storage == "ram":
        if device is not None:
            return TorchFrames(capacity, frame_shape, device, what=what)
        return RamFrames(capacity, frame_shape, prefault=prefault)
    if storage in CODECS:
        return CompressedFrames(capacity, frame_shape, storage)
    if storage == "disk":
        return DiskFrames(capacity, frame_shape, path, what=what)
    raise ValueError(f"storage must be one of {STORAGES}, got {storage!r}")


check_module(globals())
