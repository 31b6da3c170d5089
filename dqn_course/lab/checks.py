"""One-call self-checks for the notebooks' exercises.

Each ``check_*`` function takes the learner's answer (a number or a function), compares it with the
course's own implementation or arithmetic, prints a line starting with "✓" when it is right, and
raises ``AssertionError`` with a hint when it is not. The sections follow the notebooks, 00 to 10.
tests/test_checks_00_03.py, test_checks_01.py, test_checks_04_06.py, test_checks_core.py, test_checks_07.py,
test_checks_08.py, test_checks_09.py, test_checks_09_resume.py and test_checks_10.py prove that
every check passes the right answer and rejects wrong ones with its hint.
"""
from __future__ import annotations

import operator
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from dqn_course.contracts import Count, check_module


def _passed(message: str) -> bool:
    print(f"✓ {message}")
    return True


def _not_answered_yet(todo: str) -> None:
    """The answer is still ``None``: say so without raising, so the notebook runs top to bottom."""
    print(f"Not answered yet: {todo}, then run this cell again.")
    return None


def _require_number(value, should: str) -> None:
    """Raise ``AssertionError`` "<should>, got <type>: <value>" unless ``value`` is a real number (not a bool)."""
    import numbers

    assert isinstance(value, numbers.Real) and not isinstance(value, bool), (
        f"{should}, got {type(value).__name__}: {value!r}")


def _check_number(answer, expected: float, *, todo: str, should: str, right: str, hints: list[tuple[float, str]],
                  otherwise: str, close: Callable[[float, float], bool] = operator.eq, show: str = ",") -> bool | None:
    """The pattern of the checks that take one number: ``None`` is not answered yet (``todo`` says what to do);
    anything but a number fails with ``should``; an answer ``close`` to ``expected`` passes with ``right``;
    otherwise the first hint whose value the answer is close to, or ``otherwise``, in
    "<answer> is not it: <hint>." (the answer formatted with ``show``)."""
    if answer is None:
        return _not_answered_yet(todo)
    _require_number(answer, should)
    if close(answer, expected):
        return _passed(right)
    hint = next((h for value, h in hints if close(answer, value)), otherwise)
    raise AssertionError(f"{answer:{show}} is not it: {hint}.")


# --- notebook 00: setup -------------------------------------------------------------------------------------

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


# --- notebook 01: the naive agent ---------------------------------------------------------------------------

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


# --- notebook 02: downsampling ------------------------------------------------------------------------------

def _preprocess_check_frames():
    """Real Breakout screens for ``check_preprocess`` (computed once per process)."""
    global _PREPROCESS_FRAMES
    if _PREPROCESS_FRAMES is None:
        from dqn_course.lab.frames import raw_frames

        _PREPROCESS_FRAMES = raw_frames(6, seed=1, every=20)
    return _PREPROCESS_FRAMES


_PREPROCESS_FRAMES = None


def _preprocess_hint(out, frame) -> str:
    """Why ``out`` differs from the reference for ``frame``: compare with the usual mistakes."""
    import cv2
    import numpy as np

    def close(a):
        return a.shape == out.shape and int(np.abs(a.astype(np.int16) - out.astype(np.int16)).max()) <= 1

    gray = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
    area = cv2.INTER_AREA
    if close(cv2.resize(gray, (84, 84), interpolation=area).T):
        return ("the frame comes out transposed, its rows and columns swapped: keep the screen's axes as they are, "
                "rows first")
    if close(cv2.resize(cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY), (84, 84), interpolation=area)):
        return ("the screen is RGB, not BGR: a BGR conversion gives red the weight that belongs to blue (section 4, "
                "*The preprocessing, by hand*, gives the luminance weights)")
    if close(cv2.resize(frame.mean(axis=2).astype(np.uint8), (84, 84), interpolation=area)):
        return ("a plain mean of R, G and B is not luminance: gray weighs the channels as the eye does, green "
                "most (section 4, *The preprocessing, by hand*, gives the weights)")
    for name, how in (("INTER_LINEAR", "bilinear"), ("INTER_NEAREST", "nearest-neighbour"),
                      ("INTER_CUBIC", "bicubic")):
        if close(cv2.resize(gray, (84, 84), interpolation=getattr(cv2, name))):
            return (f"that is a {how} resize: it samples a few input pixels per output pixel, and thin bricks or the "
                    "ball can fall between them; the resize to use is area averaging, each output pixel the mean "
                    "of all the input pixels it covers (section 4, *The preprocessing, by hand*)")
    return ("the whole screen, converted to gray, then shrunk to 84 x 84 by averaging the pixels each output pixel "
            "covers, without cropping (section 4, *The preprocessing, by hand*)")


def check_preprocess(preprocess) -> bool | None:
    """Notebook 02: ``preprocess(frame)`` turns a (210, 160, 3) RGB uint8 screen into an (84, 84) uint8 frame.

    Compared on real Breakout screens with the course's reference (``frames.downsample``: luminance gray,
    then ``cv2.resize`` with ``INTER_AREA``, as ``AtariPreprocessing`` does); pixels may differ by 1
    (rounding), no more.
    """
    import numpy as np

    from dqn_course.lab.frames import downsample

    if preprocess is None:
        return _not_answered_yet("write `preprocess(frame)` and pass the function (no brackets)")
    assert callable(preprocess), f"pass the function itself, e.g. check_preprocess(preprocess), got {preprocess!r}"
    for i, frame in enumerate(_preprocess_check_frames()):
        out = preprocess(frame.copy())
        assert isinstance(out, np.ndarray), f"preprocess should return a numpy array, got {type(out).__name__}"
        if out.shape != (84, 84):
            if out.shape in ((84, 84, 1), (1, 84, 84)):
                hint = "drop the channel axis (a gray frame is 2-D)"
            elif out.shape == (105, 80):
                hint = ("that is every second row and column of 210x160: shrink the whole gray screen to 84 x 84 "
                        "with an area-averaging resize instead (section 4, *The preprocessing, by hand*)")
            elif out.shape[-1:] == (3,):
                hint = ("the frame is still in colour: it should be luminance gray, one value per pixel (section 4, "
                        "*The preprocessing, by hand*)")
            else:
                hint = "the gray screen should be shrunk to 84 x 84 as a whole (section 4, *The preprocessing*)"
            raise AssertionError(f"preprocess returned shape {out.shape}, expected (84, 84): {hint}.")
        if out.dtype != np.uint8:
            raise AssertionError(
                f"preprocess returned dtype {out.dtype} ({out.dtype.itemsize} bytes per pixel), expected uint8 "
                "(1 byte): keep the pixels as integers 0-255 (section 2, *Trap 1*: a mean or a division makes "
                "float64)")
        ref = downsample(frame)
        diff = np.abs(out.astype(np.int16) - ref.astype(np.int16))
        if int(diff.max()) > 1:
            raise AssertionError(
                f"on test screen {i}, {int((diff > 1).sum()):,} of 7,056 pixels differ from the reference by more "
                f"than 1 (up to {int(diff.max())}): {_preprocess_hint(out, frame)}.")
    return _passed("preprocess matches the reference (gray + INTER_AREA resize to 84x84, uint8) on "
                   f"{len(_preprocess_check_frames())} real Breakout screens.")


# --- notebooks 03-10: predict, then measure; short questions --------------------------------------------------

def _show(x) -> str:
    """A number as the learner reads it: thousands separators, no spurious decimals."""
    if float(x).is_integer():
        return f"{int(x):,}"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


REDO = "redo the arithmetic from the cell's numbers"


def _prediction_hint(prediction, measured, rel: float, forgot: dict | None, otherwise: str = REDO) -> str:
    """How far ``prediction`` is from ``measured``, in words that never state ``measured``.

    The direction (too high / too low), a rough factor band, and, when ``prediction / measured`` lies within 5%
    of a factor in ``forgot`` (within half its distance from 1 for a factor closer to 1 than 10%), what that
    factor usually means; else ``otherwise``. A prediction of zero gets ``forgot``'s text for the factor 0.
    """
    forgot = forgot or {}
    if prediction == 0 and measured != 0:
        return f"zero, where the measurement is not: {forgot.get(0, otherwise)}"
    if measured == 0 or (prediction > 0) != (measured > 0):
        return f"not even the same sign as the measurement (or zero): {otherwise}"
    ratio = prediction / measured
    direction = "too high" if abs(prediction) > abs(measured) else "too low"
    factor = max(abs(ratio), 1 / abs(ratio))
    if factor > 10:
        band = "off by more than 10x"
    elif factor >= 1.5:
        band = f"off by about {max(2, round(factor))}x"
    elif factor > 1.1:
        band = "off by between 10% and 50%"
    else:
        band = "within 10% but not exact" if rel == 0 else f"within 10% but not within {rel:.0%}"
    hint = f"{direction}, {band}"
    # A factor matches within 5%, or within half its distance from 1 when closer (a near miss is not "forgot").
    near = [(abs(ratio / f - 1), why) for f, why in forgot.items()
            if f > 0 and abs(ratio / f - 1) <= min(0.05, abs(f - 1) / 2)]
    why = min(near)[1] if near else otherwise
    return f"{hint}: {why}"


def check_prediction(prediction: Any, measured: float, what: str, rel: float = 0.02, *,
                     forgot: dict[float, str] | None = None, otherwise: str = REDO) -> bool | None:
    """Notebooks 03-10: the learner's ``prediction`` (a number written *before* the measurement) against the
    ``measured`` value, within ``rel`` (2% by default; 0 asks for the exact value).

    A wrong prediction gets a hint, never the measured value: too high or too low, by roughly what factor
    (more than 10x, about N x, 10-50%, within 10%), and, when ``prediction / measured`` is within 5% of a key
    of ``forgot``, that key's text: e.g. ``forgot={8.0: "pixels are uint8, 1 byte each, not float64"}``; else
    ``otherwise`` (how to work the number out). On success it prints the measured value (the learner has answered).
    """
    if prediction is None:
        return _not_answered_yet(f"write your prediction of {what} (a number) in the cell above")
    _require_number(prediction, f"the prediction of {what} should be a number")
    off = abs(prediction - measured) / max(abs(measured), 1e-12)
    if off <= rel:
        return _passed(f"{what}: predicted {_show(prediction)}, measured {_show(measured)}")
    raise AssertionError(f"you predicted {_show(prediction)} for {what}; that is "
                         f"{_prediction_hint(prediction, measured, rel, forgot, otherwise)}.")


class Prediction(NamedTuple):
    """One predict-then-measure question: the quantity (``what``), how close counts (``rel``; 0 asks for the exact
    value), the likely mistakes: ``mistakes(measured, **given)`` maps the number a learner who made a mistake
    would write to its hint (``given``: the notebook's own inputs a wrong answer is made of), and the hint for any
    other wrong number (``otherwise``: how to work it out)."""

    what: str
    rel: float
    mistakes: Callable[..., dict[float, str]]
    otherwise: str = REDO


_FLOAT64 = "section 4, *The float64 trap*"
_BATCH = "section 3, *Scale on the device, at learn time*"
_LIFE = "section 5, *Losing a life is not the end of an episode*"
_STACK_LIFE = f"too few frames stored again at each lost life: count the frames of the state that follows it which " \
              f"padding cannot rebuild ({_LIFE})"
_BY_INDEX = "notebook 04, section 2, *Building a stack by index*"
_LEARNING = "section 1, *Learning*"
_STACK96 = 4 * 96 * 96  # notebook 05's prediction: a 4-stack of 96x96 frames
_SCHEDULE = "section 1, *Why ε follows a schedule*"
_PRESETS = "section 1, *Two presets, one learning problem*"
_RESUME = "section 3, *Resume*"

