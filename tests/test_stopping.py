"""Runs that stop cleanly (deadline, SIGINT/SIGTERM) and resume; settings refused before anything runs."""
from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from dqn_course.checkpoint import CheckpointError, list_checkpoints, read_checkpoint
from dqn_course.lab import resume_demo
from dqn_course.lab.playback import load_agent
from dqn_course.profiling import InsufficientMemoryError, available_bytes
from dqn_course.stopping import StopRequests
from dqn_course.train import PRESETS, ConfigError, main, parse_args, resume_command, train

REPO_ROOT = Path(__file__).resolve().parents[1]


def quick_config(out: Path, **overrides):
    return dataclasses.replace(PRESETS["quick"], out_dir=str(out), progress=False, prefault=False, **overrides)


def log_steps(path: Path) -> list[str]:
    return path.read_text().splitlines()[1:]


# -- StopRequests ------------------------------------------------------------------------------------------

def test_no_deadline_and_no_signal_means_go_on():
    with StopRequests() as stop:
        assert stop.reason() is None and not stop.timed_out and not stop.by_signal


def test_a_passed_deadline_is_the_reason():
    with StopRequests(time_limit_s=1e-9) as stop:
        time.sleep(0.001)
        assert stop.timed_out and stop.reason() == f"time limit of {1e-9 / 60:g} minutes reached"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_first_signal_is_recorded_second_stops_at_once_and_handlers_come_back(sig):
    before = signal.getsignal(sig)
    with StopRequests(time_limit_s=3600) as stop:
        os.kill(os.getpid(), sig)  # the handler runs before the next bytecode of this thread
        assert stop.reason() == f"{signal.Signals(sig).name} received" and stop.by_signal
        with pytest.raises(KeyboardInterrupt, match="second stop signal"):
            os.kill(os.getpid(), sig)
            time.sleep(1)  # not reached: the handler raised
    assert signal.getsignal(sig) is before


def test_negative_time_limit_is_refused():
    with pytest.raises(ValueError, match="time limit must be >= 0"):
        StopRequests(-1)


def test_resume_command_repeats_the_arguments_and_points_at_the_run():
    argv = ["--preset", "breakout-cpu", "--resume", "old", "--time-limit", "60", "--resume=older"]
    assert resume_command(argv, "runs/my run") == \
        "python -m dqn_course.train --preset breakout-cpu --time-limit 60 --resume 'runs/my run'"


# -- a deadline ----------------------------------------------------------------------------------------

def test_time_limit_evaluates_saves_and_the_run_resumes_to_the_end(tmp_path):
    stopped = train(quick_config(tmp_path, total_steps=700, time_limit=1e-6))  # passed after the first step
    assert stopped["stopped"].startswith("time limit of") and stopped["steps"] == 1
    eval_rows = log_steps(tmp_path / "eval.csv")
    assert [int(r.split(",")[0]) for r in eval_rows] == [1], "the deadline evaluates once, at the stop"
    assert [p.name for p in list_checkpoints(tmp_path)] == ["state-0000000001.ckpt"]
    agent, info = load_agent(tmp_path / "checkpoint.pt")
    assert info["step"] == 1 and info["config"]["time_limit"] == pytest.approx(1e-6)

    resumed = train(quick_config(tmp_path, total_steps=700, resume=str(tmp_path)))
    assert resumed["stopped"] is None and resumed["resumed_from"] == 1 and resumed["steps"] == 700
    assert resumed["updates"] == 700 // 4 - (500 - 1) // 4


# -- a signal mid-run, through the real CLI ------------------------------------------------------------

def wait_for_game_after(proc: subprocess.Popen, log: Path, step: int, timeout: float = 900) -> None:
    """Block until ``log`` has a finished game logged after ``step`` (the run must still be going)."""
    deadline = time.monotonic() + timeout
    while not (log.is_file() and any(int(r.split(",")[0]) > step for r in log_steps(log))):
        assert proc.poll() is None, f"the run ended (exit {proc.returncode}) early:\n{proc.communicate()[1][-3000:]}"
        assert time.monotonic() < deadline, f"no game finished after step {step} within {timeout:.0f} s"
        time.sleep(0.05)


