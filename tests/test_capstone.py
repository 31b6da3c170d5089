"""Notebook 07c's capstone: the pieces (``lab.capstone.Run``), the worked loop (an interrupted run carries on from its
save), the gate (``checks.check_capstone``; planted bad runs show each likely cause) and the failure gallery."""
from __future__ import annotations

import copy
import csv
import dataclasses
import inspect

import numpy as np
import pytest
import torch

from dqn_course.agent import td_targets
from dqn_course.checkpoint import CheckpointError, list_checkpoints
from dqn_course.lab import capstone, capstone_gallery, checks, diagnostics
from dqn_course.lab.capstone import GATE_SCORE, Run, diagnose, gate_verdict, settings, to_tensors
from dqn_course.lab import capstone_solution
from dqn_course.lab.capstone_solution import dqn_loop
from dqn_course.networks import NatureCNN
from dqn_course.replay import FrameSharingMemory
from dqn_course.records import LOG_FIELDS, save_checkpoint
from dqn_course.train import PRESETS


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def quick():
    return settings(quick=True, seed=3)


def parts(cfg):
    q = NatureCNN(4)
    return q, copy.deepcopy(q), torch.optim.Adam(q.parameters(), lr=cfg.lr), FrameSharingMemory(
        cfg.buffer_size, seed=cfg.seed), np.random.default_rng(cfg.seed)


# -- settings and pieces ----------------------------------------------------------------------------------------

def test_settings_are_the_breakout_cpu_learning_problem_and_quick_only_shrinks_sizes():
    full, small = settings(quick=False), settings(quick=True)
    preset = PRESETS["breakout-cpu"]
    for name in ("lr", "gamma", "batch_size", "train_every", "max_grad_norm", "double", "eps_start", "eps_end"):
        assert getattr(full, name) == getattr(small, name) == getattr(preset, name)
    assert (full.total_steps, full.buffer_size, full.learning_starts) == (500_000, 100_000, 20_000)
    assert small.total_steps < 1_000
    with pytest.raises(Exception, match="lr"):
        settings(quick=True, lr=-1.0)


def test_to_tensors_gives_the_dtypes_the_rule_takes():
    memory = FrameSharingMemory(100, seed=0)
    rng = np.random.default_rng(0)
    state = rng.integers(0, 255, (4, 84, 84), dtype=np.uint8)
    for t in range(40):
        nxt = np.concatenate([state[1:], rng.integers(0, 255, (1, 84, 84), dtype=np.uint8)])
        memory.add(state, t % 4, 1.0, nxt, done=t % 13 == 12)
        state = nxt
    b = to_tensors(memory.sample(8), "cpu")
    assert b.states.dtype == torch.uint8 and b.states.shape == (8, 4, 84, 84)
    assert b.actions.dtype == torch.int64 and b.rewards.dtype == b.dones.dtype == torch.float32
    with pytest.raises(TypeError, match="Batch"):
        to_tensors({"states": 1}, "cpu")


def test_run_refuses_bad_input_and_use_before_resume(tmp_path, quick):
    with pytest.raises(TypeError, match="Config"):
        Run(tmp_path, {"lr": 1})
    with pytest.raises(ValueError, match="save_minutes"):
        Run(tmp_path, quick, save_minutes=-1)
    run = Run(tmp_path / "r", quick)
    q, target, optimizer, memory, rng = parts(quick)
    with pytest.raises(RuntimeError, match="resume"):
        run.updated(torch.tensor(1.0), torch.zeros(2, 4), torch.tensor(1.0))
    with pytest.raises(TypeError, match="optimizer"):
        run.resume(q, target, "adam", memory, rng)
    with pytest.raises(TypeError, match="rng"):
        run.resume(q, target, optimizer, memory, np.random.RandomState(0))
    assert run.resume(q, target, optimizer, memory, rng) == 0
    with pytest.raises(ValueError, match="q_values"):
        run.updated(torch.tensor(1.0), torch.zeros(4), torch.tensor(1.0))
    with pytest.raises(TypeError, match="loss"):
        run.updated(1.0, torch.zeros(2, 4), torch.tensor(1.0))
    for bad in (dict(step=-1), dict(length=0), dict(epsilon=1.5), dict(score=float("nan"))):
        args = dict(step=10, score=1.0, length=5, epsilon=0.5, replay_size=10) | bad
        with pytest.raises(ValueError, match=next(iter(bad))):
            run.game_over(**args)
    run.close()
    assert rows(tmp_path / "r" / "log.csv") == []  # nothing refused was logged