# Each notebook's predictions, named as QUESTIONS are: the check cell passes the key, the prediction and the
# measurement (and the inputs a mistake is made of), so that no wrong answer or hint is written on the page.
PREDICTIONS = {
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
    "02.max_changes": Prediction("the pixels the maximum changes per step (mean)", 0.5, lambda m: {
        0: "Breakout draws its objects on every screen, but do they stay put from one screen to the next? The "
           "maximum keeps where a moving object was on the first screen as well (section 3, the first paragraph)",
        7_056: "the maximum changes a pixel only where one of the two screens drew something the other did not: what "
               "in Breakout is on one screen and gone from the next? (section 3, the first paragraph)",
        1: "the ball and the paddle move between the two screens: where they were a moment before counts too "
           "(section 3)"},
        "estimate how many pixels of an 84 × 84 frame the ball and the paddle cover, and how many of them a move "
        "of one screen uncovers (section 3)"),
    "03.batch_over_255": Prediction("the bytes of batch / 255", 0.02, lambda m: {
        m / 8: f"that is the uint8 batch itself; dividing by 255 gives floats: which float type does NumPy pick? "
               f"({_FLOAT64})",
        m / 4: "that is 2 bytes a pixel (float16), or float64 states of one frame instead of four: NumPy's default "
               f"float is bigger ({_FLOAT64}), and a state is a 4-stack (section 1, *One state, four dtypes*)",
        m / 2: f"that is 4 bytes a pixel (float32); NumPy picks a bigger float when it divides integers ({_FLOAT64})",
        m / 32: f"that is one state; the batch holds 32 of them ({_BATCH})",
        2 * m: f"the batch holds 32 states, not 32 pairs of s and s' ({_BATCH})",
        8 * m: "that is bits; count bytes, as nbytes does (section 1, *One state, four dtypes*)"},
        f"the pixels of the batch times the bytes of the float NumPy picks when it divides integers (section 1, "
        f"*One state, four dtypes*; {_FLOAT64})"),
    "04.frames_stored": Prediction("frames stored for 3 games of 10 transitions, 2 lives lost in each", 0, lambda m: {
        33: "that is what the memory stores when it is told where the games end; given only done, what does it make "
            f"of a lost life? ({_LIFE})",
        57: "four frames again at every lost life, as in section 5's game; but the state after a game's 2nd "
            "transition still holds padding: which of its frames can padding rebuild? (section 3, *Episode starts: "
            f"padding*, and {_LIFE})",
        30: "one frame per transition leaves out each game's last next-state frame (section 1, *The same transitions "
            f"in four memories*) and what a lost life costs when only done is passed ({_LIFE})",
        39: "that counts a lost life as one more frame, as a reset would cost; but what does the state after a lost "
            f"life hold, padding or frames the agent saw? ({_LIFE})",
        45: _STACK_LIFE,
        51: "three frames again at every lost life: which lost life comes late enough that the state after it holds "
            f"no padding? (section 3, *Episode starts: padding*, and {_LIFE})",
        63: "one frame too many at each lost life: the state's frames are stored again, but its next-state frame is "
            f"one the game stores anyway ({_LIFE})",
        120: "that is a 4-frame stack per transition: how often does this memory keep a frame it has already "
             "stored? (section 2, *Building a stack by index*)",
        240: "that is s and s' stacks, 8 frames per transition, the layout this memory replaces (section 1, *The "
             "same transitions in four memories*)",
        54: "each game also stores its last next-state frame (section 1, *The same transitions in four memories*); "
            "and which lost lives come early enough that the state after them still holds padding? (section 3, "
            "*Episode starts: padding*)",
        52: "one frame per transition leaves out each game's last next-state frame (section 1, *The same transitions "
            "in four memories*)"},
        "count each game's frames (one per transition, plus its last next-state frame: section 1) and, at each lost "
        "life, the frames of the state after it that padding cannot rebuild from its first frame (section 3, "
        f"*Episode starts: padding*, and {_LIFE})"),
    "05.deque_bytes": Prediction("the deque's bytes per transition of 96x96 4-stacks", 0.005, lambda m: {
        _STACK96: "that is the pixels alone: each row also keeps Python objects around its arrays (section 1, the "
                  "pieces of a row)",
        m + _STACK96: "each next state is passed on by reference as the next step's state, so a row's next state is "
                      "the next row's state: one stack per transition (section 1, the first paragraph)",
        m - _STACK96 + 9_216: "a deque row keeps whole stacks: one new frame per step is the frame-sharing ring's "
                              "way (notebook 04)",
        m - _STACK96 + 4 * 84 * 84: "that is section 1's 84 × 84 stack; these frames are 96 × 96"},
        "a row keeps one stack of its own (its next state; its state is the row before's) and the Python objects "
        "section 1 priced, piece by piece, that nbytes counts"),
    "06.step_calls": Prediction("forward calls of one Double DQN learning step with the loop", 0, lambda m: {
        64: "the targets are only part of a learning step: Q(s, a) of the batch's states takes a forward pass too "
            "(section 4, Whole learning steps)",
        33: "with Double DQN the loop runs both networks for every transition (section 3, and section 1's hook "
            "counts)",
        3: "this step's targets come from the per-sample loop, one call per transition (section 1), not from one "
           "batched pass per network",
        96: "Q(s, a) of the batch is one batched pass of the online network, not one per transition (section 4, "
            "Whole learning steps)"},
        "count the forward passes of one learn(): for the targets, one per transition for each network the loop runs "
        "(section 1's hook counts; with Double DQN both networks, section 3), then Q(s, a) of the batch's states "
        "(section 4, Whole learning steps)"),
    "06b.ladder_factor": Prediction("the factor from the top rung to the bottom one", 0.05, lambda m: {
        403_200 / 7_072: "the top rung keeps s and s' as two separate 4-stacks of raw screens: 8 screens per "
                         "transition, not 4 (notebook 00)",
        806_400 / (4 * 7_056): "the bottom rung keeps one 84 × 84 frame per step, not a 4-stack: each stored frame "
                               "serves four states (notebook 04, frame sharing)",
        806_400 / (8 * 7_056): "that is the rung of notebook 03, s and s' as uint8 stacks; the bottom rung stores "
                               "each frame once (notebook 04)",
        8: "counting frames is half of it: a raw screen is 210 × 160 × 3 bytes, a stored frame 84 × 84 × 1 "
           "(notebooks 00, 02 and 03)"},
        "price each rung as notebooks 00 to 04 did: frames stored per transition × bytes per frame, plus what a slot "
        "keeps besides its pixels"),
    "07.eps_at_900k": Prediction("ε at agent step 900,000 of a breakout run", 0.02, lambda m: {
        0.1: f"ε falls to eps_end, the floor, not to 0: the straight line ends at eps_end ({_SCHEDULE})",
        0.91: f"ε decays over eps_fraction of total_steps, not over the whole run ({_SCHEDULE})",
        0.19: f"this preset's floor is its eps_end, printed above, not Nature DQN's 0.1 ({_SCHEDULE})",
        0.01: "step 900,000 is still inside the decay: ε reaches eps_end at eps_fraction of total_steps "
              f"({_SCHEDULE})"},
        f"find where step 900,000 lies on the straight line from eps_start to eps_end ({_SCHEDULE})"),
    "07b.state_drop": Prediction("the drop per transition from the 100k row to the 1M row", 0.05,
                                 lambda m, fixed: {
        fixed / 100_000: "that is the fixed part's share at 100k alone; at 1M the file still carries a share of it, a "
                         "tenth as large (section 2, the fixed part)",
        fixed / 1_000_000: "that is the fixed part's share at 1M alone; at 100k its share is ten times larger (section "
                           "2, the fixed part)"},
        "a file is a fixed part plus a part per transition: only the fixed part's share changes from row to row "
        "(section 2)"),
    "08.walk_nodes": Prediction("the nodes one walk visits in a tree of 100,000 leaves", 0, lambda m: {
        m - 1: "count nodes, the root's and the leaf's included, not the steps between them; and a tree has whole "
               "levels: round the leaves up to a power of two (section 1)",
        m - 2: "both ends count: the root is a node of the walk, and the leaves are rounded up to a power of two, so "
               "the tree has a whole number of levels (section 1)",
        21: "that is a tree of a million leaves; this one has 100,000 (section 1: leaves rounded up to a power of two)",
        100_000: "a walk goes down one path, one node per level, not through every leaf (section 1, the walk drawn "
                 "above the prediction)"},
        "a walk visits one node per level: count the levels of a tree whose leaves are rounded up to a power of two "
        "(section 1)"),
    "09.noisy_ratio": Prediction("lz4's ratio on frames with a noisy bottom quarter", 0.1, lambda m, clean: {
        clean: "that is a frame without noise: a quarter of this one does not shrink (the paragraph above the "
               "prediction)",
        0.75 * clean + 0.25: "ratios do not average over a frame's parts: their compressed bytes add up (section 1's "
                             "table for the Breakout part, the paragraph above the prediction for the noise)",
        1: "that is a frame of pure noise: three quarters of this one are Breakout, which still shrinks (section 1's "
           "table)",
        4: "the Breakout part is not free: it still takes some bytes once compressed (section 1's table)"},
        "the compressed bytes of a frame's parts add up: price the Breakout three quarters from section 1's table and "
        "the noisy quarter as bytes that do not shrink, then divide 7,056 by the sum (the paragraph above the "
        "prediction)"),
    "09b.checkpoint_mb": Prediction("the checkpoint's size in MB", 0.01, lambda m: {
        (2_000 * 7_072 + 26_978_880) / 1e6: "a ring's arrays are written in full, whatever its fill: its slots, not "
                                            "the transitions it holds, set the replay part (section 1: the memory "
                                            "goes in as its arrays)",
        50_000 * 7_072 / 1e6: "the agent part is missing: both networks and the optimiser's state (section 1's list)",
        (50_000 * 7_072 + 26_978_880 / 2) / 1e6: "Adam's two moments exist once learning has started: count the "
                                                 "optimiser's state too (section 1's list)",
        m - 6_744_720 / 1e6: "one network short: a run keeps the online network and its target copy (section 1's "
                             "list)",
        m * 1e6 / 2**20: "a MB here is 10⁶ bytes, as everywhere in the course"},
        "a checkpoint is the replay's arrays written in full, every slot, plus the networks and the optimiser's "
        "state: price each part from the cell's numbers (section 1's list)"),
}


def check_prediction_of(key: str, prediction: Any, measured: float, **given: float) -> bool | None:
    """A notebook's prediction ``key`` (``PREDICTIONS``): ``check_prediction`` with that question's quantity,
    tolerance and likely mistakes (``given``: the notebook's inputs its mistakes are made of), so that the check
    cell states none of them. Raises ValueError for an unknown key."""
    if key not in PREDICTIONS:
        raise ValueError(f"no prediction called {key!r}: the notebooks' are {', '.join(sorted(PREDICTIONS))}")
    what, rel, mistakes, otherwise = PREDICTIONS[key]
    forgot = {wrong / measured: why for wrong, why in mistakes(measured, **given).items()} if measured else None
    return check_prediction(prediction, measured, what, rel, forgot=forgot, otherwise=otherwise)


PAIR_HINT = "a max along an axis gives a pair (values, indices): the values are the part to use"

