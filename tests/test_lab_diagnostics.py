"""The lab's helpers for notebooks 06-07: a learner's rule trained beside the library's, and log.csv's diagnostics."""
from __future__ import annotations

import csv
import dataclasses

import pytest
import torch

from dqn_course.agent import td_targets
from dqn_course.lab import diagnostics
from dqn_course.lab.playback import RECORDED_RUN_NAMES
from dqn_course.records import LOG_FIELDS
from dqn_course.train import PRESETS, linear_epsilon

OLD_FIELDS = ["step", "episode_return", "episode_length", "loss", "epsilon", "rss_mb", "steps_per_s"]


def write_log(folder, rows, fields=LOG_FIELDS):
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "log.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in fields})
    return folder


def rows(scores, loss=0.01):
    return [{"step": 100 * (i + 1), "episode_return": s, "episode_length": 50, "loss": loss * (i + 1), "q_max": 0.1,
             "grad_norm": 0.5, "epsilon": 0.5, "replay_size": 100 * (i + 1), "rss_mb": 400, "steps_per_s": 90}
            for i, s in enumerate(scores)]


def own_schedule(step, start, end, decay_steps):
    """A learner's ε schedule (notebook 07's exercise): a straight line from start to end, then end."""
    return end + (start - end) * max(0.0, 1.0 - step / decay_steps)


def test_verdict_says_why_a_learners_function_cannot_train_and_keeps_the_check_quiet(capsys):
    assert diagnostics.verdict("targets", None) == "not written yet"
    assert diagnostics.verdict("targets", lambda *args: None) == "not written yet"
    assert diagnostics.verdict("targets", td_targets).startswith("fails its check (`td_targets(")  # the course's
    assert diagnostics.verdict("epsilon", linear_epsilon).startswith("fails its check (`epsilon_schedule(")
    assert diagnostics.verdict("epsilon", own_schedule) is None
    wrong = diagnostics.verdict("targets", lambda rewards, *rest: torch.zeros_like(rewards))
    assert wrong.startswith("fails its check (") and "\n" not in wrong
    assert capsys.readouterr().out == ""


def test_compare_logs_tells_the_same_games_from_different_ones(tmp_path):
    library = write_log(tmp_path / "library", rows([1, 0, 2]))
    same = write_log(tmp_path / "same", rows([1, 0, 2]))
    drift = write_log(tmp_path / "drift", rows([1, 0, 2], loss=0.011))
    other = write_log(tmp_path / "other", rows([1, 3, 2, 4]))
    assert diagnostics.compare_logs({"library": library, "yours": same}) == (
        "yours beside the library's: the same games, score for score; largest relative difference in the logged "
        "loss: 0.0e+00")
    assert diagnostics.compare_logs({"library": library, "yours": drift}).endswith("loss: 1.0e-01")
    assert "different games from the first 1 on (3 and 4 games)" in diagnostics.compare_logs(
        {"library": library, "yours": {"out_dir": str(other)}})  # a train() summary names its folder
    longer = write_log(tmp_path / "longer", rows([1, 0, 2, 5]))  # the same first games, then one more
    assert "different games from the first 3 on (3 and 4 games)" in diagnostics.compare_logs(
        {"library": library, "yours": longer})
    assert diagnostics.compare_logs({"library": library}) == (
        "only the library's run: write your functions above, and run this again to train with them")
    assert diagnostics.compare_logs({"library": library}, ("epsilon_schedule",)) == (  # the page's one function
        "only the library's run: write epsilon_schedule above, and run this again to train with it")


def test_plot_diagnostics_draws_each_column_a_log_has(tmp_path):
    new = write_log(tmp_path / "new", rows(range(30)))
    old = write_log(tmp_path / "old", rows(range(30)), OLD_FIELDS)  # recorded before q_max and grad_norm existed
    fig = diagnostics.plot_diagnostics({"new": new, "old": {"out_dir": str(old)}}, "title")
    panels = {ax.get_title().removesuffix(" (20-game mean)"): ax for ax in fig.axes if ax.get_title()}
    assert set(panels) == {label for _, label, _ in diagnostics.PANELS}
    lines = {title: len(ax.get_lines()) for title, ax in panels.items()}
    assert lines["TD loss"] == 2 and lines["mean max-Q of sampled states"] == 1
    assert lines["gradient norm before clipping"] == 1 and lines["transitions in the replay"] == 1


def test_diagnosed_runs_are_the_recorded_runs_with_the_diagnostics_columns(tmp_path):
    first, second, old = RECORDED_RUN_NAMES[0], RECORDED_RUN_NAMES[2], RECORDED_RUN_NAMES[1]
    write_log(tmp_path / second, rows([1]))
    write_log(tmp_path / old, rows([1]), OLD_FIELDS)
    write_log(tmp_path / first, rows([1]))
    write_log(tmp_path / "not-a-recorded-name", rows([1]))
    assert diagnostics.diagnosed_runs(tmp_path) == [tmp_path / first, tmp_path / second]


@pytest.mark.slow
def test_train_beside_trains_a_passing_function_from_the_same_seed(tmp_path, capsys):
    cfg = dataclasses.replace(PRESETS["quick"], total_steps=700, learning_starts=300, eval_every=700, eval_episodes=1,
                              eval_max_steps=50, checkpoint_every=700)
    runs = diagnostics.train_beside(cfg, tmp_path, targets=lambda *args: None, epsilon=own_schedule)
    printed = capsys.readouterr().out.splitlines()
    assert [line for line in printed if line.split()[0] in ("targets", "loss", "epsilon")] == [
        "targets  the library's: yours is not written yet", "loss     the library's",  # loss: not asked for
        "epsilon  yours"]
    assert set(runs) == {"library", "yours"} and runs["yours"]["out_dir"] == str(tmp_path / "yours")
    assert diagnostics.compare_logs(runs).startswith("yours beside the library's: the same games, score for score")


@pytest.mark.slow
def test_train_beside_trains_the_library_alone_when_nothing_passes(tmp_path, capsys):
    cfg = dataclasses.replace(PRESETS["quick"], total_steps=400, learning_starts=300, eval_every=400, eval_episodes=1,
                              eval_max_steps=50, checkpoint_every=400)
    runs = diagnostics.train_beside(cfg, tmp_path, targets=None, loss=None, epsilon=None)
    assert set(runs) == {"library"} and not (tmp_path / "yours").exists()
    assert capsys.readouterr().out.count("the library's: yours is not written yet") == 3