def test_a_logged_game_has_the_training_logs_columns_and_the_updates_means(tmp_path, quick):
    run = Run(tmp_path, quick)
    run.resume(*parts(quick))
    run.game_over(50, 3.0, 50, 0.9, 50)  # before any update: blank diagnostics
    run.updated(torch.tensor(2.0), torch.tensor([[1.0, 3.0], [0.0, 1.0]]), torch.tensor(4.0))
    run.updated(torch.tensor(4.0), torch.tensor([[1.0, 5.0], [0.0, 3.0]]), torch.tensor(6.0))
    run.game_over(120, 7.0, 70, 0.8, 120)
    run.close()
    first, second = rows(tmp_path / "log.csv")
    assert list(first) == LOG_FIELDS
    assert first["loss"] == "" and first["episode_length"] == "50"
    assert (float(second["loss"]), float(second["q_max"]), float(second["grad_norm"])) == (3.0, 3.0, 5.0)
    assert (second["step"], second["episode_return"], second["replay_size"]) == ("120", "7.0", "120")


def test_resume_refuses_a_folder_saved_with_other_fixed_settings(tmp_path, quick):
    run = Run(tmp_path, quick)
    q, target, optimizer, memory, rng = parts(quick)
    run.resume(q, target, optimizer, memory, rng)
    run.save(10, q, target, optimizer, memory, rng)
    run.close()
    other = dataclasses.replace(quick, buffer_size=quick.buffer_size * 2)
    with pytest.raises(CheckpointError, match="buffer_size"):
        Run(tmp_path, other).resume(*parts(other))


# -- the worked loop: runs, and carries on after an interruption ------------------------------------------------

def test_the_worked_loop_interrupted_carries_on_from_its_save_and_reaches_the_last_step(tmp_path, quick):
    folder = tmp_path / "run"

    def interrupted_at(n):
        def schedule(step, start, end, decay_steps):
            if step == n:
                raise KeyboardInterrupt  # the notebook's stop button, a kernel interrupt
            return start + (end - start) * min(1.0, step / decay_steps)
        return schedule

    with pytest.raises(KeyboardInterrupt):
        dqn_loop(quick, folder, epsilon_schedule=interrupted_at(350))
    saved = list_checkpoints(folder)
    assert [p.name for p in saved] == ["state-0000000349.ckpt"]  # the interrupt saved the last finished step
    before = rows(folder / "log.csv")
    assert dqn_loop(quick, folder) == quick.total_steps
    log, evals = rows(folder / "log.csv"), rows(folder / "eval.csv")
    assert log[:len(before)] == before  # the first session's games kept
    steps = [int(r["step"]) for r in log]
    assert steps == sorted(steps) and steps[-1] <= quick.total_steps
    assert [int(r["step"]) for r in evals] == [300, 600]
    assert any(r["loss"] for r in log[len(before):]) or not log[len(before):]
    from dqn_course.evaluate import load_policy

    _, info = load_policy(folder)
    assert info["step"] == quick.total_steps


def test_a_finished_run_called_again_does_nothing_more(tmp_path, quick):
    folder = tmp_path / "run"
    dqn_loop(quick, folder)
    log = rows(folder / "log.csv")
    assert dqn_loop(quick, folder) == quick.total_steps
    assert rows(folder / "log.csv") == log


# -- the gate ---------------------------------------------------------------------------------------------------

def planted_run(folder, *, config_changes=(), step=None, log_rows=()):
    """A run folder with an (untrained) policy saved at ``step`` with the breakout-cpu settings plus changes, and a
    log.csv of ``log_rows`` (dicts of LOG_FIELDS)."""
    cfg = dataclasses.replace(settings(quick=False), **dict(config_changes))
    folder.mkdir(parents=True, exist_ok=True)
    from dqn_course.agent import DQNAgent

    save_checkpoint(folder / "checkpoint.pt", DQNAgent(4, "cpu", seed=0), cfg,
                    cfg.total_steps if step is None else step)
    with open(folder / "log.csv", "w", newline="") as f:
        w = csv.DictWriter(f, LOG_FIELDS)
        w.writeheader()
        w.writerows({k: r.get(k, "") for k in LOG_FIELDS} for r in log_rows)
    return folder


def healthy_rows(n=50, total=500_000, q=lambda i: 0.5 + i / 100, eps=None, loss=0.01):
    out = []
    for i in range(n):
        step = (i + 1) * total // n
        e = max(0.01, 1 - step / 100_000) if eps is None else eps
        out.append({"step": step, "episode_return": 2.0, "episode_length": 200, "loss": loss if step >= 20_000 else "",
                    "q_max": q(i) if step >= 20_000 else "", "grad_norm": 0.1 if step >= 20_000 else "",
                    "epsilon": e, "replay_size": min(step, 100_000), "rss_mb": 800, "steps_per_s": 140})
    return out


def result_for(folder, mean, games=30, random=1.5):
    return {"file": str(folder / "checkpoint.pt"), "step": 500_000, "ratio": mean / random,
            "policy": {"mean": mean, "std": 3.0, "games": games}, "random": {"mean": random, "std": 1.0},
            "protocol": {"epsilon": 0.05}}


