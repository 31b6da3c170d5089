"""One-call self-checks for the notebooks' exercises.

Each ``check_*`` function takes the learner's answer (a number or a function), compares it with the
course's own implementation or arithmetic, prints a line starting with "✓" when it is right, and
raises ``AssertionError`` with a hint when it is not. The sections follow the notebooks, 00 to 10.
tests/test_checks_00_03.py, test_checks_01.py, test_checks_04_06.py, test_checks_07.py,
test_checks_08.py, test_checks_09.py, test_checks_09_resume.py and test_checks_10.py prove that
every check passes the right answer and rejects wrong ones with its hint.
"""
from __future__ import annotations

import operator
from collections.abc import Callable


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
        otherwise=("bytes = height x width x channels (x 1 byte per uint8) per screen, x 4 screens per state, "
                   "x 2 states (s and s')"))


# --- notebook 01: the naive agent ---------------------------------------------------------------------------

def _call_answer(fn, args: tuple, name: str):
    """Call a learner's function; a crash becomes an AssertionError that names the call."""
    try:
        return fn(*args)
    except ZeroDivisionError as exc:
        raise AssertionError(f"{name}{args} raised ZeroDivisionError ({exc}): a memory that does not grow "
                             "(bytes_per_step <= 0) is never killed: return math.inf for it") from None


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
                    "bytes per transition = (rss_b - rss_a) / (step_b - step_a)")
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
            (available / per_step, "the baseline is in RAM before the first step: only available - baseline "
                                   "is left for the memory to grow into"),
            ((available + baseline) / per_step, "subtract the baseline from the available RAM, don't add it"),
            (available / per_step / 2, "bytes_per_step is already per transition (per step): don't halve it"),
            (available - baseline - per_step, "divide what is left by the bytes per step"),
        ]
        hint = next((h for value, h in hints if abs(got - value) <= 1),
                    "killed at step (available_bytes - baseline_bytes) / bytes_per_step")
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
        return "the frame comes out transposed (cv2.resize takes (width, height); don't swap axes)"
    if close(cv2.resize(cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY), (84, 84), interpolation=area)):
        return "the screen is RGB, not BGR: use cv2.COLOR_RGB2GRAY"
    if close(cv2.resize(frame.mean(axis=2).astype(np.uint8), (84, 84), interpolation=area)):
        return ("a plain mean of R, G and B is not luminance: use cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY), "
                "which weighs green most")
    for name in ("INTER_LINEAR", "INTER_NEAREST", "INTER_CUBIC"):
        if close(cv2.resize(gray, (84, 84), interpolation=getattr(cv2, name))):
            return (f"that is cv2.{name}; use interpolation=cv2.INTER_AREA, which averages every input pixel "
                    "an output pixel covers (thin bricks and the ball are not skipped)")
    return ("convert the whole screen to gray with cv2.COLOR_RGB2GRAY, then cv2.resize it to (84, 84) with "
            "interpolation=cv2.INTER_AREA (no cropping)")


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
                hint = "that is every second row and column of 210x160; resize to 84x84 with cv2.resize instead"
            elif out.shape[-1:] == (3,):
                hint = "the frame is still in colour; convert to gray with cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)"
            else:
                hint = "resize the gray screen with cv2.resize(gray, (84, 84), interpolation=cv2.INTER_AREA)"
            raise AssertionError(f"preprocess returned shape {out.shape}, expected (84, 84): {hint}.")
        if out.dtype != np.uint8:
            raise AssertionError(
                f"preprocess returned dtype {out.dtype} ({out.dtype.itemsize} bytes per pixel), expected uint8 "
                "(1 byte): keep the pixels as integers 0-255 (np.mean and /255 turn them into float64)")
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


def _prediction_hint(prediction, measured, rel: float, forgot: dict | None) -> str:
    """How far ``prediction`` is from ``measured``, in words that never state ``measured``.

    The direction (too high / too low), a rough factor band, and, when ``prediction / measured`` lies within 5%
    of a factor in ``forgot`` (within half its distance from 1 for a factor closer to 1 than 10%), what that
    factor usually means.
    """
    if measured == 0 or prediction == 0 or (prediction > 0) != (measured > 0):
        return "not even the same sign as the measurement (or zero): redo the arithmetic from the cell's numbers"
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
    near = [(abs(ratio / f - 1), why) for f, why in (forgot or {}).items()
            if f > 0 and abs(ratio / f - 1) <= min(0.05, abs(f - 1) / 2)]
    why = min(near)[1] if near else "redo the arithmetic from the cell's numbers"
    return f"{hint}: {why}"