# Each question: (right letter, why it is right, {wrong letter: hint}). Notebook, then a short name.
QUESTIONS = {
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
    "02.view_keeps_base": ("b", "the slice is a view into the whole 250 × 160 uint8 gray array that the cast "
                                "made, so 250 × 160 = 40,000 bytes stay alive per stored frame, 4x the view's "
                                "own nbytes of 125 × 80 = 10,000",
                           {"a": "that is the view's own nbytes: what stays in memory as long as a view does "
                                 "(section 2, Trap 2)?",
                            "c": "the mean made a new gray array, and the cast another: the colour screen is not "
                                 "what the slice looks into (section 2, Trap 2)"}),
    "03.where_to_scale": ("b", "10,001 depths need more than a byte: uint16 keeps each one exactly in 2 bytes and the "
                               "network scales each batch; a cast to uint8 keeps each depth modulo 256, and float16, "
                               "2 bytes as well, rounds neighbouring depths near 10,000 mm onto the same value",
                          {"a": "a uint8 holds 0 to 255: what is left of a depth of 1,000 mm once it is cast? "
                                "(section 4, *Back into uint8: truncation and wrap-around*)",
                           "c": "section 5, *float16: precise enough, still twice uint8*, kept 256 levels apart; "
                                "here 10,001 levels share the range from 0 to 1: compare their spacing with "
                                "float16's rounding near 1"}),
    "03.mean_dtype": ("c", "dividing integer arrays gives float64, 8 bytes a pixel, eight times the frames (and "
                           "a + b wraps around at 256 before the division: section 4, *Back into uint8: truncation "
                           "and wrap-around*)",
                      {"a": "the division made floats: which float does NumPy pick for integer arrays? "
                             "(section 4, *The float64 trap*)",
                       "b": "NumPy picks float64, not float32, for integer arrays unless told otherwise (section 4, "
                            "*The float64 trap*)"}),
    "03.uint8_wrap": ("a", "uint8 arithmetic wraps around modulo 256: 100 - 200 = -100 is stored as 156; "
                           "convert to a signed or float dtype before subtracting",
                      {"b": "a uint8 array has no room for -100: what did section 4, *Back into uint8: truncation "
                            "and wrap-around*, show 200 + 100 giving?",
                       "c": "NumPy does not clip integer arithmetic: section 4, *Back into uint8: truncation and "
                            "wrap-around*, shows what 200 + 100 gives"}),
    "04.frames_per_transition": ("a", "the ring keeps each frame once, one new frame per step, whatever the stack's "
                                      "length or the frame's size (plus one slot per episode)",
                                 {"b": "that is one 5-frame stack per transition, the next-state-shared layout; a "
                                       "frame-sharing ring rebuilds every stack by index (section 2, *Building a "
                                       "stack by index*)",
                                  "c": "that is s and s' stored as two stacks each, the layout the ring replaces "
                                       "(section 1, *The same transitions in four memories*)"}),
    "04.episode_end": ("c", "the flag passed as episode_end is True at the cut, so padding restarts where it should; "
                            "the same flag as done makes the cut transition terminal: its target drops a future it "
                            "had (section 5's table: only done decides bootstrapping)",
                       {"a": "the memory refuses a stream that restarts while it was told the episode goes on; here "
                             "the flag it reads as episode_end is True at the cut (section 5, *Losing a life is not "
                             "the end of an episode*)",
                        "b": "padding reads episode_end, and the flag passed there is True at the cut: the next game "
                             "starts padded (section 3, *Episode starts: padding*)"}),
    "04.write_head": ("b", "the newest slot starts no transition yet (its next-state frame is not written), and the "
                           "seven slots after the head lost a frame of their 8-frame states to earlier writes: "
                           "1,000 - 1 - 7",
                      {"a": "a slot holds the newest frame of its own state: count how many of an 8-frame state's "
                            "frames lie in the slots behind it, the ones the head may have overwritten (section 4, "
                            "*The write head*)",
                       "c": "a next state is its state moved on by one frame, so a transition waits for one frame "
                            "after its slot, not eight; and a state reaches back only through its older frames "
                            "(section 2, *Building a stack by index*, and section 4, *The write head*)"}),
    "05.deque_walk": ("b", "at a million rows the time goes into reaching the rows, not choosing them: deque[i] walks "
                           "64-item blocks from the nearer end, whoever picked i",
                      {"a": "choosing 32 positions costs little at any capacity; the part that grows with N is "
                            "reaching each row (the opening *Why*, and section 2, *Slow: sampling time against "
                            "capacity*)",
                       "c": "a fancy index needs the rows in one array; a deque's rows sit in linked blocks, reached "
                            "one index at a time (the opening *Why*, and section 2, *Slow: sampling time against "
                            "capacity*)"}),
    "05.overhead_matters": ("c", "the Python objects per row stay the same size while the data shrinks: next to 128 "
                                 "bytes, a few hundred bytes of objects are most of the memory",
                            {"a": "the list, the float, the int and the array header are the same objects whatever "
                                  "the array holds (section 1, *Fat: what one deque row costs besides pixels*)",
                             "b": "the objects per row do not grow with the data: follow the deque's column from the "
                                  "stack to the compressed frame (section 1, *Fat: what one deque row costs besides "
                                  "pixels*)"}),
    "05.prefault": ("b", "a page costs RSS when it is first written, whatever is written: filling in the ones writes "
                         "every page at construction, as prefault does, while np.zeros leaves them unwritten until "
                         "frames arrive",
                    {"a": "RSS counts pages written, not frames stored: what must np.ones do to every byte before it "
                          "returns? (section 3, *Fitting at the start is not fitting at the end*)",
                     "c": "the guard only compares sizes, and np.zeros pages arrive as they are first written: see "
                          "the lazy line in section 3, *Fitting at the start is not fitting at the end*"}),
    "06.why_batched_faster": ("b", "on a GPU the fixed price of a call is nearly all its cost (section 5), and one "
                                   "batched call pays it once for all its targets: 128 share it instead of 32, so "
                                   "each carries about a quarter. On a CPU the arithmetic is a real part of the cost, "
                                   "so section 2's plot can show a smaller gain, or none",
                              {"a": "a call checks its arguments and launches each layer's kernels once, whatever "
                                    "batch it carries: that is what makes its price fixed (the *Why* at the top, "
                                    "section 5). How many targets share it?",
                               "c": "on a GPU the arithmetic of a small pass is expected to be nearly free (section "
                                    "5): four times nearly free is still small beside a call's fixed price. How many "
                                    "targets share that price?"}),
    "06.double_lower": ("a", "the maximum of more noisy estimates lands higher: with 18 errors to pick from, the "
                             "largest is larger (section 3's simulation with 18 columns would show it)",
                        {"b": "the max picks the luckiest error: the more errors there are to pick from, the luckier "
                              "the pick (section 3, *Overestimation and Double DQN*)",
                         "c": "a maximum does not average: it picks the largest error (section 3, *Overestimation "
                              "and Double DQN*)"}),
    "06.gpu_gain": ("c", "faster arithmetic leaves the fixed price per call as a larger share: the loop pays it 32 "
                         "times, the batched pass once (the same reason a GPU should widen the gap, section 5)",
                    {"a": "the loop's extra time is not extra arithmetic, both ways do the same: it is the fixed price "
                          "of 32 calls, which faster arithmetic does not touch (the *Why* at the top, section 5)",
                     "b": "the arithmetic is the same both ways, but the fixed price per call is not: which share of "
                          "each way's time shrinks? (the *Why* at the top, section 5)"}),
    "06.truncation_bootstraps": ("c", "a clock stopped the episode, not the agent: marked done, a state with a "
                                      "future is taught it has none, and nothing in it says why (*Why (1 − done)*)",
                                 {"a": "done = 1 says that a state has no future, not only that its episode "
                                       "stopped: a clock stopped this one, and the state could have gone on (*Why "
                                       "(1 − done)*, the time-limit case)",
                                  "b": "(1 − done) removes only the next state's value from the target; the "
                                       "transition stays in the batch, and its loss still pulls its value towards "
                                       "that target (*Why (1 − done)*)"}),
    "06.target_network": ("a", "a target copied after every update moves with every update: the network chases a "
                               "moving target again",
                          {"b": "a copy is cheap; what matters is whether the targets stay put between updates "
                                "(*Why a target network*)",
                           "c": "the target still adds the discounted value of the next state, read from the copy "
                                "(*Why a target network*)"}),
    "06.huber_large_error": ("b", "inside the threshold the Huber loss is the squared error, whose gradient is e: "
                                  "with 10, an error of 5 pushes with 5, not 1",
                             {"a": "the push is bounded only beyond the threshold (section 4, *The Huber loss*, step "
                                   "2): where is 5 now?",
                              "c": "the Huber loss never drops an error: inside the threshold it is the squared "
                                   "error (section 4, *The Huber loss*, step 1)"}),
    "06b.fresh_process": ("a", "the C allocator (glibc's malloc) keeps the memory that many small arrays freed and "
                               "hands it to the next requests instead of returning it to the OS, so the next games' "
                               "fills cost no new RSS (notebook 01b, section 1): one fresh process per measurement, "
                               "as this notebook's How does. Rings as large as this notebook's are another case: "
                               "their arrays get pages of their own, returned when freed (notebook 05)",
                          {"b": "a page costs RSS once it is written, whatever bytes are written into it: zero bytes "
                                "are bytes like any other (this notebook's How: every slot is written so that its "
                                "pages exist)",
                           "c": "RSS counts every page the process has written, read back or not (this notebook's "
                                "How): where did the memory that Pong's deque freed go?"}),
    "06b.fill_every_slot": ("b", "np.zeros pages cost no RSS until written: the ring grows page by page over its first "
                                 "2M steps, to 2,000,000 x (9,216 + 16) bytes, about 18.5 GB, then overwrites its "
                                 "oldest slots",
                            {"a": "np.zeros hands out address space; each page costs RSS when it is first written "
                                  "(this notebook's How: it writes every slot so that the pages exist)",
                             "c": "a ring overwrites its oldest slots once full: it never holds more than its "
                                  "capacity, however long the run (section 1: n is the capacity)"}),
    "07b.lost_runtime": ("b", "the next session resumes from the newest state file and plays the steps after it "
                              "again: at most one save interval, counted in steps whatever the GPU; a GPU twice as "
                              "fast plays those steps again in half the time",
                         {"a": "a save comes every 100,000 steps at any speed: how far past the newest one can a run "
                               "be when its runtime ends? (section 3)",
                          "c": "a runtime ends at any moment, not at a save: no signal, no save (section 3; "
                               "--time-limit is how a run saves first)"}),
    "07b.fast_state": ("b", "the new state is written under a temporary name and takes the old one's place only once "
                            "whole; the old file goes after that. Killed mid-write, the run leaves its last good state "
                            "untouched and a partial .tmp that no resume reads (and the next save removes): the next "
                            "session carries on from step 500,000. So even one kept file needs room for two during "
                            "a save",
                       {"a": "the oldest file goes only once the new one is whole (section 2): which file can a kill "
                             "during the write have damaged?",
                        "c": "a state is written under a temporary name and renamed only once it is whole "
                             "(section 2, and notebook 09b): a resume only ever reads whole files"}),
    "07.eps_start": ("c", "at step 0 the schedule gives ε = 1 again: the agent acts at random until ε has fallen",
                     {"a": "the memory keeps the past, but every new transition comes from the actions ε picks "
                           "(section 1, *Why ε follows a schedule*)",
                      "b": "ε picks the actions; the TD target holds no ε (section 1, *ε-greedy*; notebook 06's TD "
                           "target)"}),
    "07.q_explodes": ("a", "with at most 1 reward per step, no discounted return exceeds 1 / (1 - γ): 1,000 for "
                           "γ = 0.999, so 300 can be an honest estimate; a max-Q past the bound is divergence",
                      {"b": "max-Q has a ceiling, the largest discounted return (section 5, *Mean max-Q*): work it "
                            "out for γ = 0.999 and compare 300 with it",
                       "c": "max-Q has a bound of its own, whatever the loss does: the largest discounted return "
                            "(section 5, *Mean max-Q*)"}),
    "07.loss_rises": ("b", "the targets move: more reward and larger Q-values make larger TD errors, so a rising "
                           "loss beside a rising score is no alarm",
                      {"a": "unlike a supervised loss, the TD loss chases targets that grow as the agent improves "
                            "(section 5, *TD loss*)",
                       "c": "divergence shows as a jump by orders of magnitude, or a max-Q past its bound, not as a "
                            "loss that grows with the score (section 5, *TD loss*)"}),
    "07.dead_agent": ("b", "long games fit both agents: waiting for FIRE earns nothing, so the stuck agent's score "
                           "stays flat and low and its targets hold nothing new (max-Q flat, gradients small), while "
                           "a good player's long games come with a rising score and max-Q",
                      {"a": "the TD loss does not fall as an agent improves: its targets grow with the score "
                            "(section 5, *TD loss*), so neither its level nor its trend tells a waiting agent from "
                            "one that keeps the ball in play",
                       "c": "a norm above the clipping threshold all the time says the steps are too large; a waiting "
                            "agent's targets teach little: how large are its gradients? (section 5)"}),
    "07c.run_a": ("b", "a learning rate 100x too large: each step overshoots, so the loss, the gradient norm and "
                       "max-Q jump far from the working run's within the first updates",
                  {"a": "compare how soon this run departs from the working run, and in which panels (notebook 07, "
                        "section 5)",
                   "c": "look at the ε panel: it follows the working run's line (notebook 07, section 5)"}),
    "07c.run_b": ("c", "ε that never decays: the ε panel stays at 1, so every action is random and the score stays at "
                       "random play",
                  {"a": "look at the ε panel first: does it fall like the working run's? (notebook 07, section 5)",
                   "b": "look at the ε panel first: does it fall like the working run's? (notebook 07, section 5)"}),
    "07c.run_c": ("a", "(1 - done) forgotten: a lost life bootstraps as if the game went on, so the targets that "
                       "taught the working run what a lost life costs (its largest TD errors) are gone: the TD loss "
                       "stays flat and the gradient norm low where the working run's rise, max-Q sits above the "
                       "working run's, and the score climbs later, while ε follows the working run's line",
                  {"b": "a learning rate 100x too large shows at once in the loss and gradient norm; compare their "
                        "size with the working run's (notebook 07, section 5, *Gradient norm before clipping*)",
                   "c": "look at the ε panel: it follows the working run's line (notebook 07, section 5)"}),
    "07c.eps_stuck": ("a", "a schedule right for the run's step, fed each game's length instead, starts again near 1 "
                           "at every game: no game is long enough to bring it down",
                      {"b": "decaying over the whole run is slow, but by the last steps ε would be near its floor "
                            "(notebook 07, section 1, *Why ε follows a schedule*)",
                       "c": "swapped, ε would start near its floor and rise: it would be low early on (notebook 07, "
                            "section 1, *Why ε follows a schedule*)"}),
    "08.mass_leaf": ("c", "with leaves 0 and 1 at priority 0 the line starts with leaf 2's interval, [0, 1): at the "
                          "root 0.0 is below the left sum 3, so the walk goes left; below it the left sum is 0, and "
                          "0.0 is not below 0, so it goes right, then left, to leaf 2",
                     {"a": "a leaf of priority 0 owns an empty interval, even at the start of the line: walk down as "
                           "section 1 says, going left only where the mass is below the left child's sum",
                      "b": "leaf 1's priority is 0 as well in section 1's tree: it owns no interval either, so no "
                           "walk can end there (section 1, zero priority)"}),
    "08.where_tree_hurts": ("b", "a per-item tree walks once per item, so 256 items cost about 8 times the walk of 32, "
                                 "while an eager GPU update, mostly the price of launching its operations, barely "
                                 "lengthens: the factor grows",
                            {"a": "a per-item tree walks once for each item of the batch (sections 1 and 2): its time "
                                  "grows with the batch, it is not paid once per batch",
                             "c": "the walk grows with the batch, but an eager update on a GPU is mostly the launching "
                                  "of its operations, which does not (section 3, How to read these numbers)"}),
    "08.weights_n": ("b", "N multiplies every weight by the same factor, which the division by the largest removes",
                     {"a": "N multiplies every weight before the division: what does dividing by the batch's largest "
                           "weight do to a factor they all share? (*Why PER*, the weight's last step, and *Where the "
                           "weight comes from*)",
                      "c": "a square root of 10 would be β = 0.5 applied to N with nothing after it: finish the weight "
                           "of *Why PER*, divided by the batch's largest"}),
    "09.what_sets_speed": ("b", "a batch decompresses 32 x 5 = 160 frames, so the decompression time sets the rate",
                           {"a": "the ratio decides how much RAM the memory takes: copying a few hundred bytes per "
                                 "frame is not where a batch's time goes (section 3, *What the numbers say*)",
                            "c": "a frame is compressed once, when it is stored, not while batches are drawn: count "
                                 "what drawing a batch does to each of its frames (section 3, *What the numbers "
                                 "say*)"}),
    "09.cold_disk": ("c", "cold, every frame is a read at a random place on the device; warm, its page is in RAM",
                     {"a": "the page cache belongs to the kernel, which gives its pages back under memory pressure: "
                           "it never makes the process swap (section 4)",
                      "b": "the store declares its reads random, which turns the kernel's read-ahead off: a batch "
                           "reads only the pages its frames lie on (section 4)"}),
    "09b.kill_before_rename": ("b", "a resume reads only files named state-<step>.ckpt; the rename is what makes a "
                                    "written file a checkpoint, so a complete .tmp file is never read (and the next "
                                    "save deletes it): the newest checkpoint is step 125,000's",
                               {"a": "a resume looks only at files named as finished checkpoints, and a written file "
                                     "gets that name from the rename, its last step (section 1, Atomic)",
                                "c": "the kill came while another file was being written; step 125,000's checkpoint "
                                     "was renamed long before and passes its checks (section 1, Atomic)"}),
    "09b.stop_or_kill": ("a", "the watchdog stops the run from inside its loop and saves the state first, so that "
                              "resume repeats nothing; SIGKILL gives the process no chance to save, so that resume "
                              "starts from the last checkpoint, step 50,000, and plays the steps after it again",
                         {"b": "the watchdog runs inside the training loop: before it stops the run it saves the "
                               "state (section 4, the line the run printed as it stopped)",
                          "c": "a resume starts from a checkpoint, not from the log: the state after the last "
                               "checkpoint died with the killed process (section 2, Pulling the plug)"}),
    "10.samples_per_step": ("b", "the single process ties one update to every 4 agent steps, so a faster game brings "
                                 "its updates along and samples per step stay 32 / 4 = 8; Ray's worker steps without "
                                 "waiting for the learner, so the same updates/s meet more steps",
                            {"a": "the gradient step does cost what it did, but notebook 07's loop learns once every "
                                  "4 agent steps: count updates per agent step, not per second (*The question* at "
                                  "the top of the page, and section 4, samples/step)",
                             "c": "a learner at its own pace draws as many batches per second as before: compare that "
                                  "with the transitions per second the faster worker sends. And what ties notebook "
                                  "07's updates to its steps? (*The shape*, the learner's line, and section 4, "
                                  "samples/step)"}),
    "10.second_worker": ("b", "a worker needs a core: four workers, the replay actor and the learner's process are "
                              "six busy processes on four cores, so the added workers take turns with the rest",
                         {"a": "a chunk travels once, from its worker to the replay actor, through the object store "
                               "(section 2, *The replay actor*): count the busy processes against the cores instead "
                               "(section 4, *How to read it*)",
                          "c": "Ray places actors by the logical CPUs it was told, not by the real cores: all four "
                               "workers start (the cell that starts Ray, before section 1)"}),
}