def test_the_gate_passes_at_the_threshold_and_says_score_random_and_ratio(tmp_path):
    run = planted_run(tmp_path / "good", log_rows=healthy_rows())
    passed, message = gate_verdict(run, result_for(run, GATE_SCORE))
    assert passed and "15.0 ± 3.0 over 30 fresh games" in message and "random play 1.50" in message
    assert "10.0x random" in message
    passed, message = gate_verdict(run, result_for(run, GATE_SCORE - 0.1))
    assert not passed and "below the gate's 15" in message
    assert "none of the usual causes" in message  # a healthy log, just not enough score


@pytest.mark.parametrize("name, plant, expected", [
    ("wrong-preset", dict(config_changes={"lr": 1e-3}), "the wrong preset"),
    ("too-early", dict(step=120_000), "stopped too early: its policy is from step 120,000 of 500,000"),
    ("eps-stuck", dict(log_rows=healthy_rows(eps=1.0)), "ε never decayed"),
    ("diverging", dict(log_rows=healthy_rows(q=lambda i: 10.0 ** (i / 10))), "max-Q diverging"),
    ("loss-zero", dict(log_rows=healthy_rows(loss=0.0)), "the loss is flat at zero"),
    ("no-updates", dict(log_rows=[{**r, "loss": "", "q_max": "", "grad_norm": ""} for r in healthy_rows()]),
     "no gradient update was logged"),
    ("no-games", dict(log_rows=[]), "log.csv holds no finished game"),
])
def test_each_planted_failure_is_named_in_the_gates_message(tmp_path, name, plant, expected):
    plant = {"log_rows": healthy_rows(), **plant}
    run = planted_run(tmp_path / name, **plant)
    passed, message = gate_verdict(run, result_for(run, 2.0))
    assert not passed
    assert expected in message
    others = {"the wrong preset", "stopped too early", "ε never decayed", "max-Q diverging", "flat at zero"}
    assert not any(o in message for o in others if o not in expected)  # only the planted cause


def test_the_gates_verdict_names_the_loop_it_is_given(tmp_path):
    run = planted_run(tmp_path / "good", log_rows=healthy_rows())
    assert gate_verdict(run, result_for(run, 20.0))[1].startswith("your DQN learned Breakout: 20.0")
    passed, message = gate_verdict(run, result_for(run, 20.0), who="the worked loop")
    assert passed and message.startswith("the worked loop learned Breakout: 20.0") and "your" not in message


def test_recorded_sessions_reads_each_session_and_the_machine_from_a_readme(tmp_path):
    (tmp_path / "README.md").write_text(
        "```bash\n# session 2, after stopping session 1: the same command\n```\n"
        "- **Machine:** 2 cores (AMD EPYC, no GPU), 25.8 GB RAM; Python 3.11.7; 2026-11-26. Not alone, so ...\n"
        "  - session 1, 14:25:55-15:32:05 UTC, one torch thread, beside ...;\n"
        "  - session 2, 23:59:00-00:01:30 UTC, two torch threads, resumed ...\n")
    wall = capstone.recorded_sessions(tmp_path)
    assert wall.sessions == [66 * 60 + 10, 150] and wall.total == 66 * 60 + 160  # the second passes midnight
    assert wall.machine == "2 cores (AMD EPYC, no GPU), 25.8 GB RAM" and wall.date == "2026-11-26"
    assert not wall.alone
    readme = (tmp_path / "README.md").read_text()
    (tmp_path / "README.md").write_text(readme.replace(". Not alone, so ...", "."))
    assert capstone.recorded_sessions(tmp_path).alone
    (tmp_path / "README.md").write_text(readme.replace("23:59:00-00:01:30 UTC", "23:59:00 UTC on"))
    with pytest.raises(ValueError, match="each session's start and end"):  # a session without its end
        capstone.recorded_sessions(tmp_path)
    (tmp_path / "README.md").write_text(readme.replace("**Machine:**", "Machine:"))
    with pytest.raises(ValueError, match="machine line"):
        capstone.recorded_sessions(tmp_path)


def test_the_recorded_long_run_gives_its_wall_time():
    from dqn_course.lab.playback import DATA_DIR

    wall = capstone.recorded_sessions(DATA_DIR / "capstone-seed1")
    stdout = (DATA_DIR / "capstone-seed1" / "stdout.txt").read_text()  # the last session's own count
    assert f"after {wall.sessions[-1]:,} s" in stdout and len(wall.sessions) == 2 and not wall.alone


def test_too_few_games_do_not_pass_the_gate(tmp_path):
    run = planted_run(tmp_path / "few", log_rows=healthy_rows())
    passed, message = gate_verdict(run, result_for(run, 40.0, games=5))
    assert not passed and "only 5 games were played" in message


