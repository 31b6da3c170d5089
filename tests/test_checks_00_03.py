"""The exercise checks of notebooks 00, 02 and 03: right answers pass, wrong ones raise, ``None`` only reminds."""
from __future__ import annotations

import functools
import json
import types
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

import dqn_course
from _solutions import run_solutions
from dqn_course.lab import checks, frames
from dqn_course.lab.checks.ch00_01 import next_stack_passes
from dqn_course.lab.frames import (blog_preprocess, downsample, max_pool_downsample, preprocessing_trace, raw_frames,
                                   state_bytes)
from dqn_course.networks import NatureCNN


# --- notebook 00 ----------------------------------------------------------------------------------

def next_stack(state, screen):
    """The worked answer: the 3 newest screens of the state, then the new one, in a new array."""
    return np.concatenate([state[1:], screen[None]])


def as_course_code(fn):
    """``fn`` with its code moved into the course's package: what a helper of ``dqn_course`` doing the same is."""
    code = fn.__code__.replace(co_filename=str(Path(dqn_course.__file__).parent / "lab" / "frames.py"))
    return types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def test_next_stack_right(capsys):
    assert checks.check_next_stack(next_stack) is True
    assert checks.check_next_stack(lambda s, x: np.stack([*s[1:], x])) is True  # another way to the same array
    out = capsys.readouterr().out
    assert out.startswith("✓") and "806" not in out and "GB" not in out  # the figure's home: the summary's cell


def test_next_stack_refuses_the_courses_own_function_and_the_pages_imports():
    """The same code, from the course's package, or a library function the page imports, is not the learner's."""
    with pytest.raises(AssertionError, match="not yours"):
        checks.check_next_stack(as_course_code(next_stack))
    for library in (np.roll, np.append, np.ndarray.sort, functools.partial(np.concatenate, axis=0)):
        with pytest.raises(AssertionError, match="not yours|not a function of yours"):
            checks.check_next_stack(library)


WRONG_NEXT_STACK = {
    "in place": (lambda s, x: (s.__setitem__(slice(0, 3), s[1:].copy()), s.__setitem__(3, x), s)[2],
                 "changed the state it was given"),
    "the state back": (lambda s, x: s.copy(), "new screen is missing"),
    "newest first": (lambda s, x: np.concatenate([x[None], s[1:]]), "new screen goes last"),
    "reversed": (lambda s, x: np.concatenate([s[1:], x[None]])[::-1].copy(), "order is reversed"),
    "drops the newest": (lambda s, x: np.concatenate([s[:3], x[None]]), "the oldest, the first one"),
    "np.roll alone": (lambda s, x: np.roll(s, -1, axis=0), "3 newest screens of s"),
    "a view of 5": (lambda s, x: np.concatenate([s, x[None]])[1:], "view"),
    "float32": (lambda s, x: np.concatenate([s[1:], x[None]]).astype(np.float32), "uint8"),
    "five screens": (lambda s, x: np.concatenate([s, x[None]]), "shape"),
    "a list": (lambda s, x: [*s[1:], x], "one NumPy array"),
    "crashes": (lambda s, x: np.concatenate([s[1:], x]), "raised ValueError"),
}


@pytest.mark.parametrize("name", list(WRONG_NEXT_STACK))
def test_next_stack_wrong(name):
    wrong, hint = WRONG_NEXT_STACK[name]
    with pytest.raises(AssertionError, match=hint):
        checks.check_next_stack(wrong)


def test_next_stack_none(capsys):
    assert checks.check_next_stack(None) is None
    assert checks.check_next_stack(lambda s, x: None) is None  # the exercise cell's function, not written yet
    assert capsys.readouterr().out.count("Not answered yet") == 2


def test_next_stack_passes_says_whether_the_summary_may_use_the_learners_function(capsys):
    """Notebook 00's summary builds its top-rung transition with the learner's next_stack once it passes, and prints
    no figure while it returns None (the committed notebook, and CI) or fails its check."""
    assert next_stack_passes(next_stack) is True
    assert next_stack_passes(lambda s, x: None) is False
    assert next_stack_passes(WRONG_NEXT_STACK["newest first"][0]) is False
    assert next_stack_passes(as_course_code(next_stack)) is False  # the course's own code is not the learner's
    assert capsys.readouterr().out == ""  # silent: the exercise cell shows the verdict
    for wrong in (None, 3, "next_stack"):
        with pytest.raises(TypeError, match="next_stack"):
            next_stack_passes(wrong)


