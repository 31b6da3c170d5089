"""Where a ``FrameSharingMemory`` keeps its frames: a numpy array, compressed bytes in RAM, or a file.

The memory only ever writes one frame, ``frames[k] = frame``, and gathers a batch's frames,
``frames[index]`` (an int array of shape (B, stack+1)). Each store here answers those two calls, so
the memory's invariants and its ``stacks_at`` do not change with the storage::

    FrameSharingMemory(1_000_000, storage="lz4")                   # the default codec: small and fast
    FrameSharingMemory(1_000_000, storage="zstd")                  # smaller still, samples slower
    FrameSharingMemory(10_000_000, storage="disk", path="/scratch")  # a memory-mapped file

Choices (measured on real Breakout frames with ``benchmarks/sampling.py`` and notebook 09, where the
figures are, taken on the machine that runs them):

* **One frame per payload, not chunks.** A batch reads 5-frame windows at random slots; a chunk
  must be decompressed whole to read one of its frames, so chunks would multiply the work per batch
  while saving only a few bytes of header per frame (arithmetic, not measured).
* **lz4 is the default; zstd is there for memory.** A preprocessed frame is mostly flat black with
  flat brick rows: lz4 shrinks it more than tenfold, zstd (level 3) further still. Sampling a batch
  of 32 means 160 decompressions, and lz4 decompressed faster than zstd at every zstd level tried
  (-5 to 9): several times faster than level 3, and zstd's fast negative levels, still slower, also
  compressed worse than lz4. Only lz4 clears the 3,000 batches/s target on one core. zstd's higher
  levels shrank frames a little more at several times the cost per ``add``; lz4's high-compression
  mode too, at many times the cost, and lz4's fast mode already meets the 1 GB target for 1M.
* **Decompress straight into the batch.** Joining decompressed frames into one ``bytes`` allocates a
  fresh 1.1 MB block per batch, which glibc maps and unmaps each time (hundreds of page faults per
  batch, several times slower); writing each frame into a preallocated output costs none.
* **No de-duplication per batch.** In a large memory the 160 frames of a batch are almost all
  distinct (repeats come only from padding at episode starts and from overlapping windows), so
  finding the repeats (``np.unique``) and copying them back out cost far more than they saved.
* **Disk files are reserved, not sparse.** ``posix_fallocate`` claims the file's blocks when the
  memory is built, after a free-space check; a sparse file would get its blocks when frames are
  first written, and a full disk then kills the process with SIGBUS hours into a run.
* **Disk reads are declared random** (``madvise(MADV_RANDOM)``): with the kernel's default
  read-around, each cold page fault read far more of the file than a batch uses, and cold batches
  were several times slower.

Payloads are ``bytes`` objects in a list, one per slot: the list is all that is preallocated
(8 bytes a slot); the payloads grow with what is written, so the memory guard cannot check them up
front (``nbytes`` reports them as they are: payloads, object headers and the list).
"""
from __future__ import annotations

import ctypes
import importlib
import json
import mmap
import os
import shutil
import sys
import tempfile
import weakref
from pathlib import Path

import numpy as np

from dqn_course.profiling import format_bytes

__all__ = [
    "STORAGES",
    "CODECS",
    "CompressedFrames",
    "DiskFrames",
    "InsufficientDiskError",
    "check_disk_space",
    "make_store",
    "planned_host_bytes",
    "rng_state_array",
    "parse_rng_state",
]

STORAGES = ("ram", "lz4", "zstd", "disk")
CODECS = ("lz4", "zstd")
ZSTD_LEVEL = 3
POINTER_BYTES = 8  # one list slot per frame: what a compressed store preallocates
_PACKAGES = {"lz4": "lz4.block", "zstd": "zstandard"}


class InsufficientDiskError(OSError):
    """A disk-backed memory was refused because its directory's disk lacks the space."""


def check_disk_space(needed: int, directory: str | Path, what: str = "this file", fraction: float = 0.9) -> None:
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


def _codec(name: str):
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


