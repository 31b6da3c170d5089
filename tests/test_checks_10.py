"""Notebook 10: its exercise check (the learner's RateLimiter, run in a simulated worker and learner: right passes,
each typical slip raises with its hint, the course's code and the page's imports are refused, None only prints)."""
from __future__ import annotations

import numpy as np
import pytest

from dqn_course.agent import DQNAgent
from dqn_course.distributed import Chunk, DistConfig, ParameterServer, ReplayServer, worker_epsilons
from dqn_course.lab import checks
from dqn_course.lab.checks.ch10 import LIMITER_CASES, TICKS_AFTER_MIN, _simulate
from dqn_course.replay import FrameSharingMemory


class Limiter:
    """The solution's limiter: the samples owed count from min_size on, each side waits beyond the tolerance."""

    def __init__(self, samples_per_insert, min_size, error_buffer):
        self.samples_per_insert, self.min_size, self.error_buffer = samples_per_insert, min_size, error_buffer

    def owed(self, inserted, sampled):
        return self.samples_per_insert * (inserted - self.min_size) - sampled

    def may_insert(self, inserted, sampled):
        return inserted < self.min_size or self.owed(inserted + 1, sampled) <= self.error_buffer

    def may_sample(self, inserted, sampled):
        return inserted >= self.min_size and self.owed(inserted, sampled + 1) >= -self.error_buffer


class AsksBeforeActing(Limiter):
    """Judges the counts as they are, not as they would be after the step: off by one step, within the slack."""

    def may_insert(self, inserted, sampled):
        return inserted < self.min_size or self.owed(inserted, sampled) <= self.error_buffer

    def may_sample(self, inserted, sampled):
        return inserted >= self.min_size and self.owed(inserted, sampled) >= -self.error_buffer


class NumpyAnswers(Limiter):
    """Answers with numpy bools (a comparison of numpy numbers): accepted as True and False."""

    def may_insert(self, inserted, sampled):
        return np.bool_(super().may_insert(inserted, sampled))

    def may_sample(self, inserted, sampled):
        return np.float64(self.owed(inserted, sampled + 1)) >= -self.error_buffer and inserted >= self.min_size


class AlwaysYes(Limiter):
    def may_insert(self, inserted, sampled):
        return True

    def may_sample(self, inserted, sampled):
        return True


class FreeAfterMinimum(Limiter):
    def may_insert(self, inserted, sampled):
        return True

    def may_sample(self, inserted, sampled):
        return inserted >= self.min_size


class Inverted(Limiter):
    def owed(self, inserted, sampled):
        return (inserted - self.min_size) / self.samples_per_insert - sampled


class NoTolerance(Limiter):
    def may_insert(self, inserted, sampled):
        return inserted < self.min_size or self.owed(inserted + 1, sampled) <= 0

    def may_sample(self, inserted, sampled):
        return inserted >= self.min_size and self.owed(inserted, sampled + 1) >= 0


class IgnoresMinimum(Limiter):
    def may_sample(self, inserted, sampled):
        return self.owed(inserted, sampled + 1) >= -self.error_buffer


class OwedFromFirstInsert(Limiter):
    def owed(self, inserted, sampled):
        return self.samples_per_insert * inserted - sampled


class HoldsWorkersBeforeMinimum(OwedFromFirstInsert):
    def may_insert(self, inserted, sampled):
        return self.owed(inserted + 1, sampled) <= self.error_buffer


class SidesSwapped(Limiter):
    def may_insert(self, inserted, sampled):
        return inserted < self.min_size or self.owed(inserted + 1, sampled) >= -self.error_buffer

    def may_sample(self, inserted, sampled):
        return inserted >= self.min_size and self.owed(inserted, sampled + 1) <= self.error_buffer


class Hesitant(Limiter):
    """Refuses every other sample it could allow: holds back a learner that is the slower side."""

    calls = 0

    def may_sample(self, inserted, sampled):
        self.calls += 1
        return self.calls % 2 == 1 and super().may_sample(inserted, sampled)


class AnswersInNumbers(Limiter):
    def may_insert(self, inserted, sampled):
        return 1


class Crashes(Limiter):
    def may_sample(self, inserted, sampled):
        return self.backlog < 0


class Unanswered:
    def __init__(self, samples_per_insert, min_size, error_buffer):
        self.samples_per_insert = samples_per_insert

    def may_insert(self, inserted, sampled):
        pass

    def may_sample(self, inserted, sampled):
        pass


class SamplesUnanswered(Limiter):
    def may_sample(self, inserted, sampled):
        pass


class WithoutSample:
    def __init__(self, samples_per_insert, min_size, error_buffer):
        pass

    def may_insert(self, inserted, sampled):
        return True


class OverTheCourse(Limiter):
    """Calls the course's code (the page's Ape-X schedule) inside a method: refused, whatever it answers."""

    def may_insert(self, inserted, sampled):
        return bool(worker_epsilons(1)) and super().may_insert(inserted, sampled)


class SubclassOfCourse(FrameSharingMemory):
    def may_insert(self, inserted, sampled):
        return True

    def may_sample(self, inserted, sampled):
        return True