def _summary_cells(next_stack, capsys) -> str:
    """What notebook 00's two summary cells print, run with ``next_stack`` as the exercise cell's function."""
    from itertools import islice

    from dqn_course.lab.bench import play_frames, transitions
    from dqn_course.lab.ladder import STAGES_BY_NAME
    from dqn_course.profiling import fits_in_ram

    cells = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "00_setup.ipynb").read_text())["cells"]
    namespace = {"np": np, "islice": islice, "play_frames": play_frames, "transitions": transitions,
                 "STAGES_BY_NAME": STAGES_BY_NAME, "fits_in_ram": fits_in_ram, "next_stack": next_stack}
    capsys.readouterr()
    for cell_id in ("c22", "c22b"):
        source = next("".join(c["source"]) for c in cells if c.get("id") == cell_id)
        exec(compile(source, f"<00 {cell_id}>", "exec"), namespace)  # noqa: S102
    return capsys.readouterr().out


@pytest.mark.parametrize("answer", [lambda s, x: None, WRONG_NEXT_STACK["newest first"][0], as_course_code(next_stack)],
                         ids=["None", "wrong", "course code"])
def test_notebook_00_top_rung_says_a_copy_built_s_prime_until_the_learners_next_stack_passes(answer, capsys):
    """The prediction's answer cell measures in any case (the committed run has none), and says who built s'."""
    out = _summary_cells(answer, capsys)
    assert "s' built by a copy (your next_stack has not passed its check yet) | 1M, measured: 806.4 GB" in out
    assert "your next_stack |" not in out


def test_notebook_00_summary_prints_the_top_rung_from_the_learners_next_stack(capsys):
    out = _summary_cells(next_stack, capsys)
    assert "806,400 bytes, s' built by your next_stack | 1M, measured: 806.4 GB" in out
    assert out.count("806.4 GB") == 1 and "available now" in out  # one home for the figure: the ladder line


def test_notebook_00_solution_cell_passes_its_check():
    """The solution cell is committed without outputs and skipped by nbval; it runs here instead."""
    out = run_solutions("00_setup", {"checks": checks, "np": np})
    assert out.count("✓") == 2  # the exercise and the Space Invaders question
    assert "806" not in out and "GB" not in out  # the top rung's figure has one home: the summary's ladder line


def test_invaders_question_key_by_learning_signals():
    """00's question: in the 4 frames of the step a time limit cuts a Space Invaders game, a 10-point alien is hit,
    then a life is lost. ``learning_signals`` clips the step's reward to r = 1 and makes done = 1 (the lost life; the
    time limit only starts a new game), so y = 1 + 0.9 x (1 - 1) x 5.0 = 1 (option a); b keeps the future term, c
    (10) forgets the clipping."""
    from dqn_course.envs import learning_signals

    r, done, new_game = learning_signals(10.0, False, True, True)
    assert (float(r), bool(done), bool(new_game)) == (1.0, True, True)
    assert r + 0.9 * (1 - done) * 5.0 == 1.0
    assert checks.check_question("00.invaders_life_and_clock", "a") is True
    for wrong, words in (("b", "lost-life case"), ("c", "clipped to its sign")):
        with pytest.raises(AssertionError, match=words):
            checks.check_question("00.invaders_life_and_clock", wrong)


def test_top_rung_prediction_takes_the_arithmetic_and_names_each_slip(capsys):
    """00's prediction: 1M transitions of two separate stacks of 4 raw screens, 2 x 4 x 210 x 160 x 3 bytes each."""
    measured = 2 * 4 * 210 * 160 * 3 * 1_000_000 / 1e9
    assert checks.check_prediction_of("00.top_rung_gb", 806, measured) is True
    for wrong, words in ((measured / 2, "two arrays"), (measured / 4, "4 most recent"), (measured / 3, "colour"),
                         (measured * 1e9 / 2**30, "GiB"), (measured / 8, "one raw screen")):
        with pytest.raises(AssertionError, match=words) as caught:
            checks.check_prediction_of("00.top_rung_gb", wrong, measured)
        assert "806" not in str(caught.value)  # a hint, never the value


# --- notebook 02 ----------------------------------------------------------------------------------

def _gray(screen, code=cv2.COLOR_RGB2GRAY):
    return cv2.cvtColor(screen, code)


def _worked_preprocess(prev, last, size):
    return cv2.resize(np.maximum(_gray(prev), _gray(last)), (size, size), interpolation=cv2.INTER_AREA)