class CompressedFrames:
    """Frames compressed one by one on write, decompressed straight into the output on read.

    Unwritten slots share one compressed all-zero frame, so they read as zeros, as ``np.zeros`` does.
    """

    def __init__(self, capacity: int, frame_shape: tuple[int, ...], codec: str = "lz4"):
        self.capacity, self.frame_shape, self.codec = int(capacity), tuple(frame_shape), codec
        self.frame_bytes = int(np.prod(self.frame_shape))
        self._compress, self._decompress = _codec(codec)
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


class DiskFrames:
    """Frames in a memory-mapped file (``np.memmap``) in ``directory``: capacity beyond RAM.

    The file is reserved in full when the store is built (after a free-space check) and deleted
    when the store is garbage-collected or ``close()``d. Its pages live in the kernel's page
    cache, which the kernel may evict, so they are not counted in ``nbytes`` (which counts RAM the
    memory owns); ``file_bytes`` is the file's size.
    """

    nbytes = 0

    def __init__(self, capacity: int, frame_shape: tuple[int, ...], directory: str | Path, name: str = "frames",
                 what: str | None = None):
        directory = Path(directory)
        self.capacity, self.frame_shape = int(capacity), tuple(frame_shape)
        self.file_bytes = self.capacity * int(np.prod(self.frame_shape))
        check_disk_space(self.file_bytes, directory, what or f"a frames file of {self.capacity:,} frames")
        fd, file = tempfile.mkstemp(prefix=f"{name}-", suffix=".u8", dir=directory)
        self.path = Path(file)
        self._cleanup = weakref.finalize(self, _remove, file)
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

    def __setitem__(self, k, frame) -> None:
        self.array[k] = frame

    def __getitem__(self, index) -> np.ndarray:
        return self.array[index]

    def __len__(self) -> int:
        return self.capacity

    @property
    def shape(self) -> tuple[int, ...]:
        return self.array.shape

    def state_arrays(self) -> dict[str, np.ndarray]:
        """The frames as a view of the file (no copy in RAM: a writer streams it from the page cache)."""
        return {"frames": self.array}

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        self.array[...] = arrays["frames"]

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


def _remove(file: str) -> None:
    try:
        os.remove(file)
    except FileNotFoundError:
        pass


def planned_host_bytes(storage: str, capacity: int, frame_shape: tuple[int, ...]) -> int:
    """What a store preallocates in host RAM (the memory guard's share): frames, list slots, or nothing."""
    if storage == "ram":
        return capacity * int(np.prod(frame_shape))
    return capacity * POINTER_BYTES if storage in CODECS else 0


def make_store(storage: str, capacity: int, frame_shape: tuple[int, ...], path=None, name: str = "frames",
               what: str | None = None):
    """The frame store for ``storage`` in ("lz4", "zstd", "disk"); "ram" is a plain array the ring makes."""
    if storage in CODECS:
        return CompressedFrames(capacity, frame_shape, storage)
    if storage == "disk":
        return DiskFrames(capacity, frame_shape, path, name, what)
    raise ValueError(f"storage must be one of {STORAGES}, got {storage!r}")


def rng_state_array(rng: np.random.Generator) -> np.ndarray:
    """A generator's state as JSON bytes in a uint8 array (checkpoints hold arrays, never pickles)."""
    return np.frombuffer(json.dumps(rng.bit_generator.state).encode(), np.uint8).copy()


