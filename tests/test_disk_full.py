"""A full disk stops a run the way a signal does: no traceback, what was kept, what the next save needs, how to go
on; and nothing is lost (issue: every fault during a run, the same rule). The disk is simulated: the write that
would have failed raises ``OSError(ENOSPC)`` as the OS would, at the moment chosen."""
from __future__ import annotations

import csv
import errno
import os
from pathlib import Path

import pytest

import dqn_course.records as records
from dqn_course.agent import DQNAgent
from dqn_course.checkpoint import list_checkpoints, read_checkpoint
from dqn_course.profiling import format_bytes
from dqn_course.train import PRESETS, main

ARGS = ["--preset", "quick", "--total-steps", "1200", "--checkpoint-every", "400", "--eval-every", "600",
        "--learning-starts", "200", "--progress", "false", "--prefault", "false"]


def full(filename: str) -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), filename)


def run(out: Path, *extra: str) -> None:
    main([*ARGS, "--out-dir", str(out), *extra])


def stopped_by_a_full_disk(out: Path, capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        run(out)
    err = capsys.readouterr().err
    assert exit_.value.code == 3, err
    assert "Traceback" not in err and err.startswith("stopped: the disk filled while the run wrote")
    return err


def resumes_to_the_end(out: Path, capsys) -> None:
    run(out, "--resume", str(out))
    assert "done: 1,200 steps" in capsys.readouterr().out
    with open(out / "log.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and all(None not in r.values() for r in rows)  # no row cut short by the full disk
    steps = [int(r["step"]) for r in rows]
    assert steps == sorted(steps) and steps[-1] <= 1200


@pytest.mark.slow
def test_a_training_state_that_cannot_be_written_stops_the_run_and_the_last_one_resumes(tmp_path, monkeypatch,
                                                                                         capsys):
    real, calls = records.write_checkpoint, []

    def second_fails(path, arrays, meta):
        calls.append(path)
        if len(calls) == 2:
            raise full(str(path))
        real(path, arrays, meta)

    monkeypatch.setattr(records, "write_checkpoint", second_fails)
    out = tmp_path / "run"
    err = stopped_by_a_full_disk(out, capsys)
    kept = list_checkpoints(out)
    assert [p.name for p in kept] == [calls[0].name] and read_checkpoint(kept[0])[1]["counters"]["step"] == 400
    assert f"Kept: {kept[0]} (step 400)" in err
    size = kept[0].stat().st_size
    assert f"The next save needs about {format_bytes(size)}" in err and " is free there" in err
    assert "resume with: python -m dqn_course.train" in err and f"--resume {out}" in err
    assert not list(out.glob("*.tmp"))
    monkeypatch.setattr(records, "write_checkpoint", real)
    resumes_to_the_end(out, capsys)


@pytest.mark.slow
def test_a_log_row_cut_short_by_a_full_disk_stops_the_run_and_is_dropped_on_resume(tmp_path, monkeypatch, capsys):
    real, rows = records.CsvLog.write, []

    def fails_half_way(self, **row):
        rows.extend(["game"] if "episode_return" in row else [])
        if rows.count("game") == 3 and "episode_return" in row:  # the 3rd game (after the save at step 400): half
            # its row reaches the disk, then the disk is full
            self.file.write(f"{row['step']},{row['episode_return']}")
            self.file.flush()
            raise full(self.file.name)
        real(self, **row)

    monkeypatch.setattr(records.CsvLog, "write", fails_half_way)
    out = tmp_path / "run"
    err = stopped_by_a_full_disk(out, capsys)
    assert "log.csv" in err and "Kept: " in err
    monkeypatch.setattr(records.CsvLog, "write", real)
    resumes_to_the_end(out, capsys)


@pytest.mark.slow
def test_a_policy_file_that_cannot_be_written_stops_the_run(tmp_path, monkeypatch, capsys):
    def no_room(path, *args, **kwargs):
        raise full(str(path))

    monkeypatch.setattr(records, "save_checkpoint", no_room)
    out = tmp_path / "run"
    err = stopped_by_a_full_disk(out, capsys)
    assert "checkpoint.pt" in err and "Kept: " in err and "resume with:" in err


def test_a_disk_full_while_setting_up_leaves_the_log_as_it_was(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "log.csv").write_text("step,episode_return\n100,1.0\n")
    real_open = open

    def no_room_for_new_files(file, mode="r", *args, **kwargs):
        if str(file).endswith(".tmp") and "w" in mode:
            raise full(str(file))
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr("builtins.open", no_room_for_new_files)
    with pytest.raises(OSError) as error:
        records.CsvLog(out / "log.csv", ["step", "episode_return"], resume_step=1_000)
    assert error.value.errno == errno.ENOSPC
    monkeypatch.setattr("builtins.open", real_open)
    assert (out / "log.csv").read_text() == "step,episode_return\n100,1.0\n"
    assert not list(out.glob("*.tmp"))


def test_a_write_the_disk_cuts_short_leaves_the_previous_file_and_no_temporary_one(tmp_path):
    from dqn_course.checkpoint import replacing

    path = tmp_path / "checkpoint.pt"
    path.write_bytes(b"the previous policy")
    with pytest.raises(OSError) as error, replacing(path) as tmp:
        tmp.write_bytes(b"half a poli")  # the disk takes part of the new file, then is full
        raise full(str(tmp))
    assert error.value.errno == errno.ENOSPC
    assert path.read_bytes() == b"the previous policy" and sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    with replacing(path) as tmp:
        tmp.write_bytes(b"the new policy")
    assert path.read_bytes() == b"the new policy" and sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_the_policy_file_and_a_resumed_log_are_written_through_it(tmp_path, monkeypatch):
    import torch

    out = tmp_path / "run"
    out.mkdir()
    (out / "log.csv").write_text("step,episode_return\n100,1.0\n")
    real_writerows = csv.DictWriter.writerows

    def disk_fills(self, rows):
        real_writerows(self, rows)
        raise full("log.csv.tmp")

    monkeypatch.setattr(csv.DictWriter, "writerows", disk_fills)
    with pytest.raises(OSError):
        records.CsvLog(out / "log.csv", ["step", "episode_return"], resume_step=1_000)
    assert (out / "log.csv").read_text() == "step,episode_return\n100,1.0\n" and not list(out.glob("*.tmp"))

    (out / "checkpoint.pt").write_bytes(b"the previous policy")

    def torch_save_cut_short(obj, f):
        Path(f).write_bytes(b"half")
        raise full(str(f))

    monkeypatch.setattr(torch, "save", torch_save_cut_short)
    agent = DQNAgent(n_actions=4, device="cpu", seed=0)
    with pytest.raises(OSError):
        records.save_checkpoint(out / "checkpoint.pt", agent, PRESETS["quick"], 10)
    assert (out / "checkpoint.pt").read_bytes() == b"the previous policy" and not list(out.glob("*.tmp"))
