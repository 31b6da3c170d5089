"""Notebook 10 (scaling out with Ray): its exercise (a rate limiter), its prediction and its questions.

The exercise holds samples per step at a target; the prediction is the Ray learner's updates/s over the single
process's.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from dqn_course.contracts import check_module
from dqn_course.lab.checks.core import (PREDICTIONS, QUESTIONS, Prediction, _call_learner, _not_answered_yet, _passed,
                                        _require_learners_code)

_LIMITER = "section 4, *Holding the ratio: a rate limiter*"
_RATIO = "*The shape*, samples per step"
_CALL = "RateLimiter(samples_per_insert, min_size, error_buffer)"
_METHODS = ("may_insert", "may_sample")


class LimiterCase(NamedTuple):
    """One simulated run of ``check_rate_limiter``: the limiter's settings (``samples_per_insert``, ``min_size``,
    ``error_buffer``) and the learner's pace, a batch of ``batch`` samples, then ``every`` ticks of computing
    before the next (the worker offers one transition per tick). Left free, the learner would draw
    ``batch / every`` samples per insert: more than ``samples_per_insert`` makes the learner the fast side, less
    makes the worker the fast side."""

    samples_per_insert: float
    min_size: int
    error_buffer: float
    batch: int
    every: int

    @property
    def fast(self) -> str:
        """The side that would run ahead of the target with no limiter: ``"worker"`` or ``"learner"``."""
        return "learner" if self.batch / self.every > self.samples_per_insert else "worker"


# None of them the page's (its table has no limiter; its learner draws batches of 32): targets below 1, fractional
# and 8 samples per insert, each with a fast worker and a fast learner, a batch larger than the tolerance included.
LIMITER_CASES = (
    LimiterCase(8, 400, 64, 32, 16),  # the learner's own pace gives 2 samples per insert: the worker is ahead
    LimiterCase(8, 400, 64, 32, 1),  # 32 per insert: the learner is ahead
    LimiterCase(0.5, 250, 16, 16, 64),  # 0.25 per insert: the worker is ahead
    LimiterCase(0.5, 250, 16, 16, 4),  # 4 per insert: the learner is ahead
    LimiterCase(2.5, 1_000, 40, 64, 40),  # 1.6 per insert, a batch larger than the tolerance: the worker is ahead
    LimiterCase(2.5, 1_000, 40, 64, 8),  # 8 per insert: the learner is ahead
)
TICKS_AFTER_MIN = 3_000  # ticks each run goes on once the memory holds min_size transitions
STALLED = 3  # consecutive ticks on which both sides want to act and both are refused: a deadlock


class _Unanswered(Exception):
    """A method of the learner's limiter returned None: the exercise is not answered yet."""


class _Trace(NamedTuple):
    """What one simulated run recorded (``_simulate``)."""

    early: tuple[int, int] | None  # (inserted, sampled) when a sample was allowed before min_size
    stuck: tuple[int, int] | None  # (inserted, sampled) when both sides had been refused STALLED ticks in a row
    inserted: int
    sampled: int
    worst: tuple[float, int, int] | None  # (distance beyond the tolerance, inserted, sampled), the largest
    from_first: bool  # at the end, within the tolerance when the samples owed are counted from the first insert
    min_tick: int | None  # the tick at which the memory first held min_size transitions