def _off_by_one_preprocess(prev, last, size):
    """Luminance by hand, truncated instead of rounded: differs from the reference by at most 1."""
    weights = np.array([0.299, 0.587, 0.114])
    pooled = np.maximum(prev @ weights, last @ weights).astype(np.uint8)
    return cv2.resize(pooled, (size, size), interpolation=cv2.INTER_AREA)


def _rgb_max_preprocess(prev, last, size):
    """The maximum of the colour screens, then gray: the same frames on Breakout (its objects do not overlap)."""
    return cv2.resize(_gray(np.maximum(prev, last)), (size, size), interpolation=cv2.INTER_AREA)


@pytest.mark.parametrize("fn", [_worked_preprocess, _off_by_one_preprocess, _rgb_max_preprocess])
def test_preprocess_right(fn, capsys):
    assert checks.check_preprocess(fn) is True
    assert "✓" in capsys.readouterr().out


COURSE_PREPROCESS = {
    "max_pool_downsample itself": max_pool_downsample,
    "downsample itself": downsample,
    "blog_preprocess itself": blog_preprocess,
    "a lambda around max_pool_downsample": lambda a, b, s: max_pool_downsample(a, b, s),
    "a def through the frames module": lambda a, b, s: frames.max_pool_downsample(a, b, size=s),
    "a partial of max_pool_downsample": functools.partial(max_pool_downsample),
    "a closure over downsample": (lambda f: lambda a, b, s: f(np.maximum(a, b), s))(downsample),
    "to_gray itself": frames.to_gray,
    "preprocessing_trace itself": preprocessing_trace,
}


@pytest.mark.parametrize("name", list(COURSE_PREPROCESS))
def test_preprocess_refuses_the_courses_own_functions(name):
    """The page imports max_pool_downsample, which does exactly what the exercise asks: handing it over, or a
    function that calls it or any other function of the course, must not pass."""
    with pytest.raises(AssertionError, match="course's own|not yours|not a function of yours"):
        checks.check_preprocess(COURSE_PREPROCESS[name])


@pytest.mark.parametrize("fn", [cv2.resize, cv2.cvtColor, np.stack, np.mean], ids=lambda f: f.__name__)
def test_preprocess_refuses_the_libraries_the_page_imports(fn):
    with pytest.raises(AssertionError, match="not yours|not a function of yours"):
        checks.check_preprocess(fn)


def _pooled(prev, last):
    return np.maximum(_gray(prev), _gray(last))


def _keeps_screens(prev, last, size, cache=[]):  # noqa: B006 (the cache that keeps the screens is the mistake)
    """A preprocess that keeps every screen it is given: the screens stay alive."""
    cache += [prev, last]
    return _worked_preprocess(prev, last, size)


def _in_place(prev, last, size):
    prev[...] = np.maximum(prev, last)  # writes into the emulator's screen
    return cv2.resize(_gray(prev), (size, size), interpolation=cv2.INTER_AREA)


WRONG_PREPROCESS = {
    "last screen only": lambda a, b, s: cv2.resize(_gray(b), (s, s), interpolation=cv2.INTER_AREA),
    "maximum after the resize": lambda a, b, s: np.maximum(*(cv2.resize(_gray(x), (s, s), interpolation=cv2.INTER_AREA)
                                                             for x in (a, b))),
    "always 84": lambda a, b, s: _worked_preprocess(a, b, 84),
    "a view of a padded frame": lambda a, b, s: np.pad(_worked_preprocess(a, b, s), 1)[1:-1, 1:-1],
    "keeps the screens": _keeps_screens,
    "writes into the screen": _in_place,
    "blog [::2, ::2]": lambda a, b, s: np.maximum(a.mean(axis=2), b.mean(axis=2)).astype(np.uint8)[::2, ::2],
    "float64 output": lambda a, b, s: _worked_preprocess(a, b, s) / 1.0,
    "float32 scaled": lambda a, b, s: (_worked_preprocess(a, b, s) / 255.0).astype(np.float32),
    "channel axis kept": lambda a, b, s: _worked_preprocess(a, b, s)[:, :, None],
    "still colour": lambda a, b, s: cv2.resize(np.maximum(a, b), (s, s), interpolation=cv2.INTER_AREA),
    "BGR": lambda a, b, s: cv2.resize(np.maximum(_gray(a, cv2.COLOR_BGR2GRAY), _gray(b, cv2.COLOR_BGR2GRAY)), (s, s),
                                      interpolation=cv2.INTER_AREA),
    "channel mean": lambda a, b, s: cv2.resize(np.maximum(a.mean(axis=2), b.mean(axis=2)).astype(np.uint8), (s, s),
                                               interpolation=cv2.INTER_AREA),
    "INTER_NEAREST": lambda a, b, s: cv2.resize(_pooled(a, b), (s, s), interpolation=cv2.INTER_NEAREST),
    "INTER_LINEAR": lambda a, b, s: cv2.resize(_pooled(a, b), (s, s), interpolation=cv2.INTER_LINEAR),
    "transposed": lambda a, b, s: _worked_preprocess(a, b, s).T,
    "cropped": lambda a, b, s: _worked_preprocess(a[34:194], b[34:194], s),
    "constant": lambda a, b, s: np.zeros((s, s), np.uint8),
    "list": lambda a, b, s: _worked_preprocess(a, b, s).tolist(),
    "one screen in": lambda frame: _worked_preprocess(frame, frame, 84),
}