def check_prediction(prediction, measured, what: str, rel: float = 0.02, *,
                     forgot: dict[float, str] | None = None) -> bool | None:
    """Notebooks 03-10: the learner's ``prediction`` (a number written *before* the measurement) against the
    ``measured`` value, within ``rel`` (2% by default; 0 asks for the exact value).

    A wrong prediction gets a hint, never the measured value: too high or too low, by roughly what factor
    (more than 10x, about N x, 10-50%, within 10%), and, when ``prediction / measured`` is within 5% of a key
    of ``forgot``, that key's text: e.g. ``forgot={8.0: "pixels are uint8, 1 byte each, not float64"}``.
    On success it prints the measured value (the learner has answered).
    """
    if prediction is None:
        return _not_answered_yet(f"write your prediction of {what} (a number) in the cell above")
    _require_number(prediction, f"the prediction of {what} should be a number")
    off = abs(prediction - measured) / max(abs(measured), 1e-12)
    if off <= rel:
        return _passed(f"{what}: predicted {_show(prediction)}, measured {_show(measured)}")
    raise AssertionError(f"you predicted {_show(prediction)} for {what}; that is "
                         f"{_prediction_hint(prediction, measured, rel, forgot)}.")


# Each question: (right letter, why it is right, {wrong letter: hint}). Notebook, then a short name.
QUESTIONS = {
    "03.where_to_scale": ("b", "the memory keeps 1 byte per pixel and the network converts each batch itself",
                          {"a": "float32 in the memory costs 4 bytes per pixel for a million transitions",
                           "c": "float16 still costs 2 bytes per pixel and buys nothing: the network converts"}),
    "03.mean_dtype": ("c", "np.mean (and /) on integers returns float64 unless you pass dtype=",
                      {"a": "run np.mean(frame, axis=0).dtype: NumPy promotes",
                       "b": "NumPy picks float64, not float32, when no dtype is given"}),
    "03.uint8_assign": ("a", "a uint8 array truncates floats in [0, 1) to 0",
                        {"b": "NumPy converts silently, it does not raise", "c": "uint8 cannot hold 0.5"}),
    "04.frames_per_transition": ("c", "s and s' as 4-stacks hold 8 frames; the ring keeps each frame once",
                                 {"a": "the folded state keeps 5 frames", "b": "next-state sharing keeps 4"}),
    "04.episode_end": ("b", "padding restarts where the frame stream restarts: episode_end, not done",
                       {"a": "after a lost life the frames go on: no padding",
                        "c": "a truncated episode has done=False, yet the stream restarts"}),
    "04.write_head": ("a", "the transitions whose state or next state reads the overwritten frame",
                      {"b": "the ones after it whose stacks look back through that slot go too",
                       "c": "only transitions that read the overwritten frame are affected"}),
    "05.deque_walk": ("b", "deque[i] walks 64-item blocks from the nearer end, so a draw costs time growing with N",
                      {"a": "random.sample itself is cheap on a list; the deque's indexing is the cost",
                       "c": "np.stack copies 32 arrays whatever the capacity: that part stays flat"}),
    "05.overhead_matters": ("c", "the Python objects per row stay the same size while the pixels shrink",
                            {"a": "at 28,224 bytes of pixels a few hundred bytes are about 1%",
                             "b": "the objects per row do not depend on the frame size"}),
    "05.prefault": ("a", "np.zeros only reserves address space; pages arrive as they are written",
                    {"b": "the ring's size is fixed at construction", "c": "nothing is freed while filling"}),
    "06.why_batched_faster": ("b", "the fixed price per framework call is paid once instead of 32 times",
                              {"a": "the same arithmetic is done both ways",
                               "c": "the targets are identical: same precision"}),
    "06.double_lower": ("a", "the target net values the online net's choice, never more than its own maximum",
                        {"b": "both networks are used for every non-terminal transition",
                         "c": "a terminal transition does not bootstrap: both targets equal the reward"}),
    "06.gpu_gain": ("c", "on a GPU the arithmetic of a small forward is tiny, so the fixed price is most of it",
                    {"a": "the number of calls is the same on any device",
                     "b": "the loop also waits for the GPU at each read-back"}),
    "06b.fresh_process": ("a", "memory freed earlier is often kept by the allocator and reused, hiding growth",
                          {"b": "each rung runs alone; the point is a clean RSS baseline",
                           "c": "RSS can be read any time; what matters is what was allocated before"}),
    "06b.fill_every_slot": ("b", "np.zeros pages cost no RSS until written, so an unfilled ring would look cheap",
                            {"a": "the arithmetic is the same either way; the RSS is not",
                             "c": "sampling works on a partly filled ring"}),
    "08.zero_priority": ("a", "a leaf of priority 0 owns an empty interval of the line, so no mass can land in it",
                         {"b": "the walk has no special case for zero: look at what the leaf owns on the line",
                          "c": "the slot stays in the memory; only its priority is 0"}),
    "08.where_tree_hurts": ("b", "a GPU shrinks the network's part of a step while the tree stays on the CPU",
                            {"a": "on a CPU the network dominates the step: the tree's share is small there",
                             "c": "the tree's time is about fixed, but the step it is compared with is not"}),
    "08.weights_n": ("b", "N multiplies every weight by the same factor, which the division by the largest removes",
                     {"a": "every weight changes by the same factor; divide by the largest and see what is left",
                      "c": "only β and the ratios between the probabilities survive the division"}),
    "09.what_sets_speed": ("b", "a batch decompresses 32 x 5 = 160 frames, so the decompression time sets the rate",
                           {"a": "the ratio decides the RAM, not how fast a batch is drawn",
                            "c": "each frame is compressed once, when stored, but decompressed at every draw"}),
    "09.cold_disk": ("c", "cold, every frame is a read at a random place on the device; warm, its page is in RAM",
                     {"a": "the disk store keeps raw frames, uncompressed",
                      "b": "a memory-mapped gather reads only the pages its frames lie on"}),
    "09.two_checkpoints": ("a", "if the newest file is damaged, a resume falls back to the previous good one",
                           {"b": "one file holds the whole state: networks, optimiser, replay and counters",
                            "c": "a resume restores one state exactly; nothing is averaged"}),
    "09.redone_steps": ("b", "the resume starts from the newest good checkpoint; the steps after it are played again",
                        {"a": "the state after the checkpoint died with the process",
                         "c": "the checkpoint holds the whole state up to its step"}),
    "10.samples_per_step": ("b", "32 x updates/s / env steps/s: the steps sped up, the learner did not",
                            {"a": "8 holds only while one update follows every 4 steps; Ray decouples them",
                             "c": "more data per second spreads the same updates over more transitions"}),
    "10.second_worker": ("c", "a worker needs a core; with none idle it takes turns with the learner and the rest",
                         {"a": "Ray places as many workers as there are logical CPUs declared",
                          "b": "the replay actor keeps one stream per worker"}),
}