def check_question(key: str, answer: Any) -> bool | None:
    """Notebooks 01-10: a short multiple-choice question; ``answer`` is a letter, e.g. ``"b"``."""
    if key not in QUESTIONS:
        raise KeyError(f"check_question: key {key!r} names no question here (e.g. {next(iter(QUESTIONS))!r})")
    right, why, hints = QUESTIONS[key]
    if answer is None:
        return _not_answered_yet("write the letter of your answer, e.g. \"a\"")
    assert isinstance(answer, str) and answer.strip().lower() in ("a", "b", "c"), (
        f"answer with one letter, \"a\", \"b\" or \"c\", got {answer!r}")
    letter = answer.strip().lower()
    assert letter == right, f"not {letter!r}: {hints.get(letter, 'look again at the measurements above')}"
    return _passed(f"{letter}: {why}")


# --- notebooks 04-06: frame sharing, the ring buffer, batched targets ---------------------------------------

def check_stack_at(stack_at: Any) -> bool | None:
    """Notebook 04: ``stack_at(frames, first, t, stack=4)`` builds the state whose newest frame is ``frames[t]``.

    ``frames`` holds one frame per step in order, ``first[k]`` is True where frame k starts an episode.
    The answer is compared with ``FrameSharingMemory.stacks_at`` (and with the stacks the agent saw)
    on random episodes, short ones and stacks of 2, 3 and 4 included.
    """
    if stack_at is None:
        return _not_answered_yet("write stack_at(frames, first, t, stack=4)")
    assert callable(stack_at), f"pass the function itself, e.g. check_stack_at(stack_at), got {stack_at!r}"
    import numpy as np

    from dqn_course.lab.toy import frame_numbers, numbered_transitions
    from dqn_course.replay import FrameSharingMemory

    def numbers(a):
        try:
            return frame_numbers(a)
        except Exception:  # the answer may not even be indexable; the hint still has to print
            return repr(a)

    rng = np.random.default_rng(404)
    checked = at_start = 0
    for stack in (4, 4, 2, 3, 4):
        lengths = [int(n) for n in rng.integers(1, 9, size=6)]
        lost = {int(i) for i in rng.choice(sum(lengths), size=3, replace=False)}
        shape = (stack, 2, 3)
        memory = FrameSharingMemory(sum(lengths) + len(lengths), shape, seed=0)
        truth = {}
        for n, transition in enumerate(numbered_transitions(lengths, stack, shape[1:], life_lost=lost)):
            memory.add(*transition)
            truth[n] = transition
        frames = memory.frames[:memory.written]
        first = memory.first[:memory.written]
        slots = np.flatnonzero(memory.valid)
        states, next_states = memory.stacks_at(slots)
        for k, s, s2 in zip(slots, states, next_states):
            seen = truth[int(memory.ids[k])]
            if not (np.array_equal(s, seen[0]) and np.array_equal(s2, seen[3])):
                raise RuntimeError("FrameSharingMemory disagrees with the stacks it was given: a bug in "
                                   "dqn_course, not in your answer; please report it")
            for t, expected in ((int(k), s), (int(k) + 1, s2)):
                got = stack_at(frames.copy(), first.copy(), t, stack=stack)
                if got is None:
                    return _not_answered_yet("stack_at still returns None; build the stack")
                got = np.asarray(got)
                start = int(np.flatnonzero(first[:t + 1])[-1])
                where = (f"at t={t} with stack={stack} (frames numbered by step; this episode starts at "
                         f"frame {start}): expected frames {numbers(expected)}, got {numbers(got)}")
                assert got.shape == expected.shape, (
                    f"stack_at must return one array of shape (stack, H, W) = {expected.shape}, got shape "
                    f"{got.shape} {where}. A stack is `stack` frames picked by their indices in one go (section 2, "
                    "*Building a stack by index*).")
                if np.array_equal(got, expected):
                    checked += 1
                    at_start += t - stack + 1 < start
                    continue
                idx = np.arange(t - stack + 1, t + 1)
                no_episode = frames[np.maximum(idx, 0)]
                zeros = np.where((idx < start)[:, None, None], 0, frames[np.maximum(idx, start)])
                by_index = "section 2, *Building a stack by index*"
                hint = f"compare your stack with the expected one, frame by frame ({by_index})"
                if np.array_equal(got, expected[::-1]):
                    hint = f"the order is reversed: oldest frame first, frames[t] last ({by_index})"
                elif np.array_equal(got, no_episode):
                    hint = ("the stack reaches back across an episode start into the previous episode: a window "
                            "stops at its episode's first frame, and copies of that frame fill the places before it "
                            "(section 3, *Episode starts: padding*)")
                elif np.array_equal(got, zeros):
                    hint = ("positions before the episode's first frame repeat that first frame, not zeros (section 3, "
                            "*Episode starts: padding*)")
                elif np.array_equal(got, np.repeat(frames[t:t + 1], stack, axis=0)):
                    hint = ("only an episode's first frame is repeated; later stacks hold consecutive frames "
                            "(section 3, *Episode starts: padding*)")
                raise AssertionError(f"stack_at is wrong {where}. Hint: {hint}.")
    return _passed(f"stack_at matches FrameSharingMemory on {checked} stacks, {at_start} of them padded "
                   "at an episode start")


