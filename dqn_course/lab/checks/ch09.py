"""Notebooks 09 (compressed and disk-backed replay) and 09b (surviving crashes): checks, predictions, questions.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from dqn_course.contracts import check_module
from dqn_course.lab.checks.core import (PREDICTIONS, QUESTIONS, Prediction, _call_learner, _cut_short, _flip_a_byte,
    _not_answered_yet, _passed, _require_learners_code)


_DAMAGED = "section 5, *A damaged checkpoint*"


_ATOMIC = "section 3, the *Atomic* point"


class SimulatedCrash(RuntimeError):
    """What ``check_save_atomically``'s writer raises partway through a file: a crash in the middle of a save."""


def _slot_overheads() -> dict[str, int]:
    """Bytes a compressed frame-sharing slot costs besides its payload, read from the code that spends them."""
    import sys

    import numpy as np

    from dqn_course.replay import FrameSharingMemory
    from dqn_course.replay.stores import POINTER_BYTES

    dtypes = {"actions": np.uint8, "rewards": np.float32, "dones": np.bool_, "first": np.bool_, "valid": np.bool_,
              "ids": np.int64}
    assert set(dtypes) == set(FrameSharingMemory.RING_ARRAYS), "update _slot_overheads with the ring's arrays"
    return {"bookkeeping": sum(np.dtype(d).itemsize for d in dtypes.values()), "list_slot": POINTER_BYTES,
            "bytes_header": sys.getsizeof(b"")}


_SLOT = "section 1, *A compressed slot*"


_NOISE_SLACK = 16  # bytes a lossless codec could save on random bytes by luck; lz4, zlib, zstd, bz2, lzma save none