@pytest.mark.parametrize("name", list(WRONG_PREPROCESS))
def test_preprocess_wrong(name):
    with pytest.raises(AssertionError):
        checks.check_preprocess(WRONG_PREPROCESS[name])


@pytest.mark.parametrize("name, words", [
    ("last screen only", "maximum of the step's two screens"), ("maximum after the resize", "after shrinking"),
    ("always 84", r"expected \(42, 42\)"), ("a view of a padded frame", "returned a view"),
    ("keeps the screens", "still alive"), ("writes into the screen", "changed the screens"),
    ("BGR", "red the weight that belongs to blue"), ("INTER_LINEAR", "area averaging"),
    ("transposed", "transposed"), ("channel mean", "luminance"), ("float64 output", "uint8"),
    ("one screen in", "raised TypeError")])
def test_preprocess_hints_name_the_mistake(name, words):
    with pytest.raises(AssertionError, match=words):
        checks.check_preprocess(WRONG_PREPROCESS[name])


def test_preprocess_not_callable():
    with pytest.raises(AssertionError):
        checks.check_preprocess(np.zeros((84, 84), np.uint8))


def test_preprocess_none(capsys):
    assert checks.check_preprocess(None) is None
    assert "not answered yet" in capsys.readouterr().out.lower()


def test_notebook_02_solution_cell_passes_its_check():
    out = run_solutions("02_downsample", {"checks": checks, "cv2": cv2, "np": np})
    assert out.count("✓") == 2 and "Not answered yet" not in out


@pytest.mark.parametrize("prediction, passes", [(46, True), (110 * 8 / (5 * 160 / 42), True), (110, False),
                                                (110 / 4, False), (0, False)])
def test_ball_prediction(prediction, passes):
    """Notebook 02's prediction: the ball's 8 pixels of gray 110 over a 42 x 42 frame pixel's 5 x 3.8 screen pixels
    give the measured 46 within the check's 5%; the ball's own gray, a quarter of it, or zero do not."""
    def check():
        return checks.check_prediction_of("02.ball_at_42", prediction, 46, gray=110, pixels=8)
    if passes:
        assert check() is True
    else:
        with pytest.raises(AssertionError, match="section 5"):
            check()


# --- notebook 03 ----------------------------------------------------------------------------------

class ScaledNet(torch.nn.Module):
    """The worked answer: a channel-last uint8 batch in, anything else refused; channels moved first, converted and
    scaled inside."""

    def __init__(self, body):
        super().__init__()
        self.body = body

    def forward(self, frames):
        if frames.dtype != torch.uint8:
            raise TypeError(f"uint8 frames only, got {frames.dtype}")
        return self.body(frames.permute(0, 3, 1, 2).float() / 255)


def _moved_and_multiplied(self, frames):
    """Another right answer: the axis moved by another call, the scale a multiplication (255 x float32(1/255) is 1)."""
    if frames.dtype != torch.uint8:
        raise TypeError("uint8 only")
    return self.body(torch.movedim(frames, -1, 1).to(torch.float32) * (1 / 255))


def test_scaled_net_right(capsys):
    assert checks.check_scaled_net(ScaledNet) is True
    assert checks.check_scaled_net(_variant(_moved_and_multiplied)) is True
    assert capsys.readouterr().out.count("✓") == 2


class _SubclassOfNatureCNN(NatureCNN):
    pass