def check_question(key: str, answer) -> bool | None:
    """Notebooks 03-10: a short multiple-choice question; ``answer`` is a letter, e.g. ``"b"``."""
    right, why, hints = QUESTIONS[key]
    if answer is None:
        return _not_answered_yet("write the letter of your answer, e.g. \"a\"")
    assert isinstance(answer, str) and answer.strip().lower() in ("a", "b", "c"), (
        f"answer with one letter, \"a\", \"b\" or \"c\", got {answer!r}")
    letter = answer.strip().lower()
    assert letter == right, f"not {letter!r}: {hints.get(letter, 'look again at the measurements above')}"
    return _passed(f"{letter}: {why}")


# --- notebooks 04-06: frame sharing, the ring buffer, batched targets ---------------------------------------

def check_stack_at(stack_at) -> bool | None:
    """Notebook 04: ``stack_at(frames, first, t, stack=4)`` builds the state whose newest frame is ``frames[t]``.

    ``frames`` holds one frame per step in order, ``first[k]`` is True where frame k starts an episode.
    The answer is compared with ``FrameSharingMemory.stacks_at`` (and with the stacks the agent saw)
    on random episodes, short ones and stacks of 2, 3 and 4 included.
    """
    if stack_at is None:
        return _not_answered_yet("write stack_at(frames, first, t, stack=4)")
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
                    f"{got.shape} {where}. Index the frames as frames[[...]] with `stack` indices.")
                if np.array_equal(got, expected):
                    checked += 1
                    at_start += t - stack + 1 < start
                    continue
                idx = np.arange(t - stack + 1, t + 1)
                no_episode = frames[np.maximum(idx, 0)]
                zeros = np.where((idx < start)[:, None, None], 0, frames[np.maximum(idx, start)])
                hint = "compare your stack with the expected one, frame by frame"
                if np.array_equal(got, expected[::-1]):
                    hint = "the order is reversed: oldest frame first, frames[t] last"
                elif np.array_equal(got, no_episode):
                    hint = ("the stack reaches back across an episode start into the previous episode: stop at "
                            "the latest k <= t with first[k] True and repeat frames[k] for the earlier positions")
                elif np.array_equal(got, zeros):
                    hint = "positions before the episode's first frame repeat that first frame (not zeros)"
                elif np.array_equal(got, np.repeat(frames[t:t + 1], stack, axis=0)):
                    hint = "only an episode's first frame is repeated; later stacks hold consecutive frames"
                raise AssertionError(f"stack_at is wrong {where}. Hint: {hint}.")
    return _passed(f"stack_at matches FrameSharingMemory on {checked} stacks, {at_start} of them padded "
                   "at an episode start")