def _breakout_like(shape: tuple[int, ...]):
    """A deterministic stack shaped like preprocessed Breakout: black, rows of bricks in flat greys, a paddle, a ball
    that moves from frame to frame (``shape`` is (frames, height, width) or (height, width))."""
    import numpy as np

    frames = np.zeros((int(np.prod(shape[:-2])), *shape[-2:]), np.uint8)
    h, w = shape[-2:]
    for k, frame in enumerate(frames):
        for row, grey in zip(range(h // 6, h // 3, 2), (181, 162, 142, 124, 104, 66)):
            frame[row:row + 2, 2:w - 2] = grey
        frame[h - 6:h - 5, w // 3 + k:w // 3 + k + 8] = 200
        frame[h // 2 + 2 * k, w // 2 + k] = 236
        frame[1:4, 4:4 + 3 * (k + 1)] = 150
    return frames.reshape(shape)


class _WatchedPayloads(list):
    """A memory's payloads, one a slot (``None`` for a slot never written), that note which slots were read: a
    batch reads the payloads of the slots it draws, one at a time, and walks over no others."""

    def __init__(self, items):
        super().__init__(items)
        self.read: set[int] = set()
        self.walked = False

    def __getitem__(self, key):
        if isinstance(key, slice):
            self.walked = True
        else:
            self.read.add(int(key) % len(self))
        return super().__getitem__(key)

    def __iter__(self):
        self.walked = True
        return super().__iter__()


def _check_gather(gather: Any, pack: Any) -> bool:
    """Raise ``AssertionError`` with a hint unless ``gather(payloads, indices, shape)`` decompresses only the drawn
    slots' payloads into one uint8 batch equal to their frames (``pack`` makes a payload with the learner's code);
    False while ``gather`` returns ``None`` (not written yet), True when right."""
    import numpy as np

    call = "gather(payloads, indices, shape)"
    on_sample = (f"a compressed memory decompresses a slot when a batch draws it, and only then: the other slots' "
                 f"payloads stay as they are, and a slot never written holds no payload at all ({_SLOT})")
    for slots, drawn, what in ((_breakout_like((6, 84, 84)), [4, 1, 4, 0], "slots of one frame (84, 84)"),
                               (_breakout_like((3, 4, 84, 84)), [2, 2, 0], "slots of a stack (4, 84, 84)")):
        shape = slots.shape[1:]
        payloads = _WatchedPayloads([pack(frames.copy(), what) for frames in slots] + [None] * 3)
        indices = np.array(drawn, dtype=np.int64)
        try:
            got = gather(payloads, indices, shape)
        except Exception:  # noqa: BLE001 - reported as a hint below, or by _call_learner
            got = None
            crashed = True
        else:
            crashed = False
        assert not payloads.walked and payloads.read <= set(drawn), (
            f"gather read the payloads of slots the batch did not draw, for {what}: {on_sample}")
        if crashed:
            _call_learner(gather, (payloads, indices, shape), call)
        if got is None:
            return False
        assert isinstance(got, np.ndarray), (
            f"{call} returned {type(got).__name__} for {what}: a batch is one numpy array, a slot's frames per "
            f"index drawn ({_SLOT})")
        want = slots[indices]
        assert got.dtype == np.uint8 and got.shape == want.shape, (
            f"{call} returned {got.dtype} of shape {got.shape} for {what} and {len(drawn)} indices, where the batch "
            f"is uint8 of shape {want.shape}: the indices drawn first, then the shape of one slot's frames ({_SLOT})")
        assert np.array_equal(got, want), (
            f"{call} returned other frames than the slots drawn, for {what}: entry k of the batch is the slot the "
            f"k-th index names, decoded from that slot's own payload; a slot drawn twice appears twice ({_SLOT})")
    return True


def check_compressed_slot(compress: Any, decompress: Any, gather: Any = None) -> bool | None:
    """Notebook 09: ``compress(frames)`` turns a stored uint8 frame or frame stack into a ``bytes`` payload with a
    library codec, ``decompress(payload, shape)`` gives the frames back, and ``gather(payloads, indices, shape)``
    makes a batch from a memory's payloads (a list, one a slot, ``None`` for a slot never written).

    Right when, for a Breakout-like stack (4, 84, 84), one frame (84, 84) and a stack of another size (2, 42, 42):
    the payload is ``bytes``, smaller than the frames' own bytes, and ``decompress`` returns a uint8 array of the
    shape asked for, equal to the frames bit for bit; a stack of random bytes (which no codec shrinks) and a
    non-contiguous view of a stack round-trip exactly too; decoding one payload does not depend on another, and
    reads a copy of it, not the object ``compress`` returned; six stacks of random bytes (five shapes) each give a
    payload at least their own bytes less 16 (so a payload that names frames kept elsewhere, a short key into a
    dict, is refused) and each comes back from its own payload after all six were made; and a
    float32 or int64 stack is refused with ``TypeError`` or ``ValueError`` (a uint8 memory that took it would store
    4 or 8 bytes a pixel and read back garbage). Then ``gather``, on slots of one frame and slots of a stack, each
    with slots never written (``None``) and a slot drawn twice: it returns one uint8 array, the drawn slots' frames
    in the order drawn, and reads the payloads of the drawn slots only (decompression on sample; a gather that walks
    the whole list, or reads an undrawn slot, is refused). The course's own stores and codec functions, wrappers
    around them and library functions are refused first (``_require_learners_code``). Raises ``AssertionError`` with
    a hint naming the section; prints a note (no error) while an answer, or what ``compress`` returns, is ``None``.
    """
    write = f"a def of your own that calls a codec's functions ({_SLOT})"
    for answer, call in ((compress, "compress(frames)"), (decompress, "decompress(payload, shape)"),
                         (gather, "gather(payloads, indices, shape)")):
        if answer is not None:  # the one already written is checked, even while the other is not
            _require_learners_code(answer, call, write)
    if compress is None or decompress is None:
        return _not_answered_yet("write compress(frames) and decompress(payload, shape)")
    import numpy as np

    view_hint = {"contiguous": f"the frames handed in may be a view whose bytes are not in order in memory "
                               f"(notebook 01 defines a view): compress the frames' values in their order ({_SLOT})"}

    def pack(frames, what):
        payload = _call_learner(compress, (frames,), "compress(frames)", view_hint)
        if payload is None:
            return None
        assert isinstance(payload, bytes), (
            f"compress(frames) returned {type(payload).__name__} for {what}: a payload is a bytes object, the one "
            f"whose header section 2 counts ({_SLOT})")
        return payload

    def unpack(payload, shape, want, what):
        # an equal copy, not the object compress returned: the frames must come back from the payload's bytes
        got = _call_learner(decompress, (bytes(bytearray(payload)), shape), "decompress(payload, shape)")
        assert isinstance(got, np.ndarray), (
            f"decompress(payload, shape) returned {type(got).__name__} for {what}: it gives back the frames as a "
            f"numpy array ({_SLOT})")
        assert got.dtype == np.uint8, (
            f"decompress gave back dtype {got.dtype} for {what}: a payload holds the frames' bytes, one a pixel, "
            f"and they come back as the uint8 they were (notebook 03; {_SLOT})")
        assert got.shape == tuple(shape), (
            f"decompress gave back shape {got.shape} for {what}, asked for {tuple(shape)}: the payload holds the "
            f"bytes in order, not the shape, which the memory knows and hands over ({_SLOT})")
        assert np.array_equal(got, want), (
            f"decompress gave back other values than {what} held: a replay memory must return the frames bit for "
            f"bit, so the codec must be lossless and decode exactly what was encoded ({_SLOT})")
        return got

    stack = _breakout_like((4, 84, 84))
    payload = pack(stack.copy(), "a Breakout-like stack (4, 84, 84)")
    if payload is None:
        return _not_answered_yet("compress(frames) returns None; return the compressed bytes")
    unpack(payload, stack.shape, stack, "a Breakout-like stack (4, 84, 84)")
    assert len(payload) < stack.nbytes / 4, (
        f"the payload of a Breakout-like stack is {len(payload):,} bytes for {stack.nbytes:,} bytes of frames: "
        f"mostly black frames shrink many times over with a codec (section 1's table), so the payload should be "
        f"far smaller than the frames")
    cases = [(_breakout_like((84, 84)), "one frame (84, 84)"),
             (_breakout_like((2, 42, 42)), "a stack of another size (2, 42, 42)"),
             (np.random.default_rng(9).integers(0, 256, (4, 84, 84), dtype=np.uint8), "a stack of random bytes")]
    payloads = []
    for frames, what in cases:
        payloads.append(pack(frames.copy(), what))
        unpack(payloads[-1], frames.shape, frames, what)
    noise_rng = np.random.default_rng(90)
    noisy = [cases[2][0]] + [noise_rng.integers(0, 256, shape, dtype=np.uint8)
                             for shape in ((84, 84), (2, 42, 42), (3, 21, 21), (4, 84, 84), (1, 84, 84))]
    noisy_payloads = [payloads[2]] + [pack(frames.copy(), "a stack of random bytes") for frames in noisy[1:]]
    for frames, noisy_payload in zip(noisy, noisy_payloads):
        assert len(noisy_payload) >= frames.nbytes - _NOISE_SLACK, (
            f"the payload of a stack of random bytes {frames.shape} is {len(noisy_payload):,} bytes for "
            f"{frames.nbytes:,} bytes of frames: lossless compression shrinks repetition, and noise has none, so "
            f"its payload holds at least about as many bytes as the frames (section 1, *Predict, then measure*). A "
            f"payload much shorter than that is not the frames compressed: the frames must be in the payload, not "
            f"kept somewhere else for it to name ({_SLOT})")
    for k in reversed(range(len(noisy))):  # each decoded from its own payload, after all were made
        unpack(noisy_payloads[k], noisy[k].shape, noisy[k], f"a stack of random bytes {noisy[k].shape}")
    view, what = stack[::-1], "a view of a stack (its frames in reverse order)"  # not in order in memory
    unpack(pack(view, what), view.shape, np.ascontiguousarray(view), what)
    unpack(payloads[0], cases[0][0].shape, cases[0][0], "one frame (84, 84), decoded again after the others")
    for dtype in (np.float32, np.int64):
        wrong = stack.astype(dtype) / 255 if dtype == np.float32 else stack.astype(dtype)
        try:
            compress(wrong)
        except (TypeError, ValueError):
            continue
        except Exception as exc:  # noqa: BLE001 - reported as a hint, not a traceback
            raise AssertionError(f"compress(frames) raised {type(exc).__name__} for a {np.dtype(dtype).name} stack: "
                                 f"refuse it with a TypeError or ValueError that says which dtype is stored "
                                 f"({_SLOT})") from None
        raise AssertionError(
            f"compress(frames) accepted a {np.dtype(dtype).name} stack: a slot stores uint8 frames, and a "
            f"{np.dtype(dtype).name} one would take {np.dtype(dtype).itemsize} bytes a pixel and come back as "
            f"garbage; refuse any other dtype with a TypeError or ValueError (notebook 03; {_SLOT})")
    if gather is None or not _check_gather(gather, pack):
        return _not_answered_yet("compress and decompress are right; now write gather(payloads, indices, shape)")
    return _passed(f"frames come back bit for bit, as uint8 of the shape asked for; a Breakout-like stack of "
                   f"{stack.nbytes:,} bytes shrinks to {len(payload):,}; float32 and int64 stacks are refused; a "
                   f"batch decompresses only the slots it draws")


def check_checkpoint_to_resume(checkpoint_to_resume: Any) -> bool | None:
    """Notebook 09b: ``checkpoint_to_resume(folder)`` picks the file a resume reads: the newest checkpoint in
    ``folder`` that passes its checks, or ``None`` when none does.

    Right when it returns the path of the ``state-<digits>.ckpt`` file with the largest step (the number in its
    name) that ``read_checkpoint`` accepts. Checked by behaviour, in temporary folders of small real checkpoints
    written by ``write_checkpoint``: two good files; steps that sort otherwise as text or by modification time
    (``state-900.ckpt`` and ``state-1000.ckpt``); a newer complete ``.tmp`` file and other names beside
    checkpoints (``state-abc.ckpt``, ``state-<digits>.ckpt.bak``, ``notes.txt``), all of them holding a valid
    checkpoint; a newest file with one bit flipped, one cut short, and both in a row; a folder of damaged files only;
    an empty folder. The learner's function may call ``read_checkpoint`` and catch ``CheckpointError``; the course's
    own ``latest_checkpoint``, ``list_checkpoints`` or any other of its code is refused (``_require_learners_code``).
    Raises ``AssertionError`` with a hint naming the section; prints a note (no error) while the function returns
    ``None`` for a folder of two good checkpoints.
    """
    if checkpoint_to_resume is None:
        return _not_answered_yet("write checkpoint_to_resume(folder)")
    from dqn_course.checkpoint import CheckpointError, read_checkpoint, write_checkpoint

    call = "checkpoint_to_resume(folder)"
    _require_learners_code(checkpoint_to_resume, call, allowed=(read_checkpoint, CheckpointError))
    import os
    import tempfile
    from pathlib import Path

    import numpy as np

    def good(folder: Path, name: str, step: int) -> Path:
        path = folder / name
        write_checkpoint(path, {"weights": np.arange(step % 97 + 3, dtype=np.float32)}, {"counters": {"step": step}})
        return path

    def flipped(folder: Path, name: str, step: int) -> Path:
        _flip_a_byte(good(folder, name, step))
        return folder / name

    def cut(folder: Path, name: str, step: int) -> Path:
        _cut_short(good(folder, name, step), 1 / 3)
        return folder / name

    refused = {"corrupt": f"a file that fails its checks is passed over, and the one before it tried ({_DAMAGED})",
               "truncated": f"a file that fails its checks is passed over, and the one before it tried ({_DAMAGED})"}

    def chosen(folder: Path):
        result = _call_learner(checkpoint_to_resume, (folder,), call, refused)
        if result is None:
            return None
        assert isinstance(result, (str, os.PathLike)), (
            f"{call} returned {type(result).__name__}: it should return the path of the file a resume reads (or None)")
        return Path(result).name

    def expect(folder: Path, want: str | None, why: str, hint: str) -> None:
        got = chosen(folder)
        assert got == want, (f"{why}: {call} chose {got if got is not None else 'None'}, a resume reads "
                             f"{want if want is not None else 'nothing (None)'}; {hint}")

    with tempfile.TemporaryDirectory(prefix="resume-") as root:
        root = Path(root)
        folders = {}
        for case in ("two", "numbers", "names", "flipped", "cut", "both", "all_bad", "empty"):
            folders[case] = root / case
            folders[case].mkdir()
        two = folders["two"]
        good(two, "state-0000000100.ckpt", 100)
        good(two, "state-0000000200.ckpt", 200)
        if chosen(two) is None:
            return _not_answered_yet(f"{call} returned None for a folder of two good checkpoints; return the path of "
                                     f"the one a resume reads")
        expect(two, "state-0000000200.ckpt", "a folder with the checkpoints of steps 100 and 200",
               f"a resume carries on from the newest checkpoint, the one with the largest step ({_DAMAGED})")

        numbers = folders["numbers"]
        good(numbers, "state-1000.ckpt", 1_000)
        good(numbers, "state-900.ckpt", 900)
        os.utime(numbers / "state-1000.ckpt", (1_000_000_000, 1_000_000_000))  # written before the older step's
        os.utime(numbers / "state-900.ckpt", (2_000_000_000, 2_000_000_000))
        expect(numbers, "state-1000.ckpt", "a folder with the checkpoints of steps 900 and 1,000 (the older one "
               "touched last)", "the step is the number in the name: as text 900 sorts after 1000, and a file's "
               "time says when it was copied or touched, not which step it holds (section 3, the *Atomic* point "
               "names the files)")

        names = folders["names"]
        good(names, "state-0000000200.ckpt", 200)
        good(names, "state-0000000300.ckpt.tmp", 300)
        expect(names, "state-0000000200.ckpt", "a folder with step 200's checkpoint and a complete, valid "
               "state-0000000300.ckpt.tmp", f"a file becomes a checkpoint when it takes its final name: until the "
               f"rename, a .tmp file is a save that may not have finished, and a resume never reads it ({_ATOMIC})")
        for name in ("state-abc.ckpt", "state-0000000400.ckpt.bak", "notes.txt"):
            good(names, name, 400)
        expect(names, "state-0000000200.ckpt", "a folder that also holds valid files named state-abc.ckpt, "
               "state-0000000400.ckpt.bak and notes.txt", "only a file named state-, then the step's digits, then "
               f".ckpt is one of the run's checkpoints: anything else in the folder is someone else's ({_ATOMIC})")

        for case, damage, what in (("flipped", flipped, "one bit flipped"), ("cut", cut, "cut short")):
            good(folders[case], "state-0000000100.ckpt", 100)
            good(folders[case], "state-0000000200.ckpt", 200)
            damage(folders[case], "state-0000000300.ckpt", 300)
            expect(folders[case], "state-0000000200.ckpt", f"a folder whose newest checkpoint, step 300's, has {what}",
                   f"a file that fails its checks is passed over, and the one before it tried ({_DAMAGED})")
        both = folders["both"]
        good(both, "state-0000000100.ckpt", 100)
        flipped(both, "state-0000000200.ckpt", 200)
        cut(both, "state-0000000300.ckpt", 300)
        expect(both, "state-0000000100.ckpt", "a folder whose two newest checkpoints are both damaged",
               f"keep passing over refused files, newest first, until one passes its checks ({_DAMAGED})")
        flipped(folders["all_bad"], "state-0000000100.ckpt", 100)
        cut(folders["all_bad"], "state-0000000200.ckpt", 200)
        expect(folders["all_bad"], None, "a folder whose every checkpoint is damaged",
               f"when no file passes its checks there is nothing to resume from: return None ({_DAMAGED})")
        expect(folders["empty"], None, "an empty folder",
               f"with no checkpoint there is nothing to resume from: return None ({_DAMAGED})")
    return _passed("the newest checkpoint that passes its checks, by the step in its name: .tmp files and other "
                   "names passed over, damaged newest files skipped, None when nothing can be resumed")


def check_save_atomically(save_atomically: Any) -> bool | None:
    """Notebook 09b: ``save_atomically(path, write)`` saves a file so that a crash never leaves half of one.

    ``write(f)`` writes the file's content into the open binary file ``f``. Right when the content goes to another
    file in the same folder, reaches the disk (Python's buffer flushed, then ``os.fsync`` on that file, or
    ``os.fdatasync``, which also puts the data on the disk: the check reads the file's size at that call) and only then
    takes the final name by ``os.replace`` (or ``os.rename``). Checked by behaviour, in a temporary folder, with
    ``os.fsync``, ``os.fdatasync`` (where the platform has it), ``os.replace`` and ``os.rename`` watched (and
    restored afterwards): a first save; a writer that raises ``SimulatedCrash`` halfway, over a file saved before and
    over no file (the crash must reach the caller, the final name keep the old content or stay absent, and the
    temporary file be gone); an ``fsync`` (or ``fdatasync``) that raises ``OSError`` (the same three: the error
    reaches the caller, the old file stays whole, the temporary file is gone). Nothing is timed. The course's
    code, or any function the page imports, is refused. Raises ``AssertionError`` with a hint naming the section.
    """
    if save_atomically is None:
        return _not_answered_yet("write save_atomically(path, write)")
    _require_learners_code(save_atomically, "save_atomically(path, write)")
    import contextlib
    import inspect
    import os
    import tempfile
    from pathlib import Path
    from unittest import mock

    call = "save_atomically(path, write)"
    events: list[tuple] = []
    real_fsync, real_replace, real_rename = os.fsync, os.replace, os.rename
    real_fdatasync = getattr(os, "fdatasync", None)  # absent on macOS and Windows
    failing_fsync = []  # while non-empty, fsync and fdatasync raise this OSError

    def syncer(real):
        def sync(fd):  # either call puts the file's data on the disk: both count as the flush to disk
            st = os.fstat(fd)
            events.append(("fsync", st.st_ino, st.st_size))
            if failing_fsync:
                raise failing_fsync[0]
            return real(fd)
        return sync

    def renamer(real):
        def rename(src, dst, *args, **kwargs):
            src_path = Path(os.fspath(src)).absolute()
            ino = os.stat(src_path).st_ino if src_path.exists() else None
            events.append(("rename", src_path, Path(os.fspath(dst)).absolute(), ino))
            return real(src, dst, *args, **kwargs)
        return rename

    def writer(content, crash_at=None):
        def write(f):
            for i in range(0, len(content), 1_000):
                if crash_at is not None and i >= crash_at:
                    f.flush()  # the half written so far reaches the file, as it would before a crash
                    raise SimulatedCrash(f"simulated crash after {i:,} of {len(content):,} bytes")
                f.write(content[i:i + 1_000])
        return write

    old = bytes(range(256)) * 196 + b"old"  # 50,179 bytes: the last 1,000-byte chunk is partial
    new = bytes(reversed(range(256))) * 196 + b"new"
    watched = {id(real_fsync): syncer(real_fsync), id(real_replace): renamer(real_replace),
               id(real_rename): renamer(real_rename)}
    patches = [("fsync", real_fsync), ("replace", real_replace), ("rename", real_rename)]
    if real_fdatasync is not None:
        watched[id(real_fdatasync)] = syncer(real_fdatasync)
        patches.append(("fdatasync", real_fdatasync))
    learners = getattr(inspect.unwrap(getattr(save_atomically, "__func__", save_atomically)), "__globals__", {})
    aliases = {name: watched[id(value)] for name, value in learners.items() if id(value) in watched}  # from os import
    with tempfile.TemporaryDirectory(prefix="atomic-") as folder, contextlib.ExitStack() as stack:
        for name, real in patches:
            stack.enter_context(mock.patch.object(os, name, watched[id(real)]))
        stack.enter_context(mock.patch.dict(learners, aliases))
        folder = Path(folder).absolute()
        path = folder / "state.ckpt"

        def others():
            return sorted(p.name for p in folder.iterdir() if p != path)

        result = _call_learner(save_atomically, (path, writer(old)), call)
        if result is None and not path.exists() and not others() and not events:
            return _not_answered_yet("save_atomically wrote nothing yet; write the file")
        assert path.exists(), (
            f"after a save there is no {path.name}: the temporary file takes the final name at the end ({_ATOMIC})")
        assert path.read_bytes() == old, (
            f"after a save, {path.name} should hold the {len(old):,} bytes write(f) wrote, it holds "
            f"{path.stat().st_size:,}: call write with the open file, once, and keep all it writes")
        renames = [e for e in events if e[0] == "rename" and e[2] == path]
        assert renames, (f"{path.name} never took its name by a rename: a file written, or copied, under its final "
                         f"name can be seen half done. Write another file and rename it over the old one, the one "
                         f"step a crash cannot split ({_ATOMIC})")
        _, tmp, _, tmp_ino = renames[-1]
        assert tmp.parent == folder, (
            f"the temporary file was written in {tmp.parent}, not beside {path.name}: a rename is atomic only within "
            f"one file system, so the temporary file goes in the final file's folder ({_ATOMIC})")
        synced = [e for e in events[:events.index(renames[-1])] if e[0] == "fsync" and e[1] == tmp_ino]
        assert synced, (f"the temporary file was renamed without an fsync before: a power cut after the rename could "
                        f"leave the final name on data still in RAM ({_ATOMIC}, and the fsync manual page it links)")
        assert max(size for _, _, size in synced) == len(old), (
            f"at its fsync the temporary file held {max(size for _, _, size in synced):,} of {len(old):,} bytes: the "
            f"rest sat in Python's own buffer, which fsync does not see; flush the file object first ({_ATOMIC})")
        assert not others(), f"after a save the folder also holds {others()}: only {path.name} should be left"

        for what, target, before in (("over a file saved before", path, old),
                                     ("over no file", folder / "fresh.ckpt", None)):
            try:
                _call_learner(save_atomically, (target, writer(new, crash_at=len(new) // 2)), call)
            except AssertionError as e:
                if "SimulatedCrash" not in str(e):
                    raise
            else:
                raise AssertionError(f"a crash halfway through write(f), {what}, did not reach the caller: a run "
                                     f"that saves must learn the save failed, so let the exception through")
            now = target.read_bytes() if target.exists() else None
            assert now == before, (
                f"a crash halfway through write(f), {what}, left {target.name} "
                + (f"holding {len(now):,} bytes of the half-written file" if now is not None else "missing")
                + ": the final name must keep the whole old file (or none) until the new one is complete, and only "
                f"a rename at the end gives the new file that name ({_ATOMIC})")
            assert not others(), (f"a crash halfway through write(f), {what}, left {others()} in the folder: remove "
                                  f"the temporary file when the writing fails, then let the error through ({_ATOMIC})")

        failing_fsync.append(OSError(5, "Input/output error (simulated: the disk could not flush)"))
        try:
            _call_learner(save_atomically, (path, writer(new)), call)
        except AssertionError as e:
            if "Input/output error" not in str(e):
                raise
        else:
            raise AssertionError("an fsync that failed (the disk could not flush) did not reach the caller: a run "
                                 "that saves must learn the save failed, so let the OSError through")
        finally:
            failing_fsync.clear()
        assert path.read_bytes() == old, (
            f"an fsync that failed left {path.name} holding the new content: the rename came before the data was "
            f"safely on disk; fsync first, rename once it succeeded ({_ATOMIC})")
        assert not others(), (f"an fsync that failed left {others()} in the folder: remove the temporary file when "
                              f"any step of the save fails, then let the error through ({_ATOMIC})")
    return _passed(f"a save goes through a temporary file beside the final one, flushed and fsynced ({len(old):,} "
                   f"bytes on disk at the fsync) before the rename; a crash halfway through, over an old file or none, "
                   f"left the old file whole (or no file) and no temporary file, and a failed fsync reached the "
                   f"caller and left the old file whole and no temporary file")


PREDICTIONS.update({
    "09.noisy_ratio": Prediction("lz4's ratio on frames with a noisy bottom quarter", 0.1, lambda m, clean: {
        clean: "that is a frame without noise: a quarter of this one does not shrink (the paragraph above the "
               "prediction)",
        0.75 * clean + 0.25: "ratios do not average over a frame's parts: their compressed bytes add up (section 1's "
                             "table for the Breakout part, the paragraph above the prediction for the noise)",
        1: "that is a frame of pure noise: three quarters of this one are Breakout, which still shrinks (section 1's "
           "table)",
        4: "the Breakout part is not free: it still takes some bytes once compressed (section 1's table)"},
        "the compressed bytes of a frame's parts add up: price the Breakout three quarters from section 1's table and "
        "the noisy quarter as bytes that do not shrink, then divide 7,056 by the sum (the paragraph above the "
        "prediction)"),
    "09b.checkpoint_mb": Prediction("the checkpoint's size in MB", 0.01, lambda m: {
        (2_000 * 7_072 + 26_978_880) / 1e6: "a ring's arrays are written in full, whatever its fill: its slots, not "
                                            "the transitions it holds, set the replay part (section 1: the memory "
                                            "goes in as its arrays)",
        50_000 * 7_072 / 1e6: "the agent part is missing: both networks and the optimiser's state (section 1's list)",
        (50_000 * 7_072 + 26_978_880 / 2) / 1e6: "Adam's two moments exist once learning has started: count the "
                                                 "optimiser's state too (section 1's list)",
        m - 6_744_720 / 1e6: "one network short: a run keeps the online network and its target copy (section 1's "
                             "list)",
        m * 1e6 / 2**20: "a MB here is 10⁶ bytes, as everywhere in the course"},
        "a checkpoint is the replay's arrays written in full, every slot, plus the networks and the optimiser's "
        "state: price each part from the cell's numbers (section 1's list)"),
})


QUESTIONS.update({
    "09.stack_payload_ram": ("b", "a stack's four frames are consecutive frames of one game, mostly the same bytes: "
                                  "lz4 encodes frame 1 and then much of frames 2 to 4 as matches back to it, so a "
                                  "stack's payload costs more than one frame's but well under four; the slot's header, "
                                  "list pointer and bookkeeping (section 2) are paid once either way. The memory "
                                  "grows, by between 1.2 and 2 times: more than one frame's payload, far from four",
                             {"a": "a compressor removes repetition, and the ratio belongs to the frames (section 1, "
                                   "*Predict, then measure*, and the paragraph after it): how much of frame 1 do "
                                   "frames 2 to 4 of one stack repeat?",
                              "c": "each payload is compressed on its own, so that any slot can be read without its "
                                   "neighbours (section 1, the two codecs): can one slot's payload point back into "
                                   "another's? And frames 2 to 4 are not frame 1: the ball, the paddle and the score "
                                   "move, and their bytes cost something"}),
    "09.cold_disk": ("c", "the page cache keeps a file's pages only until memory runs short, and here it can hold "
                          "about 12 of 70.6 GB, a sixth of the file. A uniform draw favours no page, so a frame's "
                          "pages are cached about as often as that share, less when a frame spans two pages: at most "
                          "160 × 12 / 70.6 ≈ 27 frames of a batch are found in RAM, and most are read from the SSD, "
                          "near section 3's cold line, not its warm one",
                     {"a": "a file's pages stay in the page cache while there is room, not for as long as the file is "
                           "mapped: how much of this file can 12 GB hold? (section 3, *The disk store*, where the page "
                           "cache is defined, and its point *RAM is counted where it is*)",
                      "b": "the pages read most recently are the ones kept, but a uniform draw is as likely to pick "
                           "any other page of the file next: what share of the file is cached at any moment? "
                           "(section 4, warm and cold reads)"}),
    "09b.kill_before_rename": ("b", "a rename is atomic only within one file system; between two, a move copies the "
                                    "bytes into a new file under the final name and deletes the original afterwards, "
                                    "so a kill during the copy can leave a checkpoint cut short under its real name, "
                                    "which a rename within one folder never leaves (a resume refuses it by its "
                                    "length and carries on from step 125,000). A kill before the copy starts or "
                                    "after it ends leaves whole files only, as a rename does at any moment",
                               {"a": "whole files are what a kill before the move or after it leaves here, and what "
                                     "a rename within one folder leaves at any moment: the question asks what only "
                                     "this script can leave. A rename works only within one file system (section 3, "
                                     "the *Atomic* point, says why the temporary file goes in the final file's "
                                     "folder): what must a move between two disks do instead?",
                                "c": "a partial .tmp file in the run folder is what a save killed before its rename "
                                     "leaves, the course's own included (section 3, the *Atomic* point), so a rename "
                                     "leaves it too, and this script's temporary file lies in /tmp. A move between "
                                     "file systems writes the bytes straight under the final name: what lies under "
                                     "that name while it writes?"}),
    "09b.prefault_over_budget": ("b", "prefault writes every page of the 7.07 GB memory when the memory is built, "
                                      "so the process's RSS is past the 6 GB budget before the first step; the "
                                      "watchdog looks at its first call, after that step, saves the state (a memory "
                                      "that holds almost nothing yet) and stops. A budget must cover the memory as "
                                      "built plus the rest of the run",
                                 {"a": "a memory fills one frame per step, but with prefault its pages are resident "
                                       "from the start, every one written once when the memory is built: how much of "
                                       "it counts in RSS before the first step? (section 6, why its run turns prefault "
                                       "off, and notebook 05, section 3, *Fitting at the start is not fitting at the "
                                       "end*)",
                                  "c": "the watchdog compares the process's whole RSS with the budget, not what it "
                                       "grew by: the memory's resident pages count like any other (section 6, the two "
                                       "numbers it looks at)"}),
})


check_module(globals())
