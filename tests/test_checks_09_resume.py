"""Notebook 09's resume exercise: the right Config passes; each wrong one raises with a hint; None just notes."""
from __future__ import annotations

import dataclasses

import pytest

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

    from dqn_course.lab import checks

    cfg, out = stopped_run
    printed = run_solutions("09b_surviving_crashes", {"checks": checks, "dataclasses": dataclasses, "run_cfg": cfg,
                                                     "run_dir": out})
    assert printed.count("✓") == 3, printed
