"""Measuring the frame stores (notebook 09, ``benchmarks/sampling.py``): codecs, RSS, warm and cold sampling."""
from __future__ import annotations

import gc
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dqn_course.contracts import Count, check_module
from dqn_course.lab.bench import FramePool, fill, sampling_rates, timeit
from dqn_course.replay import FrameSharingMemory
from dqn_course.replay.stores import CODECS, DiskFrames, codec_functions


def compare_codecs(frames: np.ndarray, codecs: Sequence[str] = CODECS, rounds: Count = 3) -> list[dict]:
    """Per codec: mean compressed bytes per frame, ratio, and µs to compress / decompress one frame (best round)."""
    frames = np.ascontiguousarray(frames, np.uint8)
    frame_bytes = int(np.prod(frames.shape[1:]))
    rows = []
    for name in codecs:
        compress, decompress = codec_functions(name)
        payloads = [compress(f) for f in frames]
        passes = {"compress": _over(compress, frames), "decompress": _over(decompress, payloads)}
        stats = timeit(passes, min_seconds=0.0, rounds=rounds, warmup=False)  # the two passes take turns
        timings = [stats[way]["best_ms"] * 1e3 / len(frames) for way in passes]
        mean = float(np.mean([len(p) for p in payloads]))
        rows.append({"codec": name, "frames": len(frames), "mean_bytes": round(mean, 1),
                     "ratio": round(frame_bytes / mean, 2), "compress_us": round(timings[0], 2),
                     "decompress_us": round(timings[1], 2)})
    return rows


def _over(fn, items):
    """One pass of ``fn`` over ``items``, as a function of nothing (for ``timeit``)."""
    def one_pass():
        for item in items:
            fn(item)
    return one_pass


def rss_split() -> tuple[int, int]:
    """(anonymous, file-backed) resident bytes of this process: a memory-mapped file's pages are the second."""
    import psutil

    info = psutil.Process().memory_info()
    shared = getattr(info, "shared", 0)  # Linux: file-backed and shared pages
    return info.rss - shared, shared


