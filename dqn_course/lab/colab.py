"""Notebook 07b's session loop: one training command to run again after every stop, until the run is finished.

A Colab runtime ends without warning (an idle tab, the session's limit, a GPU taken back), and with it the
machine's disk. A run that writes into a Google Drive folder and stops itself in time survives that:
``session_command`` builds the training command for one session (``--resume`` once the folder holds a
checkpoint, so the same cell starts the run and carries it on), ``run_session`` runs it with its output shown as
it comes, and ``finished`` says when there is nothing left to run. They work on any folder; the notebook and
``tests/test_colab.py`` use a local stand-in for Drive.
"""
from __future__ import annotations

import codecs
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from dqn_course.contracts import Count, check_module
from dqn_course.checkpoint import checkpoint_step, list_checkpoints
from dqn_course.lab.playback import legend_with_twins, plot_run


def on_colab() -> bool:
    """True in a Colab runtime (its kernel has imported ``google.colab``)."""
    return "google.colab" in sys.modules


def latest_step(run_dir: str | Path) -> int | None:
    """The agent step of the newest training state (``state-<step>.ckpt``) in ``run_dir``; None if none."""
    saved = list_checkpoints(run_dir) if Path(run_dir).is_dir() else []
    return checkpoint_step(saved[-1]) if saved else None


def finished(run_dir: str | Path, total_steps: int) -> bool:
    """True once ``run_dir`` holds the training state of step ``total_steps`` (a run saves it at its last step)."""
    step = latest_step(run_dir)
    return step is not None and step >= total_steps


def session_command(preset: str, run_dir: str | Path, time_limit: float, *, cwd: str | Path = ".",
                    replay_storage: str = "lz4", resume_from: Callable[[Path], str | Path | None] | None = None,
                    **overrides) -> list[str]:
    """The command of one session: ``python -m dqn_course.train`` with ``--preset``, ``--out-dir run_dir``,
    ``--time-limit`` (minutes), ``--replay-storage`` and ``--resume run_dir`` when it holds a checkpoint.

    A relative ``run_dir`` is taken from ``cwd``, the folder the command will run in. ``overrides`` are further
    ``Config`` fields (``total_steps=1500``), passed as ``--total-steps 1500``; every session of one run must give
    the same ones. ``resume_from``, when given, chooses the state file to carry on from (notebook 07b's exercise):
    called with the run folder (``cwd / run_dir``), it returns a path, and ``--resume`` names that file (relative to
    ``cwd``), or None for a new run; without it, ``--resume`` names the folder, whose newest state the run reads.
    Raises ``ValueError`` for a time limit that is not positive: a session without one runs until the runtime dies,
    and loses the steps since its last checkpoint.
    """
    if not time_limit > 0:
        raise ValueError(f"time_limit must be > 0 minutes (a session must stop itself before Colab does), "
                         f"got {time_limit!r}")
    command = [sys.executable, "-m", "dqn_course.train", "--preset", preset, "--out-dir", str(run_dir),
               "--time-limit", f"{time_limit:g}", "--replay-storage", replay_storage]
    for name, value in overrides.items():
        command += ["--" + name.replace("_", "-"), str(value).lower() if isinstance(value, bool) else str(value)]
    if resume_from is not None:
        chosen = resume_from(Path(cwd) / run_dir)
        if chosen is not None:
            command += ["--resume", os.path.relpath(chosen, cwd)]
    elif latest_step(Path(cwd) / run_dir) is not None:
        command += ["--resume", str(run_dir)]
    return command


def kill_session(command: list[str], cwd: str | Path, games: Count, timeout: float = 60.0) -> dict:
    """Run ``command`` in ``cwd`` without showing its output and SIGKILL it, as a lost runtime ends a session,
    once its ``log.csv`` (in the ``--out-dir`` the command names) has logged ``games`` games, or after ``timeout``
    seconds. Returns what the kill left: ``games`` logged, ``last_game_step`` (the step the last one ended at,
    None without one), ``states`` (the state files' names) and ``seconds`` the session ran."""
    import time

    out = Path(cwd) / command[command.index("--out-dir") + 1]
    t0 = time.perf_counter()
    proc = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while proc.poll() is None and time.perf_counter() - t0 < timeout and len(_game_steps(out)) < games:
            time.sleep(0.1)
    finally:
        proc.kill()
        proc.wait()
    steps = _game_steps(out)
    return {"games": len(steps), "last_game_step": steps[-1] if steps else None, "seconds": time.perf_counter() - t0,
            "states": [p.name for p in list_checkpoints(out)] if out.is_dir() else []}