def check_ring(ring_class) -> bool | None:
    """Notebook 05: a preallocated ring ``ring_class(capacity, item_shape, dtype)`` with
    ``add(item)``, ``len(ring)`` and ``sample(batch_size, rng)`` (an array of ``batch_size`` items).

    Checked: it holds at most ``capacity`` items, overwrites the oldest first, samples only what it
    holds (all of it, uniformly enough), keeps the dtype, and copies items into storage made once in
    ``__init__`` instead of keeping the arrays it is given (measured with tracemalloc).
    """
    if ring_class is None:
        return _not_answered_yet("write the ring class")
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
        f"sample(300, rng) should return an array of shape (300, *item_shape) = (300, 2, 3), got {batch.shape}")
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
        raise AssertionError("the ring stopped storing once full; it must overwrite the oldest item: the write "
                             "head goes back to slot 0 (head = (head + 1) % capacity)")
    assert got == {12, 13, 14, 15, 16}, (
        f"after adding items 10..16 into capacity 5 the ring should hold 12..16, it sampled {sorted(got)}")

    big = ring_class(500, (84, 84), np.uint8)
    with TraceMalloc() as tm:
        for v in range(1_500):
            big.add(item(v % 256, (84, 84)))
    assert tm.current < 500 * 84 * 84 // 4, (
        f"adding 1,500 frames kept {tm.current:,} more bytes allocated: the ring keeps the arrays it is given "
        "(a list or deque of references) or allocates per add. Allocate one array of shape "
        "(capacity, *item_shape) in __init__ and copy each item into its slot")
    return _passed("the ring holds the newest `capacity` items in storage made once, and samples only them")