def filesystem_type(path: str | Path) -> str | None:
    """The type of the filesystem ``path`` lies on (``ext4``, ``tmpfs``, ...), from /proc/mounts; None elsewhere."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    path = os.path.realpath(path)
    best, kind = "", None
    for line in mounts:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


_NETWORK_FILESYSTEMS = ("nfs", "nfs4", "cifs", "smb3", "9p", "ceph", "glusterfs", "lustre", "fuse.sshfs")


def describe_disk(path: str | Path) -> str:
    """What the kernel says about the storage under ``path``, in words: filesystem type, block device, its driver
    and its rotational flag (``/sys/block/<disk>/queue/rotational``: 1 for a spinning disk).

    Cold-read timings depend on it, so they are shown beside it. Nothing is guessed: a RAM filesystem or a network
    one is named as such, a virtual machine's disk (virtio, Xen) is said to hide the host's device (its flag is
    the driver's default, not the hardware's), and whatever cannot be read is said to be unknown.
    """
    kind = filesystem_type(path) or "unknown filesystem"
    if kind in ("tmpfs", "ramfs"):
        return f"{kind}: a filesystem held in RAM, no device under it"
    if kind in _NETWORK_FILESYSTEMS:
        return f"{kind}: a network filesystem, every read that misses the cache crosses the network"
    st_dev = os.stat(path).st_dev
    entry = Path(f"/sys/dev/block/{os.major(st_dev)}:{os.minor(st_dev)}")
    try:
        device = entry.resolve(strict=True)
    except OSError:
        return f"{kind} on a device the kernel does not list as a block device (an overlay or a container's layer)"
    disk = device if (device / "queue").is_dir() else device.parent  # a partition's queue is its disk's
    try:
        rotational = (disk / "queue" / "rotational").read_text().strip()
        driver = (disk / "device" / "driver").resolve(strict=True).name
    except OSError:
        return f"{kind} on {device.name}, a device whose kind the kernel does not say"
    if driver.startswith(("virtio", "xen")):
        return (f"{kind} on {device.name}, a virtual machine's disk ({driver}): the host's device behind it, SSD, HDD "
                f"or network storage, is unknown here (its rotational flag, {rotational}, is the driver's default)")
    spins = "1: a spinning disk (HDD)" if rotational == "1" else "0: not spinning (an SSD)"
    return f"{kind} on {device.name} ({driver}), rotational flag {spins}"


def can_drop_page_cache(path: str | Path, frames: int = 64) -> tuple[bool, str]:
    """Whether a cold read can really be measured in directory ``path``: (True or False, why, in words).

    Writes a small disk-backed store there, drops its pages the way ``cold_sampling_rate`` does, and
    asks the kernel (``mincore``) how much of the file is still cached. On tmpfs (a RAM disk, what /tmp
    is on many systems) the file *is* page cache and nothing can be dropped; where mincore cannot be
    asked, a cold number cannot be verified. Either way a "cold" rate measured there would be a warm one.
    """
    kind = filesystem_type(path)
    if kind in ("tmpfs", "ramfs"):
        return False, f"{path} is on {kind}, a filesystem held in RAM: its files are page cache and cannot be dropped"
    try:
        store = DiskFrames(frames, (84, 84), path, name="probe")
    except OSError as exc:
        return False, f"no test file could be made in {path}: {exc}"
    try:
        store.array[:] = 1
        try:
            store.drop_page_cache()
        except OSError as exc:
            return False, f"dropping the page cache failed in {path}: {exc}"
        left = store.cached_fraction()
        if left is None:
            return False, "this system cannot say which pages are cached (mincore), so a cold read cannot be checked"
        if left > 0.05:
            return False, (f"{left:.0%} of a test file in {path} stayed in the page cache after dropping it"
                           + (f" ({kind})" if kind else ""))
        return True, f"dropping the page cache works in {path}" + (f" ({kind})" if kind else "")
    finally:
        store.close()


def cold_sampling_rate(memory: FrameSharingMemory, batch_size: Count = 32, seconds: float = 1.0,
                       min_batches: Count = 20) -> dict:
    """Batches per wall-clock second and per CPU second of a disk-backed memory with the page cache dropped before
    every batch (only ``sample`` timed).

    Not ``bench.timeit``: untimed work (dropping the cache) comes before every call, and the answer is
    the total over all calls, each one cold, where ``timeit`` keeps the best turn. The CPU rate counts this
    process's CPU time only: time spent waiting for the device is no CPU time, so a cold CPU rate far above the
    wall-clock one says the batches waited for reads.
    """
    store = memory.frames
    elapsed, cpu, n, cached = 0.0, 0.0, 0, []
    while elapsed < seconds or n < min_batches:
        store.drop_page_cache()
        cached.append(store.cached_fraction())
        c0, t0 = time.process_time(), time.perf_counter()
        memory.sample(batch_size)
        elapsed += time.perf_counter() - t0
        cpu += time.process_time() - c0
        n += 1
    known = [c for c in cached if c is not None]
    return {"batches_per_s": n / elapsed, "batches_per_cpu_s": n / max(cpu, 1e-9), "batches": n,
            "cached_before": max(known) if known else None}


def measure_storage(storage: str, capacity: Count, pool: FramePool, path: str | Path | None = None,
                    seconds: float = 1.0,
                    batch_size: Count = 32, cold_seconds: float | None = 1.0) -> dict:
    """Fill one ``FrameSharingMemory(capacity, storage=...)`` from ``pool`` and measure it; for a fresh process.

    Meant for ``profiling.measure_in_subprocess(measure_storage, ...)``: RSS is read in that process
    right before the memory is built and right after ``capacity`` transitions went in (every slot
    written at least once), so only what the memory keeps is counted. Then ``sampling_rates``
    times ``sample(batch_size)``; a disk store is timed warm (right after the fill, its pages cached)
    and cold (``cold_sampling_rate``), unless ``cold_seconds`` is None (see ``can_drop_page_cache``).
    """
    gc.collect()
    anon0, file0 = rss_split()
    t0 = time.perf_counter()
    memory = FrameSharingMemory(capacity, seed=0, storage=storage, path=path)
    fill(memory, pool, capacity)
    fill_s = time.perf_counter() - t0
    anon1, file1 = rss_split()
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
    if storage == "disk" and cold_seconds is not None:
        cold = cold_sampling_rate(memory, batch_size, cold_seconds)
        row.update({"cold_batches_per_s": round(cold["batches_per_s"], 1),
                    "cold_batches_per_cpu_s": round(cold["batches_per_cpu_s"], 1), "cold_batches": cold["batches"],
                    "cached_before_cold": cold["cached_before"]})
    return row


check_module(globals())