@pytest.mark.parametrize("answer", [Limiter, AsksBeforeActing, NumpyAnswers])
def test_rate_limiter_right(answer, capsys):
    assert checks.check_rate_limiter(answer) is True
    assert capsys.readouterr().out.startswith("✓")


@pytest.mark.parametrize("answer, hint", [
    (AlwaysYes, "no sample comes before the memory holds its minimum"),
    (IgnoresMinimum, "no sample comes before the memory holds its minimum"),
    (FreeAfterMinimum, "the worker ran ahead"),
    (SidesSwapped, "the worker ran ahead"),
    (Inverted, "about the inverse of the target"),
    (NoTolerance, r"a deadlock\): the tolerance"),
    (HoldsWorkersBeforeMinimum, r"may not sample yet: nothing could move again \(a deadlock\)"),
    (OwedFromFirstInsert, "counting from the first insert"),
    (Hesitant, "the learner, the slower side here, was held back"),
    (AnswersInNumbers, r"returned 1: answer True \(go on\) or False \(wait\)"),
    (Crashes, "may_sample.* raised AttributeError"),
    (WithoutSample, "has no `may_sample`"),
    (Limiter(8, 400, 64), "pass the class itself"),
])
def test_rate_limiter_wrong(answer, hint):
    with pytest.raises(AssertionError, match=hint) as caught:
        checks.check_rate_limiter(answer)
    assert "section" in str(caught.value) or "pass the class" in str(caught.value) or "has no" in str(caught.value)


def test_a_learner_ahead_is_held_too():
    """A limiter that never holds the learner lets it run ahead wherever it is the fast side."""

    class LearnerFree(Limiter):
        def may_sample(self, inserted, sampled):
            return inserted >= self.min_size

    with pytest.raises(AssertionError, match="the learner ran ahead.*the limiter makes it wait"):
        checks.check_rate_limiter(LearnerFree)


@pytest.mark.parametrize("answer", [ReplayServer, ParameterServer, DistConfig, Chunk, DQNAgent, SubclassOfCourse,
                                    OverTheCourse, np.ndarray, dict])
def test_rate_limiter_refuses_the_course_and_the_pages_imports(answer):
    with pytest.raises(AssertionError, match="course's own|not yours|not a function of yours"):
        checks.check_rate_limiter(answer)


def test_rate_limiter_unanswered(capsys):
    assert checks.check_rate_limiter(None) is None
    assert checks.check_rate_limiter(Unanswered) is None
    assert checks.check_rate_limiter(SamplesUnanswered) is None
    out = capsys.readouterr().out
    assert out.count("Not answered yet") == 3 and "may_sample still returns None" in out


def test_every_target_is_run_with_a_fast_worker_and_a_fast_learner():
    """Both regimes of the chapter (the workers ahead, the learner ahead) for each target the check uses."""
    regimes = {}
    for case in LIMITER_CASES:
        regimes.setdefault(case.samples_per_insert, set()).add(case.fast)
    assert all(sides == {"worker", "learner"} for sides in regimes.values()) and len(regimes) == 3


@pytest.mark.parametrize("case", LIMITER_CASES)
def test_the_simulation_holds_the_ratio_with_the_solution(case):
    """With the solution, each side moves at the pace the target allows: the fast side is held to it, the slow one
    keeps its own, and the ratio of samples to inserts beyond min_size ends within the tolerance of the target."""
    limiter = Limiter(case.samples_per_insert, case.min_size, case.error_buffer)
    trace = _simulate(limiter, case, lambda method, inserted, sampled: getattr(limiter, method)(inserted, sampled))
    assert trace.early is None and trace.stuck is None and trace.worst is None
    beyond = trace.inserted - case.min_size
    assert abs(trace.sampled - case.samples_per_insert * beyond) <= case.error_buffer
    if case.fast == "worker":  # the learner keeps its own pace, a batch every `every` ticks
        assert trace.sampled == pytest.approx(TICKS_AFTER_MIN * case.batch / case.every, rel=0.05)
    else:  # the worker keeps its own, one transition per tick
        assert beyond == pytest.approx(TICKS_AFTER_MIN, rel=0.01)


def test_solution_cell_passes_its_checks():
    """The solution cell (committed without outputs, skipped by nbval) passes every check it calls."""
    from _solutions import run_solutions

    out = run_solutions("10_scaling_out_with_ray", {"checks": checks, "np": np})
    assert out.count("✓") == 3, out


def test_quiet_ray_sets_plain_output_before_ray(monkeypatch):
    """quiet_ray (notebook 10's set-up) turns Ray's colour codes and start-up notices off, keeping user settings."""
    import logging
    import warnings

    from dqn_course.lab import scaling

    monkeypatch.delenv("RAY_COLOR_PREFIX", raising=False)
    monkeypatch.setenv("NO_COLOR", "")
    with warnings.catch_warnings():
        scaling.quiet_ray()
        import os

        assert os.environ["RAY_COLOR_PREFIX"] == "0" and os.environ["NO_COLOR"] == ""
        assert all(logging.getLogger(n).level == logging.ERROR for n in scaling._NOISY_LOGGERS)
        with warnings.catch_warnings(record=True) as caught:
            warnings.warn("IProgress not found. Please update jupyter and ipywidgets.", stacklevel=2)
        assert not caught


