"""Notebook 01's checks: right answers pass, wrong ones raise with a hint, None is 'not answered yet'."""
from __future__ import annotations

import math

import pytest

from _solutions import run_solutions
from dqn_course.lab import checks, naive


def bytes_per_transition(step_a, rss_a, step_b, rss_b):
    return (rss_b - rss_a) / (step_b - step_a)


def killed_at_step(baseline_bytes, bytes_per_step, available_bytes):
    if bytes_per_step <= 0:
        return math.inf
    return (available_bytes - baseline_bytes) / bytes_per_step


@pytest.mark.parametrize("check", [checks.check_bytes_per_transition, checks.check_killed_at_step])
def test_none_is_not_answered_yet(check, capsys):
    assert check(None) is None
    assert "Not answered yet" in capsys.readouterr().out


def test_bytes_per_transition_right(capsys):
    assert checks.check_bytes_per_transition(bytes_per_transition) is True
    assert capsys.readouterr().out.startswith("✓")


@pytest.mark.parametrize("wrong, hint", [
    (lambda sa, ra, sb, rb: rb - ra, "divide by the steps"),
    (lambda sa, ra, sb, rb: rb / sb, "baseline"),
    (lambda sa, ra, sb, rb: (ra - rb) / (sb - sa), "sign"),
    (lambda sa, ra, sb, rb: (rb - ra) / (sb - sa) / 2**20, "MiB"),
    (lambda sa, ra, sb, rb: (rb - ra) / (sb - sa) / 2, "do not halve"),
    (lambda sa, ra, sb, rb: 12_345.0, "what grew between them, spread over the steps"),
    (lambda sa, ra, sb, rb: "34 KB", "number"),
])
def test_bytes_per_transition_wrong(wrong, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_bytes_per_transition(wrong)


def test_bytes_per_transition_returning_none_is_not_answered(capsys):
    assert checks.check_bytes_per_transition(lambda *a: None) is None
    assert "Not answered yet" in capsys.readouterr().out


def test_killed_at_step_right(capsys):
    assert checks.check_killed_at_step(killed_at_step) is True
    assert capsys.readouterr().out.startswith("✓")
    # rounding to a whole step is fine
    assert checks.check_killed_at_step(
        lambda b, s, a: math.inf if s <= 0 else (a - b) // s) is True


@pytest.mark.parametrize("wrong, hint", [
    (lambda b, s, a: math.inf if s <= 0 else a / s, "baseline is in RAM"),
    (lambda b, s, a: math.inf if s <= 0 else (a + b) / s, "don't add"),
    (lambda b, s, a: math.inf if s <= 0 else a / s / 2, "don't halve"),
    (lambda b, s, a: (a - b) / s, "ZeroDivisionError"),
    (lambda b, s, a: 0 if s <= 0 else (a - b) / s, "math.inf"),
    (lambda b, s, a: math.inf if s <= 0 else (a - b) / s + 10, "used up the RAM its baseline leaves free"),
])
def test_killed_at_step_wrong(wrong, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_killed_at_step(wrong)


def test_not_callable_is_refused():
    with pytest.raises(AssertionError, match="function itself"):
        checks.check_bytes_per_transition(34_000)
    with pytest.raises(AssertionError, match="function itself"):
        checks.check_killed_at_step(12_345)


def test_count_predict_calls_is_two_per_sampled_transition():
    assert naive.count_predict_calls(32) == 64
    assert naive.count_predict_calls(4) == 8


def test_prediction_check_on_predict_calls(capsys):
    assert checks.check_prediction(64, naive.count_predict_calls(32), "the predict calls in one replay()", rel=0)
    with pytest.raises(AssertionError):
        checks.check_prediction(32, 64, "the predict calls in one replay()", rel=0)
    assert checks.check_prediction(None, 64, "the predict calls in one replay()", rel=0) is None
    assert "Not answered yet" in capsys.readouterr().out


def test_notebook_01_solution_cell_passes_its_checks():
    """The solution cell is committed without outputs and skipped by nbval; it runs here instead."""
    out = run_solutions("01_naive_agent", {"checks": checks, "naive": naive})
    assert out.count("✓") == 4 and "Not answered yet" not in out


def test_notebook_01b_solution_cell_passes_its_check():
    """01b's quiz: its solution cell, committed without outputs and skipped by nbval, runs here instead."""
    out = run_solutions("01b_measuring_honestly", {"checks": checks})
    assert out.count("✓") == 1 and "Not answered yet" not in out