def _simulate(limiter, case: LimiterCase, ask) -> _Trace:
    """Run ``limiter`` (the learner's class, built for ``case``) in a replay memory fed by a worker that offers one
    transition per tick and read by a learner that draws ``case.batch`` samples, one ``may_sample`` at a time (a
    refused sample waits for a later tick), then computes for ``case.every`` ticks. ``ask(method, inserted,
    sampled)`` asks the limiter and returns its bool. Deterministic: no threads, no clock."""
    spi, least, slack = case.samples_per_insert, case.min_size, case.error_buffer + case.samples_per_insert + 1

    def trace(early=None, stuck=None):
        return _Trace(early, stuck, inserted, sampled, worst, abs(spi * inserted - sampled) <= slack, min_tick)

    inserted = sampled = 0
    pending, ready_at, refused_both, min_tick = case.batch, 0, 0, None
    worst = None
    for tick in range(least + TICKS_AFTER_MIN):
        stored = ask("may_insert", inserted, sampled)
        if stored:
            inserted += 1
        if min_tick is None and inserted >= least:
            min_tick = tick
        wants = tick >= ready_at
        drew = False
        while wants and pending and ask("may_sample", inserted, sampled):
            if inserted < least:
                return trace(early=(inserted, sampled))
            sampled, pending, drew = sampled + 1, pending - 1, True
        if wants and not pending:
            pending, ready_at = case.batch, tick + case.every
        if inserted >= least:
            off = abs(spi * (inserted - least) - sampled) - slack
            if off > 0 and (worst is None or off > worst[0]):
                worst = (off, inserted, sampled)
        refused_both = refused_both + 1 if (not stored and wants and pending and not drew) else 0
        if refused_both >= STALLED:
            return trace(stuck=(inserted, sampled))
    return trace()


def _verdict(trace: _Trace, case: LimiterCase) -> str | None:
    """What went wrong in one simulated run, as "what happened: hint" (the hint names the concept and the
    section), or None when the run held the ratio, started at the minimum, never stuck and never held back the
    slower side."""
    spi, least, buf = case.samples_per_insert, case.min_size, case.error_buffer
    if trace.early is not None:
        inserted, _ = trace.early
        return (f"the learner was let draw a sample when the memory held {inserted:,} of its min_size of "
                f"{least:,} transitions: no sample comes before the memory holds its minimum, or the first batches "
                f"are drawn again and again from a handful of transitions ({_LIMITER})")
    if trace.stuck is not None:
        inserted, sampled = trace.stuck
        if inserted < least:
            return (f"the worker was refused with {inserted:,} transitions stored, fewer than min_size ({least:,}), "
                    "while the learner may not sample yet: nothing could move again (a deadlock). Before the "
                    f"memory holds its minimum no sample is owed, so nothing holds the workers back ({_LIMITER})")
        return (f"after {inserted:,} inserts and {sampled:,} samples both sides were refused and nothing could move "
                "again (a deadlock): the tolerance, error_buffer samples on either side of the target, is what "
                f"leaves one side free to act while the other catches up ({_LIMITER})")
    beyond = trace.inserted - least
    if trace.worst is not None:
        ratio = trace.sampled / beyond if beyond > 0 else float("nan")
        if spi != 1 and beyond > 0 and abs(ratio * spi - 1) < 0.25:
            return (f"samples per insert came out at {ratio:.3g}, about the inverse of the target {spi:g}: the "
                    f"ratio counts the samples drawn per transition stored ({_RATIO}; {_LIMITER})")
        if trace.from_first:
            return (f"the samples drawn followed {spi:g} per transition stored counting from the first insert, so "
                    f"the first {least:,} transitions were owed {spi * least:,.0f} samples the moment learning could "
                    "start: the minimum is the memory's warm-up, not a debt, and counting it makes the learner "
                    f"replay those transitions in a burst while the workers wait ({_LIMITER})")
        _, inserted, sampled = trace.worst
        owed = spi * (inserted - least) - sampled
        if owed > 0:
            return (f"the worker ran ahead: with {inserted - least:,} transitions stored beyond min_size the learner "
                    f"had drawn {sampled:,} samples, {owed:,.0f} fewer than {spi:g} per insert asks, more than the "
                    f"error_buffer of {buf:g}: when the learner falls that far behind, the limiter makes the "
                    f"workers wait ({_LIMITER})")
        return (f"the learner ran ahead: with {inserted - least:,} transitions stored beyond min_size it had drawn "
                f"{sampled:,} samples, {-owed:,.0f} more than {spi:g} per insert asks, more than the error_buffer "
                f"of {buf:g}: when the learner is that far ahead, the limiter makes it wait ({_LIMITER})")
    ticks = least + TICKS_AFTER_MIN - (trace.min_tick or 0)
    if case.fast == "worker" and trace.sampled < 0.9 * ticks * case.batch / case.every - case.batch:
        return (f"the learner, the slower side here, was held back: it drew {trace.sampled:,} samples where its own "
                f"pace gives about {ticks * case.batch / case.every:,.0f}: a rate limiter makes only the side that "
                f"runs ahead wait, and lets the other go at its own pace ({_LIMITER})")
    if case.fast == "learner" and beyond < 0.9 * ticks - 1:
        return (f"the worker, the slower side here, was held back: it stored {beyond:,} transitions beyond min_size "
                f"where its own pace gives about {ticks:,}: a rate limiter makes only the side that runs ahead "
                f"wait, and lets the other go at its own pace ({_LIMITER})")
    return None