def parse_rng_state(rng: np.random.Generator, array: np.ndarray) -> dict:
    """The state ``rng_state_array`` saved, checked to fit ``rng`` (assign it to ``rng.bit_generator.state``)."""
    try:
        state = json.loads(np.asarray(array, np.uint8).tobytes().decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot load: the saved rng state is not JSON ({exc})") from None
    mine = type(rng.bit_generator).__name__
    saved = state.get("bit_generator") if isinstance(state, dict) else state
    if saved != mine:
        raise ValueError(f"cannot load: saved rng is {saved!r}, this memory's is {mine!r}")
    return state


# -- measuring the stores (benchmarks/sampling.py and notebook 09) ------------------------------------------------

def compare_codecs(frames: np.ndarray, codecs=CODECS, rounds: int = 3) -> list[dict]:
    """Per codec: mean compressed bytes per frame, ratio, and µs to compress / decompress one frame (best round)."""
    import time

    frames = np.ascontiguousarray(frames, np.uint8)
    frame_bytes = int(np.prod(frames.shape[1:]))
    rows = []
    for name in codecs:
        compress, decompress = _codec(name)
        payloads = [compress(f) for f in frames]
        timings = []
        for fn, items in ((compress, frames), (decompress, payloads)):
            best = float("inf")
            for _ in range(rounds):
                t0 = time.perf_counter()
                for item in items:
                    fn(item)
                best = min(best, time.perf_counter() - t0)
            timings.append(best / len(frames) * 1e6)
        mean = float(np.mean([len(p) for p in payloads]))
        rows.append({"codec": name, "frames": len(frames), "mean_bytes": round(mean, 1),
                     "ratio": round(frame_bytes / mean, 2), "compress_us": round(timings[0], 2),
                     "decompress_us": round(timings[1], 2)})
    return rows


def _rss_split() -> tuple[int, int]:
    """(anonymous, file-backed) resident bytes of this process: a memory-mapped file's pages are the second."""
    import psutil

    info = psutil.Process().memory_info()
    shared = getattr(info, "shared", 0)  # Linux: file-backed and shared pages
    return info.rss - shared, shared


def cold_sampling_rate(memory, batch_size: int = 32, seconds: float = 1.0, min_batches: int = 20) -> dict:
    """Batches/s of a disk-backed memory with the page cache dropped before every batch (only ``sample`` timed)."""
    import time

    store = memory.frames
    elapsed, n, cached = 0.0, 0, []
    while elapsed < seconds or n < min_batches:
        store.drop_page_cache()
        cached.append(store.cached_fraction())
        t0 = time.perf_counter()
        memory.sample(batch_size)
        elapsed += time.perf_counter() - t0
        n += 1
    known = [c for c in cached if c is not None]
    return {"batches_per_s": n / elapsed, "batches": n, "cached_before": max(known) if known else None}


def measure_storage(storage: str, capacity: int, pool, path=None, seconds: float = 1.0, batch_size: int = 32,
                    cold_seconds: float = 1.0) -> dict:
    """Fill one ``FrameSharingMemory(capacity, storage=...)`` from ``pool`` and measure it; for a fresh process.

    Meant for ``profiling.measure_in_subprocess(measure_storage, ...)``: RSS is read in that process
    right before the memory is built and right after ``capacity`` transitions went in (every slot
    written at least once), so only what the memory keeps is counted. Then ``sampling_rates``
    times ``sample(batch_size)``; a disk store is timed warm (right after the fill, its pages cached)
    and cold (``cold_sampling_rate``).
    """
    import gc
    import time

    from dqn_course.bench import fill, sampling_rates
    from dqn_course.replay import FrameSharingMemory

    gc.collect()
    anon0, file0 = _rss_split()
    t0 = time.perf_counter()
    memory = FrameSharingMemory(capacity, seed=0, storage=storage, path=path)
    fill(memory, pool, capacity)
    fill_s = time.perf_counter() - t0
    anon1, file1 = _rss_split()
    row = {"storage": storage, "capacity": capacity, "transitions": len(memory), "nbytes": memory.nbytes,
           "rss_growth": anon1 + file1 - anon0 - file0, "rss_anon_growth": anon1 - anon0,
           "rss_file_growth": file1 - file0, "fill_s": round(fill_s, 1)}
    if storage in CODECS:
        row["mean_payload_bytes"] = round(float(memory.frames.payload_sizes().mean()), 1)
    if storage == "disk":
        row["file_bytes"] = memory.frames.file_bytes
        row["cached_before_warm"] = memory.frames.cached_fraction()
    rates = sampling_rates(memory, batch_size, min_seconds=seconds)
    row.update({k: round(v, 1) for k, v in rates.items()})
    if storage == "disk":
        cold = cold_sampling_rate(memory, batch_size, cold_seconds)
        row.update({"cold_batches_per_s": round(cold["batches_per_s"], 1), "cold_batches": cold["batches"],
                    "cached_before_cold": cold["cached_before"]})
    return row