# -- the questions' keys, verified ---------------------------------------------------------------------------


def _held_run(workers: int, ticks: int = 4_000) -> tuple[float, float]:
    """Question 1's case through the solution's limiter (8 samples per insert), in ticks of 10 ms: each worker offers
    5 transitions a tick (500 a second), the GPU learner could draw 4 batches of 32 a tick (400 updates a second).
    Returns (updates per tick, transitions stored per tick) over the ticks after the warm-up."""
    limiter, least = Limiter(8, 1_000, 64), 1_000
    inserted = sampled = updates = 0
    start = None
    for tick in range(ticks):
        for _ in range(5 * workers):
            if limiter.may_insert(inserted, sampled):
                inserted += 1
        if start is None and inserted >= least:
            start = (tick, inserted, updates)
        for _ in range(4):  # a batch is drawn whole or waits for a later tick (its samples held back until then)
            if not all(limiter.may_sample(inserted, sampled + k) for k in range(32)):
                break
            sampled, updates = sampled + 32, updates + 1
    tick0, inserted0, updates0 = start
    return (updates - updates0) / (ticks - tick0), (inserted - inserted0) / (ticks - tick0)


def test_question_1_key_a_second_worker_doubles_the_held_learners_updates():
    """10.limiter_more_workers: held at 8 samples per insert, the learner (the side ahead) makes 125 updates a second
    beside one worker and 250 beside two; the workers are never held (each stores its 500 a second)."""
    assert checks.QUESTIONS["10.limiter_more_workers"][0] == "a"
    one, two = _held_run(1), _held_run(2)
    assert one[0] * 100 == pytest.approx(125, rel=0.02) and two[0] * 100 == pytest.approx(250, rel=0.02)
    assert one[1] == pytest.approx(5, rel=0.01) and two[1] == pytest.approx(10, rel=0.01)  # no worker waits
    assert 32 * two[0] / two[1] == pytest.approx(8, rel=0.02)  # samples per step stays at the target


def test_question_2_key_b_the_learners_own_requests_overlap_the_replays_work(monkeypatch):
    """10.prefetched_batches: the course's Learner asks for its batches as it does in a run (``_next_batch``, with
    ``DistConfig``'s default prefetch), on a simulated clock: 2 ms per update, 5 ms per batch assembled by a
    replay actor that serves one request at a time. The slower side sets the pace: about 200 updates a second,
    not 1 / 7 ms (one after the other) nor 500 (the learner alone)."""
    from types import SimpleNamespace

    from dqn_course.distributed import roles

    assert checks.QUESTIONS["10.prefetched_batches"][0] == "b"
    clock = {"now": 0.0, "replay_free": 0.0}

    def sample(batch_size, count):
        clock["replay_free"] = max(clock["now"], clock["replay_free"]) + 0.005 * count
        return clock["replay_free"], count

    def get(ref):
        ready, count = ref
        clock["now"] = max(clock["now"], ready)
        return [object()] * count

    monkeypatch.setattr(roles, "ray", SimpleNamespace(get=get))
    monkeypatch.setattr(roles, "_writable", lambda batch: batch)
    learner = roles.Learner.__new__(roles.Learner)
    learner.cfg, learner.queue, learner.next_ref = DistConfig(), [], None
    learner.replay = SimpleNamespace(sample=SimpleNamespace(remote=sample))
    updates = 1_000
    for _ in range(updates):
        learner._next_batch(None)
        clock["now"] += 0.002  # the update
    assert updates / clock["now"] == pytest.approx(200, rel=0.03)


def test_the_summary_lines_worker_count_is_the_verdicts():
    """Notebook 10's summary line names the worker count at which ``verdict`` says adding workers stops helping:
    both read ``stops_helping``."""
    from dqn_course.lab.scaling import add_ratios, stops_helping, verdict

    def row(layout, workers, steps, updates):
        return {"layout": layout, "workers": workers, "env_steps_per_s": steps, "updates_per_s": updates,
                "learner_threads": 1}

    rows = [row("train", 1, 100, 25), row("ray", 1, 500, 20), row("ray", 2, 900, 19), row("ray", 4, 1_000, 18)]
    add_ratios(rows)
    assert stops_helping(rows) == (2, 4, pytest.approx(1_000 / 900), pytest.approx(18 / 19))
    assert "stops helping at 4 workers" in verdict(rows, 8)
    rows[3]["env_steps_per_s"] = 1_200  # 2 -> 4 now adds a third: every step helps
    assert stops_helping(rows) is None and "Up to 4 workers" in verdict(rows, 8)
    rows[2]["updates_per_s"] = 10  # 1 -> 2 costs half the updates
    assert stops_helping(rows)[:2] == (1, 2) and "stops helping at 2 workers" in verdict(rows, 8)