class _HoldsNatureCNN(torch.nn.Module):
    def __init__(self, body):
        super().__init__()
        self.net = NatureCNN(n_actions=4)

    def forward(self, frames):
        return self.net(frames)


class _HandedACourseModule(ScaledNet):
    """Its own code, but a course module put inside it after construction."""

    def __init__(self, body):
        super().__init__(body)
        self.add_module("course", _nature_cnn_instance())


def _nature_cnn_instance():
    return NatureCNN(n_actions=4)


@pytest.mark.parametrize("answer", [NatureCNN, _SubclassOfNatureCNN, _HoldsNatureCNN, _HandedACourseModule],
                         ids=lambda c: c.__name__)
def test_scaled_net_refuses_the_courses_own_network(answer):
    with pytest.raises(AssertionError, match="course's own"):
        checks.check_scaled_net(answer)


@pytest.mark.parametrize("answer", [torch.nn.Identity, torch.nn.Sequential, torch.nn.Module],
                         ids=lambda c: c.__name__)
def test_scaled_net_fails_on_the_modules_the_page_imports(answer):
    with pytest.raises(AssertionError):
        checks.check_scaled_net(answer)


def _variant(forward):
    return type(forward.__name__, (ScaledNet,), {"forward": forward})


def _first(frames):
    """The channel-last batch channels first, each frame whole: the right move, for the variants wrong elsewhere."""
    return frames.permute(0, 3, 1, 2)


def _reshaped(self, frames):
    if frames.dtype != torch.uint8:
        raise TypeError("uint8 only")
    return self.body(frames.reshape(frames.shape[0], 4, 84, 84).float() / 255)  # the right shape, frames scrambled


def _channels_last(self, frames):
    if frames.dtype != torch.uint8:
        raise TypeError("uint8 only")
    return self.body(frames.float() / 255)  # the memory's layout, as it comes


def _transposed(self, frames):
    if frames.dtype != torch.uint8:
        raise TypeError("uint8 only")
    return self.body(frames.permute(0, 3, 2, 1).float() / 255)


def _almost_255(self, frames):
    if frames.dtype != torch.uint8:
        raise TypeError("uint8 only")
    return self.body(_first(frames).float() / 255.0001)  # within 1e-6 of the right values, yet 255 is not 1.0


def _skips_the_body(self, frames):
    if frames.dtype != torch.uint8:
        raise TypeError("uint8 only")
    return torch.zeros(frames.shape[0], 4)


def _unscaled(self, frames):
    if frames.dtype != torch.uint8:
        raise TypeError("uint8 only")
    return self.body(_first(frames).float())


def _by_256(self, frames):
    if frames.dtype != torch.uint8:
        raise TypeError("uint8 only")
    return self.body(_first(frames).float() / 256)