def check_ring(ring_class: Any) -> bool | None:
    """Notebook 05: a preallocated ring ``ring_class(capacity, item_shape, dtype)`` with
    ``add(item)``, ``len(ring)`` and ``sample(batch_size, rng)`` (an array of ``batch_size`` items).

    Checked: it holds at most ``capacity`` items, overwrites the oldest first, samples only what it
    holds (all of it, uniformly enough), keeps the dtype, and copies items into storage made once in
    ``__init__`` instead of keeping the arrays it is given (measured with tracemalloc).
    """
    if ring_class is None:
        return _not_answered_yet("write the ring class")
    assert isinstance(ring_class, type), f"pass the class itself, e.g. check_ring(Ring), got {ring_class!r}"
    import numpy as np

    from dqn_course.profiling import TraceMalloc

    rng = np.random.default_rng(505)

    def item(v, shape=(2, 3)):
        return np.full(shape, v, np.uint8)

    ring = ring_class(5, (2, 3), np.uint8)
    for v in (10, 11, 12):
        ring.add(item(v))
    batch = ring.sample(300, rng)
    if batch is None:
        return _not_answered_yet("sample() still returns None; return an array of sampled items")
    batch = np.asarray(batch)
    assert batch.shape == (300, 2, 3), (
        f"sampling 300 items should return an array of 300 items, shape (300, 2, 3), got {batch.shape}")
    assert batch.dtype == np.uint8, (
        f"sampled items have dtype {batch.dtype}, the ring was made for uint8: preallocate storage with the "
        "dtype passed to __init__")
    assert len(ring) == 3, f"after 3 adds into capacity 5, len(ring) should be 3, got {len(ring)}"
    assert all(len(set(np.unique(x))) == 1 for x in batch), "each sampled item must be one whole stored item"
    got = set(int(x.flat[0]) for x in batch)
    assert got <= {10, 11, 12}, (
        f"after adding items 10, 11, 12 the ring sampled {sorted(got)}: sample only the slots written so far "
        "(draw indices below len(ring))")
    assert got == {10, 11, 12}, f"300 draws from 3 items should see all of them, saw only {sorted(got)}"
    for v in range(13, 17):
        ring.add(item(v))
    assert len(ring) == 5, f"after 7 adds into capacity 5, len(ring) should be 5, got {len(ring)}"
    got = set(int(x.flat[0]) for x in np.asarray(ring.sample(500, rng)))
    if got == {10, 11, 12, 13, 14}:
        raise AssertionError("the ring stopped storing once full; it must overwrite the oldest item: after the "
                             "last slot the write head wraps round to the first (the exercise's `add`)")
    assert got == {12, 13, 14, 15, 16}, (
        f"after adding items 10..16 into capacity 5 the ring should hold 12..16, it sampled {sorted(got)}")

    big = ring_class(500, (84, 84), np.uint8)
    with TraceMalloc() as tm:
        for v in range(1_500):
            big.add(item(v % 256, (84, 84)))
    assert tm.current < 500 * 84 * 84 // 4, (
        f"adding 1,500 frames kept {tm.current:,} more bytes allocated: the ring keeps the arrays it is given "
        "(a list or deque of references) or allocates per add. All the storage is made once, in __init__, with "
        "a slot for every item, and each add copies its item into a slot (the layouts drawn at the top, and section "
        "1: a deque keeps references, a ring copies into its own slots)")
    return _passed("the ring holds the newest `capacity` items in storage made once, and samples only them")


def _call_learner(fn, args: tuple, call: str, hints: dict[str, str] | None = None):
    """Call a learner's function; an exception becomes an ``AssertionError`` naming the call, the exception, the
    line of the learner's code it came from and, when its message contains a key of ``hints``, that key's hint."""
    import inspect
    import traceback

    try:
        return fn(*args)
    except Exception as exc:  # any crash of the learner's code is reported, not shown as a traceback
        code = getattr(inspect.unwrap(fn), "__code__", None)  # a decorated function: the learner's own code
        lines = [f.line for f in traceback.extract_tb(exc.__traceback__)
                 if code is not None and f.filename == code.co_filename and f.line]
        where = f" at `{lines[-1]}`" if lines else ""
        hint = next((h for key, h in (hints or {}).items() if key in str(exc)), None)
        raise AssertionError(f"{call} raised {type(exc).__name__}{where}: {exc}"
                             + (f". Hint: {hint}." if hint else "")) from None


TD_BATCH, TD_N_ACTIONS, TD_GAMMA = 32, 4, 0.9  # check_td_targets' batch; γ is not the usual 0.99 on purpose


def _td_check_inputs():
    """The seeded batch and networks of ``check_td_targets``: 32 transitions, two different ``NatureCNN(4)``s
    whose parameters require grad, their last layers scaled so Q-values are of the order of the rewards."""
    import numpy as np
    import torch

    from dqn_course.networks import NatureCNN

    torch.manual_seed(606)
    online, target = NatureCNN(TD_N_ACTIONS), NatureCNN(TD_N_ACTIONS)  # two draws: they differ
    with torch.no_grad():
        for net in (online, target):
            net.net[-1].weight.mul_(300.0)
    rng = np.random.default_rng(606)
    # Coarse 7x7 blocks of random gray, so the screens differ in what the convolutions see (not only in noise).
    coarse = rng.integers(0, 256, size=(TD_BATCH, 4, 7, 7), dtype=np.uint8)
    next_states = torch.as_tensor(np.repeat(np.repeat(coarse, 12, axis=2), 12, axis=3))
    dones = (rng.random(TD_BATCH) < 0.25).astype(np.float32)
    dones[:2] = 1.0, 0.0
    rewards = rng.choice([-3.0, -1.0, 0.0, 0.5, 1.0, 2.0], TD_BATCH).astype(np.float32)
    rewards[:3] = 2.0, -3.0, 0.5
    return torch.as_tensor(rewards), torch.as_tensor(dones), next_states, online, target


def _td_targets_hint(got, r, d, q_target, q_online, gamma: float, double: bool) -> str:
    """What a wrong batch of targets ``got`` most likely forgot: it is compared with the usual mistakes."""
    import torch

    v_plain = q_target.max(1).values
    v_double = q_target.gather(1, q_online.argmax(1, keepdim=True)).squeeze(1)
    v_online = q_online.max(1).values
    v = v_double if double else v_plain
    clip = ("do not clip the reward here: the training loop clips rewards before it stores them, so a targets "
            "function gets them ready to use (this check uses rewards such as 2, -3 and 0.5 to see it)")
    candidates = [
        (r + gamma * v, "a transition with done = 1 (game over or a lost life) must not bootstrap: its next "
                        "state's value must not count (*Why (1 − done)*, above section 1)"),
        (r + gamma * d * v, "the mask for endings is the wrong way round: the next state's value must count for the "
                            "transitions that go on, you kept it only for the terminal ones (*Why (1 − done)*)"),
        (r + (1 - d) * v, "the discount is missing: the next state's value counts γ times, the `gamma` argument "
                          "(*The target each learning step moves towards*)"),
        (r + 0.99 * (1 - d) * v, "use the `gamma` argument, not a fixed 0.99"),
        (torch.sign(r) + gamma * (1 - d) * v, clip),
        (r.clamp(-1, 1) + gamma * (1 - d) * v, clip),
        (r + gamma * (1 - d) * q_target.max(), "that is the largest Q-value of the whole batch: each transition "
                                               "takes the max over its own actions, along the action axis"),
        (r + gamma * (1 - d) * q_target.mean(1), "V(s') is the best action's value, the max over actions, "
                                                 "not their mean"),
    ]
    if double:
        candidates += [
            (r + gamma * (1 - d) * v_plain,
             "with `double` on, your targets equal plain DQN's: did you ignore `double`, or choose a* with the target "
             "network? The online network chooses a* = argmax_a Q_online(s', a), the target network values it: "
             "Q_target(s', a*) (section 3)"),
            (r + gamma * (1 - d) * v_online, "Double DQN: value a* with the target network, Q_target(s', a*), not "
                                             "with the online network that chose it"),
            (r + gamma * (1 - d) * q_online.gather(1, q_target.argmax(1, keepdim=True)).squeeze(1),
             "Double DQN: the roles are swapped: the online network chooses a*, the target network values it"),
        ]
    else:
        candidates.append((r + gamma * (1 - d) * v_online,
                           "plain DQN takes the max with the target network (the slowly moving copy), not the "
                           "online network (*Why a target network*)"))
    return next((h for c, h in candidates if torch.allclose(got, c, rtol=1e-4, atol=1e-4)),
                "compare each part of your targets with the TD target's formula (*The target each learning step "
                "moves towards*): the reward, the discount, the mask for endings, the next state's value from the "
                "target network")


def _td_shape_hint(shape: tuple) -> str:
    """Why td_targets' result of ``shape`` is not one target per transition."""
    b, n = TD_BATCH, TD_N_ACTIONS
    return {(b, 1): "one value per transition, but in a (B, 1) column: the targets are a (B,) vector",
            (b, b): "a (B, 1) column met a (B,) row and broadcast to (B, B): the picked values must be a (B,) "
                    "vector before they are combined",
            (b, n): "that is one value per action: reduce over the actions (axis 1) to get V(s')",
            (n,): "that is one value per action: take the max over the actions (axis 1), not over the batch (axis 0)",
            (): "that is one number for the whole batch: keep one target per transition (no sum or mean)",
            (1,): "that is one number for the whole batch: keep one target per transition (no sum or mean)",
            }.get(shape, "one target per transition: combine (B,) tensors only")


def check_td_targets(td_targets) -> bool | None:
    """Notebook 06: ``td_targets(rewards, dones, next_states, online, target, gamma, double=False)`` for a batch.

    ``rewards`` and ``dones`` are float32 (B,), ``next_states`` uint8 (B, 4, 84, 84), ``online`` and ``target``
    ``NatureCNN``s. The answer must be r + γ (1 - done) V(s') with V(s') = max_a Q_target(s', a), or with
    ``double``, Q_target(s', argmax_a Q_online(s', a)), and carry no gradient. It is compared with
    ``dqn_course.agent.td_targets`` on a seeded batch of 32, plain and double, with two networks that differ
    and whose parameters require grad (so a missing ``no_grad`` shows), γ = 0.9, and rewards such as 2, -3 and 0.5:
    the training loop clips rewards before it stores them, so a targets function that clips them again is wrong.
    The inputs are passed as copies; changing one in place fails. Any number type holding the right (B,) values
    passes. Raises ``AssertionError`` with a hint naming the likely mistake.
    """
    if td_targets is None:
        return _not_answered_yet("write td_targets(rewards, dones, next_states, online, target, gamma, double=False)")
    assert callable(td_targets), (
        f"pass the function itself, e.g. check_td_targets(td_targets), got {td_targets!r}")
    import torch

    from dqn_course.agent import td_targets as reference

    with torch.random.fork_rng(devices=[]):  # leave the learner's own torch seed as it was
        r, d, next_states, online, target = _td_check_inputs()
        g = TD_GAMMA
        with torch.no_grad():
            q_target, q_online = target(next_states), online(next_states)
        for double in (False, True):
            name = "Double DQN (double=True)" if double else "plain DQN (double=False)"
            expected = reference(r, d, next_states, online, target, g, double)
            given = (r.clone(), d.clone(), next_states.clone())
            got = _call_learner(td_targets, given + (online, target, g, double),
                                f"td_targets(rewards, dones, next_states, online, target, gamma={g}, double={double})",
                                {"return_types": PAIR_HINT,
                                 "converted to an index": "if you multiplied by the result of a max along an "
                                                          "axis: " + PAIR_HINT,
                                 "must match the size": "one value per transition (B,): reduce over the actions "
                                                        "(axis 1), not over the batch (axis 0)"})
            if got is None:
                return _not_answered_yet("td_targets still returns None; return a tensor of shape (B,)")
            for arg, before, after in zip(("rewards", "dones", "next_states"), (r, d, next_states), given):
                assert torch.equal(before, after), (
                    f"{name}: td_targets changed its argument `{arg}` in place (an in-place operation on it): the "
                    "batch it reads belongs to the caller; compute the targets into a new tensor")
            assert type(got).__module__ != "torch.return_types", (
                f"{name}: td_targets returned {type(got).__name__}(values, indices): {PAIR_HINT}")
            try:
                values = torch.as_tensor(got, dtype=torch.float32).detach().cpu()
            except (TypeError, ValueError, RuntimeError):
                raise AssertionError(f"{name}: td_targets should return a tensor of {TD_BATCH} targets, got "
                                     f"{type(got).__name__}") from None
            assert values.shape == expected.shape, (
                f"{name}: td_targets should return one target per transition, shape {tuple(expected.shape)}, got "
                f"{tuple(values.shape)}: {_td_shape_hint(tuple(values.shape))}")
            if not torch.allclose(values, expected, rtol=1e-4, atol=1e-4):
                wrong = ~torch.isclose(values, expected, rtol=1e-4, atol=1e-4)
                i = int(wrong.nonzero()[0])
                hint = _td_targets_hint(values, r, d, q_target, q_online, g, double)
                raise AssertionError(
                    f"{name}: {int(wrong.sum())} of {TD_BATCH} targets are wrong, e.g. transition {i} (reward "
                    f"{float(r[i]):g}, done {float(d[i]):g}): yours is {float(values[i]):.4f}. Hint: {hint}.")
            assert not (isinstance(got, torch.Tensor) and got.requires_grad), (
                f"{name}: the values are right, but the targets carry a gradient (requires_grad is True), so "
                "loss.backward() would differentiate through them too, as if the goal itself were to be moved: "
                "a target is a constant the prediction moves towards, computed where autograd records nothing "
                "(`torch.no_grad()`, the exercise's first paragraph)")
    return _passed("td_targets matches dqn_course.agent.td_targets for plain and Double DQN, without a gradient")


