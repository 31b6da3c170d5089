"""Notebook 09b's exercises, the resume and the atomic save: the right answer passes; each wrong one raises with a
hint; the course's own code and the page's imports are refused; None just notes."""
from __future__ import annotations

import os
import shutil
from os import fsync as os_fsync
from os import replace as os_replace
from pathlib import Path

import pytest

from dqn_course import checkpoint
from dqn_course.checkpoint import (CheckpointError, latest_checkpoint, list_checkpoints, read_checkpoint,
                                   write_checkpoint)
from dqn_course.lab import checks


# -- notebook 09b: the checkpoint a resume reads -------------------------------------------------------------------

def _steps(folder):
    """The run's checkpoints in ``folder`` and their steps, by name only (state-<digits>.ckpt)."""
    digits = {p: p.name[len("state-"):-len(".ckpt")] for p in Path(folder).iterdir()
              if p.name.startswith("state-") and p.name.endswith(".ckpt")}
    return {p: int(d) for p, d in digits.items() if d.isdigit()}


def pick_right(folder):
    steps = _steps(folder)
    for path in sorted(steps, key=steps.get, reverse=True):
        try:
            read_checkpoint(path)
        except CheckpointError:
            continue
        return path
    return None


def pick_by_text(folder):  # the names sorted as text: state-900 after state-1000
    for path in sorted(_steps(folder), reverse=True):
        try:
            read_checkpoint(path)
        except CheckpointError:
            continue
        return path
    return None


