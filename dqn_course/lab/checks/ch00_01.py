"""Notebooks 00 (setup), 01 (the naive agent) and 01b (measuring honestly): their checks, predictions, questions.
"""
from __future__ import annotations


from dqn_course.contracts import check_module
from dqn_course.lab.checks.core import (PREDICTIONS, QUESTIONS, Prediction, _check_number,
    _not_answered_yet, _passed, _require_number)


def check_raw_transition_bytes(answer) -> bool | None:
    """Notebook 00: bytes of one transition whose s and s' are separate 4-stacks of raw 210x160x3 uint8 screens."""
    screen = 210 * 160 * 3
    expected = 2 * 4 * screen
    return _check_number(
        answer, expected, todo="set `answer` to the number of bytes",
        should="answer should be a number of bytes (an int)",
        right=f"{expected:,} bytes per transition: 2 states (s and s') x 4 screens x 210x160x3 bytes.",
        hints=[(screen, "that is one screen; a transition holds two states of 4 screens each"),
               (4 * screen, "that is one 4-stack (s); s' is stored as a separate copy too"),
               (2 * screen, "that is s and s' as single screens; each state is a stack of 4 screens"),
               (8 * expected, "that is bits; count bytes (a uint8 pixel value is 1 byte)"),
               (2 * 4 * 84 * 84, "that is 84x84 gray frames; this memory stores raw 210x160x3 RGB screens"),
               (2 * 4 * 210 * 160, "that leaves out the 3 colour channels of each pixel")],
        otherwise=("count what one transition holds: how many screens, each of how many pixels and channels, at "
                   "how many bytes a value, for each of its states (section 5, *What does it cost?*)"))


def _call_answer(fn, args: tuple, name: str):
    """Call a learner's function; a crash becomes an AssertionError that names the call."""
    try:
        return fn(*args)
    except ZeroDivisionError as exc:
        raise AssertionError(f"{name}{args} raised ZeroDivisionError ({exc}): a memory that does not grow "
                             "(no bytes a step, or fewer) is never killed: the exercise's answer for it is "
                             "math.inf") from None


def check_bytes_per_transition(bytes_per_transition) -> bool | None:
    """Notebook 01: ``bytes_per_transition(step_a, rss_a, step_b, rss_b)`` from two RSS readings.

    One transition is stored per agent step, so the answer is the growth between the readings
    divided by the steps between them; the baseline (interpreter, torch, the networks) cancels out.
    """
    if bytes_per_transition is None:
        return _not_answered_yet("write `bytes_per_transition(step_a, rss_a, step_b, rss_b)` and pass the function")
    assert callable(bytes_per_transition), (
        "pass the function itself, e.g. check_bytes_per_transition(bytes_per_transition), "
        f"got {bytes_per_transition!r}")
    cases = ((500, 400_000_000, 1_500, 434_000_000),
             (1_000, 1_000_000_000, 3_000, 1_403_200_000),
             (3_000, 1_403_200_000, 1_000, 1_000_000_000),  # readings given latest first
             (0, 350_000_000, 250, 350_000_000))  # a memory that does not grow
    for args in cases:
        step_a, rss_a, step_b, rss_b = args
        got = _call_answer(bytes_per_transition, args, "bytes_per_transition")
        if got is None:
            return _not_answered_yet("bytes_per_transition still returns None; return a number of bytes")
        _require_number(got, f"bytes_per_transition{args} should be a number of bytes (an int)")
        expected = (rss_b - rss_a) / (step_b - step_a)
        if abs(got - expected) <= 1e-6 * max(1.0, abs(expected)):
            continue
        hints = [
            (rss_b - rss_a, "that is the growth between the readings; divide by the steps between them"),
            (rss_b / step_b if step_b else float("nan"),
             "that divides the whole RSS by the step, baseline included (the interpreter, torch, the networks "
             "are there at step 0); use the difference of two readings"),
            (-expected, "the sign is off: subtract the earlier reading from the later one (in the same order for "
                        "steps and bytes)"),
            (expected / 2**20, "that is MiB; answer in bytes"),
            (expected / 1e6, "that is MB; answer in bytes"),
            (expected / 2, "one transition is stored per step: do not halve it (s and s' copies are already in "
                           "the readings)"),
        ]
        hint = next((h for value, h in hints if abs(got - value) <= 1e-6 * max(1.0, abs(value))),
                    "two readings of one process share its baseline (the interpreter, torch, the networks): "
                    "what grew between them, spread over the steps between them, is what a step stored "
                    "(section 3, *Extrapolate*)")
        raise AssertionError(f"bytes_per_transition{args} returned {got:,.1f}, expected {expected:,.1f}: {hint}.")
    return _passed("bytes_per_transition is right: growth between two readings / steps between them "
                   "(the baseline cancels out)")


