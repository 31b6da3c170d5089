"""python -m dqn_course.evaluate: the course's evaluation protocol on any policy file, and its refusals."""
from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from dqn_course import evaluate as ev
from dqn_course.agent import DQNAgent
from dqn_course.records import play_evaluation, save_checkpoint
from dqn_course.train import PRESETS

CAP = 60  # agent steps per game: short games keep the test fast


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    """A run folder holding an untrained policy saved by records.save_checkpoint, with the quick preset's config."""
    folder = tmp_path_factory.mktemp("run")
    cfg = dataclasses.replace(PRESETS["quick"], out_dir=str(folder), eval_max_steps=CAP)
    agent = DQNAgent(4, "cpu", seed=3)
    save_checkpoint(folder / "checkpoint.pt", agent, cfg, step=1_234)
    return folder, cfg


def _main(capsys, *argv) -> tuple[int, str, str]:
    try:
        ev.main([str(a) for a in argv])
        code = 0
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def test_a_run_folder_is_evaluated_beside_random_play_on_the_same_games(policy, capsys):
    folder, _ = policy
    code, out, _ = _main(capsys, folder, "--games", 3, "--json")
    result = json.loads(out)
    assert code == 0 and result["step"] == 1_234 and result["file"].endswith("checkpoint.pt")
    assert result["protocol"] == {**result["protocol"], "games": 3, "seed": ev.DEFAULT_SEED, "epsilon": 0.05,
                                  "max_steps": CAP}
    for who in ("policy", "random"):
        assert result[who]["games"] == len(result[who]["scores"]) == 3
        assert result[who]["mean"] == pytest.approx(sum(result[who]["scores"]) / 3)
    code, text, _ = _main(capsys, folder / "checkpoint.pt", "--games", 3)
    assert code == 0 and "over 3 games; random play" in text and f"seed {ev.DEFAULT_SEED}" in text


def test_the_same_file_and_seed_give_the_same_games(policy):
    folder, _ = policy
    a = ev.policy_vs_random(folder, games=2, seed=999_999_999)
    b = ev.policy_vs_random(folder, games=2, seed=999_999_999)
    assert a["policy"]["scores"] == b["policy"]["scores"] and a["random"]["scores"] == b["random"]["scores"]


def test_random_play_is_the_runs_own_baseline_protocol(policy):
    """With the run's evaluation seed (allowed on purpose), random play equals records.play_evaluation(None, cfg)."""
    folder, cfg = policy
    result = ev.policy_vs_random(folder, games=3, seed=cfg.seed + ev.EVAL_SEED_OFFSET, allow_run_seeds=True)
    assert result["random"]["scores"] == play_evaluation(None, cfg, 3)


def test_a_seed_the_run_used_is_refused_unless_asked(policy, capsys):
    folder, cfg = policy
    code, _, err = _main(capsys, folder, "--seed", cfg.seed + 5)
    assert code == 2 and "inside the seeds this run trained and evaluated on" in err and "--allow-run-seeds" in err


@pytest.mark.parametrize("argv, message", [
    (["--games", "0"], "--games must be an integer >= 1"),
    (["--epsilon", "1.5"], "--epsilon must be a number in [0, 1]"),
    (["--max-steps", "0"], "--max-steps must be an integer >= 1"),
])
def test_settings_that_cannot_work_are_refused(policy, capsys, argv, message):
    code, _, err = _main(capsys, policy[0], *argv)
    assert code == 2 and err.startswith("error: ") and message in err


def test_a_missing_file_or_empty_folder(tmp_path, capsys):
    code, _, err = _main(capsys, tmp_path / "nope.pt")
    assert code == 2 and f"no file at {tmp_path / 'nope.pt'}" in err
    code, _, err = _main(capsys, tmp_path)
    assert code == 2 and "holds no checkpoint.pt" in err


def test_a_damaged_file(policy, tmp_path, capsys):
    data = (policy[0] / "checkpoint.pt").read_bytes()
    bad = tmp_path / "checkpoint.pt"
    bad.write_bytes(data[: len(data) // 2])
    code, _, err = _main(capsys, bad)
    assert code == 2 and "is damaged or not a torch file" in err
    bad.write_text("not a checkpoint at all")
    code, _, err = _main(capsys, bad)
    assert code == 2 and "is damaged or not a torch file" in err


def test_a_file_that_is_not_a_policy(tmp_path, capsys):
    other = tmp_path / "weights.pt"
    torch.save({"optimizer": {}, "step": 3}, other)
    code, _, err = _main(capsys, other)
    assert code == 2 and "is not a policy file" in err and "records.save_checkpoint" in err
    torch.save({"q": {"fc.weight": torch.zeros(2, 2)}, "step": 3}, other)
    code, _, err = _main(capsys, other)
    assert code == 2 and "is not the course's Nature DQN" in err
