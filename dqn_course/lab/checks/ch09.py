"""Notebooks 09 (compressed and disk-backed replay) and 09b (surviving crashes): checks, predictions, questions.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from dqn_course.contracts import check_module
from dqn_course.lab.checks.core import (PREDICTIONS, QUESTIONS, Prediction, _call_learner, _check_number,
    _not_answered_yet, _passed, _require_learners_code)


_RESUME = "section 3, *Resume*"


_ATOMIC = "section 1, the *Atomic* point"


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


def check_min_compression_ratio(answer: Any) -> bool | None:
    """Notebook 09: the smallest compression ratio (84x84 frame bytes / payload bytes) at which a 1M-slot
    ``FrameSharingMemory(storage="lz4")`` fits in 1 GB = 10^9 bytes.

    Each slot costs its payload plus 16 B of bookkeeping, an 8 B list slot and a 33 B ``bytes`` header
    (64-bit CPython), so the payload may be 1,000 - 57 = 943 B: ratio 7,056 / 943 ≈ 7.48.
    """
    frame, per_slot = 84 * 84, 1e9 / 1e6
    o = _slot_overheads()
    overhead = sum(o.values())
    expected = frame / (per_slot - overhead)
    return _check_number(
        answer, expected, todo="set `min_ratio` to the smallest compression ratio",
        should="min_ratio should be a number (frame bytes / payload bytes)",
        right=(f"{expected:.2f}x: 10^9 B / 10^6 slots = {per_slot:,.0f} B a slot, minus {overhead} B of overhead "
               f"({o['bookkeeping']} bookkeeping + {o['list_slot']} list slot + {o['bytes_header']} bytes header) "
               f"leaves {per_slot - overhead:,.0f} B for the payload: {frame:,} / {per_slot - overhead:,.0f}"),
        hints=[
            (frame / per_slot, "each slot also pays for bookkeeping, a list slot and the payload's bytes header: "
                               "subtract them from the 1,000 B first (section 2 prints all three)"),
            (frame / (per_slot - o["bookkeeping"]), "the payload is a Python bytes object (with a header) held in "
                                                    "a list (one pointer a slot): subtract those too (section 2)"),
            (frame / (per_slot - o["list_slot"] - o["bytes_header"]), "the ring's bookkeeping arrays (action, "
                                                                       "reward, flags, id) cost 16 B a slot as well "
                                                                       "(section 2)"),
            (frame / (per_slot - o["bookkeeping"] - o["list_slot"]), "a bytes object carries a 33 B header "
                                                                     "(what sys.getsizeof reports when empty; "
                                                                     "section 2)"),
            (frame / (per_slot - o["bookkeeping"] - o["bytes_header"]), "the list holds one 8 B pointer per slot "
                                                                        "(section 2)"),
            (frame / (2**30 / 1e6 - overhead), "1 GB here is 10^9 bytes, not 2^30, as the exercise of section 2 says"),
            ((per_slot - overhead) / frame, "the ratio is frame bytes over payload bytes (greater than 1), as in "
                                            "section 1's table"),
            (per_slot - overhead, "that is the payload budget in bytes; the ratio is 7,056 divided by it (section 1's "
                                  "ratio)"),
        ],
        otherwise=("the compression must bring a frame down to what a slot has left for its payload once every "
                   "per-slot overhead printed above is paid (section 2, and its drawing of one slot): the ratio is "
                   "the frame's bytes over that budget"),
        close=lambda a, b: abs(a - b) <= 0.005 * abs(b), show=",.4g")


def check_resume_config(cfg: Any, run_dir: str | Path) -> bool | None:
    """Notebook 09b: a ``Config`` that resumes the killed run in ``run_dir`` and trains it further.

    Right when ``cfg.resume`` names the run (its folder or one of its ``state-*.ckpt`` files), the
    checkpoint it picks passes ``records.load_resume`` (same replay shape), the logs go on in the same
    folder and ``total_steps`` lies beyond the step that checkpoint saved.
    """
    if cfg is None:
        return _not_answered_yet("set `resume_cfg` to a Config that resumes the run")
    from pathlib import Path

    from dqn_course.checkpoint import CheckpointError
    from dqn_course.train import Config, load_resume

    assert isinstance(cfg, Config), (
        f"resume_cfg should be a dqn_course.train.Config (a copy of the run's, with the fields to change), "
        f"got {type(cfg).__name__}")
    run_dir = Path(run_dir).resolve()
    assert cfg.resume, ("resume is empty, so this run would start from scratch: a resume names the run it carries "
                        f"on ({_RESUME})")
    target = Path(cfg.resume).resolve()
    assert target == run_dir or target.parent == run_dir, (
        f"resume={cfg.resume!r} is not the killed run: a resume names the killed run's folder or one of its "
        f"checkpoints ({_RESUME})")
    assert Path(cfg.out_dir).resolve() == run_dir, (
        f"out_dir={cfg.out_dir!r}: a resumed run writes where it was, so that log.csv and the checkpoints carry on "
        f"({_RESUME})")
    try:
        _, meta, path = load_resume(cfg)
    except CheckpointError as e:
        raise AssertionError(f"this resume would be refused: {e}") from None
    saved = meta["counters"]["step"]
    assert cfg.total_steps > saved, (
        f"total_steps={cfg.total_steps:,} is not beyond the checkpoint's step {saved:,}: the run would stop at once "
        f"({_RESUME})")
    return _passed(f"resumes from {path.name} at step {saved:,} and trains on to {cfg.total_steps:,} in the same "
                   f"folder")


def check_save_atomically(save_atomically: Any) -> bool | None:
    """Notebook 09b: ``save_atomically(path, write)`` saves a file so that a crash never leaves half of one.

    ``write(f)`` writes the file's content into the open binary file ``f``. Right when the content goes to another
    file in the same folder, reaches the disk (Python's buffer flushed, then ``os.fsync`` on that file: the check
    reads the file's size at the ``fsync``) and only then takes the final name by ``os.replace`` (or ``os.rename``).
    Checked by behaviour, in a temporary folder, with ``os.fsync``, ``os.replace`` and ``os.rename`` watched (and
    restored afterwards): a first save; a writer that raises ``SimulatedCrash`` halfway, over a file saved before and
    over no file (the crash must reach the caller, the final name keep the old content or stay absent, and the
    temporary file be gone); an ``fsync`` that fails (the old file must stay whole). Nothing is timed. The course's
    code, or any function the page imports, is refused. Raises ``AssertionError`` with a hint naming the section.
    """
    if save_atomically is None:
        return _not_answered_yet("write save_atomically(path, write)")
    _require_learners_code(save_atomically, "save_atomically(path, write)")
    import os
    import tempfile
    from pathlib import Path
    from unittest import mock

    call = "save_atomically(path, write)"
    events: list[tuple] = []
    real_fsync, real_replace, real_rename = os.fsync, os.replace, os.rename
    failing_fsync = []  # while non-empty, fsync raises this OSError

    def fsync(fd):
        st = os.fstat(fd)
        events.append(("fsync", st.st_ino, st.st_size))
        if failing_fsync:
            raise failing_fsync[0]
        return real_fsync(fd)

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
    with tempfile.TemporaryDirectory(prefix="atomic-") as folder, \
            mock.patch.object(os, "fsync", fsync), mock.patch.object(os, "replace", renamer(real_replace)), \
            mock.patch.object(os, "rename", renamer(real_rename)):
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
        finally:
            failing_fsync.clear()
        assert path.read_bytes() == old, (
            f"an fsync that failed left {path.name} holding the new content: the rename came before the data was "
            f"safely on disk; fsync first, rename once it succeeded ({_ATOMIC})")
    return _passed(f"a save goes through a temporary file beside the final one, flushed and fsynced ({len(old):,} "
                   f"bytes on disk at the fsync) before the rename; a crash halfway through, over an old file or none, "
                   f"left the old file whole (or no file) and no temporary file, and a failed fsync left the old file "
                   f"whole")


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
    "09.what_sets_speed": ("b", "a batch decompresses 32 x 5 = 160 frames, so the decompression time sets the rate",
                           {"a": "the ratio decides how much RAM the memory takes: copying a few hundred bytes per "
                                 "frame is not where a batch's time goes (section 3, *What the numbers say*)",
                            "c": "a frame is compressed once, when it is stored, not while batches are drawn: count "
                                 "what drawing a batch does to each of its frames (section 3, *What the numbers "
                                 "say*)"}),
    "09.cold_disk": ("c", "cold, every frame is a read at a random place on the device; warm, its page is in RAM",
                     {"a": "the page cache belongs to the kernel, which gives its pages back under memory pressure: "
                           "it never makes the process swap (section 4)",
                      "b": "the store declares its reads random, which turns the kernel's read-ahead off: a batch "
                           "reads only the pages its frames lie on (section 4)"}),
    "09b.kill_before_rename": ("b", "a resume reads only files named state-<step>.ckpt; the rename is what makes a "
                                    "written file a checkpoint, so a complete .tmp file is never read (and the next "
                                    "save deletes it): the newest checkpoint is step 125,000's",
                               {"a": "a resume looks only at files named as finished checkpoints, and a written file "
                                     "gets that name from the rename, its last step (section 1, Atomic)",
                                "c": "the kill came while another file was being written; step 125,000's checkpoint "
                                     "was renamed long before and passes its checks (section 1, Atomic)"}),
    "09b.stop_or_kill": ("a", "the watchdog stops the run from inside its loop and saves the state first, so that "
                              "resume repeats nothing; SIGKILL gives the process no chance to save, so that resume "
                              "starts from the last checkpoint, step 50,000, and plays the steps after it again",
                         {"b": "the watchdog runs inside the training loop: before it stops the run it saves the "
                               "state (section 4, the line the run printed as it stopped)",
                          "c": "a resume starts from a checkpoint, not from the log: the state after the last "
                               "checkpoint died with the killed process (section 2, Pulling the plug)"}),
})


check_module(globals())