def check_killed_at_step(killed_at_step) -> bool | None:
    """Notebook 01: ``killed_at_step(baseline_bytes, bytes_per_step, available_bytes)``.

    A fresh agent process starts at ``baseline_bytes`` of RSS and grows by ``bytes_per_step``; with no
    swap it is killed (roughly) when that reaches the RAM available: at step
    (available - baseline) / bytes_per_step, and never (``math.inf``) if it does not grow.
    Answers within one step of that are right (rounding up or down is fine).
    """
    import math

    if killed_at_step is None:
        return _not_answered_yet("write `killed_at_step(baseline_bytes, bytes_per_step, available_bytes)` and "
                                 "pass the function")
    assert callable(killed_at_step), (
        f"pass the function itself, e.g. check_killed_at_step(killed_at_step), got {killed_at_step!r}")
    cases = ((350_000_000, 40_000, 20_000_000_000),
             (0, 201_600, 16 * 2**30),
             (400_000_000, 34_000, 8_000_000_000),
             (400_000_000, 0, 8_000_000_000),
             (400_000_000, -100, 8_000_000_000))
    for args in cases:
        baseline, per_step, available = args
        got = _call_answer(killed_at_step, args, "killed_at_step")
        if got is None:
            return _not_answered_yet("killed_at_step still returns None; return a step number")
        _require_number(got, f"killed_at_step{args} should return a step number (int, float or math.inf)")
        if per_step <= 0:
            assert got == math.inf, (
                f"killed_at_step{args} returned {got!r}: with bytes_per_step = {per_step} the memory never grows, "
                "so the process is never killed: return math.inf")
            continue
        expected = (available - baseline) / per_step
        if abs(got - expected) <= 1:
            continue
        hints = [
            (available / per_step, "the baseline is in RAM before the first step: only the RAM it leaves "
                                   "free is left for the memory to grow into"),
            ((available + baseline) / per_step, "subtract the baseline from the available RAM, don't add it"),
            (available / per_step / 2, "bytes_per_step is already per transition (per step): don't halve it"),
            (available - baseline - per_step, "divide what is left by the bytes per step"),
        ]
        hint = next((h for value, h in hints if abs(got - value) <= 1),
                    "the process is killed once its growth, step after step, has used up the RAM "
                    "its baseline leaves free (section 3, *Extrapolate*)")
        raise AssertionError(f"killed_at_step{args} returned {got:,.1f}, expected about {expected:,.1f}: {hint}.")
    return _passed("killed_at_step is right: (available - baseline) / bytes per step, and never (inf) "
                   "for a memory that does not grow")


_LEARNING = "section 1, *Learning*"


PREDICTIONS.update({
    "01.predict_calls": Prediction("the predict calls in one replay()", 0, lambda m: {
        m / 2: "one call per sampled transition is half the story: a target starts from the Q-values of its state s, "
               f"and the TD target in it needs those of its next state s' ({_LEARNING})",
        m / 32: "that is one call per batch of states, the batched pass notebook 06 writes; the posted replay() "
                f"forwards one state at a time ({_LEARNING})",
        m / 64: "one batched call for the whole minibatch is notebook 06's fix; the posted replay() forwards one "
                f"state at a time ({_LEARNING})",
        2 * m: "one forward pass of a state gives the Q-values of every action at once: no pass per action "
               f"({_LEARNING})",
        4 * m: "one forward pass of a state gives the Q-values of all 4 actions at once: no pass per action "
               f"({_LEARNING})",
        m * 65 / 64: "that adds act()'s greedy call: the question is one replay() alone (act() is counted in the cell "
                     "after the check)"},
        "count the forward passes replay() makes for one sampled transition, then for the whole minibatch "
        f"({_LEARNING})"),
    "01b.page_rss": Prediction("the MB of RSS growth, one byte written in each page", 0.03, lambda m: {
        0: "np.zeros pages cost nothing until written, but here every page gets a write: RSS counts every page "
           "written at least once, however little of it (section 3, the first paragraph)",
        m / 4096: "RSS counts whole pages, not the bytes written in them: which pages did the writes touch? "
                  "(section 3, the first paragraph)",
        m * 1e6 / 2**20: "that is MiB; a MB here is 10⁶ bytes, as everywhere in the course"},
        "count the pages the writes touch, and what RSS counts for each of them (section 3, the first paragraph)"),
})


QUESTIONS.update({
    "00.pong_done": ("b", "a game that someone won is over: nothing follows its last transition, so done is 1 there; "
                          "a time limit stops the clock on a state that still had a future, so that transition is "
                          "not done and its target keeps γ · max Q_target; a lost point is no lost life (Pong has "
                          "none), so it ends nothing",
                     {"a": "a cut by the clock is a truncation: the state still had a future, only the clock stopped "
                           "the game (section 6, *DQN in one page*, the time-limit case)",
                      "c": "Pong has no lives: after a lost point play goes on with the next serve, and only the end "
                           "of a game or a lost life counts as done (section 6, *DQN in one page*, the two Breakout "
                           "cases)"}),
    "01.killed_scaling": ("b", "the baseline is in RAM on either machine, paid once: all the added RAM goes to "
                               "transitions, so the process lives twice your steps plus the baseline's worth of "
                               "steps (the baseline over the bytes per step)",
                          {"a": "the baseline cancels in the bytes per step (a difference of two readings), not in "
                                "the step at which a process is killed: work that step out for each machine from the "
                                "RAM it has left once the baseline is in (section 3, *Extrapolate*)",
                           "c": "your machine pays the baseline out of its RAM too: compare the RAM each machine has "
                                "left for steps once the baseline is in, not the RAM each has (section 3, "
                                "*Extrapolate*)"}),
    "01b.which_tool_sees": ("b", "an np.memmap's bytes are a file the OS maps into the process, not a buffer from "
                                 "NumPy's allocator, the one that reports to tracemalloc (section 2); RSS counts the "
                                 "mapped pages while they sit in RAM",
                            {"a": "NumPy's data buffers do show in tracemalloc (section 2, the np.ones line): what "
                                  "differs here is who provides the bytes",
                             "c": "written pages of a mapped file stay in RAM, in the OS's page cache, until it needs "
                                  "the room, and RSS counts them; tracemalloc would miss them even there: who "
                                  "provides those bytes? (section 2)"}),
})


check_module(globals())