def check_td_targets(td_targets) -> bool | None:
    """Notebook 06: ``td_targets(rewards, dones, next_q_target, gamma, next_q_online=None)`` for a whole batch.

    ``next_q_target`` and ``next_q_online`` are (B, n_actions) Q-values of s' from the target and the
    online network. Without ``next_q_online``: r + γ (1 - done) max_a Q_target(s', a). With it (Double
    DQN): the online network picks a* = argmax_a Q_online(s', a), the target network values it.
    Compared with ``DQNAgent.batched_targets`` on a seeded batch, plain and double.
    """
    if td_targets is None:
        return _not_answered_yet("write td_targets(rewards, dones, next_q_target, gamma, next_q_online=None)")
    import numpy as np
    import torch

    from dqn_course.agent import DQNAgent, batch_to_tensors
    from dqn_course.replay import Batch

    with torch.random.fork_rng(devices=[]):  # leave the learner's own torch seed as it was
        rng = np.random.default_rng(606)
        B = 32

        def batch():
            frames = rng.integers(0, 256, size=(B, 5, 84, 84), dtype=np.uint8)
            dones = (rng.random(B) < 0.25).astype(np.float32)
            dones[:2] = 1.0, 0.0
            return Batch(frames[:, :4], rng.integers(0, 4, B), rng.choice([-1.0, 0.0, 1.0], B).astype(np.float32),
                         frames[:, 1:], dones, np.arange(B))

        agent = DQNAgent(4, "cpu", lr=1e-3, seed=606)
        for _ in range(3):  # move the online network away from its target copy, so Double DQN differs
            agent.learn(batch())
        t = batch_to_tensors(batch(), torch.device("cpu"))
        with torch.no_grad():
            q_target, q_online = agent.target(t["next_states"]), agent.q(t["next_states"])
        r, d, g = t["rewards"], t["dones"], agent.gamma
        for double in (False, True):
            agent.double = double
            expected = agent.batched_targets(t)
            args = (r.clone(), d.clone(), q_target.clone(), g) + ((q_online.clone(),) if double else ())
            got = td_targets(*args)
            if got is None:
                return _not_answered_yet("td_targets still returns None")
            got = torch.as_tensor(got, dtype=torch.float32).detach().cpu()
            name = "Double DQN (next_q_online given)" if double else "plain DQN"
            assert got.shape == expected.shape, (
                f"{name}: td_targets should return one target per transition, shape {tuple(expected.shape)}, "
                f"got {tuple(got.shape)} (reduce over the action axis, dim=1)")
            if torch.allclose(got, expected, atol=1e-5):
                continue
            a_star = q_online.argmax(1, keepdim=True)
            candidates = {
                "terminal transitions (done = 1) must not bootstrap: multiply the next value by (1 - done)":
                    r + g * (q_target.gather(1, a_star).squeeze(1) if double else q_target.max(1).values),
                "multiply the next state's value by gamma": r + (1 - d) * q_target.max(1).values,
                "take the max over actions (dim=1), not over the batch": r + g * (1 - d) * q_target.max(),
                ("Double DQN: the online network *chooses* a* = argmax Q_online(s', a); the target network "
                 "*values* it, Q_target(s', a*); you used the max of the target network"):
                    r + g * (1 - d) * q_target.max(1).values,
                "Double DQN: value a* with the target network, not with the online network":
                    r + g * (1 - d) * q_online.max(1).values,
            }
            hint = next((h for h, c in candidates.items() if torch.allclose(got, c, atol=1e-5)),
                        "targets are r + gamma * (1 - done) * V(s'), with V(s') from the target network")
            worst = int((got - expected).abs().argmax())
            raise AssertionError(f"{name}: target {worst} is {got[worst]:.4f}, expected {expected[worst]:.4f} "
                                 f"(reward {r[worst]:.0f}, done {d[worst]:.0f}). Hint: {hint}.")
    return _passed("td_targets matches DQNAgent.batched_targets for plain and Double DQN")


# --- notebook 07: does it learn? ----------------------------------------------------------------------------

def check_updates_in_run(answer) -> bool | None:
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
            (total / every, "no update happens before learning_starts: subtract those 80,000 steps first"),
            (total - starts, "one update per train_every = 4 agent steps, not one per step"),
            (expected * batch, "that counts sampled transitions; each update uses one batch of 32"),
            (expected / batch, "the batch size does not divide the count: one update per 4 steps, whatever the "
                               "batch"),
            (expected / envs, "train_every counts agent steps summed over all envs: 8 envs make 2 updates per "
                              "vector step, so the total does not change"),
            (expected * envs, "10M counts agent steps over all envs together: 8 envs don't multiply the updates"),
            (expected / 4, "10M already counts agent steps, not emulator frames: don't divide by the frame skip"),
            (total / every - starts, "subtract the 80,000 steps before dividing by 4 (80,000 steps make no update), "
                                     "not from the result"),
        ],
        otherwise="updates = (total_steps - learning_starts) / train_every",
        close=lambda a, b: abs(a - b) <= 4)


# --- notebook 08: can PER be cheap? -------------------------------------------------------------------------

IS_PROBABILITIES = (0.4, 0.3, 0.2, 0.1)  # P(i) of the four sampled transitions in notebook 08's exercise
IS_N, IS_BETA = 1_000, 0.5


def check_is_weights(answer) -> bool | None:
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
                       "smallest; N cancels once you divide by the largest weight")
    raw = (IS_N * p) ** -IS_BETA
    hints = [
        (raw, "divide by the batch's largest weight, so that every w is at most 1"),
        ((IS_N * p) ** IS_BETA / ((IS_N * p) ** IS_BETA).max(), "the exponent is -β: frequent transitions must get "
                                                                 "smaller weights, not larger"),
        (raw / raw.sum(), "normalise by the largest weight, not by the sum"),
        ((IS_N * p) ** -1.0 / ((IS_N * p) ** -1.0).max(), "use β = 0.5, not β = 1 (β is annealed towards 1 "
                                                           "over the run)"),
        (p ** -IS_BETA, "divide by the largest weight, so that every w is at most 1"),
        (1 / (IS_N * p), "w = (N·P(i)) ** -β with β = 0.5, then divide by the largest weight"),
    ]
    hint = next((h for value, h in hints if close(value)), "w_i = (N · P(i)) ** -β, then divide by max_j w_j")
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