def _integer_division(self, frames):
    if frames.dtype != torch.uint8:
        raise TypeError("uint8 only")
    return self.body((_first(frames) // 255).float())


def _accepts_floats(self, frames):
    return self.body(_first(frames).float() / 255)


def _scales_floats_again(self, frames):
    return self.body(_first(frames).to(torch.float32) / 255)


def _wrong_exception(self, frames):
    if frames.dtype != torch.uint8:
        raise ValueError("uint8 only")
    return self.body(_first(frames).float() / 255)


def _no_conversion(self, frames):
    if frames.dtype != torch.uint8:
        raise TypeError("uint8 only")
    return self.body(_first(frames))


def _float64(self, frames):
    if frames.dtype != torch.uint8:
        raise TypeError("uint8 only")
    return self.body(_first(frames).double() / 255)


def _in_place(self, frames):
    if frames.dtype != torch.uint8:
        raise TypeError("uint8 only")
    out = self.body(_first(frames).float() / 255)
    frames.zero_()
    return out


def _returns_numpy(self, frames):
    if frames.dtype != torch.uint8:
        raise TypeError("uint8 only")
    return self.body(_first(frames).float() / 255).numpy()


@pytest.mark.parametrize("forward, words", [
    (_unscaled, "unscaled"), (_by_256, "256"), (_integer_division, "integer division"),
    (_accepts_floats, "accepted a float32 batch"), (_scales_floats_again, "accepted a float32 batch"),
    (_wrong_exception, "raised ValueError"), (_no_conversion, "becomes float32"), (_float64, "becomes float32"),
    (_in_place, "changed the batch"), (_returns_numpy, "should return"), (_reshaped, "scrambled"),
    (_channels_last, "channel-last"), (_transposed, "transposed"), (_almost_255, "not exactly 1.0"),
    (_skips_the_body, "never called the body")], ids=lambda x: getattr(x, "__name__", ""))
def test_scaled_net_wrong(forward, words):
    with pytest.raises(AssertionError, match=words):
        checks.check_scaled_net(_variant(forward))


@pytest.mark.parametrize("answer", [ScaledNet(torch.nn.Identity()), lambda frames: frames.float() / 255, "ScaledNet"],
                         ids=["an instance", "a function", "a name"])
def test_scaled_net_wants_the_class(answer):
    with pytest.raises(AssertionError, match="pass your class"):
        checks.check_scaled_net(answer)


def test_scaled_net_none(capsys):
    assert checks.check_scaled_net(None) is None
    assert "not answered yet" in capsys.readouterr().out.lower()


def test_scaled_net_leaves_the_random_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    checks.check_scaled_net(ScaledNet)
    assert torch.equal(torch.rand(3), expected)


def test_notebook_03_solution_cell_passes_its_checks():
    out = run_solutions("03_dtypes", {"np": np, "checks": checks, "torch": torch, "nn": torch.nn})
    assert out.count("✓") == 6 and "Not answered yet" not in out


# --- dqn_course.lab.frames, which the checks and notebooks 02-03 rely on -------------------------

def test_hand_written_pipeline_equals_atari_preprocessing():
    trace = preprocessing_trace(40, seed=0)
    assert len(trace) == 40
    for prev, last, obs in trace:
        assert obs.shape == (84, 84) and obs.dtype == np.uint8
        assert np.array_equal(max_pool_downsample(prev, last), obs)


def test_raw_frames_deterministic_and_shaped():
    a, b = raw_frames(3, seed=2, every=5), raw_frames(3, seed=2, every=5)
    assert a.shape == (3, 210, 160, 3) and a.dtype == np.uint8
    assert np.array_equal(a, b)


def test_blog_preprocess_is_a_view_of_a_bigger_array():
    frame = raw_frames(1, seed=0)[0]
    small = blog_preprocess(frame)
    assert small.shape == (105, 80) and small.dtype == np.uint8 and small.nbytes == 8_400
    assert small.base is not None and small.base.nbytes == 33_600


def test_state_bytes():
    assert state_bytes(np.uint8) == 28_224
    assert state_bytes(np.float32) == 112_896
    assert state_bytes("float64", stack=1) == 56_448


def test_int8_store_question_key_by_round_trip(tmp_path):
    """03's Question 2: a white pixel, 255 in uint8, cast to int8 with astype wraps to -1; np.save and np.load keep
    that int8 -1, and a loader that makes it float32 and divides by 255 hands the network -1/255, about -0.004
    (option b), not 0.5 (a clip to 127) nor 1.0 (the bits read as unsigned)."""
    frame = np.array([[0, 127, 128, 255]], dtype=np.uint8)
    np.save(tmp_path / "frames.npy", frame.astype(np.int8))
    loaded = np.load(tmp_path / "frames.npy")
    assert loaded.dtype == np.int8 and loaded.tolist() == [[0, 127, -128, -1]]
    seen = torch.from_numpy(loaded).float() / 255
    assert seen[0, 3].item() == pytest.approx(-1 / 255) and seen[0, 3].item() < 0
    assert (seen[0, 2:] < 0).all()  # every pixel above 127 arrives negative
    assert checks.check_question("03.int8_store", "b") is True
    for wrong in ("a", "c"):
        with pytest.raises(AssertionError, match="section 4"):
            checks.check_question("03.int8_store", wrong)


def test_mean_dtype_question_key_by_measurement():
    """03's Question 3: the per-pixel mean of 4 uint8 frames of a 96 x 96 camera, by NumPy's default, is float64:
    96 x 96 x 8 = 73,728 bytes per transition (option c), not uint8's 9,216 (a) nor float32's 36,864 (b)."""
    frames = np.random.default_rng(0).integers(0, 256, (4, 96, 96), dtype=np.uint8)
    mean = np.mean(frames, axis=0)
    assert mean.dtype == np.float64 and mean.nbytes == 73_728 == 8 * frames[0].nbytes
    assert np.mean(frames, axis=0, dtype=np.float32).nbytes == 36_864
    assert checks.check_question("03.mean_dtype", "c") is True
    for wrong in ("a", "b"):
        with pytest.raises(AssertionError, match="section 4"):
            checks.check_question("03.mean_dtype", wrong)