def check_rate_limiter(limiter_class: Any) -> bool | None:
    """Notebook 10: ``RateLimiter(samples_per_insert, min_size, error_buffer)`` with ``may_insert(inserted,
    sampled)`` and ``may_sample(inserted, sampled)``, each answering (True or False) whether one more transition may
    be stored, or one more sample drawn, when ``inserted`` transitions have been stored and ``sampled`` drawn.

    Refused first: a class whose constructor or methods are not the learner's own code (the course's classes, which
    the page imports, a library's, a subclass of either, or methods that call the course's code). Then checked by
    behaviour, each case of ``LIMITER_CASES`` in a deterministic simulation (``_simulate``: a worker that offers one
    transition per tick, a learner that draws a batch and computes for some ticks; no Ray, no clock), with targets,
    tolerances, minimum sizes and speeds the page does not show, a fast worker and a fast learner for each target.
    Right when, in every case: no sample is allowed before ``min_size`` transitions are stored; from then on the
    samples drawn stay within ``error_buffer`` (plus one insert's and one sample's worth, the slack of asking
    before or after acting) of ``samples_per_insert`` times the transitions stored beyond ``min_size``; the two
    sides are never both refused ``STALLED`` ticks in a row (a deadlock); and the slower side keeps at least 90%
    of its own pace. ``None``, or a method that returns ``None``, is "not answered yet". Raises ``AssertionError``
    with a hint naming the concept and the section.
    """
    if limiter_class is None:
        return _not_answered_yet(f"write the class {_CALL}")
    assert isinstance(limiter_class, type), (
        f"pass the class itself, e.g. check_rate_limiter(RateLimiter), got {limiter_class!r}")
    write = f"a class of your own that decides when each side must wait ({_LIMITER})"
    _require_learners_code(limiter_class, _CALL, write)
    for name in _METHODS:
        assert hasattr(limiter_class, name), (
            f"{limiter_class.__name__} has no `{name}`: the limiter answers {' and '.join(_METHODS)}")
        _require_learners_code(getattr(limiter_class, name), f"{limiter_class.__name__}.{name}(inserted, sampled)",
                               write)
    import numpy as np

    unanswered = []

    def ask(limiter):
        def answer(method: str, inserted: int, sampled: int) -> bool:
            got = _call_learner(getattr(limiter, method), (inserted, sampled), f"{method}({inserted}, {sampled})")
            if got is None:
                unanswered.append(method)
                raise _Unanswered
            assert isinstance(got, (bool, np.bool_)), (
                f"{method}({inserted:,}, {sampled:,}) returned {got!r}: answer True (go on) or False (wait), the "
                f"limiter's yes or no to one request ({_LIMITER})")
            return bool(got)
        return answer

    for case in LIMITER_CASES:
        spi, least, buf = case.samples_per_insert, case.min_size, case.error_buffer
        limiter = _call_learner(limiter_class, (spi, least, buf), f"{limiter_class.__name__}({spi}, {least}, {buf})")
        try:
            trace = _simulate(limiter, case, ask(limiter))
        except _Unanswered:
            return _not_answered_yet(f"{unanswered[0]} still returns None; return True or False")
        wrong = _verdict(trace, case)
        if wrong is not None:
            raise AssertionError(
                f"target {spi:g} samples per insert, min_size {least:,}, error_buffer {buf:g}, a learner drawing "
                f"{case.batch} samples every {case.every} tick(s) beside a worker offering one transition per tick "
                f"(the {case.fast} is the fast side): {wrong}.")
    return _passed(f"{len(LIMITER_CASES)} simulated runs, a fast worker and a fast learner for each of 3 targets: "
                   "no sample before the minimum, the samples drawn within the tolerance of the target all along, "
                   "no deadlock, and the slower side at its own pace")