def test_check_capstone_waits_for_a_run_then_plays_fresh_games_and_fails_an_untrained_policy(tmp_path, capsys):
    assert checks.check_capstone(None) is None
    assert checks.check_capstone(tmp_path / "not-yet") is None
    assert "no run of yours yet" in capsys.readouterr().out
    (tmp_path / "started").mkdir()
    assert checks.check_capstone(tmp_path / "started") is None
    assert "holds no policy yet" in capsys.readouterr().out
    run = planted_run(learners_run(tmp_path / "untrained"), config_changes={"eval_max_steps": 60},
                      log_rows=healthy_rows())
    with pytest.raises(AssertionError, match="not yet: .* over 2 fresh games") as e:
        checks.check_capstone(run, games=2)
    assert "only 2 games were played" in str(e.value)
    learners_run(tmp_path / "broken")
    (tmp_path / "broken" / "checkpoint.pt").write_bytes(b"not a torch file")
    with pytest.raises(AssertionError, match="damaged"):
        checks.check_capstone(tmp_path / "broken")


def learners_run(folder):
    """``folder`` first written through ``capstone.Run`` by a function of this test module (not the course's code),
    as a learner's loop writes it: its writer record, fresh logs."""
    cfg = settings(quick=True)
    run = Run(folder, cfg)
    run.resume(*parts(cfg))
    run.close()
    return folder


def test_run_records_the_loop_that_first_wrote_its_folder(tmp_path):
    folder = learners_run(tmp_path / "mine")
    writer = capstone.read_writer(folder)
    assert writer["module"] == __name__ and writer["qualname"] == "learners_run" and writer["file"] == __file__
    assert not capstone.written_by_the_course(writer)
    cfg = settings(quick=True)
    Run(folder, cfg).resume(*parts(cfg))  # a later session, from another function: the first writer stays
    assert capstone.read_writer(folder) == writer
    assert capstone.read_writer(tmp_path / "nothing") is None
    for forged in ({"module": "dqn_course.lab.capstone_solution", "qualname": "dqn_loop", "file": "<x>"},
                   {"module": "__main__", "qualname": "dqn_loop", "file": capstone_solution.__file__}):
        assert capstone.written_by_the_course(forged)
    assert not capstone.written_by_the_course({"module": "__main__", "qualname": "my_dqn",
                                               "file": "/tmp/ipykernel_1/2.py"})


def no_games_for(monkeypatch):
    from dqn_course import evaluate

    def no_games(*args, **kwargs):
        raise AssertionError("the gate played games for a policy it should have refused")

    monkeypatch.setattr(evaluate, "policy_vs_random", no_games)


TINY_RUN = dict(total_steps=64, learning_starts=32, target_sync_every=32, eval_every=64, eval_max_steps=30)


def test_check_capstone_judges_a_run_a_learners_loop_wrote(tmp_path, monkeypatch, capsys):
    """A learner-style loop (the worked loop's statements, defined outside the course's modules, as a notebook
    defines it) writes a folder the gate plays; its games are not played here (``policy_vs_random`` is replaced)."""
    from dqn_course import evaluate

    folder = tmp_path / "my-dqn"
    loop = learners_loop()
    loop(settings(quick=True, **TINY_RUN), folder, td_targets, capstone_solution.library_td_loss,
         capstone_solution.linear_epsilon)
    assert capstone.read_writer(folder)["module"] == "__main__"
    played = []

    def games(file, games):
        played.append(file)
        return result_for(folder, GATE_SCORE)

    monkeypatch.setattr(evaluate, "policy_vs_random", games)
    assert checks.check_capstone(folder) is True and played == [folder / "checkpoint.pt"]
    assert "your DQN learned Breakout" in capsys.readouterr().out


@pytest.mark.filterwarnings("ignore:.*found in sys.modules:RuntimeWarning")  # runpy: the module is imported already
def test_check_capstone_refuses_runs_the_courses_loop_or_trainer_wrote(tmp_path, monkeypatch):
    """Before a game is played: a folder the worked loop wrote (called, or run as ``python -m``), a folder
    ``train()`` wrote (no writer record), and a writer record forged to name the course's loop."""
    import json
    import runpy
    import sys

    from dqn_course.train import train

    cfg = settings(quick=True, **TINY_RUN)
    called = tmp_path / "called"
    dqn_loop(cfg, called)
    as_command = tmp_path / "as-command"
    for key, value in TINY_RUN.items():  # the command's --quick settings, shrunk further
        monkeypatch.setitem(capstone.QUICK_SIZES, key, value)
    monkeypatch.setattr(sys, "argv", ["capstone_solution", str(as_command), "--quick", "--seed", "7"])
    runpy.run_module("dqn_course.lab.capstone_solution", run_name="__main__")
    trained = tmp_path / "trained"
    train(dataclasses.replace(cfg, out_dir=str(trained)))
    forged = learners_run(tmp_path / "forged")
    planted_run(forged, log_rows=healthy_rows())
    (forged / capstone.WRITER_FILE).write_text(json.dumps(
        {"module": "dqn_course.lab.capstone_solution", "qualname": "dqn_loop", "file": "<a cell>"}))
    damaged = planted_run(learners_run(tmp_path / "damaged"), log_rows=healthy_rows())
    (damaged / capstone.WRITER_FILE).write_text("{not json")
    no_games_for(monkeypatch)
    for folder, expected in [
            (called, "written by dqn_course.lab.capstone_solution.dqn_loop .*the course's own code, not your loop"),
            (as_command, "written by __main__.dqn_loop .*capstone_solution.py.*the course's own code"),
            (trained, "holds no writer.json.*not written through capstone.Run .*dqn_course.train"),
            (forged, "written by dqn_course.lab.capstone_solution.dqn_loop .*the course's own code"),
            (damaged, "writer.json is damaged")]:
        assert (folder / "checkpoint.pt").is_file()
        with pytest.raises(AssertionError, match=expected):
            checks.check_capstone(folder)