TD_LOSS_BATCH = 32  # check_td_loss' batch (4 actions: B is not the number of actions, so axis mix-ups show)


def _td_loss_inputs():
    """Seeded (q_values (B, 4), actions int64 (B,), targets (B,)) for ``check_td_loss``: the TD errors of the
    taken actions spread over [-3, 3], so some lie beyond 1 (where Huber and the squared error differ) and some
    within."""
    import torch

    gen = torch.Generator().manual_seed(616)
    q_values = 2.0 * torch.randn(TD_LOSS_BATCH, TD_N_ACTIONS, generator=gen)
    actions = torch.randint(0, TD_N_ACTIONS, (TD_LOSS_BATCH,), generator=gen)
    actions[:TD_N_ACTIONS] = torch.arange(TD_N_ACTIONS)
    errors = torch.linspace(-3.0, 3.0, TD_LOSS_BATCH)[torch.randperm(TD_LOSS_BATCH, generator=gen)]
    targets = q_values.gather(1, actions.unsqueeze(1)).squeeze(1) + errors
    return q_values, actions, targets


def _td_loss_hint(got: float, q_values, actions, targets) -> str:
    """What a wrong loss value ``got`` most likely did: it is compared with the usual mistakes."""
    import math
    import warnings

    import torch
    import torch.nn.functional as F

    taken = q_values.gather(1, actions.unsqueeze(1))
    error = taken.squeeze(1) - targets
    mse = "that is the squared error (MSE); DQN uses the Huber loss (section 4, *The Huber loss*): squared for " \
          "|error| < 1, linear beyond, so one large error cannot make a huge gradient step"
    clipped = ("the error was clipped to [-1, 1] before the loss: the Nature paper's 'error clipping' IS the Huber "
               "loss (its gradient is the error clipped to [-1, 1]); clipping twice gives every |error| > 1 a zero "
               "gradient. The Huber loss takes the raw error")
    with warnings.catch_warnings():  # the (B, 1) against (B,) mistake makes torch warn about broadcasting
        warnings.simplefilter("ignore")
        candidates = [
            (F.smooth_l1_loss(taken, targets), "Q(s, a) of shape (B, 1) against targets of shape (B,) broadcast "
                                               "to (B, B): the picked Q-values must be a (B,) vector, like the "
                                               "targets"),
            (F.mse_loss(taken, targets), "Q(s, a) of shape (B, 1) against targets of shape (B,) broadcast to "
                                         "(B, B): the picked Q-values must be a (B,) vector (and the loss is the "
                                         "Huber loss)"),
        ]
    candidates += [
        ((error ** 2).mean(), mse),
        (0.5 * (error ** 2).mean(), mse),
        (F.smooth_l1_loss(q_values.gather(0, actions.unsqueeze(1)).squeeze(1), targets),
         "pick each transition's Q(s, a) along the action axis (dim 1), not along the batch (dim 0)"),
        (F.smooth_l1_loss(q_values.max(1).values, targets), "use Q(s, a) of the action taken in each transition "
                                                            "(picked by `actions`), not the max: the max belongs "
                                                            "in the target"),
        (F.smooth_l1_loss(taken.squeeze(1), targets, reduction="sum"), "average over the batch (mean), don't sum: "
                                                                      "a sum makes the step size grow with the "
                                                                      "batch size"),
        ((error.clamp(-1, 1) ** 2).mean(), clipped),
        (0.5 * (error.clamp(-1, 1) ** 2).mean(), clipped),
        (F.smooth_l1_loss(error.clamp(-1, 1), torch.zeros_like(error)), clipped),
    ]
    for delta in (0.1, 0.5, 2.0, 5.0, 10.0):
        why = f"that is a Huber loss with a threshold of {delta:g}; DQN's is 1 (PyTorch's default for it)"
        candidates += [(F.huber_loss(taken.squeeze(1), targets, delta=delta), why),
                       (F.smooth_l1_loss(taken.squeeze(1), targets, beta=delta), why)]
    return next((h for c, h in candidates if math.isclose(got, float(c), rel_tol=1e-4, abs_tol=1e-6)),
                "the loss is the mean over the batch of the Huber loss (section 4) between Q(s, a) of the "
                "taken actions and the targets")


def check_td_loss(td_loss) -> bool | None:
    """Notebook 06: ``td_loss(q_values, actions, targets)``, the Huber loss (δ = 1) between Q(s, a) of the taken
    actions and the targets, averaged over the batch: one number that carries the gradient to ``q_values``.

    ``q_values`` is (B, 4) float, ``actions`` int64 (B,), ``targets`` float (B,). Compared with
    ``dqn_course.agent.td_loss`` on a seeded batch of 32 (not the number of actions, so an axis mix-up shows)
    whose TD errors lie both within and beyond 1 (where Huber and the squared error differ): the value, then the
    gradient ``backward`` leaves in ``q_values``. Raises ``AssertionError`` with a hint naming the likely mistake.
    """
    if td_loss is None:
        return _not_answered_yet("write td_loss(q_values, actions, targets)")
    assert callable(td_loss), f"pass the function itself, e.g. check_td_loss(td_loss), got {td_loss!r}"
    import math

    import torch

    from dqn_course.agent import td_loss as reference

    with torch.random.fork_rng(devices=[]):  # leave the learner's own torch seed as it was
        q_values, actions, targets = _td_loss_inputs()
        q_ref = q_values.clone().requires_grad_(True)
        expected = reference(q_ref, actions, targets)
        expected.backward()
        q_in = q_values.clone().requires_grad_(True)
        given = (actions.clone(), targets.clone())
        got = _call_learner(td_loss, (q_in,) + given, "td_loss(q_values, actions, targets)",
                            {"return_types": PAIR_HINT})
        if got is None:
            return _not_answered_yet("td_loss still returns None; return the loss (a tensor holding one number)")
        for arg, before, after in zip(("actions", "targets"), (actions, targets), given):
            assert torch.equal(before, after), (
                f"td_loss changed its argument `{arg}` in place: compute into new tensors")
        assert isinstance(got, torch.Tensor), (
            f"td_loss returned a {type(got).__name__}, not a tensor: a plain number has no gradient, so nothing "
            "could learn from it. Return the loss tensor itself, not a Python number made from it")
        shape = tuple(got.shape)
        if got.numel() != 1:
            hint = {(TD_LOSS_BATCH,): "that is one loss per transition: average them over the batch",
                    (TD_LOSS_BATCH, 1): "that is one loss per transition: average them over the batch",
                    (TD_LOSS_BATCH, TD_LOSS_BATCH): ("a (B, 1) column met a (B,) row and broadcast to (B, B): the "
                                                     "picked Q-values must be a (B,) vector; then average")}.get(
                shape, "average the per-transition losses over the batch")
            raise AssertionError(f"td_loss should return one number (a 0-dim tensor), got shape {shape}: {hint}.")
        value = float(got.detach())
        if not math.isclose(value, float(expected.detach()), rel_tol=1e-4, abs_tol=1e-6):
            hint = _td_loss_hint(value, q_values, actions, targets)
            raise AssertionError(f"td_loss returned {value:.4f} on the check's batch, which is not it. Hint: {hint}.")
        no_grad = ("the value is right, but no gradient reaches q_values: the loss must be computed where autograd "
                   "records, from tensors still attached to q_values (nothing detached or turned into numbers), so "
                   "the backward pass can train the network")
        assert got.requires_grad and got.grad_fn is not None, no_grad
        try:
            got.reshape(()).backward()
        except RuntimeError as exc:
            raise AssertionError(f"loss.backward() on td_loss's result failed: {exc}") from None
        assert q_in.grad is not None, no_grad
        assert torch.allclose(q_in.grad, q_ref.grad, rtol=1e-4, atol=1e-6), (
            "the value is right, but the gradient in q_values is not the Huber loss's: let the gradient flow "
            "through Q(s, a) of the taken actions only (no part of the error detached)")
    return _passed("td_loss matches dqn_course.agent.td_loss: the mean Huber loss over the batch of Q(s, a) of "
                   "the taken actions, and its gradient")


# --- notebook 07: does it learn? ----------------------------------------------------------------------------

def check_updates_in_run(answer: Any) -> bool | None:
    """Notebook 07: gradient updates in a 10,000,000-agent-step run with learning_starts=80,000 and train_every=4.

    ``train.train`` makes no update before ``learning_starts``, then one per ``train_every`` agent
    steps summed over all envs: (10M - 80k) / 4 = 2,480,000 with 1 env or 8. Counting exactly (the loop
    updates at every multiple of 4 from 80,000 to 10,000,000: 2,480,001) or off by one is accepted:
    anything within 4 of 2,480,000.
    """
    total, starts, every, batch, envs = 10_000_000, 80_000, 4, 32, 8
    expected = (total - starts) / every
    return _check_number(
        answer, expected, todo="set `updates` to the number of gradient updates",
        should="updates should be a number (of gradient updates)",
        right=(f"{expected:,.0f} gradient updates: none in the first {starts:,} steps, then one per {every} agent "
               f"steps ({expected * batch:,.0f} sampled transitions in batches of {batch}); the same with {envs} "
               f"envs, {envs // every} updates per vector step."),
        hints=[
            (total / every, f"no update happens before learning_starts: which agent steps can learn at all? "
                            f"({_PRESETS})"),
            (total - starts, f"one update per train_every = 4 agent steps, not one per step ({_PRESETS})"),
            (expected * batch, f"that counts sampled transitions; each update uses one batch of 32 ({_PRESETS})"),
            (expected / batch, "the batch size does not divide the count: one update per 4 steps, whatever the "
                               f"batch ({_PRESETS})"),
            (expected / envs, "train_every counts agent steps summed over all envs: 8 envs make 2 updates per "
                              "vector step, so the total does not change"),
            (expected * envs, "10M counts agent steps over all envs together: 8 envs don't multiply the updates"),
            (expected / 4, "10M already counts agent steps, not emulator frames: don't divide by the frame skip "
                           f"({_PRESETS})"),
            (total / every - starts, "the steps before learning_starts make no update: they are agent steps, to be "
                                     f"left out of the steps that count, not updates ({_PRESETS})"),
        ],
        otherwise=("count the agent steps that can learn (those after learning_starts), then how many of them "
                   f"make an update ({_PRESETS})"),
        close=lambda a, b: abs(a - b) <= 4)


EPSILON_CASES = ((1.0, 0.01, 100_000), (1.0, 0.1, 1_000_000), (0.5, 0.05, 250))  # (start, end, decay_steps)


