"""Notebook 09b's exercises, the resume and the atomic save: the right answer passes; each wrong one raises with a
hint; the course's own code and the page's imports are refused; None just notes."""
from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

from dqn_course import checkpoint
from dqn_course.checkpoint import write_checkpoint
from dqn_course.lab import checks
from dqn_course.lab.checks import check_resume_config
from dqn_course.train import PRESETS, train


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory):
    """A quick-preset run the watchdog stops at its first step, leaving state-0000000001.ckpt."""
    out = tmp_path_factory.mktemp("run")
    cfg = dataclasses.replace(PRESETS["quick"], out_dir=str(out), progress=False, prefault=False, max_rss_gb=1e-6)
    assert train(cfg)["stopped"]
    return dataclasses.replace(cfg, max_rss_gb=0.0), out


def test_right_answer_passes(stopped_run, capsys):
    cfg, out = stopped_run
    assert check_resume_config(dataclasses.replace(cfg, resume=str(out), total_steps=3_000), out)
    assert capsys.readouterr().out.startswith("✓ resumes from state-0000000001.ckpt at step 1")
    assert check_resume_config(dataclasses.replace(cfg, resume=str(out / "state-0000000001.ckpt")), out)


@pytest.mark.parametrize("change, hint", [
    ({}, "resume is empty"),
    ({"resume": "elsewhere"}, "is not the killed run"),
    ({"resume": "RUN", "out_dir": "other"}, "writes where it was"),
    ({"resume": "RUN", "buffer_size": 20_000}, "would be refused: .*buffer_size: saved 10000, now 20000"),
    ({"resume": "RUN", "total_steps": 1}, "not beyond the checkpoint's step 1"),
])
def test_wrong_answers_raise_with_a_hint(stopped_run, change, hint):
    cfg, out = stopped_run
    change = {k: str(out) if v == "RUN" else v for k, v in change.items()}
    with pytest.raises(AssertionError, match=hint):
        check_resume_config(dataclasses.replace(cfg, **change), out)
    with pytest.raises(AssertionError, match="should be a dqn_course.train.Config"):
        check_resume_config({"resume": str(out)}, out)


def test_none_is_not_answered_yet(tmp_path, capsys):
    assert check_resume_config(None, tmp_path) is None
    assert "Not answered yet" in capsys.readouterr().out


def test_solution_cell_passes_its_checks(stopped_run):
    """Notebook 09b's solution cell (committed without outputs, skipped by nbval), run on a stopped run."""
    from _solutions import run_solutions

    cfg, out = stopped_run
    printed = run_solutions("09b_surviving_crashes", {"checks": checks, "dataclasses": dataclasses, "os": os,
                                                     "Path": Path, "run_cfg": cfg, "run_dir": out})
    assert printed.count("✓") == 4, printed


# -- notebook 09b: the atomic save ---------------------------------------------------------------------------------

def save_right(path, write):
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
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


def save_fsync_unflushed(path, write):
    tmp = Path(str(path) + ".tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            os.fsync(f.fileno())  # Python's buffer still holds the tail
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


def save_unanswered(path, write):
    pass


def test_atomic_save_right(capsys):
    assert checks.check_save_atomically(save_right) is True
    assert capsys.readouterr().out.startswith("✓")


@pytest.mark.parametrize("answer, hint", [
    (save_in_place, "never took its name by a rename"),
    (save_without_fsync, "renamed without an fsync"),
    (save_fsync_unflushed, "Python's own buffer"),
    (save_rename_then_fsync, "renamed without an fsync"),
    (save_elsewhere, "not beside state.ckpt"),
    (save_copying, "never took its name by a rename"),
    (save_leaves_tmp, r"left \['state.ckpt.tmp'\]"),
    (save_swallows_crash, "did not reach the caller"),
])
def test_atomic_save_wrong(answer, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_save_atomically(answer)


@pytest.mark.parametrize("answer", [write_checkpoint, checkpoint.replacing, shutil.copyfile, os.replace])
def test_atomic_save_refuses_the_course_and_the_pages_imports(answer):
    with pytest.raises(AssertionError, match="course's own|not yours|not a function of yours"):
        checks.check_save_atomically(answer)


def test_atomic_save_restores_os():
    fsync, replace, rename = os.fsync, os.replace, os.rename
    with pytest.raises(AssertionError):
        checks.check_save_atomically(save_in_place)
    checks.check_save_atomically(save_right)
    assert (os.fsync, os.replace, os.rename) == (fsync, replace, rename)


def test_atomic_save_unanswered(capsys):
    assert checks.check_save_atomically(None) is None
    assert checks.check_save_atomically(save_unanswered) is None
    assert capsys.readouterr().out.count("Not answered yet") == 2