def pick_by_time(folder):  # the file touched last
    for path in sorted(_steps(folder), key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            read_checkpoint(path)
        except CheckpointError:
            continue
        return path
    return None


def pick_with_tmp(folder):  # .tmp files read as checkpoints too
    names = {p: p.name.split(".")[0][len("state-"):] for p in Path(folder).iterdir()
             if p.name.startswith("state-") and p.name.endswith((".ckpt", ".ckpt.tmp"))}
    for path in sorted((p for p, d in names.items() if d.isdigit()), key=lambda p: int(names[p]), reverse=True):
        try:
            read_checkpoint(path)
        except CheckpointError:
            continue
        return path
    return None


def pick_any_name(folder):  # every file but .tmp ones, by the digits in its name: state-400.ckpt.bak is read too
    def step(p):
        return int("".join(c for c in p.name if c.isdigit()) or 0)

    for path in sorted((p for p in Path(folder).iterdir() if p.suffix != ".tmp"), key=step, reverse=True):
        try:
            read_checkpoint(path)
        except CheckpointError:
            continue
        return path
    return None


def pick_unchecked(folder):  # the newest name, never read
    steps = _steps(folder)
    return max(steps, key=steps.get) if steps else None


def pick_one_back(folder):  # a damaged newest file: only the one before is tried
    steps = sorted(_steps(folder), key=_steps(folder).get, reverse=True)
    if not steps:
        return None
    try:
        read_checkpoint(steps[0])
        return steps[0]
    except CheckpointError:
        return steps[1] if len(steps) > 1 else None


def pick_raises_when_none(folder):
    found = pick_right(folder)
    if found is None:
        raise FileNotFoundError(f"no checkpoint to resume in {folder}")
    return found


def pick_lets_refusal_through(folder):
    steps = _steps(folder)
    if not steps:
        return None
    newest = max(steps, key=steps.get)
    read_checkpoint(newest)
    return newest


def pick_unanswered(folder):
    return None


def test_checkpoint_to_resume_right(capsys):
    assert checks.check_checkpoint_to_resume(pick_right) is True
    assert capsys.readouterr().out.startswith("✓")


@pytest.mark.parametrize("answer, hint", [
    (pick_by_text, "as text 900 sorts after 1000"),
    (pick_by_time, "as text 900 sorts after 1000"),
    (pick_with_tmp, "a .tmp file is a save that may not have finished"),
    (pick_any_name, "is one of the run's checkpoints"),
    (pick_unchecked, "fails its checks is passed over"),
    (pick_one_back, "keep passing over refused files"),
    (pick_raises_when_none, "raised FileNotFoundError"),
    (pick_lets_refusal_through, r"raised CheckpointError.*Hint: a file that fails its checks is passed over"),
])
def test_checkpoint_to_resume_wrong(answer, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_checkpoint_to_resume(answer)


@pytest.mark.parametrize("answer", [latest_checkpoint, list_checkpoints, read_checkpoint, checkpoint.checkpoint_step,
                                    lambda folder: latest_checkpoint(folder)[2],
                                    lambda folder: list_checkpoints(folder)[-1]])
def test_checkpoint_to_resume_refuses_the_course_and_the_pages_imports(answer):
    with pytest.raises(AssertionError, match="course's own|not yours|not a function of yours"):
        checks.check_checkpoint_to_resume(answer)


def test_checkpoint_to_resume_unanswered(capsys):
    assert checks.check_checkpoint_to_resume(None) is None
    assert checks.check_checkpoint_to_resume(pick_unanswered) is None
    assert capsys.readouterr().out.count("Not answered yet") == 2


def test_solution_cell_passes_its_checks():
    """Notebook 09b's solution cell (committed without outputs, skipped by nbval)."""
    from _solutions import run_solutions

    printed = run_solutions("09b_surviving_crashes", {"checks": checks, "os": os, "Path": Path,
                                                     "read_checkpoint": read_checkpoint,
                                                     "CheckpointError": CheckpointError})
    assert printed.count("✓") == 4, printed


# -- notebook 09b: the atomic save ---------------------------------------------------------------------------------

def save_right(path, write, sync="fsync"):
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            getattr(os, sync)(f.fileno())  # looked up at the call: the check watches os.fsync and os.fdatasync
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def save_by_fdatasync(path, write):
    """save_right with os.fdatasync, which puts the file's data on the disk as fsync does: the check accepts either."""
    save_right(path, write, sync="fdatasync")


def save_fdatasync_unflushed(path, write):
    save_fsync_unflushed(path, write, sync="fdatasync")


def save_swallows_fdatasync_error(path, write):  # a failed fdatasync ignored: the caller never knows
    tmp = Path(str(path) + ".tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            try:
                os.fdatasync(f.fileno())
            except OSError:
                pass
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def save_in_place(path, write):
    with open(path, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())


def save_without_fsync(path, write):
    tmp = Path(str(path) + ".tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def save_fsync_unflushed(path, write, sync="fsync"):
    tmp = Path(str(path) + ".tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            getattr(os, sync)(f.fileno())  # Python's buffer still holds the tail
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def save_rename_then_fsync(path, write):
    tmp = Path(str(path) + ".tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


def save_elsewhere(path, write):
    tmp = Path(path).parent.parent / f"state-{os.getpid()}.tmp"  # the folder above: renamed away, nothing left
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def save_copying(path, write):
    tmp = Path(str(path) + ".tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    shutil.copyfile(tmp, path)
    tmp.unlink()


def save_leaves_tmp(path, write):
    tmp = Path(str(path) + ".tmp")
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def save_swallows_crash(path, write):
    try:
        save_right(path, write)
    except Exception:
        pass


def save_swallows_fsync_error(path, write):  # a failed fsync ignored: the .tmp file stays, the caller never knows
    tmp = Path(str(path) + ".tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    with open(tmp, "rb+") as f:
        try:
            os.fsync(f.fileno())
        except OSError:
            return
    os.replace(tmp, path)


def save_fsync_error_leaves_tmp(path, write):  # the error reaches the caller, the .tmp file stays
    tmp = Path(str(path) + ".tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def save_unanswered(path, write):
    pass


def save_by_imported_names(path, write):
    """save_right with fsync and replace imported from os by name: the check must still see them."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os_fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os_replace(tmp, path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os_fsync(folder)
    finally:
        os.close(folder)


def test_atomic_save_right(capsys):
    assert checks.check_save_atomically(save_right) is True
    assert checks.check_save_atomically(save_by_imported_names) is True
    assert os_fsync is os.fsync and os_replace is os.replace  # the learner's names are given back
    assert capsys.readouterr().out.startswith("✓")


@pytest.mark.skipif(not hasattr(os, "fdatasync"), reason="os.fdatasync is not on this platform")
def test_atomic_save_accepts_fdatasync(capsys):
    assert checks.check_save_atomically(save_by_fdatasync) is True
    assert capsys.readouterr().out.startswith("✓")
    with pytest.raises(AssertionError, match="Python's own buffer"):
        checks.check_save_atomically(save_fdatasync_unflushed)
    with pytest.raises(AssertionError, match="an fsync that failed .*did not reach the caller"):
        checks.check_save_atomically(save_swallows_fdatasync_error)


@pytest.mark.parametrize("answer, hint", [
    (save_in_place, "never took its name by a rename"),
    (save_without_fsync, "renamed without an fsync"),
    (save_fsync_unflushed, "Python's own buffer"),
    (save_rename_then_fsync, "renamed without an fsync"),
    (save_elsewhere, "not beside state.ckpt"),
    (save_copying, "never took its name by a rename"),
    (save_leaves_tmp, r"left \['state.ckpt.tmp'\]"),
    (save_swallows_crash, "did not reach the caller"),
    (save_swallows_fsync_error, "an fsync that failed .*did not reach the caller"),
    (save_fsync_error_leaves_tmp, r"an fsync that failed left \['state.ckpt.tmp'\]"),
])
def test_atomic_save_wrong(answer, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_save_atomically(answer)


@pytest.mark.parametrize("answer", [write_checkpoint, checkpoint.replacing, shutil.copyfile, os.replace])
def test_atomic_save_refuses_the_course_and_the_pages_imports(answer):
    with pytest.raises(AssertionError, match="course's own|not yours|not a function of yours"):
        checks.check_save_atomically(answer)


def test_atomic_save_restores_os():
    fsync, replace, rename, fdatasync = os.fsync, os.replace, os.rename, getattr(os, "fdatasync", None)
    with pytest.raises(AssertionError):
        checks.check_save_atomically(save_in_place)
    checks.check_save_atomically(save_right)
    assert (os.fsync, os.replace, os.rename, getattr(os, "fdatasync", None)) == (fsync, replace, rename, fdatasync)


def test_atomic_save_unanswered(capsys):
    assert checks.check_save_atomically(None) is None
    assert checks.check_save_atomically(save_unanswered) is None
    assert capsys.readouterr().out.count("Not answered yet") == 2


# -- notebook 09b, section 2: pickle against raw arrays, one difference at a time ---------------------------------

def test_pickle_vs_arrays_changes_one_thing_per_row(tmp_path):
    """Three rows: the deque pickled, the ring pickled (only the layout differs), the ring as raw arrays (only the
    format differs), each timed as a median over rounds. The two ring files hold the same arrays, so their sizes
    differ by framing only; the deque's copies make its file several times larger; nothing is left in the folder."""
    from dqn_course.lab.bench import play_frames
    from dqn_course.lab.resume_demo import pickle_vs_arrays

    rows = pickle_vs_arrays(play_frames(100, seed=9), 200, tmp_path)
    assert [r["way"] for r in rows] == ["pickle of the deque of lists", "pickle of the frame-sharing ring",
                                        "frame-sharing ring as raw arrays"]
    deque_pickle, ring_pickle, raw = rows
    assert abs(raw["bytes"] - ring_pickle["bytes"]) < 0.01 * raw["bytes"]
    assert deque_pickle["bytes"] > 4 * ring_pickle["bytes"]
    assert all(r["seconds_save"] > 0 and r["seconds_load"] > 0 for r in rows)
    assert raw["seconds_sha256"] > 0  # the hash its save and load compute, timed in the same rounds
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="rounds"):
        pickle_vs_arrays(play_frames(100, seed=9), 200, tmp_path, rounds=0)