def test_check_capstone_refuses_the_courses_recorded_policies_wherever_they_lie(tmp_path, monkeypatch):
    """A run under data/ (the worked loop's, train()'s), its policy file, or a copy of one in a folder of the
    learner's is refused before a game is played; the refusal names the recorded run."""
    from dqn_course import evaluate
    from dqn_course.lab.playback import DATA_DIR

    def no_games(*args, **kwargs):
        raise AssertionError("the gate played games for a policy it should have refused")

    monkeypatch.setattr(evaluate, "policy_vs_random", no_games)
    for name in ("capstone-seed1", "breakout-cpu-seed2"):
        recorded = DATA_DIR / name
        copied = tmp_path / f"my-{name}"
        copied.mkdir()
        copied.joinpath("checkpoint.pt").write_bytes(recorded.joinpath("checkpoint.pt").read_bytes())
        for run in (recorded, recorded / "checkpoint.pt", copied):
            with pytest.raises(AssertionError, match=f"policy of data/{name}, a run the course recorded"):
                checks.check_capstone(run)


def test_diagnose_reads_the_saved_settings_and_the_log(tmp_path):
    run = planted_run(tmp_path / "d", log_rows=healthy_rows(eps=1.0))
    causes = diagnose(run, dataclasses.asdict(settings(quick=False)), 500_000)
    assert len(causes) == 1 and causes[0].startswith("ε never decayed")


# -- the gallery ------------------------------------------------------------------------------------------------

def test_each_gallery_mistake_differs_from_the_working_rule_in_its_own_way():
    torch.manual_seed(0)
    online, target = NatureCNN(4), NatureCNN(4)
    next_states = torch.randint(0, 255, (6, 4, 84, 84), dtype=torch.uint8)
    rewards, dones = torch.ones(6), torch.tensor([1.0, 0, 0, 1.0, 0, 0])
    right = td_targets(rewards, dones, next_states, online, target, 0.99)
    no_mask = capstone_gallery.targets_without_done_mask(rewards, dones, next_states, online, target, 0.99)
    assert torch.equal(no_mask[dones == 0], right[dones == 0]) and not torch.equal(no_mask, right)
    from_online = capstone_gallery.targets_from_the_online_network(rewards, dones, next_states, online, target, 0.99)
    assert torch.equal(from_online, td_targets(rewards, dones, next_states, online, online, 0.99))
    assert capstone_gallery.epsilon_that_never_decays(10**6, 1.0, 0.01, 1000) == 1.0
    assert capstone_gallery.MISTAKES["lr-100x"].changes == {"lr": 1e-2}


def test_recording_a_mistake_runs_the_worked_loop_with_it(tmp_path):
    folder = tmp_path / "eps"
    assert capstone_gallery.record("eps-never-decays", folder, steps=300, quick=True) == 300
    assert {float(r["epsilon"]) for r in rows(folder / "log.csv")} == {1.0}
    with pytest.raises(ValueError, match="no mistake called"):
        capstone_gallery.record("typo", folder, steps=300, quick=True)


def test_the_gate_constants_are_what_the_notebook_says():
    assert (capstone.GATE_SCORE, capstone.GATE_GAMES, capstone.PRESET) == (15.0, 30, "breakout-cpu")


# -- the loop's check: a learner's loop passes, the course's is refused, each planted gap is named ----------------

def learners_loop(*edits: tuple[str, str]):
    """The worked loop's text defined in this test module, as a learner's cell defines a loop typed into it (with
    the pieces of the notebook's section 2 at hand), each ``(old, new)`` of ``edits`` applied to the text first: a
    learner's right loop, or one with a planted mistake."""
    source = inspect.getsource(dqn_loop)
    for old, new in edits:
        assert old in source, old
        source = source.replace(old, new)
    namespace = {**vars(capstone_solution), "__name__": "__main__"}  # its imports, in a learner's namespace
    exec(compile(source, "<a learner's cell>", "exec"), namespace)
    loop = namespace["dqn_loop"]
    loop.__defaults__ = (None,)  # the notebook's signature: the pieces come as arguments, only minutes has a default
    return loop