def _line(step: float, start: float, end: float, decay_steps: float) -> float:
    """``linear_epsilon``'s line where the diagnosis needs more than it takes: before step 0, or over a decay
    length that is no whole number (the one a wrong schedule's values imply)."""
    return end + (start - end) * max(0.0, 1.0 - step / decay_steps)


def _epsilon_hint(got: dict[int, float], start: float, end: float, decay_steps: int) -> tuple[int, str]:
    """The first step where a schedule's values ``got`` (step -> ε) go wrong, and what the schedule most likely
    does there, compared with the usual mistakes."""
    import math

    from dqn_course.train import linear_epsilon

    def close(a: float, b: float) -> bool:
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)

    n = decay_steps
    first = next(s for s, v in got.items() if not close(v, linear_epsilon(s, start, end, n)))
    mid = n // 2
    if close(got[0], end) and close(got[n], start):
        return first, "ε rises: it starts at `start` (explore a lot while Q knows nothing) and falls to `end`"
    if end > 0 and (close(got[n], 0.0) or close(got[10 * n], 0.0)):
        return (n if close(got[n], 0.0) else 10 * n), ("ε falls to 0 instead of to `end`: it should level off at "
                                                       "`end`, so a little exploration goes on for the rest of the run")
    if got[10 * n] < end - 1e-9:
        return 10 * n, ("ε keeps falling after decay_steps and ends below `end` (even negative): the schedule has a "
                        "third part, after the line, where ε stays at `end` (the text's *Why ε follows a schedule*)")
    if close(got[mid], start) and close(got[n - 1], start) and close(got[n], end):
        return first, ("ε jumps from start to end at decay_steps: the fraction of the decay done is computed by "
                       "integer division, which stays 0 until decay_steps; it should grow a little at every step")
    for shift in (1, -1):  # the whole line one step early or late: step 0 is not where the line starts
        shifted = [_line(s + shift, start, end, n) for s in got]
        if any(all(close(v, w) for v, w in zip(got.values(), line))
               for line in (shifted, [min(start, w) for w in shifted])):
            return first, (f"off by one step: at every step ε is the line's value one step "
                           f"{'later' if shift > 0 else 'earlier'}, so step 0 does not start at `start`. The line "
                           "starts at step 0 with ε = `start`: the fraction of the decay done at a step is that step "
                           "out of decay_steps")
    if not close(got[0], start):
        return 0, "at step 0, ε should be `start`"
    if start - got[mid] > 1e-9 * start:  # a straight line through step 0 and half way: where does it reach `end`?
        length = mid * (start - end) / (start - got[mid])
        for off in (-1, 1):
            if abs(length - (n + off)) < 0.01 and all(close(got[s], linear_epsilon(s, start, end, n + off))
                                                     for s in (0, 1, 10, mid)):
                return first, (f"off by one step: ε reaches `end` at step {n + off:,}, not at decay_steps = {n:,}. "
                               "The line runs from step 0 to step decay_steps, so the fraction of the decay done at "
                               "a step is that step out of decay_steps, no more and no less")
    if got[1] < start:
        other = (start - end) / (start - got[1])  # the decay length a straight line through got[0], got[1] has
        if abs(other / n - 1) > 0.01 and all(close(v, _line(s, start, end, other)) for s, v in got.items()):
            return first, (f"ε reaches `end` at about step {other:,.0f}, not at decay_steps = {n:,}: decay_steps is "
                           "already a number of steps (not a fraction of the run), so the fraction of the decay done "
                           "at a step is that step out of decay_steps itself")
    values = list(got.values())
    if (all(end - 1e-9 <= v <= start + 1e-9 for v in values) and all(a >= b for a, b in zip(values, values[1:]))
            and got[mid] < linear_epsilon(mid, start, end, n) - 0.01 * (start - end)):  # a curve below the line
        return first, ("ε falls along a curve, not a straight line: that is multiplicative decay (ε multiplied by "
                       "a constant such as 0.995 at every step, as in many blog agents). The DQN papers anneal ε "
                       "linearly from start to end over decay_steps, and that straight line is what train() uses and "
                       "what the epsilon column of a run's log.csv shows")
    return first, ("ε should fall in a straight line from `start` at step 0 to `end` at decay_steps, then stay at "
                   "`end`")


