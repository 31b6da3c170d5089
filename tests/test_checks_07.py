"""Notebook 07's self-check (right passes, wrong raises with a hint, None only prints) and dqn_course.lab.playback."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from dqn_course.lab import checks, playback
from dqn_course.profiling import measure_in_subprocess
from dqn_course.train import PRESETS

# -- playback helpers ----------------------------------------------------------------------------------


def write_run(run_dir, games=12, evals=2):
    run_dir.mkdir(parents=True)
    with open(run_dir / "log.csv", "w", newline="") as f:
        w = csv.DictWriter(f, ["step", "episode_return", "episode_length", "loss", "epsilon", "rss_mb", "steps_per_s"])
        w.writeheader()
        for i in range(games):
            w.writerow({"step": 100 * (i + 1), "episode_return": i % 3, "episode_length": 100,
                        "loss": "" if i < 3 else 0.1, "epsilon": 1 - i / games, "rss_mb": 500, "steps_per_s": 80})
    with open(run_dir / "eval.csv", "w", newline="") as f:
        w = csv.DictWriter(f, ["step", "mean_return", "std_return", "episodes"])
        w.writeheader()
        for i in range(evals):
            w.writerow({"step": 600 * (i + 1), "mean_return": i, "std_return": 0.5, "episodes": 2})


def test_recorded_random(tmp_path):
    """random.json beside a run is read as is; a run without one gives None."""
    import json

    write_run(tmp_path / "run")
    assert playback.recorded_random(tmp_path / "run") is None
    doc = {"games": 3, "mean": 1.0, "std": 0.8, "returns": [0.0, 1.0, 2.0]}
    (tmp_path / "run" / "random.json").write_text(json.dumps(doc))
    assert playback.recorded_random(tmp_path / "run") == doc


def test_recorded_wall_time_reads_the_line_of_a_run_finished_in_one_session(tmp_path):
    (tmp_path / "stdout.txt").write_text("A.L.E banner\ndone: 500,000 steps in 3037 s (165 steps/s on cpu), 980 "
                                         "games, replay 56 MB; files in x\n")
    assert playback.recorded_wall_time(tmp_path) == (500_000, 3037.0)
    # resumed: the seconds are the last session's, so the run's overall rate cannot be read off it
    (tmp_path / "stdout.txt").write_text("done: 500,000 steps (200,000 this session) in 1200 s (167 steps/s)\n")
    with pytest.raises(ValueError, match="no finished run"):
        playback.recorded_wall_time(tmp_path)
    with pytest.raises(FileNotFoundError):
        playback.recorded_wall_time(tmp_path / "missing")


def test_score_over_random_has_one_source():
    """Notebook 07's "Does it learn?" line and README's table both come from the longest recorded run's
    evaluation.json (its committed policy measured on fresh games): what 07 recorded when it ran equals that file."""
    from dqn_course.lab import figures

    run = playback.find_recorded_run()
    fresh = playback.recorded_evaluation(run)
    assert figures.load("07_train_breakout")["figures"]["eval_run"] == run.name
    recorded = figures.load("07_train_breakout")["figures"]
    assert recorded["score_over_random"] == round(fresh["ratio"], 1)
    assert recorded["eval_mean"] == round(fresh["policy"]["mean"], 1) and recorded["eval_step"] == fresh["step"]


def test_find_recorded_run(tmp_path):
    assert playback.find_recorded_run(tmp_path) is None
    (tmp_path / "breakout").mkdir()
    assert playback.find_recorded_run(tmp_path) is None  # a directory without log.csv is no run
    write_run(tmp_path / "breakout" / "x")
    (tmp_path / "breakout" / "log.csv").write_text("step,episode_return\n")
    assert playback.find_recorded_run(tmp_path) == tmp_path / "breakout"
    write_run(tmp_path / "breakout-fast")
    assert playback.find_recorded_run(tmp_path) == tmp_path / "breakout-fast"
    write_run(tmp_path / "breakout-cpu")
    assert playback.find_recorded_run(tmp_path) == tmp_path / "breakout-fast"  # a GPU-length run comes first
    assert playback.recorded_runs(tmp_path) == [tmp_path / "breakout-fast", tmp_path / "breakout",
                                                tmp_path / "breakout-cpu"]


def test_plot_learning_draws_runs_random_five_times_random_and_the_published_scores(tmp_path):
    write_run(tmp_path / "a")
    write_run(tmp_path / "b", evals=3)
    fig = playback.plot_learning({"a": tmp_path / "a", "b": tmp_path / "b"}, random_mean=1.5,
                                 published=playback.published_scores())
    (ax,) = fig.axes
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sum("evaluation" in t for t in labels) == 2 and sum("training games" in t for t in labels) == 2
    assert "random actions, same protocol: 1.50" in labels and "5 × random: 7.5" in labels
    assert "published: CleanRL dqn_atari (366.9)" in labels and "published: Dopamine DQN (1.6, 3.1)" in labels
    assert not any("random play" in t for t in labels if t.startswith("published"))  # no step count: not drawn
    assert sorted(line.get_ydata()[0] for line in ax.lines if len(set(line.get_ydata())) == 1)[:2] == [1.5, 7.5]
    alone = playback.plot_learning({"a": tmp_path / "a"}, random_mean=1.0)
    assert not any("published" in t.get_text() for t in alone.axes[0].get_legend().get_texts())


def test_every_published_score_names_its_source_link_and_protocol():
    rows = playback.published_scores()
    assert {r["method"] for r in rows} >= {"random play", "DrQ(ε)", "SPR", "Dopamine DQN", "CleanRL dqn_atari"}
    for r in rows:
        assert r["source"] and r["protocol"] and r["url"].startswith("https://") and r["score"] >= 0


def test_last_evaluation_reads_the_last_row(tmp_path):
    write_run(tmp_path / "run", evals=3)
    assert playback.last_evaluation(tmp_path / "run") == {"step": 1800, "mean": 2.0, "std": 0.5, "games": 2}
    write_run(tmp_path / "none", evals=0)
    with pytest.raises(ValueError, match="no evaluation yet"):
        playback.last_evaluation(tmp_path / "none")


def test_save_gif_writes_every_other_frame(tmp_path):
    from PIL import Image

    frames = [np.full((210, 160, 3), i * 20, np.uint8) for i in range(10)]
    path = playback.save_gif(frames, tmp_path / "a.gif", every=2)
    with Image.open(path) as im:
        assert im.format == "GIF" and im.size == (160, 210) and im.n_frames == 5
    with pytest.raises(ValueError, match="no frames"):
        playback.save_gif([], tmp_path / "b.gif")


def test_read_log_and_plot_run(tmp_path):
    write_run(tmp_path / "run")
    log = playback.read_log(tmp_path / "run" / "log.csv")
    assert log["step"].tolist() == [100.0 * (i + 1) for i in range(12)]
    assert np.isnan(log["loss"][:3]).all() and log["loss"][3] == 0.1
    fig = playback.plot_run(tmp_path / "run", "test")
    assert len(fig.axes) == 3  # returns, ε twin axis, evaluation
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend[-1] == "ε" and "one game's return" in legend  # ε's line, on its twin axis, is in the legend
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "log.csv").write_text("step,episode_return,epsilon\n")
    assert playback.read_log(tmp_path / "empty" / "log.csv")["step"].size == 0
    playback.plot_run(tmp_path / "empty")  # a run with no finished game yet still plots


def test_moving_average():
    assert playback.moving_average([1, 2, 3, 4], 2).tolist() == [1.0, 1.5, 2.5, 3.5]
    assert playback.moving_average([], 3).size == 0


def test_checkpoint_round_trip_and_play(tmp_path):
    import torch

    from dqn_course.agent import DQNAgent
    from dqn_course.records import save_checkpoint

    agent = DQNAgent(4, "cpu", seed=7)
    save_checkpoint(tmp_path / "checkpoint.pt", agent, PRESETS["quick"], 1234)
    loaded, info = playback.load_agent(tmp_path / "checkpoint.pt")
    assert info["step"] == 1234 and info["config"]["total_steps"] == PRESETS["quick"].total_steps
    assert set(torch.load(tmp_path / "checkpoint.pt", weights_only=True)) == {"q", "config", "step", "evaluation"}
    assert playback.run_config(tmp_path) == PRESETS["quick"]
    for a, b in zip(agent.q.parameters(), loaded.q.parameters()):
        assert torch.equal(a, b)
    episode = playback.play_episode(loaded, max_steps=20, seed=0)
    assert episode.steps <= 20 and len(episode.frames) == episode.steps + 1
    assert episode.frames[0].shape == (210, 160, 3) and episode.frames[0].dtype == np.uint8
    random_again = [playback.play_episode(None, max_steps=20, seed=3, render=False) for _ in range(2)]
    assert random_again[0].score == random_again[1].score and random_again[0].steps == random_again[1].steps
    assert len(playback.play_scores(None, games=2, max_steps=10)) == 2
    html = playback.animate(episode.frames, every=5, title="t").to_jshtml()
    assert "<img" in html or "img" in html


def test_allocate_replay_is_measured_in_a_fresh_process():
    capacity = 20_000
    m = measure_in_subprocess(playback.allocate_replay, capacity, prefault=True, timeout=300)
    assert m.result["nbytes"] == capacity * (84 * 84 + 16)
    # prefaulted and kept alive until the child read its RSS: the growth is the memory's size
    assert 0.9 * m.result["nbytes"] < m.rss_growth < 1.3 * m.result["nbytes"]
    multi = measure_in_subprocess(playback.allocate_replay, capacity, 4, prefault=False, timeout=300)
    assert multi.result["nbytes"] == capacity * (84 * 84 + 16)
    assert multi.rss_growth < 0.5 * multi.result["nbytes"]  # untouched pages cost no RSS yet


def test_play_episode_is_reproducible_and_leaves_the_agent_generator_alone():
    from dqn_course.agent import DQNAgent

    agent = DQNAgent(4, "cpu", seed=3)
    before = agent.rng.bit_generator.state
    a = playback.play_episode(agent, epsilon=0.5, max_steps=40, seed=5, render=False)
    b = playback.play_episode(agent, epsilon=0.5, max_steps=40, seed=5, render=False)
    assert (a.score, a.steps, a.lives_lost) == (b.score, b.steps, b.lives_lost)
    assert agent.rng.bit_generator.state == before


def test_the_random_share_is_the_mean_of_the_schedule_over_a_breakout_cpu_run():
    """Section 1's prediction: the answer cell averages train.epsilon_at over every step of a breakout-cpu run. By
    arithmetic, eps_fraction of the run on the line from eps_start to eps_end (its mean, their midpoint), the rest at
    eps_end; the key's likely mistakes (the decay alone, the floor forgotten, breakout's settings) fail with their
    hint, and a prediction near the arithmetic passes."""
    from dqn_course.train import epsilon_at

    cpu = PRESETS["breakout-cpu"]
    measured = float(np.mean([epsilon_at(step, cpu) for step in range(cpu.total_steps)]))
    arithmetic = cpu.eps_fraction * (cpu.eps_start + cpu.eps_end) / 2 + (1 - cpu.eps_fraction) * cpu.eps_end
    assert measured == pytest.approx(arithmetic, rel=1e-4)
    assert checks.check_prediction_of("07.random_share", round(arithmetic, 3), measured) is True
    for wrong, hint in ((0.505, "the decay alone"), (0.101, "after the decay still act at random"),
                        (0.0595, "breakout's settings"), (0.2, "eps_fraction is the share of the run")):
        with pytest.raises(AssertionError, match=hint) as raised:
            checks.check_prediction_of("07.random_share", wrong, measured)
        assert "0.109" not in str(raised.value) and "(section 1, *Why ε follows a schedule*)" in str(raised.value)


def test_solution_cell_passes_its_check():
    """The solution cell (committed without outputs, skipped by nbval) run on its own."""
    from _solutions import run_solutions

    out = run_solutions("07_train_breakout", {"checks": checks, "np": np})
    assert out.count("✓") == 6, out  # the ε schedule, run_warnings, four questions


def test_07b_solution_cell_passes_its_checks():
    """Notebook 07b's solution cell, run with what the page holds there: a quick run of 3,000 steps whose last
    stop line reported 1.5 MB of replay, and its newest state file (the fixed part, the frames without their
    object headers, and the offsets the file stores in place of the list's pointers)."""
    import dataclasses

    from _solutions import run_solutions

    from dqn_course.lab import colab
    from dqn_course.train import PRESETS

    fixed = 26_978_880
    said = ["stopped: 2,832 steps in 17 s (53 steps/s on cpu), 8 games, replay 1.4 MB; files in x\n",
            "done: 3,000 steps (168 this session) in 5 s (35 steps/s on cpu), 8 games, replay 1.5 MB; files in x\n"]
    state_mb = (fixed + 5_300 + 1_500_000 - 33 * 3_000) / 1e6  # + the rng states and counters, - the headers
    out = run_solutions("07b_training_on_colab", {
        "checks": checks, "colab": colab, "dataclasses": dataclasses, "PRESETS": PRESETS, "PRESET": "quick",
        "SETTINGS": {"total_steps": 3_000}, "fixed_by_arithmetic": fixed, "said": said, "stops": [1_236, 3_000],
        "state_mb": state_mb, "Path": Path})
    assert out.count("✓") == 4, out  # the prediction, two questions, resume_from


def test_07b_state_file_prediction_hints():
    """Each likely mistake about this run's state file gets its own hint, never the measured size."""
    given = {"fixed_mb": 26.97888, "steps": 3_000, "capacity": 10_000}
    measured = 28.42
    assert checks.check_prediction_of("07b.state_file", 26.98 + 1.5 - 0.1, measured, **given) is True
    for wrong, hint in ((26.98, "fixed part alone"), (1.44, "replay part alone"), (26.98 + 21.2, "replay kept raw"),
                        (26.98 + 70.7, "a full raw memory"), (56.84, "two files")):
        with pytest.raises(AssertionError, match=hint) as raised:
            checks.check_prediction_of("07b.state_file", wrong, measured, **given)
        assert "28.4" not in str(raised.value)


# -- notebook 07b's exercise: the state file the next session carries on from ------------------------------------

def resume_from_right(folder):
    import hashlib
    from pathlib import Path

    def whole(path):  # the format ends a file with the SHA-256 of every byte before it
        data = path.read_bytes()
        return len(data) > 32 and hashlib.sha256(data[:-32]).digest() == data[-32:]

    states = sorted(Path(folder).glob("state-*.ckpt"), key=lambda path: int(path.stem.split("-")[1]))
    return next((path for path in reversed(states) if whole(path)), None)  # a folder not made yet holds nothing


def resume_from_bare_name(folder):
    import hashlib
    import os

    if not os.path.isdir(folder):
        return None
    names = sorted((n for n in os.listdir(folder) if n.startswith("state-") and n.endswith(".ckpt")),
                   key=lambda n: int(n[6:-5]), reverse=True)
    for name in names:
        with open(os.path.join(folder, name), "rb") as f:
            data = f.read()
        if data[-32:] == hashlib.sha256(data[:-32]).digest() and len(data) > 32:
            return name  # a name in the folder passes too
    return None


def resume_from_unverified(folder):
    from pathlib import Path

    states = Path(folder).glob("state-*.ckpt")  # the largest step, whole or not
    return max(states, key=lambda path: int(path.stem.split("-")[1]), default=None)


def resume_from_nonempty(folder):
    from pathlib import Path

    states = [p for p in Path(folder).glob("state-*.ckpt") if p.stat().st_size > 0]  # a half file passes this
    return max(states, key=lambda path: int(path.stem.split("-")[1]), default=None)


def resume_from_largest_size(folder):
    from pathlib import Path

    states = [p for p in Path(folder).glob("state-*.ckpt") if p.stat().st_size > 0]
    if not states:
        return None
    largest = max(p.stat().st_size for p in states)  # a whole file taken to be the largest one
    return max((p for p in states if p.stat().st_size == largest), key=lambda path: int(path.stem.split("-")[1]))


def resume_from_aligned_size(folder):
    from pathlib import Path

    states = [p for p in Path(folder).glob("state-*.ckpt")  # the format's 64-byte layout plus its digest
              if p.stat().st_size > 32 and (p.stat().st_size - 32) % 64 == 0]
    return max(states, key=lambda path: int(path.stem.split("-")[1]), default=None)


def resume_from_any_state_name(folder):
    from pathlib import Path

    return max(Path(folder).glob("state-*"), default=None)  # the .tmp of a save cut short sorts last


def resume_from_newest_time(folder):
    import os
    from pathlib import Path

    return max(Path(folder).glob("state-*.ckpt"), key=os.path.getmtime, default=None)


def resume_from_oldest(folder):
    from pathlib import Path

    return min(Path(folder).glob("state-*.ckpt"), default=None)


def resume_from_policy_file(folder):
    from pathlib import Path

    policy = Path(folder) / "checkpoint.pt"
    return policy if policy.is_file() else None


def resume_from_listdir(folder):
    import os

    names = sorted(n for n in os.listdir(folder) if n.endswith(".ckpt"))
    return os.path.join(folder, names[-1]) if names else None


def resume_from_gives_up_on_a_tmp(folder):
    from pathlib import Path

    found = sorted(Path(folder).glob("state-*"))
    if any(path.suffix == ".tmp" for path in found):
        return None  # a folder with a save cut short taken for a broken run: start again
    return found[-1] if found else None


@pytest.mark.parametrize("answer", [resume_from_right, resume_from_bare_name])
def test_resume_from_right(answer, capsys):
    assert checks.check_resume_from(answer) is True
    assert capsys.readouterr().out.startswith("✓ resume_from finds the newest whole state")


@pytest.mark.parametrize("answer, hint", [
    (resume_from_any_state_name, r"state-0000001500\.ckpt\.tmp.*save cut short"),
    (resume_from_newest_time, r"returned state-0000000500\.ckpt.*file's time.*its step, in its name"),
    (resume_from_oldest, r"older of the two kept states"),
    (resume_from_policy_file, r"before its first save returned checkpoint\.pt.*policy of the last evaluation"),
    (resume_from_listdir, r"not made yet raised FileNotFoundError.*Hint: the first session finds no run folder"),
    (resume_from_gives_up_on_a_tmp, r"returned None, a new run, though state-0000001000\.ckpt is there"),
    (resume_from_unverified, r"newest cut to half its bytes.*not whole: an upload cut short.*SHA-256"),
    (resume_from_nonempty, r"newest cut to half its bytes.*returned state-0000001000\.ckpt.*not whole"),
    (resume_from_largest_size, r"still larger than the older whole one returned state-0000001000\.ckpt.*not whole"),
    (resume_from_aligned_size, r"one byte changed returned state-0000001000\.ckpt.*full length.*SHA-256 digest"),
])
def test_resume_from_wrong(answer, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_resume_from(answer)


def test_resume_from_unanswered(capsys):
    assert checks.check_resume_from(None) is None
    assert checks.check_resume_from(lambda folder: None) is None
    assert "not answered yet" in capsys.readouterr().out.lower()


def _calls_list_checkpoints(folder):
    from dqn_course.checkpoint import list_checkpoints

    return (list_checkpoints(folder) or [None])[-1]


@pytest.mark.parametrize("name", ["list_checkpoints", "latest_step", "finished", "session_command", "wrapper",
                                  "import inside", "read_log", "pick_device", "OwnedTempDir", "format_bytes",
                                  "NatureCNN", "os.path.basename"])
def test_resume_from_refuses_the_courses_code_and_the_pages_imports(name):
    import os

    from dqn_course.checkpoint import list_checkpoints
    from dqn_course.cleanup import OwnedTempDir
    from dqn_course.device import pick_device
    from dqn_course.lab import colab
    from dqn_course.networks import NatureCNN
    from dqn_course.profiling import format_bytes

    answers = {"list_checkpoints": list_checkpoints, "latest_step": colab.latest_step, "finished": colab.finished,
               "session_command": colab.session_command,
               "wrapper": lambda folder: (list_checkpoints(folder) or [None])[-1],
               "import inside": _calls_list_checkpoints, "read_log": playback.read_log, "pick_device": pick_device,
               "OwnedTempDir": OwnedTempDir, "format_bytes": format_bytes, "NatureCNN": NatureCNN,
               "os.path.basename": os.path.basename}
    with pytest.raises(AssertionError, match="write it yourself: a def that finds the newest whole training state"):
        checks.check_resume_from(answers[name])


# -- notebook 07's exercise: the columns of a finished run's log.csv that show trouble -----------------------------

def run_warnings_right(log, gamma, eps_end, r_max):
    import numpy as np

    flagged = set()
    q_max, loss = log["q_max"][~np.isnan(log["q_max"])], log["loss"][~np.isnan(log["loss"])]
    if q_max.size and q_max.max() > r_max / (1 - gamma):
        flagged.add("q_max")
    if loss.size and loss.max() > 100 * np.median(loss):
        flagged.add("loss")
    if log["epsilon"][-1] > eps_end + 0.001:
        flagged.add("epsilon")
    return flagged


def run_warnings_nanmax(log, gamma, eps_end, r_max):
    import numpy as np

    flagged = []  # a list passes as well as a set
    if np.nanmax(log["q_max"]) > r_max / (1 - gamma):
        flagged.append("q_max")
    if np.nanmax(log["loss"]) > 100 * np.nanmedian(log["loss"]):
        flagged.append("loss")
    if not np.isclose(log["epsilon"][-1], eps_end, atol=1e-3):
        flagged.append("epsilon")
    return flagged


def run_warnings_nan_blind(log, gamma, eps_end, r_max):
    import numpy as np

    flagged = set()
    if np.max(log["q_max"]) > r_max / (1 - gamma):  # NaN rows before learning starts make this NaN
        flagged.add("q_max")
    if np.max(log["loss"]) > 100 * np.median(log["loss"]):
        flagged.add("loss")
    if log["epsilon"][-1] > eps_end + 0.001:
        flagged.add("epsilon")
    return flagged


def run_warnings_bound_of_099(log, gamma, eps_end, r_max):
    return run_warnings_right(log, 0.99, eps_end, r_max)  # the presets' γ, whatever the run's


def run_warnings_loss_rises(log, gamma, eps_end, r_max):
    import numpy as np

    flagged = run_warnings_right(log, gamma, eps_end, r_max)
    loss = log["loss"][~np.isnan(log["loss"])]
    if loss[-1] > 2 * loss[0]:  # a rising loss taken for trouble
        flagged.add("loss")
    return flagged


def run_warnings_first_epsilon(log, gamma, eps_end, r_max):
    flagged = run_warnings_right(log, gamma, eps_end, r_max) - {"epsilon"}
    if log["epsilon"][0] > eps_end + 0.001:
        flagged.add("epsilon")
    return flagged


def run_warnings_fills_nan(log, gamma, eps_end, r_max):
    import numpy as np

    for column in ("loss", "q_max"):
        log[column][np.isnan(log[column])] = 0.0  # overwrites the caller's arrays
    return run_warnings_right(log, gamma, eps_end, r_max)


def run_warnings_sentences(log, gamma, eps_end, r_max):
    return ["Q diverges"] if run_warnings_right(log, gamma, eps_end, r_max) else []


def run_warnings_clipped_ceiling(log, gamma, eps_end, r_max):
    return run_warnings_right(log, gamma, eps_end, 1)  # the ceiling of rewards clipped to 1, whatever r_max


@pytest.mark.parametrize("answer", [run_warnings_right, run_warnings_nanmax])
def test_run_warnings_right(answer, capsys):
    assert checks.check_run_warnings(answer) is True
    assert capsys.readouterr().out.startswith("✓ run_warnings flags max-Q past r_max / (1 - γ)")


@pytest.mark.parametrize("answer, hint", [
    (run_warnings_nan_blind, r"climbs to 150.*missed 'q_max'.*before learning starts.*NaN.*section 5"),
    (run_warnings_bound_of_099, r"γ = 0\.999.*flagged 'q_max'.*depends on γ \(section 5, \*Mean max-Q\*\)"),
    (run_warnings_loss_rises, r"healthy run.*flagged 'loss'.*rises steadily.*\(section 5, \*TD loss\*\)"),
    (run_warnings_first_epsilon, r"healthy run.*flagged 'epsilon'.*where it ends.*\*ε, replay fill and RSS\*"),
    (run_warnings_fills_nan, r"changed the log's arrays"),
    (run_warnings_clipped_ceiling, r"not clipped.*max-Q climbs to 400.*flagged 'q_max'.*up to r_max, not 1.*"
                                   r"\(section 5, \*Mean max-Q\*, and the question on unclipped rewards"),
    (run_warnings_sentences, r"returned \['Q diverges'\]: name the log\.csv columns"),
])
def test_run_warnings_wrong(answer, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_run_warnings(answer)


def test_run_warnings_unanswered(capsys):
    assert checks.check_run_warnings(None) is None
    assert checks.check_run_warnings(lambda log, gamma, eps_end, r_max: None) is None
    assert "not answered yet" in capsys.readouterr().out.lower()


def test_run_warnings_synthetic_logs_read_as_read_log_reads_a_log_csv(tmp_path):
    """The check's made-up logs have log.csv's columns, and read back through playback.read_log unchanged."""
    from dqn_course.lab.checks.ch07 import _synthetic_log

    log = _synthetic_log(eps_stuck=True)
    with open(tmp_path / "log.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(list(log))
        for row in zip(*log.values()):
            w.writerow(["" if np.isnan(v) else repr(float(v)) for v in row])
    back = playback.read_log(tmp_path / "log.csv")
    assert set(back) == set(log)
    assert all(np.array_equal(back[k], log[k], equal_nan=True) for k in log)


@pytest.mark.parametrize("name", ["plot_diagnostics", "diagnosed_runs", "read_log", "wrapper", "epsilon_at",
                                  "np.isnan"])
def test_run_warnings_refuses_the_courses_code_and_the_pages_imports(name):
    from dqn_course.lab import diagnostics
    from dqn_course.train import epsilon_at

    answers = {"plot_diagnostics": diagnostics.plot_diagnostics, "diagnosed_runs": diagnostics.diagnosed_runs,
               "read_log": playback.read_log, "epsilon_at": epsilon_at, "np.isnan": np.isnan,
               "wrapper": lambda log, gamma, eps_end: set() if diagnostics.diagnosed_runs() else set()}
    with pytest.raises(AssertionError, match="a def that reads a run's loss, max-Q and ε columns"):
        checks.check_run_warnings(answers[name])