@pytest.mark.slow
def test_sigterm_between_checkpoints_saves_that_step_and_the_run_resumes(tmp_path):
    """SIGINT takes the same path (``StopRequests``, tested above): one real CLI run is enough."""
    sig = signal.SIGTERM
    out = tmp_path / "run"
    args = ("--checkpoint-every", "1000", "--total-steps", "2500", "--prefault", "false")
    proc = resume_demo.start_run(out, *args)
    try:
        resume_demo.wait_for_checkpoint(proc, out, min_step=1000)
        wait_for_game_after(proc, out / "log.csv", 1000)  # a game that only the signal's save can keep
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stderr
    name = signal.Signals(sig).name
    assert f"why: {name} received" in stdout and f"--resume {out}" in stdout
    newest = list_checkpoints(out)[-1]
    saved_step = read_checkpoint(newest)[1]["counters"]["step"]
    assert 1000 < saved_step < 2500 and newest.name == f"state-{saved_step:010d}.ckpt"
    signalled_log = log_steps(out / "log.csv")
    assert signalled_log and all(int(r.split(",")[0]) <= saved_step for r in signalled_log)
    assert any(int(r.split(",")[0]) > 1000 for r in signalled_log)

    resumed = resume_demo.run(out, *args, "--resume", str(out))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resumed from {newest} at step {saved_step:,}" in resumed.stdout and "done: 2,500 steps" in resumed.stdout
    log = log_steps(out / "log.csv")
    assert log[: len(signalled_log)] == signalled_log, "no game finished before the signal may be lost"
    assert not list(out.glob("*.tmp"))


# -- settings refused before anything runs ----------------------------------------------------------

NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
SMALL_RAM = pytest.mark.skipif(available_bytes() > 700 * 10**9, reason="this machine could hold 707 GB")

REFUSED = [
    pytest.param(["--num-envs", "0"], ConfigError, "--num-envs must be a positive whole number, got 0", id="envs"),
    pytest.param(["--buffer-size", "-5"], ConfigError, "--buffer-size must be a positive whole number", id="buffer"),
    pytest.param(["--replay-storage", "foo"], ConfigError, "--replay-storage must be one of ram, lz4, zstd, disk",
                 id="storage"),
    pytest.param(["--env-backend", "gym"], ConfigError, "--env-backend must be one of gymnasium, ale", id="backend"),
    pytest.param(["--buffer-size", "100000000"], InsufficientMemoryError, "needs 707.2 GB but this machine has",
                 id="too-big", marks=SMALL_RAM),
    pytest.param(["--total-steps", "10", "--learning-starts", "5", "--batch-size", "64"], ConfigError,
                 "--learning-starts 5 is too early for --batch-size 64", id="learning-starts"),
    pytest.param(["--device", "cuda"], ConfigError, "--device cuda asks for a CUDA GPU", id="cuda", marks=NO_CUDA),
    pytest.param(["--device", "tpu9"], ConfigError, "is not a torch device", id="device-name"),
    pytest.param(["--eps-fraction", "0"], ConfigError, "--eps-fraction", id="eps-fraction"),
    pytest.param(["--gamma", "1.5"], ConfigError, "--gamma must be between 0 and 1", id="gamma"),
    pytest.param(["--time-limit", "-1"], ConfigError, "--time-limit must be >= 0", id="time-limit"),
    pytest.param(["--replay-on-device", "true", "--replay-storage", "lz4"], ConfigError,
                 "works with --replay-storage ram only", id="device-replay-storage"),
    pytest.param(["--resume", "/nonexistent"], CheckpointError, "no checkpoint at /nonexistent", id="resume"),
]
@pytest.mark.parametrize("argv, error, message", REFUSED)
def test_the_cli_refuses_with_status_2_and_no_traceback(tmp_path, argv, error, message, capsys):
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as info:
        main(["--preset", "quick", "--out-dir", str(out), "--progress", "false", *argv])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err, err
    assert not out.exists(), "a refused run must not leave a run folder"


@pytest.mark.slow
@pytest.mark.parametrize("argv, message", [(["--num-envs", "0"], "--num-envs must be a positive whole number"),
                                           (["--resume", "/nonexistent"], "no checkpoint at /nonexistent")])
def test_the_real_cli_prints_one_error_line(tmp_path, argv, message):
    """In a fresh interpreter, as a user types it: status 2, the message, no traceback, no folder."""
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "dqn_course.train", "--preset", "quick", "--out-dir", str(out),
                           "--progress", "false", *argv], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()


@pytest.mark.parametrize("argv, error, message", REFUSED)
def test_train_raises_the_same_error_before_writing_anything(tmp_path, argv, error, message):
    out = tmp_path / "run"
    with pytest.raises(error) as info:  # a field out of its range is refused as the config is made, the rest by train
        cfg = dataclasses.replace(parse_args(["--preset", "quick", *argv]), out_dir=str(out), progress=False)
        train(cfg)
    assert message in str(info.value)
    assert not out.exists()


def test_an_unwritable_out_dir_is_refused(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(ConfigError, match="cannot be written"):
        train(quick_config(blocker / "run"))


def test_a_disk_replay_folder_that_cannot_be_made_is_refused(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(ConfigError, match="--replay-path .* cannot be written"):
        train(quick_config(tmp_path / "run", replay_storage="disk", replay_path=str(blocker / "replay")))
    assert not (tmp_path / "run").exists()