def check_epsilon_schedule(epsilon_schedule) -> bool | None:
    """Notebook 07: ``epsilon_schedule(step, start, end, decay_steps)``, the ε of ε-greedy at agent step ``step``.

    Compared with ``dqn_course.train.linear_epsilon`` (``start`` at step 0, a straight line to ``end`` at
    ``decay_steps``, then ``end``) for each of ``EPSILON_CASES`` at steps 0, 1, 10, half way, decay_steps - 1,
    decay_steps, decay_steps + 1 and 10 x decay_steps. A Python, NumPy or torch scalar passes. Raises
    ``AssertionError`` with a hint naming the likely mistake (no floor, decay to 0, rising, multiplicative decay,
    integer division, a decay one step short or long, the wrong decay length).
    """
    if epsilon_schedule is None:
        return _not_answered_yet("write epsilon_schedule(step, start, end, decay_steps)")
    assert callable(epsilon_schedule), (
        f"pass the function itself, e.g. check_epsilon_schedule(epsilon_schedule), got {epsilon_schedule!r}")
    import math

    from dqn_course.train import linear_epsilon

    for start, end, n in EPSILON_CASES:
        got = {}
        for step in (0, 1, 10, n // 2, n - 1, n, n + 1, 10 * n):
            call = f"epsilon_schedule({step:_}, {start}, {end}, {n:_})"
            value = _call_learner(epsilon_schedule, (step, start, end, n), call)
            if value is None:
                return _not_answered_yet("epsilon_schedule still returns None; return ε, a number")
            if getattr(value, "ndim", None) == 0 or getattr(value, "shape", None) == (1,):
                value = value.item()  # a NumPy or torch scalar
            _require_number(value, f"{call} should return ε, a number")
            got[step] = float(value)
        if all(math.isclose(v, linear_epsilon(s, start, end, n), rel_tol=1e-6, abs_tol=1e-9) for s, v in got.items()):
            continue
        step, hint = _epsilon_hint(got, start, end, n)
        where = "" if "*Why ε follows a schedule*" in hint else f" ({_SCHEDULE})"
        raise AssertionError(f"epsilon_schedule({step:_}, {start}, {end}, {n:_}) returned {got[step]:.6g}, which "
                             f"is not it: {hint}{where}.")
    return _passed("epsilon_schedule matches train.linear_epsilon: a straight line from start to end over "
                   "decay_steps, then end")


# --- notebook 08: can PER be cheap? -------------------------------------------------------------------------

IS_PROBABILITIES = (0.4, 0.3, 0.2, 0.1)  # P(i) of the four sampled transitions in notebook 08's exercise
IS_N, IS_BETA = 1_000, 0.5


def check_is_weights(answer: Any) -> bool | None:
    """Notebook 08: importance-sampling weights of transitions drawn with P = (0.4, 0.3, 0.2, 0.1), N = 1,000, β = 0.5.

    w_i = (N · P(i)) ** -β, divided by the largest w in the batch: (0.5, 0.577, 0.707, 1.0).
    """
    if answer is None:
        return _not_answered_yet("set `weights` to the four importance-sampling weights")
    import numpy as np

    from dqn_course.per import importance_weights

    try:
        got = np.asarray(answer, np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise AssertionError(f"weights should be four numbers (a list or an array), got {answer!r}") from None
    p = np.array(IS_PROBABILITIES)
    assert got.size == p.size, f"weights should hold one number per sampled transition ({p.size}), got {got.size}"
    expected = importance_weights(p, IS_N, IS_BETA).astype(np.float64)

    def close(value) -> bool:
        return bool(np.allclose(got, value, rtol=1e-3, atol=1e-4))

    if close(expected):
        return _passed("w = (N·P)^-β / max w: the rarest transition gets weight 1 and the most frequent the "
                       "smallest")
    raw = (IS_N * p) ** -IS_BETA
    hints = [
        (raw, "divide by the batch's largest weight, so that every w is at most 1 (*Where the weight comes "
              "from*)"),
        ((IS_N * p) ** IS_BETA / ((IS_N * p) ** IS_BETA).max(), "the exponent is -β: frequent transitions must get "
                                                                 "smaller weights, not larger (*Why PER*)"),
        (raw / raw.sum(), "normalise by the largest weight, not by the sum (*Where the weight comes from*)"),
        ((IS_N * p) ** -1.0 / ((IS_N * p) ** -1.0).max(), "use β = 0.5, not β = 1 (β is annealed towards 1 "
                                                           "over the run: *Why PER*)"),
        (p ** -IS_BETA, "divide by the largest weight, so that every w is at most 1 (*Where the weight comes "
                        "from*)"),
        (1 / (IS_N * p), "that is the full correction, β = 1: the exercise's β is 0.5, the exponent of *Why PER*'s "
                         "weight; then divide by the largest weight"),
    ]
    hint = next((h for value, h in hints if close(value)),
                "each weight is the formula of *Why PER* (its exponent is the exercise's β), then every weight is "
                "divided by the batch's largest (*Where the weight comes from* says why)")
    raise AssertionError(f"weights {np.round(got, 4).tolist()} are not it: {hint}.")


# --- notebook 09: compressed and disk-backed replay ---------------------------------------------------------

def _slot_overheads() -> dict[str, int]:
    """Bytes a compressed frame-sharing slot costs besides its payload, read from the code that spends them."""
    import sys

    import numpy as np

    from dqn_course.replay import FrameSharingMemory
    from dqn_course.replay.stores import POINTER_BYTES

    dtypes = {"actions": np.uint8, "rewards": np.float32, "dones": np.bool_, "first": np.bool_, "valid": np.bool_,
              "ids": np.int64}
    assert set(dtypes) == set(FrameSharingMemory.RING_ARRAYS), "update _slot_overheads with the ring's arrays"
    return {"bookkeeping": sum(np.dtype(d).itemsize for d in dtypes.values()), "list_slot": POINTER_BYTES,
            "bytes_header": sys.getsizeof(b"")}


def check_min_compression_ratio(answer: Any) -> bool | None:
    """Notebook 09: the smallest compression ratio (84x84 frame bytes / payload bytes) at which a 1M-slot
    ``FrameSharingMemory(storage="lz4")`` fits in 1 GB = 10^9 bytes.

    Each slot costs its payload plus 16 B of bookkeeping, an 8 B list slot and a 33 B ``bytes`` header
    (64-bit CPython), so the payload may be 1,000 - 57 = 943 B: ratio 7,056 / 943 ≈ 7.48.
    """
    frame, per_slot = 84 * 84, 1e9 / 1e6
    o = _slot_overheads()
    overhead = sum(o.values())
    expected = frame / (per_slot - overhead)
    return _check_number(
        answer, expected, todo="set `min_ratio` to the smallest compression ratio",
        should="min_ratio should be a number (frame bytes / payload bytes)",
        right=(f"{expected:.2f}x: 10^9 B / 10^6 slots = {per_slot:,.0f} B a slot, minus {overhead} B of overhead "
               f"({o['bookkeeping']} bookkeeping + {o['list_slot']} list slot + {o['bytes_header']} bytes header) "
               f"leaves {per_slot - overhead:,.0f} B for the payload: {frame:,} / {per_slot - overhead:,.0f}"),
        hints=[
            (frame / per_slot, "each slot also pays for bookkeeping, a list slot and the payload's bytes header: "
                               "subtract them from the 1,000 B first (section 2 prints all three)"),
            (frame / (per_slot - o["bookkeeping"]), "the payload is a Python bytes object (with a header) held in "
                                                    "a list (one pointer a slot): subtract those too (section 2)"),
            (frame / (per_slot - o["list_slot"] - o["bytes_header"]), "the ring's bookkeeping arrays (action, "
                                                                       "reward, flags, id) cost 16 B a slot as well "
                                                                       "(section 2)"),
            (frame / (per_slot - o["bookkeeping"] - o["list_slot"]), "a bytes object carries a 33 B header "
                                                                     "(what sys.getsizeof reports when empty; "
                                                                     "section 2)"),
            (frame / (per_slot - o["bookkeeping"] - o["bytes_header"]), "the list holds one 8 B pointer per slot "
                                                                        "(section 2)"),
            (frame / (2**30 / 1e6 - overhead), "1 GB here is 10^9 bytes, not 2^30, as the exercise of section 2 says"),
            ((per_slot - overhead) / frame, "the ratio is frame bytes over payload bytes (greater than 1), as in "
                                            "section 1's table"),
            (per_slot - overhead, "that is the payload budget in bytes; the ratio is 7,056 divided by it (section 1's "
                                  "ratio)"),
        ],
        otherwise=("the compression must bring a frame down to what a slot has left for its payload once every "
                   "per-slot overhead printed above is paid (section 2, and its drawing of one slot): the ratio is "
                   "the frame's bytes over that budget"),
        close=lambda a, b: abs(a - b) <= 0.005 * abs(b), show=",.4g")


# --- notebook 09, second half: resuming a run ---------------------------------------------------------------

def check_resume_config(cfg: Any, run_dir: str | Path) -> bool | None:
    """Notebook 09: a ``Config`` that resumes the killed run in ``run_dir`` and trains it further.

    Right when ``cfg.resume`` names the run (its folder or one of its ``state-*.ckpt`` files), the
    checkpoint it picks passes ``records.load_resume`` (same replay shape), the logs go on in the same
    folder and ``total_steps`` lies beyond the step that checkpoint saved.
    """
    if cfg is None:
        return _not_answered_yet("set `resume_cfg` to a Config that resumes the run")
    from pathlib import Path

    from dqn_course.checkpoint import CheckpointError
    from dqn_course.train import Config, load_resume

    assert isinstance(cfg, Config), (
        f"resume_cfg should be a dqn_course.train.Config (a copy of the run's, with the fields to change), "
        f"got {type(cfg).__name__}")
    run_dir = Path(run_dir).resolve()
    assert cfg.resume, ("resume is empty, so this run would start from scratch: a resume names the run it carries "
                        f"on ({_RESUME})")
    target = Path(cfg.resume).resolve()
    assert target == run_dir or target.parent == run_dir, (
        f"resume={cfg.resume!r} is not the killed run: a resume names the killed run's folder or one of its "
        f"checkpoints ({_RESUME})")
    assert Path(cfg.out_dir).resolve() == run_dir, (
        f"out_dir={cfg.out_dir!r}: a resumed run writes where it was, so that log.csv and the checkpoints carry on "
        f"({_RESUME})")
    try:
        _, meta, path = load_resume(cfg)
    except CheckpointError as e:
        raise AssertionError(f"this resume would be refused: {e}") from None
    saved = meta["counters"]["step"]
    assert cfg.total_steps > saved, (
        f"total_steps={cfg.total_steps:,} is not beyond the checkpoint's step {saved:,}: the run would stop at once "
        f"({_RESUME})")
    return _passed(f"resumes from {path.name} at step {saved:,} and trains on to {cfg.total_steps:,} in the same "
                   f"folder")


# --- notebook 10: scaling out with Ray ----------------------------------------------------------------------

CHUNK_STEPS, FRAME_BYTES, STACK = 100, 84 * 84, 4  # notebook 10's exercise: a chunk from the middle of a game
_CHUNKS = "section 1, *What travels: chunks of frames*"


def check_chunk_bytes(answer: Any) -> bool | None:
    """Notebook 10: pixel bytes in a chunk of 100 transitions from the middle of a game (no episode start in it).

    A chunk carries its first state as a full 4-stack and then one new 84x84 uint8 frame per step:
    (4 + 100) x 7,056 = 733,824 bytes, against 100 x 2 x 4 x 7,056 = 5,644,800 for s and s' stacks.
    """
    expected = (STACK + CHUNK_STEPS) * FRAME_BYTES
    stacks = CHUNK_STEPS * 2 * STACK * FRAME_BYTES
    return _check_number(
        answer, expected, todo="set `predicted_bytes` to your prediction of the bytes of pixels in the chunk",
        should="predicted_bytes should be a number of bytes (an int)",
        right=(f"{expected:,} bytes: one 4-frame stack to start from, then one new frame per step; "
               f"{stacks / expected:.1f}x less than sending s and s' stacks ({stacks:,} bytes)."),
        hints=[
            (CHUNK_STEPS * FRAME_BYTES, "the replay also needs the first state's whole stack to rebuild the first "
                                        f"transition ({_CHUNKS})"),
            ((CHUNK_STEPS + 1) * FRAME_BYTES, f"the first state is a stack of frames, not one frame ({_CHUNKS})"),
            (stacks, "that is s and s' as full stacks for every transition; a chunk sends one new frame per step "
                     f"({_CHUNKS})"),
            (CHUNK_STEPS * STACK * FRAME_BYTES, "that is one full stack per step; consecutive stacks share 3 of "
                                                f"their 4 frames, so each step adds only one new frame ({_CHUNKS})"),
            (CHUNK_STEPS * (STACK + 1) * FRAME_BYTES, "that is a folded 5-frame state per transition; within a chunk "
                                                      f"the frames chain, so each step adds only one new frame "
                                                      f"({_CHUNKS})"),
            (4 * expected, f"pixels are uint8, 1 byte each, not float32 ({_CHUNKS}, the chunk's output)"),
            (8 * expected, f"that is bits; count bytes ({_CHUNKS}, the chunk's output)"),
        ],
        otherwise=("count the frames a chunk stores: its first full stack, then one new frame per step, each "
                   f"84 x 84 bytes ({_CHUNKS})"))


# --- notebook 07c: does my DQN learn? -------------------------------------------------------------------------

def check_capstone(run: str | Path | None, games: Count = 30) -> bool | None:
    """Notebook 07c's gate: the policy of the learner's run (a run folder or its ``checkpoint.pt``) plays ``games``
    whole games on seeds the run never used (ε = 0.05, unclipped score, ``dqn_course.evaluate``), beside random
    play on the same games; it passes at a mean of ``capstone.GATE_SCORE`` or more over 30 games.

    ``None`` (not run yet) while ``run`` is None or holds no policy file. Raises ``AssertionError`` with the
    score, random play, their ratio and the likely causes read from the run's ``log.csv`` (``capstone.diagnose``).
    """
    if run is None:
        return _not_answered_yet("train your loop into a run folder and pass the folder")
    from pathlib import Path

    from dqn_course.evaluate import PolicyFileError, policy_vs_random
    from dqn_course.lab.capstone import gate_verdict

    folder = Path(run)
    folder = folder.parent if folder.is_file() else folder
    try:
        result = policy_vs_random(run, games=games)
    except PolicyFileError as e:
        if not Path(run).exists() or (Path(run).is_dir() and not (Path(run) / "checkpoint.pt").exists()):
            return _not_answered_yet(f"{run} holds no policy yet ({e}); run your loop until its first evaluation")
        raise AssertionError(str(e)) from None
    passed, message = gate_verdict(folder, result)
    assert passed, message
    return _passed(message)


def check_capstone_loop(my_dqn) -> bool | None:
    """Notebook 07c: the learner's loop ``my_dqn(cfg, folder, td_targets, td_loss, epsilon_schedule, minutes=None)``
    on the quick settings (``capstone.settings(quick=True)``: a few hundred steps) in a temporary folder, with the
    library's rule. The first call is interrupted (``KeyboardInterrupt``, as the stop button sends) at step
    ``CAPSTONE_STOP``; the second, on the same folder, must carry on from what the first saved to the last step.
    Together they must log finished games with the updates' diagnostics and a falling ε, in growing steps, evaluate
    every ``eval_every`` steps and return the last step. Raises ``AssertionError`` naming the first thing missing and
    the section of the page that explains it.
    """
    if my_dqn is None:
        return _not_answered_yet("write my_dqn(cfg, folder, td_targets, td_loss, epsilon_schedule, minutes=None)")
    assert callable(my_dqn), f"pass the function itself, check_capstone_loop(my_dqn), got {my_dqn!r}"
    import csv
    import tempfile
    from pathlib import Path

    from dqn_course.agent import td_loss, td_targets
    from dqn_course.checkpoint import list_checkpoints
    from dqn_course.lab.capstone import settings
    from dqn_course.train import linear_epsilon

    def rows(path: Path) -> list[dict]:
        if not path.is_file():
            return []
        with open(path, newline="") as f:
            return list(csv.DictReader(f))

    def interrupted(step, start, end, decay_steps):
        if step == CAPSTONE_STOP:
            raise KeyboardInterrupt  # what the notebook's stop button raises in the loop
        return linear_epsilon(step, start, end, decay_steps)

    cfg = settings(quick=True)
    call = "my_dqn(cfg, folder, td_targets, td_loss, epsilon_schedule)"
    with tempfile.TemporaryDirectory(prefix="dqn-capstone-check-") as tmp:
        folder = Path(tmp) / "run"
        try:
            first = _call_learner(my_dqn, (cfg, folder, td_targets, td_loss, interrupted), call)
        except KeyboardInterrupt:
            first = "interrupted"
        if first is None:
            return _not_answered_yet("my_dqn still returns None; run the loop, then return the last step")
        assert list_checkpoints(folder), (
            f"interrupted at step {CAPSTONE_STOP}, the loop left no saved state in its folder: save in a `finally` "
            "block, so a stop, an error or the end all keep what was learned (section 4, step 6)")
        before = rows(folder / "log.csv")
        saved = max(int(p.stem.split("-")[1]) for p in list_checkpoints(folder))
        updates = []

        def counted_loss(q_values, actions, targets):
            updates.append(1)
            return td_loss(q_values, actions, targets)

        last = _call_learner(my_dqn, (cfg, folder, td_targets, counted_loss, linear_epsilon), call + " again")
        assert last == cfg.total_steps, (
            f"called again after the interruption, my_dqn returned {last!r}: it should carry on to step "
            f"cfg.total_steps ({cfg.total_steps}) and return the last step (section 4)")
        left = range(max(saved + 1, cfg.learning_starts), cfg.total_steps + 1)
        due = sum(1 for t in left if t % cfg.train_every == 0)
        assert len(updates) <= due + 1, (
            f"called again, the loop made {len(updates)} updates where {due} were left after the save at step "
            f"{saved}: it started over instead of carrying on from the step run.resume(...) returns (section 4, "
            "step 1)")
        log = rows(folder / "log.csv")
        assert log, ("log.csv holds no finished game: when a game ends, log it with run.game_over(...) (section 2, "
                     "the run folder)")
        steps = [int(r["step"]) for r in log]
        assert log[:len(before)] == before and steps == sorted(steps) and len(set(steps)) == len(steps), (
            "after the interruption the log's steps start over: carry on from the step run.resume(...) returns "
            "instead of 0 (section 4, step 1)")
        assert any(r["loss"] for r in log), (
            "no gradient update reached the log: from cfg.learning_starts on, one update every cfg.train_every "
            "steps, each followed by run.updated(...) (section 4, step 4)")
        eps = [float(r["epsilon"]) for r in log]
        assert eps[-1] < eps[0] or (len(eps) == 1 and eps[0] < cfg.eps_start), (
            f"ε did not fall over the run ({eps[0]} at the first game, {eps[-1]} at the last): act with the ε your "
            "schedule gives for the run's step, and log that ε (section 4, step 2)")
        evals = [int(r["step"]) for r in rows(folder / "eval.csv")]
        expected = list(range(cfg.eval_every, cfg.total_steps + 1, cfg.eval_every))
        assert evals == expected, (
            f"evaluations at steps {evals}, expected {expected}: evaluate once at each multiple of cfg.eval_every, "
            "also across a resume (section 4, step 6)")
    return _passed(f"your loop survived an interruption at step {CAPSTONE_STOP}, carried on from its save to step "
                   f"{last}, logged {len(log)} game(s) with the updates' diagnostics and a falling ε, and evaluated "
                   f"at steps {expected}")


CAPSTONE_STOP = 450  # the step at which check_capstone_loop interrupts the learner's first call


check_module(globals())