def _ray_updates_mistakes(measured: float, steps_vs_train: float) -> dict[float, str]:
    """The likely wrong predictions of the Ray learner's updates/s over the single process's: the workers' gain
    taken for the learner's, and, where the learner was the slow side (``measured`` below 2), the 4 agent steps of
    waiting taken for what the single process lost."""
    wrong = {steps_vs_train: "that is what Ray does to env steps/s, the workers' side; the learner's updates/s are set "
                             "by the compute each update gets (section 4, *Reading the table*, learner threads)"}
    if measured < 2:
        wrong[4.0] = ("the single process waited for 4 agent steps per update, but on this machine a gradient step "
                      "costs far more than 4 emulator steps, so not waiting for them frees little (section 4, the "
                      "layouts, and *Reading the table*, learner threads)")
    return wrong


PREDICTIONS.update({
    "10.ray_updates": Prediction(
        "the learner's updates/s with Ray and 1 worker, as a multiple of the single-process loop's", 0.2,
        _ray_updates_mistakes,
        "an update's speed is its compute: which cores and threads does the Ray learner get, beside the worker and "
        "the replay actor, where the single process had them all between its 4 steps? (section 4, *Reading the "
        "table*, learner threads)"),
})


QUESTIONS.update({
    # Question 1 (a rate limiter's target held while the side behind speeds up): one worker stores 500 transitions
    # per second, a GPU learner could make 400 updates of 32 (25.6 samples per step); held at 8, it makes
    # 500 x 8 / 32 = 125 updates/s. A second worker doubles the transitions: 250 updates/s, still within its 400.
    # tests/test_checks_10.py replays the case through the solution's limiter.
    "10.limiter_more_workers": ("a", "the limiter holds the ratio at 8 samples per transition stored, so the "
                                     "learner, the side that runs ahead, makes 500 x 8 / 32 = 125 updates/s with "
                                     "one worker and waits for the rest. A second worker stores twice the "
                                     "transitions, which owe twice the samples: 250 updates/s, still within the 400 "
                                     "the GPU could make, at 8 samples per step. Only the side ahead waits, so the "
                                     "workers are never held",
                                {"b": "that is the free run of section 4, where nothing holds the ratio: here the "
                                      "limiter lets the learner draw samples per transition stored, so more "
                                      "transitions let it draw more (section 4, *Holding the ratio: a rate "
                                      "limiter*)",
                                 "c": "a rate limiter makes wait only the side that runs ahead of its target: which "
                                      "side is ahead when the learner could draw 25.6 samples per step and the "
                                      "target is 8? (section 4, *Holding the ratio: a rate limiter*)"}),
    # Question 2 (the learner's requests to the replay actor, Learner._next_batch): an update takes 2 ms and a batch
    # 5 ms to assemble; with the next request in flight while the learner learns, the slower of the two sets the
    # pace, 1 / 5 ms = 200 updates/s (one after the other: 1 / 7 ms, about 140; the learner alone: 500).
    # tests/test_checks_10.py times the Learner's own request loop on a simulated clock.
    "10.prefetched_batches": ("b", "the learner asks for the next batches as soon as a reply arrives, so the replay "
                                   "actor assembles them while the learner learns from the last ones: the two "
                                   "overlap, and the slower, 5 ms a batch, sets the pace, 1 / 5 ms = 200 updates/s. "
                                   "The GPU then waits about 3 ms of every 5: a faster replay actor would lift "
                                   "it, a faster GPU would not",
                              {"a": "that is an update and a batch one after the other, 7 ms each: true of a "
                                    "learner that asks for each batch only when it needs it. This page's learner "
                                    "asks ahead (*The shape*, the learner's line)",
                               "c": "asking ahead overlaps assembling with learning, but the replay actor still "
                                    "spends 5 ms on each batch: can the learner use batches faster than they "
                                    "are made? (*The shape*, the learner's line)"}),
})


check_module(globals())