def _game_steps(run_dir: Path) -> list[int]:
    """The steps at which the games logged in the folder's ``log.csv`` ended (none while it does not exist)."""
    try:
        lines = (run_dir / "log.csv").read_text().splitlines()[1:]
    except OSError:
        return []
    return [int(float(line.split(",", 1)[0])) for line in lines if "," in line]  # a line being written may lack one


def run_session(command: list[str], cwd: str | Path = ".", transcript: list[str] | None = None) -> int:
    """Run ``command`` in ``cwd``, showing its output (stdout and stderr, progress bar included) as it comes, and
    return its exit status; ``transcript``, a list, gets the output's text appended as it comes. Interrupting the
    cell stops the run the clean way: it gets SIGINT, saves its state and exits, and the interrupt is raised again
    once it has."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")  # a character may span two reads

    def show_output() -> None:
        for chunk in iter(lambda: proc.stdout.read1(4096), b""):
            text = decoder.decode(chunk)
            sys.stdout.write(text)
            sys.stdout.flush()
            if transcript is not None:
                transcript.append(text)

    with subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as proc:
        try:
            show_output()
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGINT)  # the run saves its state, prints its --resume command and exits
            show_output()
            raise
    return proc.returncode


def reported_replay(transcript: list[str]) -> float | None:
    """The bytes of replay memory the last ``stopped:`` or ``done:`` line in a session's output (``run_session``'s
    ``transcript``) reports, read back from its decimal units (kB, MB, GB); None when no such line is there."""
    import re

    found = re.findall(r"^(?:stopped|done): .*?, replay ([0-9.,]+) (B|kB|MB|GB|TB);", "".join(transcript), re.MULTILINE)
    if not found:
        return None
    value, unit = found[-1]
    return float(value.replace(",", "")) * {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[unit]


PLAYERS = {"follow": "a scripted player that follows the ball", "random": "uniformly random actions"}
STATE_SIZES = Path(__file__).resolve().parents[2] / "data" / "bench" / "replay_state.json"


def recorded_state_sizes(path: str | Path = STATE_SIZES) -> tuple[dict[tuple[str, int], dict], str] | None:
    """The training-state sizes ``benchmarks/replay_state.py`` recorded: ``({(storage, transitions): row}, how it
    was measured)``, or None while the file is absent. Refused rows (a machine too small) are left out."""
    path = Path(path)
    if not path.is_file():
        return None
    recorded = json.loads(path.read_text(encoding="utf-8"))
    rows = {(r["storage"], r["transitions"]): r for r in recorded["rows"] if "file_bytes" in r}
    env, settings = recorded["environment"], recorded["settings"]
    how = (f"data/bench/replay_state.json: `python {recorded['command']}` on {env['date'][:10]}, "
           f"{env['cpu_count']}-core {env['cpu']}; the {settings['preset']} preset's replay filled with real "
           f"Breakout frames ({PLAYERS.get(settings['policy'], settings['policy'])}), saved by the training run's "
           "own writer")
    return rows, how


def plot_sessions(run_dir: str | Path, stops: list[int], title: str = ""):
    """``playback.plot_run`` of ``run_dir`` with a dashed line at each step where a session stopped."""
    fig = plot_run(run_dir, title)
    for ax in fig.axes[:2]:
        for i, step in enumerate(stops):
            ax.axvline(step, color="tab:red", linestyle="--", linewidth=1,
                       label="a session stopped, the next resumed" if i == 0 and ax is fig.axes[0] else None)
    legend_with_twins(fig.axes[0])  # ε, on its own axis, included
    return fig


check_module(globals())
