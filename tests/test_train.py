"""The training CLI end to end (quick preset), and its small pieces: ε schedule, argument parsing."""
from __future__ import annotations

import copy
import csv
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dqn_course.agent import DQNAgent
from dqn_course.train import PRESETS, Config, epsilon_at, parse_args
from quick_run_record import GOLDEN, GUARD, GUARD_ARGS, RTOL, differences, run_record

REPO_ROOT = Path(__file__).resolve().parents[1]
LOG_HEADER = ["step", "episode_return", "episode_length", "loss", "q_max", "grad_norm", "epsilon", "replay_size",
              "rss_mb", "steps_per_s"]


def run_cli(out_dir: Path, *extra: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    """Run the CLI in a fresh interpreter (``timeout`` only guards against a hang; no speed is asserted).

    One OpenMP thread: torch's worker threads spin while they wait, and on a CPU shared with other
    work (a busy CI runner) two of them made this run 10x slower."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "dqn_course.train", "--preset", "quick", "--out-dir", str(out_dir),
                           "--progress", "false", *extra],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def read_csv(path: Path) -> tuple[list[str], list[dict]]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


# The quick preset as the run below makes it: with the refactor guard's settings (tests/quick_run_record.py).
QUICK = dataclasses.replace(PRESETS["quick"], **GUARD)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("quick") / "run"
    return out, run_cli(out, *GUARD_ARGS)  # float64: the refactor guard below compares it on any CPU


@pytest.mark.slow
def test_quick_preset_runs_end_to_end(quick_run):
    out, proc = quick_run
    assert proc.returncode == 0, (f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\n"
                                  f"stderr:\n{proc.stderr[-3000:]}")
    total = QUICK.total_steps
    assert f"done: {total:,} steps" in proc.stdout
    assert "train:" not in proc.stderr  # --progress false: no progress bar


@pytest.mark.slow
def test_quick_preset_writes_its_logs(quick_run):
    out, proc = quick_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    cfg = QUICK
    header, rows = read_csv(out / "log.csv")
    assert header == LOG_HEADER
    assert len(rows) >= 1, "no game finished in the quick run"
    steps = [int(r["step"]) for r in rows]
    assert steps == sorted(steps) and 0 < steps[0] and steps[-1] <= cfg.total_steps
    sizes = [int(r["replay_size"]) for r in rows]
    assert sizes == sorted(sizes) and 0 < sizes[0] and sizes[-1] <= min(cfg.buffer_size, steps[-1])
    for r in rows:
        # A game's score is a whole number of points (one game, not an average), and a game takes steps.
        assert float(r["episode_return"]).is_integer() and int(r["episode_length"]) > 0
        assert cfg.eps_end - 1e-9 <= float(r["epsilon"]) <= cfg.eps_start
        # rss_mb is in 2^20-byte units and counts at least the frames the replay memory holds by then.
        assert float(r["rss_mb"]) * 2**20 >= int(r["replay_size"]) * 84 * 84 and float(r["steps_per_s"]) > 0
        step = int(r["step"])
        for column in ("loss", "q_max", "grad_norm"):  # blank before the first update, numbers once updates run
            if step < cfg.learning_starts:
                assert r[column] == "", (column, r)
            elif step > cfg.learning_starts + 100:
                assert r[column] != "", (column, r)
        if step > cfg.learning_starts + 100:
            assert float(r["loss"]) >= 0, "learning had started: the loss belongs in the log"
            assert float(r["grad_norm"]) > 0 and abs(float(r["q_max"])) < 100, r
    eval_header, eval_rows = read_csv(out / "eval.csv")
    assert eval_header == ["step", "mean_return", "std_return", "episodes"]
    # every eval_every steps, and at the last step
    assert [int(r["step"]) for r in eval_rows] == sorted({*range(cfg.eval_every, cfg.total_steps + 1, cfg.eval_every),
                                                          cfg.total_steps})
    assert all(int(r["episodes"]) == cfg.eval_episodes and float(r["mean_return"]) >= 0 for r in eval_rows)


@pytest.mark.slow
def test_quick_preset_leaves_a_loadable_checkpoint(quick_run):
    out, proc = quick_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    ckpt = torch.load(out / "checkpoint.pt", map_location="cpu", weights_only=True)
    assert set(ckpt) == {"q", "config", "step", "evaluation"}, "the file for playing holds the online network alone"
    assert ckpt["evaluation"]["games"] == QUICK.eval_episodes, "and the evaluation that measured it"
    assert ckpt["step"] == QUICK.total_steps == ckpt["config"]["total_steps"]
    assert ckpt["config"]["out_dir"] == str(out) and ckpt["config"]["progress"] is False
    assert Config(**ckpt["config"]) == dataclasses.replace(QUICK, out_dir=str(out), progress=False)
    n_actions = list(ckpt["q"].values())[-1].shape[0]  # the output layer's bias
    assert n_actions == 4  # Breakout: NOOP, FIRE, RIGHT, LEFT
    agent = DQNAgent(n_actions, "cpu")
    agent.q.load_state_dict(ckpt["q"])  # every tensor fits the network
    assert not list(out.glob("*.tmp")), "a temporary checkpoint file was left behind"
    # The agent for playing (as last evaluated), the logs, and the newest keep_checkpoints full training states.
    last = QUICK.total_steps // QUICK.checkpoint_every * QUICK.checkpoint_every
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.pt", "eval.csv", "log.csv",
                                                     f"state-{last - QUICK.checkpoint_every:010d}.ckpt",
                                                     f"state-{last:010d}.ckpt"]


# -- the pieces -------------------------------------------------------------------------------------
def test_epsilon_schedule():
    cfg = PRESETS["quick"]  # 3,000 steps, decay over half of them
    span = int(cfg.eps_fraction * cfg.total_steps)
    assert span == 1_500
    assert epsilon_at(0, cfg) == pytest.approx(cfg.eps_start)
    assert epsilon_at(span // 2, cfg) == pytest.approx((cfg.eps_start + cfg.eps_end) / 2)
    assert epsilon_at(span, cfg) == pytest.approx(cfg.eps_end)
    assert epsilon_at(span + 1, cfg) == pytest.approx(cfg.eps_end)
    assert epsilon_at(10 * cfg.total_steps, cfg) == pytest.approx(cfg.eps_end)
    values = [epsilon_at(s, cfg) for s in range(0, cfg.total_steps + 1, 50)]
    assert all(a >= b for a, b in zip(values, values[1:]))
    full = Config()  # the Nature/CleanRL schedule: 1 -> 0.01 over the first 1M of 10M steps
    assert epsilon_at(1_000_000, full) == pytest.approx(0.01) and epsilon_at(500_000, full) == pytest.approx(0.505)


def test_epsilon_schedule_survives_a_zero_fraction():
    cfg = dataclasses.replace(PRESETS["quick"], eps_fraction=0.0)
    assert epsilon_at(0, cfg) == pytest.approx(cfg.eps_start)
    assert epsilon_at(1, cfg) == pytest.approx(cfg.eps_end)


def test_parse_args_overrides_the_preset():
    cfg = parse_args(["--total-steps", "10", "--double", "true"])
    assert cfg.total_steps == 10 and isinstance(cfg.total_steps, int)
    assert cfg.double is True
    assert dataclasses.replace(cfg, total_steps=PRESETS["quick"].total_steps, double=False) == PRESETS["quick"]
    cfg = parse_args(["--preset", "breakout", "--lr", "3e-4", "--device", "cpu", "--double", "0"])
    assert cfg.lr == pytest.approx(3e-4) and cfg.device == "cpu" and cfg.double is False
    assert cfg.total_steps == Config().total_steps
    assert parse_args([]) == PRESETS["quick"]


def test_parse_command_takes_dry_run_and_cuda_graph():
    from dqn_course.train import parse_command

    cfg, preset, dry = parse_command(["--preset", "breakout-fast", "--cuda-graph", "false", "--dry-run"])
    assert (preset, dry, cfg.cuda_graph) == ("breakout-fast", True, False)
    assert cfg == dataclasses.replace(PRESETS["breakout-fast"], cuda_graph=False)
    assert parse_command([]) == (PRESETS["quick"], "quick", False) and PRESETS["quick"].cuda_graph


@pytest.mark.parametrize("cuda_graph, graph, compile_update", [(True, None, False), (False, False, True)])
def test_build_hands_cuda_graph_and_compile_to_the_device_learner(cuda_graph, graph, compile_update, monkeypatch):
    """``--cuda-graph false`` reaches the learner as graph=False; true leaves the choice to it (a graph on CUDA).
    ``--compile-update`` reaches it as compile."""
    from dqn_course import train as train_module

    seen = {}
    monkeypatch.setattr(train_module, "DeviceLearner",
                        lambda *args, graph=None, compile=False: seen.update(graph=graph, compile=compile))
    cfg = dataclasses.replace(PRESETS["quick"], buffer_size=200, num_envs=2, replay_on_device=True,
                              cuda_graph=cuda_graph, compile_update=compile_update, prefault=False)
    envs, *_ = train_module.build(cfg, torch.device("cpu"))
    envs.close()
    assert seen == {"graph": graph, "compile": compile_update}


@pytest.mark.parametrize("argv, message", [
    (["--double", "maybe"], "expected true/false"),
    (["--total-steps", "ten"], "invalid int value"),
    (["--lr", "fast"], "invalid float value"),
    (["--preset", "nope"], "invalid choice"),
    (["--no-such-option", "1"], "unrecognized arguments"),
])
def test_parse_args_rejects_bad_values(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        parse_args(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_crossed_counts_multiples_passed_by_vector_steps():
    from dqn_course.train import crossed  # a removed helper fails here (it used to skip)

    assert crossed(999, 1000, 1000) and not crossed(1000, 1001, 1000)
    assert crossed(996, 1004, 1000)  # 8 envs step over the multiple: it still counts, once
    assert not crossed(1000, 1008, 1000) and not crossed(0, 999, 1000)
    assert [s for s in range(8, 3001, 8) if crossed(s - 8, s, 1000)] == [1000, 2000, 3000]


def test_a_stop_between_evaluations_keeps_the_last_measured_policy(tmp_path, monkeypatch):
    """checkpoint.pt is always an evaluated policy: a stop at step 401 saves the training state there, but the
    policy file stays the one evaluated at step 300."""
    from dqn_course.checkpoint import list_checkpoints
    from dqn_course.train import train
    from dqn_course.watchdog import MemoryWatchdog

    calls = iter(range(10**9))
    monkeypatch.setattr(MemoryWatchdog, "check", lambda self: "stopped for the test" if next(calls) == 400 else None)
    cfg = dataclasses.replace(PRESETS["quick"], total_steps=700, learning_starts=200, eval_every=300,
                              eval_episodes=1, checkpoint_every=10**9, out_dir=str(tmp_path), progress=False,
                              prefault=False)
    summary = train(cfg)
    assert summary["stopped"] == "stopped for the test" and summary["steps"] == 401
    saved = torch.load(tmp_path / "checkpoint.pt", map_location="cpu", weights_only=True)
    assert saved["step"] == 300 and saved["evaluation"]["games"] == 1
    assert [p.name for p in list_checkpoints(tmp_path)] == ["state-0000000401.ckpt"]


# -- behaviour kept: the quick preset's run, step by step, as recorded ------------------------------------------------

@pytest.mark.slow
def test_the_quick_run_makes_the_same_decisions_as_recorded(quick_run):
    """Refactors must not change behaviour: the same seed gives the same games, losses and evaluations as the
    recording in tests/data (``python tests/quick_run_record.py``). The run is in float64 (``--float64 true``):
    in float32 another CPU's kernels change its decisions (tests/quick_run_record.py says why); discrete columns are
    compared exactly, losses and statistics within ``RTOL`` (the spread measured across kernels, with a margin).
    Skipped on another torch version, whose initialisation or kernels may differ by more than rounding."""
    out, proc = quick_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    golden, now = json.loads(GOLDEN.read_text(encoding="utf-8")), run_record(out)
    if golden["torch"] != now["torch"]:
        pytest.skip(f"recorded with torch {golden['torch']}; this is torch {now['torch']}")
    found = differences(golden, now)
    assert not found, (f"the quick run decided otherwise than recorded on {golden['cpu']} (this: {now['cpu']}):\n"
                       + "\n".join(found[:20]))


@pytest.mark.parametrize("plant, sign", [("lr", "loss"), ("target-never-synced", "q_max"),
                                         ("epsilon-off-by-one", "epsilon")])
def test_the_guard_catches_each_planted_change(plant, sign):
    """Runs with a planted change (another learning rate, a target network never synced, ε one step late), recorded
    by ``python tests/quick_run_record.py --plant NAME``, differ from the guard's recording where the change shows."""
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    planted = json.loads((GOLDEN.parent / f"planted-{plant}.json").read_text(encoding="utf-8"))
    assert planted["torch"] == golden["torch"]
    found = differences(golden, planted)
    assert any(f": {sign} " in line for line in found), found


def test_the_comparison_takes_the_spread_across_kernels_and_nothing_more():
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    row = next(i for i, r in enumerate(golden["log"]) if r["loss"])
    now = copy.deepcopy(golden)
    assert differences(golden, now) == []
    loss = float(golden["log"][row]["loss"])
    now["log"][row]["loss"] = f"{loss * (1 + RTOL / 2):g}"  # within the spread measured across kernels
    assert differences(golden, now) == []
    now["log"][row]["loss"] = f"{loss * (1 + 2 * RTOL):g}"
    found = differences(golden, now)
    assert len(found) == 1 and f": loss {now['log'][row]['loss']!r}, recorded " in found[0], found
    now = copy.deepcopy(golden)
    now["log"][-1]["episode_length"] = str(int(now["log"][-1]["episode_length"]) + 1)
    assert len(differences(golden, now)) == 1
    now["log"].pop()
    assert differences(golden, now)[0] == f"log.csv: {len(golden['log']) - 1} rows, recorded {len(golden['log'])}"