def test_a_learners_loop_passes_the_loop_check(capsys):
    assert checks.check_capstone_loop(learners_loop()) is True
    assert "survived an interruption at step 450" in capsys.readouterr().out
    assert checks.check_capstone_loop(None) is None


def _calls_the_worked_loop(cfg, folder, td_targets, td_loss, epsilon_schedule, minutes=None):
    return dqn_loop(cfg, folder, td_targets, td_loss, epsilon_schedule, minutes)


def _imports_the_worked_loop(cfg, folder, td_targets, td_loss, epsilon_schedule, minutes=None):
    from dqn_course.lab.capstone_solution import dqn_loop

    return dqn_loop(cfg, folder, td_targets, td_loss, epsilon_schedule, minutes)


def _trains_with_the_library(cfg, folder, td_targets, td_loss, epsilon_schedule, minutes=None):
    from dqn_course.train import train

    return train(cfg)["steps"]


@pytest.mark.parametrize("name", ["dqn_loop", "calls dqn_loop", "imports dqn_loop", "train.train",
                                  "calls train", "learner_loop", "make_breakout", "NatureCNN", "FrameSharingMemory",
                                  "to_tensors", "Run", "pick_device", "settings", "plot_beside_working", "read_log"])
def test_the_courses_loop_and_the_pages_imports_are_refused(name):
    from dqn_course.device import pick_device
    from dqn_course.envs import make_breakout
    from dqn_course.lab import playback
    from dqn_course.train import train

    answers = {"dqn_loop": dqn_loop, "calls dqn_loop": _calls_the_worked_loop,
               "imports dqn_loop": _imports_the_worked_loop, "train.train": train,
               "calls train": _trains_with_the_library, "learner_loop": diagnostics.learner_loop,
               "make_breakout": make_breakout, "NatureCNN": NatureCNN, "FrameSharingMemory": FrameSharingMemory,
               "to_tensors": to_tensors, "Run": Run, "pick_device": pick_device, "settings": settings,
               "plot_beside_working": capstone_gallery.plot_beside_working, "read_log": playback.read_log}
    with pytest.raises(AssertionError, match="write it yourself: a def of the loop.*section 4"):
        checks.check_capstone_loop(answers[name])


def test_the_pieces_a_loop_may_build_with_are_those_of_section_2():
    names = ("make_breakout", "NatureCNN", "FrameSharingMemory", "to_tensors", "Run", "pick_device")
    assert checks.ch07c.capstone_pieces() == tuple(getattr(capstone_solution, name) for name in names)


def test_a_loop_that_loses_its_work_on_a_stop_is_told_to_save_however_it_ends():
    loses_work = learners_loop(("        run.save(step, q, target, optimizer, memory, rng)\n        run.close()",
                                "        run.close()"))
    with pytest.raises(AssertionError, match="left no saved state.*however the loop ends.*section 4, step 6"):
        checks.check_capstone_loop(loses_work)


def test_a_loop_that_discounts_by_another_gamma_is_told_to_use_the_settings():
    other_gamma = learners_loop(("q, target, cfg.gamma,", "q, target, 0.9,"))
    with pytest.raises(AssertionError, match="discount γ = 0.9, not the settings' cfg.gamma.*section 4, step 4"):
        checks.check_capstone_loop(other_gamma)


def test_a_loop_that_builds_adam_with_another_lr_is_told_to_use_the_settings():
    other_lr = learners_loop(("lr=cfg.lr", "lr=1e-3"))
    with pytest.raises(AssertionError, match=r"learning rate is \[0.001\], not the settings' cfg.lr.*step 1\)"):
        checks.check_capstone_loop(other_lr)


def test_a_loop_that_starts_over_after_a_stop_is_told_to_carry_on():
    starts_over = learners_loop(("step = run.resume(q, target, optimizer, memory, rng)",
                                 "run.resume(q, target, optimizer, memory, rng)\n    step = 0"))
    with pytest.raises(AssertionError, match="started over instead of carrying on"):
        checks.check_capstone_loop(starts_over)


@pytest.mark.parametrize("gap, expected", [("run.game_over(t, score, length, epsilon, len(memory))",
                                            "holds no finished game"),
                                           ("run.evaluate(t, q)", "evaluations at steps \\[\\]"),
                                           ("run.updated(loss, q_values, norm)", "no gradient update reached the log")])
def test_each_missing_piece_of_the_loop_is_named(gap, expected):
    with pytest.raises(AssertionError, match=expected):
        checks.check_capstone_loop(learners_loop((gap, "pass")))