def check_min_compression_ratio(answer) -> bool | None:
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
                               "subtract them from the 1,000 B first"),
            (frame / (per_slot - o["bookkeeping"]), "the payload is a Python bytes object (with a header) held in "
                                                    "a list (one pointer a slot): subtract those too"),
            (frame / (per_slot - o["list_slot"] - o["bytes_header"]), "the ring's bookkeeping arrays (action, "
                                                                       "reward, flags, id) cost 16 B a slot as well"),
            (frame / (per_slot - o["bookkeeping"] - o["list_slot"]), "a bytes object carries a 33 B header "
                                                                     "(sys.getsizeof(b''))"),
            (frame / (per_slot - o["bookkeeping"] - o["bytes_header"]), "the list holds one 8 B pointer per slot"),
            (frame / (2**30 / 1e6 - overhead), "1 GB here is 10^9 bytes, not 2^30"),
            ((per_slot - overhead) / frame, "the ratio is frame bytes over payload bytes (greater than 1)"),
            (per_slot - overhead, "that is the payload budget in bytes; the ratio is 7,056 divided by it"),
        ],
        otherwise="ratio = 7,056 / (1,000 B per slot - the per-slot overheads)",
        close=lambda a, b: abs(a - b) <= 0.005 * abs(b), show=",.4g")


# --- notebook 09, second half: resuming a run ---------------------------------------------------------------

def check_resume_config(cfg, run_dir) -> bool | None:
    """Notebook 09: a ``Config`` that resumes the killed run in ``run_dir`` and trains it further.

    Right when ``cfg.resume`` names the run (its folder or one of its ``state-*.ckpt`` files), the
    checkpoint it picks passes ``train.load_resume`` (same replay shape), the logs go on in the same
    folder and ``total_steps`` lies beyond the step that checkpoint saved.
    """
    if cfg is None:
        return _not_answered_yet("set `resume_cfg` to a Config that resumes the run")
    from pathlib import Path

    from dqn_course.checkpoint import CheckpointError
    from dqn_course.train import Config, load_resume

    assert isinstance(cfg, Config), (
        f"resume_cfg should be a dqn_course.train.Config (e.g. dataclasses.replace(run_cfg, ...)), "
        f"got {type(cfg).__name__}")
    run_dir = Path(run_dir).resolve()
    assert cfg.resume, "resume is empty, so this run would start from scratch: set resume to the run's folder"
    target = Path(cfg.resume).resolve()
    assert target == run_dir or target.parent == run_dir, (
        f"resume={cfg.resume!r} is not the killed run: point it at {run_dir} (or a state-*.ckpt in it)")
    assert Path(cfg.out_dir).resolve() == run_dir, (
        f"out_dir={cfg.out_dir!r}: keep the run's folder, so log.csv and the checkpoints carry on where they were")
    try:
        _, meta, path = load_resume(cfg)
    except CheckpointError as e:
        raise AssertionError(f"this resume would be refused: {e}") from None
    saved = meta["counters"]["step"]
    assert cfg.total_steps > saved, (
        f"total_steps={cfg.total_steps:,} is not beyond the checkpoint's step {saved:,}: the run would stop at once")
    return _passed(f"resumes from {path.name} at step {saved:,} and trains on to {cfg.total_steps:,} in the same "
                   f"folder")


# --- notebook 10: scaling out with Ray ----------------------------------------------------------------------

CHUNK_STEPS, FRAME_BYTES, STACK = 100, 84 * 84, 4  # notebook 10's exercise: a chunk from the middle of a game


def check_chunk_bytes(answer) -> bool | None:
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
                                        "transition: add its 4 frames"),
            ((CHUNK_STEPS + 1) * FRAME_BYTES, "the first state is a stack of 4 frames, not one frame"),
            (stacks, "that is s and s' as full stacks for every transition; a chunk sends one new frame per step"),
            (CHUNK_STEPS * STACK * FRAME_BYTES, "that is one full stack per step; consecutive stacks share 3 of "
                                                "their 4 frames, so each step adds only one new frame"),
            (CHUNK_STEPS * (STACK + 1) * FRAME_BYTES, "that is a folded 5-frame state per transition; within a chunk "
                                                      "the frames chain, so each step adds only one new frame"),
            (4 * expected, "pixels are uint8, 1 byte each, not float32"),
            (8 * expected, "that is bits; count bytes"),
        ],
        otherwise="bytes = (frames in the first stack + one frame per step) x 84 x 84")