def test_a_loop_that_ignores_the_schedule_is_told_to_ask_it():
    fixed_eps = learners_loop(("epsilon = epsilon_schedule(t, cfg.eps_start, cfg.eps_end, decay_steps)",
                               "epsilon = 0.5"))
    with pytest.raises(AssertionError, match="ask your schedule for ε at every step before acting"):
        checks.check_capstone_loop(fixed_eps)  # caught first by the watched game: the schedule is never asked


@pytest.mark.parametrize("plant, expected", [
    (("                optimizer.step()\n", ""), "optimizer's state counts no step.*101 updates.*section 4, step 4"),
    (("target.load_state_dict(q.state_dict())", "pass"), "target network did not change.*section 4, step 5"),
    (("if t % cfg.target_sync_every == 0:", "if True:"), "target network equals the online one.*section 4, step 5"),
    (('done=terminated or info["life_lost"]', "done=terminated"), "lost life ends the episode.*section 4, step 3"),
    (('done=terminated or info["life_lost"]', "done=info[\"life_lost\"]"),
     "the game ended \\(terminated\\) and your memory does not mark it done.*section 4, step 3"),
    (('done=terminated or info["life_lost"]', 'done=terminated or truncated or info["life_lost"]'),
     "the clock cut the game \\(truncated.*and your memory marks it done.*still bootstraps.*section 4, step 3"),
    (("np.sign(reward)", "reward"), "the reward was [47] .*your memory holds [47]: .*its sign.*section 4, step 3"),
    (("np.sign(reward)", "np.sign(reward) * 2"), "your memory holds 2: .*its sign.*section 4, step 3"),
    (("if t >= cfg.learning_starts and t % cfg.train_every == 0:",
      "if len(memory) >= cfg.batch_size and t % cfg.train_every == 0:"),
     "by step 449 your loop made 1\\d\\d update\\(s\\).*learning_starts \\(200\\).*makes 63.*section 4, step 4"),
    (("if t >= cfg.learning_starts and t % cfg.train_every == 0:", "if t >= cfg.learning_starts:"),
     "by step 449 your loop made 250 update\\(s\\).*train_every \\(4\\).*makes 63.*section 4, step 4"),
], ids=["never steps the optimizer", "never syncs", "syncs every step", "done without a lost life",
        "a game's end not done", "a cut by the clock done", "unclipped rewards", "rewards not in -1, 0, 1",
        "learns before learning_starts", "learns at every step"])
def test_a_loop_that_skips_what_learning_needs_is_told_which_step(plant, expected):
    """Read from the saved states: the optimizer's steps (at the stop and at the end), the target network at the stop
    and at the end, the memory's rewards and dones beside what the check's watched game played (it pays 4 and 7,
    which the short random play of a real game rarely reaches, and cuts games by the clock and ends them)."""
    with pytest.raises(AssertionError, match=expected):
        checks.check_capstone_loop(learners_loop(plant))


def test_a_crashing_loop_is_reported_with_its_line():
    def crashes(cfg, folder, td_targets, td_loss, epsilon_schedule, minutes=None):
        return cfg.no_such_setting

    with pytest.raises(AssertionError, match="raised AttributeError at `return cfg.no_such_setting`"):
        checks.check_capstone_loop(crashes)


def test_the_notebooks_solution_passes_every_check():
    from _solutions import run_solutions

    out = run_solutions("07c_your_own_dqn", {"checks": checks})
    assert out.count("✓") == 5, out


def test_the_notebooks_solution_is_the_worked_loop_the_recorded_runs_used():
    """The solution cell's ``my_dqn`` is ``capstone_solution.dqn_loop`` statement for statement (its docstring aside):
    section 8's recorded runs, made by that module, are runs of the page's solution."""
    import ast

    from _solutions import solution_sources

    def body(source, name):
        function = next(node for node in ast.walk(ast.parse(source))
                        if isinstance(node, ast.FunctionDef) and node.name == name)
        statements = function.body[1:] if ast.get_docstring(function) else function.body
        return [ast.dump(statement) for statement in statements]

    solution = "\n".join(solution_sources("07c_your_own_dqn"))
    assert body(solution, "my_dqn") == body(inspect.getsource(capstone_solution), "dqn_loop")


def own_td_loss(q_values, actions, targets):
    """A learner's td_loss, as notebook 06's exercise asks: the Huber loss of Q(s, a) of the taken actions."""
    taken = torch.take_along_dim(q_values, actions.long()[:, None], dim=1)[:, 0]
    error = (taken - targets).abs()  # written from its definition: the check refuses torch's own Huber loss
    return torch.where(error <= 1, 0.5 * error ** 2, error - 0.5).mean()


def test_learner_rule_and_loop_take_the_learners_own_only_once_it_passes(capsys):
    from dqn_course.agent import td_loss

    chosen = diagnostics.learner_rule(None, own_td_loss, None)
    out = capsys.readouterr().out
    assert chosen[1] is own_td_loss and "td_loss           yours" in out and "td_targets        the library's" in out
    chosen = diagnostics.learner_rule(None, td_loss, None)  # the course's own is the library's, not the learner's
    assert chosen[1] is td_loss and "td_loss           the library's: yours fails its check" in capsys.readouterr().out
    assert diagnostics.learner_loop(None) is dqn_loop
    assert "not written yet" in capsys.readouterr().out
    assert diagnostics.learner_loop(lambda *a, **k: 3) is dqn_loop
    assert "fails its check" in capsys.readouterr().out
    assert diagnostics.learner_loop(dqn_loop) is dqn_loop
    assert "yours fails its check (`my_dqn(" in capsys.readouterr().out  # the worked loop itself is refused
    mine = learners_loop()
    assert diagnostics.learner_loop(mine) is mine and "your loop" in capsys.readouterr().out


def test_whose_rule_names_the_library_pieces_a_long_run_borrows(capsys):
    from dqn_course.agent import td_loss, td_targets
    from dqn_course.train import linear_epsilon

    assert "library's td_targets, epsilon_schedule (" in diagnostics.whose_rule((td_targets, own_td_loss,
                                                                                  linear_epsilon))
    assert "your rule and schedule" in diagnostics.whose_rule((own_td_loss, own_td_loss, own_td_loss))
    assert "library's td_loss (" in diagnostics.whose_rule((own_td_loss, td_loss, own_td_loss))


def test_the_gallery_plots_a_labelled_run_beside_the_working_one_without_naming_its_mistake(tmp_path):
    assert capstone_gallery.plot_beside_working("A", data_dir=tmp_path) is None  # nothing recorded there
    assert capstone_gallery.recorded_log("A", data_dir=tmp_path) is None
    for folder in (tmp_path / "capstone-seed1", tmp_path / "capstone-gallery" / "lr-100x"):
        folder.mkdir(parents=True)
        (folder / "log.csv").write_text(",".join(LOG_FIELDS) + "\n" + "\n".join(
            f"{s},1.0,100,0.01,0.5,0.1,0.5,{s},500,100" for s in (30_000, 60_000)) + "\n")
    assert capstone_gallery.recorded_steps(tmp_path / "capstone-gallery" / "lr-100x") == 60_000  # its log
    assert list(capstone_gallery.recorded_log("A", data_dir=tmp_path)["step"]) == [30_000, 60_000]
    (tmp_path / "capstone-gallery" / "lr-100x" / "eval.csv").write_text(
        "step,mean_return,std_return,episodes\n50000,1.0,0.5,10\n")
    assert capstone_gallery.recorded_steps(tmp_path / "capstone-gallery" / "lr-100x") == 50_000  # its last evaluation
    figure = capstone_gallery.plot_beside_working("A", data_dir=tmp_path)
    texts = [figure._suptitle.get_text()] + [t.get_text() for ax in figure.axes for t in
                                             (ax.get_legend().get_texts() if ax.get_legend() else [])]
    assert "run A beside the working run, its first 50,000 agent steps" in texts
    assert not any("lr" in t for t in texts)
    first_panel = figure.axes[0].lines[0]
    assert max(first_panel.get_xdata()) <= 50_000  # the working run cut at the gallery's length
    with pytest.raises(ValueError, match="label"):
        capstone_gallery.plot_beside_working("D", data_dir=tmp_path)
    with pytest.raises(ValueError, match="label"):
        capstone_gallery.recorded_log("D", data_dir=tmp_path)


@pytest.mark.parametrize("plant, expected", [
    (("if rng.random() < epsilon:", "if False:"), "at ε = 1 your loop took the online network's best action.*"
                                                  "uniformly random action.*ε-greedy; section 4, step 2"),
    (("if rng.random() < epsilon:", "if True:"), "at ε = 0 your loop took the online network's best action at only.*"
                                                 "ε-greedy; section 4, step 2"),
    (("batch.next_states, q, target, cfg.gamma", "batch.next_states, q, q, cfg.gamma"),
     "TD target\\(s\\) came from a network with the online network's weights.*target network.*section 4, step 4"),
], ids=["always greedy", "always random", "online network as target"])
def test_a_loop_that_does_not_act_eps_greedily_or_bootstraps_from_the_online_network_is_told(plant, expected):
    """Behaviour, not the log: the check watches the game the loop builds (its actions at ε = 1 and ε = 0 beside the
    online network's best) and the networks the loop hands td_targets. The solution passes both
    (test_a_learners_loop_passes_the_loop_check)."""
    with pytest.raises(AssertionError, match=expected):
        checks.check_capstone_loop(learners_loop(plant))
