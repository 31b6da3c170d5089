"""Notebooks 02 (downsampling) and 03 (dtypes): their checks, predictions and questions.
"""
from __future__ import annotations


from dqn_course.contracts import check_module
from dqn_course.lab.checks.core import (PREDICTIONS, QUESTIONS, Prediction, _call_learner, _not_answered_yet, _passed,
                                        _defined_by_learner, _is_course_object, _require_learners_code)


CHECK_SIZES = (84, 42)  # the frame sizes check_preprocess asks for: the DQN standard, and section 5's smaller one


def _preprocess_check_steps():
    """Six steps of real Breakout play, ``(prev, last, frame)`` as ``preprocessing_trace`` gives them (``frame``:
    gymnasium's ``AtariPreprocessing`` output), those where the maximum of the two screens changes the most pixels;
    computed once per process."""
    global _PREPROCESS_STEPS
    if _PREPROCESS_STEPS is None:
        import numpy as np

        from dqn_course.lab.frames import downsample, preprocessing_trace

        trace = preprocessing_trace(60, seed=1)
        changed = [int((frame != downsample(last)).sum()) for _, last, frame in trace]
        _PREPROCESS_STEPS = [trace[i] for i in sorted(np.argsort(changed, kind="stable")[-6:])]
    return _PREPROCESS_STEPS


_PREPROCESS_STEPS = None

_BY_HAND = "section 4, *The preprocessing, by hand, equals gymnasium's*"


def _preprocess_hint(out, prev, last, size: int) -> str:
    """Why ``out`` differs from the reference for the screens ``prev``, ``last``: the usual mistakes, compared."""
    import cv2
    import numpy as np

    def close(a):
        return a.shape == out.shape and int(np.abs(a.astype(np.int16) - out.astype(np.int16)).max()) <= 1

    def shrink(gray, how=cv2.INTER_AREA):
        return cv2.resize(gray, (size, size), interpolation=how)

    gray_prev, gray_last = (cv2.cvtColor(s, cv2.COLOR_RGB2GRAY) for s in (prev, last))
    pooled = np.maximum(gray_prev, gray_last)
    if close(shrink(gray_last)) or close(shrink(gray_prev)):
        return ("that is one screen's frame: the ball and paddle of the other screen are missing; a frame is made "
                "from the maximum of the step's two screens (section 3, *Why the maximum of the last two screens?*)")
    if close(np.maximum(shrink(gray_prev), shrink(gray_last))):
        return ("the maximum was taken after shrinking: take it of the two full gray screens, then shrink once, so "
                f"each frame pixel averages what either screen drew ({_BY_HAND})")
    if close(shrink(pooled).T):
        return ("the frame comes out transposed, its rows and columns swapped: keep the screen's axes, rows first "
                "(section 1, the shapes printed)")
    bgr = np.maximum(*(cv2.cvtColor(s, cv2.COLOR_BGR2GRAY) for s in (prev, last)))
    if close(shrink(bgr)):
        return ("the screen is RGB, not BGR: a BGR conversion gives red the weight that belongs to blue "
                f"({_BY_HAND} gives the luminance weights)")
    if close(shrink(np.maximum(prev.mean(axis=2), last.mean(axis=2)).astype(np.uint8))):
        return ("a plain mean of R, G and B is not luminance: gray weighs the channels as the eye does, green most "
                f"({_BY_HAND} gives the weights)")
    for name, how in (("INTER_LINEAR", "bilinear"), ("INTER_NEAREST", "nearest-neighbour"),
                      ("INTER_CUBIC", "bicubic")):
        if close(shrink(pooled, getattr(cv2, name))):
            also = " (DeepMind's own code resized bilinearly, *Further reading*)" if how == "bilinear" else ""
            return (f"that is a {how} resize{also}: it samples a few screen pixels per frame pixel, and thin bricks "
                    "or the ball can fall between them; the reference here is gymnasium's area averaging, each "
                    f"frame pixel the mean of all the screen pixels it covers ({_BY_HAND})")
    return ("both screens in luminance gray, their pixel-wise maximum, then the whole screen shrunk to the size asked "
            f"by area averaging, without cropping ({_BY_HAND})")


def _kept_alive(out) -> int:
    """The bytes of the array that ``out`` is a view of (its own when it is none): what storing ``out`` keeps."""
    import numpy as np

    root = out
    while isinstance(root.base, np.ndarray):
        root = root.base
    return root.nbytes


def _check_one_frame(preprocess, prev, last, size: int, i: int, reference):
    """Run ``preprocess(prev, last, size)`` on copies of one step's screens and hold its frame to the chapter's
    rules: a (size, size) uint8 array, nothing bigger kept alive, the screens neither changed nor kept, the
    values of ``reference`` within 1. Raises AssertionError with a hint on the first rule broken."""
    import gc
    import weakref

    import numpy as np


    call = f"preprocess(prev, last, {size})"
    screens = [prev.copy(), last.copy()]
    alive = [weakref.ref(s) for s in screens]
    out = _call_learner(preprocess, (*screens, size), call)
    assert isinstance(out, np.ndarray), f"{call} should return a numpy array, got {type(out).__name__}"
    assert np.array_equal(screens[0], prev) and np.array_equal(screens[1], last), (
        f"{call} changed the screens it was given: the emulator's screens are read, never written; make new arrays")
    if out.shape != (size, size):
        if out.shape in ((size, size, 1), (1, size, size)):
            hint = "drop the channel axis (a gray frame is 2-D)"
        elif out.shape[-1:] == (3,):
            hint = f"the frame is still in colour: it should be luminance gray, one value per pixel ({_BY_HAND})"
        else:
            hint = f"the gray screen should be shrunk as a whole to the size asked, size x size ({_BY_HAND})"
        raise AssertionError(f"{call} returned shape {out.shape}, expected ({size}, {size}): {hint}.")
    if out.dtype != np.uint8:
        raise AssertionError(
            f"{call} returned dtype {out.dtype} ({out.dtype.itemsize} bytes per pixel), expected uint8 (1 byte): keep "
            "the pixels as integers 0-255 (section 2, *Trap 1*: a mean or a division makes float64)")
    kept = _kept_alive(out)
    if kept > out.nbytes:
        raise AssertionError(
            f"{call} returned a view: its {out.nbytes:,} bytes keep an array of {kept:,} bytes alive (section 2, "
            "*Trap 2*); a stored frame must be an array of its own")
    del screens
    gc.collect()
    if any(ref() is not None for ref in alive):
        raise AssertionError(
            f"after {call}, the raw screens it was given are still alive: the frame, or something the function "
            "keeps, refers to them; a stored frame must hold only its own pixels (section 2, *Trap 2*)")
    diff = np.abs(out.astype(np.int16) - reference.astype(np.int16))
    if int(diff.max()) > 1:
        raise AssertionError(
            f"at size {size}, on test step {i}, {int((diff > 1).sum()):,} of {out.size:,} pixels differ from the "
            f"reference by more than 1 (up to {int(diff.max())}): {_preprocess_hint(out, prev, last, size)}.")


def check_preprocess(preprocess) -> bool | None:
    """Notebook 02: ``preprocess(prev, last, size)`` turns the last two (210, 160, 3) RGB uint8 screens of an agent
    step into one (size, size) uint8 frame: luminance gray, their pixel-wise maximum, area-averaged to size x size.

    The learner's own code is required: a function of the course (``frames.max_pool_downsample`` does exactly
    this) or of a library the page imports, and any function that calls the course's, are refused. On six steps
    of real Breakout play, at 84 x 84 the frame is held to gymnasium's ``AtariPreprocessing`` output and at 42 x 42
    to the course's reference, pixels within 1 (rounding); the frame must be an array of its own (a view keeps its
    base alive) and neither change nor keep the screens it was given. Raises AssertionError with a hint on the
    first rule broken.
    """
    from dqn_course.lab.frames import max_pool_downsample

    if preprocess is None:
        return _not_answered_yet("write `preprocess(prev, last, size)` and pass the function (no brackets)")
    _require_learners_code(preprocess, "preprocess(prev, last, size)",
                           f"gray, maximum and area averaging, as {_BY_HAND} describes")
    steps = _preprocess_check_steps()
    for size in CHECK_SIZES:
        for i, (prev, last, frame) in enumerate(steps):
            reference = frame if size == frame.shape[0] else max_pool_downsample(prev, last, size)
            _check_one_frame(preprocess, prev, last, size, i, reference)
    return _passed(f"preprocess matches AtariPreprocessing at 84x84 and the reference at 42x42 on {len(steps)} steps "
                   "of real Breakout play: gray, maximum of the two screens, area averaging, uint8, an array of its "
                   "own that keeps no screen alive.")


_SCALE = "section 3, *Scale on the device, at learn time*"
_LAYOUT = ("section 3 prints the layout the network takes, (batch, 4, 84, 84), and the exercise's first paragraph "
           "explains it: the 4 frames of a state on the channel axis, right after the batch axis")
_TO_FLOAT = (f"the body computes in float32: inside forward, the uint8 batch becomes float32 first, then is scaled "
             f"({_SCALE})")
_CHANNELS_LAST = (f"the body got the frames channel-last, as the memory lays them out; its first layer reads the 4 "
                  f"frames of a state from the axis after the batch ({_LAYOUT})")
_FORWARD_HINTS = {"unsigned char": _TO_FLOAT, "Byte": _TO_FLOAT, "should be the same": _TO_FLOAT,
                  "same dtype": _TO_FLOAT, "expected scalar type": _TO_FLOAT, "channels": _CHANNELS_LAST}
SCALED_NET_BATCH = 3  # states per test batch of check_scaled_net
SCALED_NET_FRAMES = (SCALED_NET_BATCH, 84, 84, 4)  # a channel-last uint8 batch, as the exercise's memory samples it


def _scaled_net_inputs():
    """The body ``check_scaled_net`` wraps (a seeded float32 conv + linear, channels first, 4 outputs) and its two
    channel-last uint8 test batches of ``SCALED_NET_FRAMES``: one white (every pixel 255), one of random pixels (so
    the 4 frames of a state differ, and each pixel of each); the caller's random state is left as it was."""
    import torch
    from torch import nn

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        body = nn.Sequential(nn.Conv2d(4, 8, kernel_size=8, stride=4), nn.ReLU(), nn.Flatten(),
                             nn.Linear(8 * 20 * 20, 4))
        mixed = torch.randint(0, 256, SCALED_NET_FRAMES, dtype=torch.uint8)
    white = torch.full(SCALED_NET_FRAMES, 255, dtype=torch.uint8)
    return body, {"a white batch (every pixel 255)": white, "a batch of random pixels": mixed}


def _channels_first(batch):
    """The channel-last uint8 ``batch`` as the body must receive it: channels first, float32, scaled to [0, 1]."""
    return batch.permute(0, 3, 1, 2).float() / 255


def _scaled_input_hint(seen, batch) -> str:
    """Why ``seen``, what the body received, is not ``_channels_first(batch)``: the usual mistakes, compared."""
    import torch

    def close(x):
        return seen.shape == x.shape and torch.allclose(seen.float(), x.float(), atol=1e-6, rtol=0)

    first = batch.permute(0, 3, 1, 2)
    if seen.shape != first.shape:
        return (f"the body received shape {tuple(seen.shape)}, expected {tuple(first.shape)}: each state's 4 frames "
                f"on the channel axis, every frame 84 × 84 ({_LAYOUT})")
    if seen.dtype != torch.float32:
        return _TO_FLOAT
    if close(batch.reshape(first.shape).float() / 255):
        return ("the shape is right but the frames arrive scrambled: a reshape keeps the bytes in their order and "
                "only cuts them into a new shape, so each channel gets pixels of all 4 frames; the frames' axis has "
                f"to move, each frame staying whole ({_LAYOUT})")
    if close(batch.permute(0, 3, 2, 1).float() / 255):
        return ("the frames arrive transposed, their rows and columns swapped: keep each frame's rows first, then "
                f"its columns ({_LAYOUT})")
    if close(first.float()):
        return f"the batch reached the body unscaled, 0-255: the network wants values in [0, 1] ({_SCALE})"
    if close(first.float() / 256):
        return ("that is a division by 256: the brightest pixel, 255, must become exactly 1, so divide by the "
                f"largest value a uint8 holds ({_SCALE})")
    if close((first // 255).float()):
        return ("that is an integer division: it keeps 1 for a pixel of 255 and 0 for every other; make floats "
                f"first, then divide ({_FLOAT64} shows which divisions give floats)")
    return (f"the body should see each pixel as a float from 0 to 1, the uint8 value divided by 255 ({_SCALE}), "
            f"each state's 4 frames whole on the channel axis ({_LAYOUT})")


def check_scaled_net(net_class) -> bool | None:
    """Notebook 03: ``net_class(body)`` is a ``torch.nn.Module`` whose ``forward(frames)`` takes a channel-last
    uint8 batch of states, (batch, 84, 84, 4) as a memory written for Keras samples it, refuses any other dtype with
    ``TypeError``, and hands ``body`` the states channels first, (batch, 4, 84, 84), converted to float32 and scaled
    to [0, 1] inside (a pixel of 255 exactly 1.0); it returns the body's output. The replay memory and the copy to
    the device stay uint8 (1 byte a pixel).

    The learner's own class is required: the course's ``NatureCNN``, a subclass of it, a class that calls the
    course's code or that holds one of its modules is refused. Run on a seeded body whose input is recorded (a
    forward pre-hook) and two batches: a white one, whose every pixel must reach the body as exactly 1.0, and one of
    random pixels, which must reach it as ``frames.permute(0, 3, 1, 2) / 255`` within 1e-6 (a reshape instead of
    moving the axis scrambles the frames and is caught); the output is held to the body's on that input within
    1e-5, and the batch it was given must stay as it was. A float32 batch (already scaled) and an int64 one must
    raise TypeError. Raises AssertionError with a hint on the first rule broken.
    """
    import inspect

    import torch
    from torch import nn

    if net_class is None:
        return _not_answered_yet("write the class `ScaledNet` and pass it (no brackets)")
    assert inspect.isclass(net_class) and issubclass(net_class, nn.Module), (
        f"pass your class itself, a subclass of torch.nn.Module, e.g. check_scaled_net(ScaledNet), got {net_class!r}")
    write = f"a module whose forward converts the uint8 batch and scales it itself ({_SCALE})"
    _require_learners_code(net_class, "ScaledNet(body)", write)
    body, batches = _scaled_net_inputs()
    received = []  # what the body is given, call by call
    body.register_forward_pre_hook(lambda module, args: received.append(args[0].detach().clone()))
    net = _call_learner(net_class, (body,), "ScaledNet(body)")
    for module in net.modules():  # the library's layers are welcome; the course's, or one of yours calling it, not
        if _is_course_object(type(module)) or _defined_by_learner(type(module)):
            _require_learners_code(module, f"the {type(module).__name__} inside ScaledNet", write)
    for name, batch in batches.items():
        given = batch.clone()
        received.clear()
        with torch.no_grad():
            out = _call_learner(net, (given,), f"net(frames) on {name}", _FORWARD_HINTS)
            calls = list(received)  # before the check's own call of the body below
            wanted = _channels_first(batch)
            expected = body(wanted)
        assert torch.equal(given, batch), (
            f"net(frames) changed the batch it was given ({name}): the sampled uint8 batch is read, not written; "
            "make the scaled floats a new tensor")
        assert calls, (f"net(frames) on {name} never called the body: forward returns the body's output on the "
                          f"scaled batch ({_SCALE})")
        seen = calls[0]
        if not (seen.shape == wanted.shape and seen.dtype == torch.float32
                and torch.allclose(seen, wanted, atol=1e-6, rtol=0)):
            raise AssertionError(f"on {name}, the body did not receive the states channels first and scaled to "
                                 f"[0, 1]: {_scaled_input_hint(seen, batch)}.")
        if not torch.all(seen[batch.permute(0, 3, 1, 2) == 255] == 1.0):
            value = seen[batch.permute(0, 3, 1, 2) == 255].flatten()[0].item()
            raise AssertionError(
                f"on {name}, a pixel of 255 reached the body as {value!r}, not exactly 1.0: the brightest pixel "
                "must become 1 exactly, which a division by the largest value a uint8 holds gives; a scale by "
                f"another number, however close, misses it ({_SCALE})")
        assert isinstance(out, torch.Tensor) and out.shape == expected.shape, (
            f"net(frames) should return the body's output, a tensor of shape {tuple(expected.shape)}, got "
            f"{type(out).__name__} {tuple(getattr(out, 'shape', ()))}")
        if not (out.dtype == torch.float32 and torch.allclose(out, expected, atol=1e-5, rtol=1e-4)):
            raise AssertionError(f"on {name}, net(frames) is not the body's output on the scaled batch: forward "
                                 f"returns what the body gives, unchanged ({_SCALE}).")
    mixed = batches["a batch of random pixels"]
    for wrong, what in ((mixed.float() / 255, "a float32 batch, already scaled"), (mixed.long(), "an int64 batch")):
        try:
            with torch.no_grad():
                net(wrong)
        except TypeError:
            continue
        except Exception as exc:  # the learner's code may raise anything: say which exception is wanted
            raise AssertionError(f"net(frames) on {what} raised {type(exc).__name__}: {exc}; a batch of the wrong "
                                 f"dtype is a TypeError, as NatureCNN raises ({_SCALE})") from None
        raise AssertionError(f"net(frames) accepted {what}: the network takes uint8 only and refuses any other dtype "
                             f"with TypeError, so a batch scaled twice, or never, cannot slip in unnoticed ({_SCALE})")
    return _passed("ScaledNet takes channel-last uint8 batches and does the rest inside: the body receives each "
                   "state's 4 frames whole on the channel axis, a pixel of 255 as exactly 1.0, every pixel within "
                   "1e-6 of its value / 255; float32 and int64 batches are refused with TypeError. The frames' "
                   "axis moved: a reshape would only have cut the stored values, in order, into the new shape, so "
                   "each frame would have held pixels of all 4.")


_FLOAT64 = "section 4, *NumPy's silent dtype changes*"
_MILLION = "section 2, *A million transitions, on this machine*"


PREDICTIONS.update({
    "02.ball_at_42": Prediction(
        "the brightest the ball makes a 42 × 42 frame pixel (gray levels above black)", 0.05, lambda m, gray, pixels: {
            0: "area averaging dims the ball, it does not erase it: the frame pixel that covers the ball averages "
               "the ball's pixels with the black around them (section 5)",
            gray: "that is the ball's own gray, what a frame pixel shows when the ball fills it; at 42 × 42 a frame "
                  "pixel covers 210 / 42 × 160 / 42 screen pixels, more than the ball's (section 5)",
            gray / 4: "halving each side makes a frame pixel cover 4 times the screen pixels it covered at 84 × 84, "
                      "but at 84 × 84 the ball filled a frame pixel with pixels to spare: count the ball's pixels "
                      "against one 42 × 42 frame pixel's (section 5)",
            gray * pixels / (210 / 21 * 160 / 21): "that is a 21 × 21 frame pixel, 10 × 7.6 screen pixels; a 42 × 42 "
                                                   "one covers half as many rows and half as many columns (section 5)"},
        "at best the whole ball lies inside one frame pixel: that pixel is the mean of the screen pixels it covers, "
        "the ball's own and black ones (section 5 gives the ball's size and gray)"),
    "03.batch_over_255": Prediction("the bytes of batch / 255", 0.02, lambda m: {
        m / 8: f"that is the uint8 batch itself; dividing by 255 gives floats: which float type does NumPy pick? "
               f"({_FLOAT64})",
        m / 4: "that is 2 bytes a pixel (float16), or float64 states of one frame instead of four: NumPy's default "
               f"float is bigger ({_FLOAT64}), and a state is a 4-stack (section 1, *One state, four dtypes*)",
        m / 2: f"that is 4 bytes a pixel (float32); NumPy picks a bigger float when it divides integers ({_FLOAT64})",
        m / 32: f"that is one state; the batch holds 32 of them ({_SCALE})",
        2 * m: f"the batch holds 32 states, not 32 pairs of s and s' ({_SCALE})",
        8 * m: "that is bits; count bytes, as nbytes does (section 1, *One state, four dtypes*)"},
        f"the pixels of the batch times the bytes of the float NumPy picks when it divides integers (section 1, "
        f"*One state, four dtypes*; {_FLOAT64})"),
    "03.transitions_in_ram": Prediction(
        "how many uint8 transitions, s and s' as separate copies, fit in 90% of the RAM available", 0.03, lambda m: {
            m / 0.9: f"that fills all the available RAM; the memory gets 90% of it, the rest is headroom ({_MILLION})",
            2 * m: f"a transition stores two states, s and s', as separate copies ({_MILLION})",
            2 * m / 0.9: f"a transition stores two states, s and s', and the memory gets 90% of the RAM ({_MILLION})",
            4 * m: "a state is a stack of 4 frames, not one (section 1, *One state, four dtypes*)",
            m / 4: "that is 4 bytes a pixel (float32); the memory stores uint8 pixels, 1 byte each (section 1, "
                   "*One state, four dtypes*)",
            m / 8: "that is 8 bytes a pixel, or bits; the memory stores uint8 pixels, 1 byte each, and the RAM is "
                   "counted in bytes (section 1, *One state, four dtypes*)"},
        f"90% of the available RAM divided by the bytes of one transition: two 4-frame states of uint8 pixels "
        f"(section 1, *One state, four dtypes*; {_MILLION})"),
})


QUESTIONS.update({
    "02.flicker_no_max": ("b", "a step is 4 screens, an even number, so the last screen of every step has the same "
                               "parity as the one before: odd all game long, or even all game long, from wherever the "
                               "game's first step ended; the ball, drawn on odd screens only, is then on every frame "
                               "or on none. The maximum of each step's last two screens, one odd and one even, keeps "
                               "it on every frame",
                          {"a": "the ball is drawn on every second screen, but the agent sees every fourth: count "
                                "from one step's last screen to the next step's, 4 screens on, and see whether its "
                                "parity changes (section 3, *Why the maximum of the last two screens?*, frame skip 4)",
                           "c": "4 screens on keeps a screen's parity, but which parity depends on where the game's "
                                "first step ended: the screens played before it (a reset's random no-ops, for one) "
                                "can leave it odd (section 3, *Why the maximum of the last two screens?*, frame skip 4)"
                           }),
    "03.where_to_scale": ("b", "10,001 depths need more than a byte: uint16 keeps each one exactly in 2 bytes and the "
                               "network scales each batch; divided by 40 and stored in uint8, each depth keeps only "
                               "the whole part, so 40 neighbouring depths share one stored value, and float16, 2 bytes "
                               "as well, rounds neighbouring depths near 10,000 mm onto the same value",
                          {"a": "a uint8 keeps only the whole part of the float it is given: how many different depths "
                                "end up as the same stored value once divided by 40? (section 4, *Back into uint8: "
                                "truncation and wrap-around*)",
                           "c": "section 5, *float16: precise enough, still twice uint8*, kept 256 levels apart; "
                                "here 10,001 levels share the range from 0 to 1: compare their spacing with "
                                "float16's rounding near 1"}),
    "03.int8_store": ("b", "an int8 holds -128 to 127: 255 does not fit, and the cast keeps it modulo 256, "
                           "255 - 256 = -1; np.save and np.load keep that int8 -1 as it is, and the loader converts "
                           "it to -1.0 and divides it by 255, so a white pixel arrives as about -0.004, darker than "
                           "black, and every pixel above 127 arrives negative",
                      {"a": "NumPy does not clip when it casts integers: a value that does not fit wraps around, "
                            "kept modulo 256, as section 4, *Back into uint8: truncation and wrap-around*, shows "
                            "for uint8",
                       "c": "the byte keeps its bits, and the saved file keeps its dtype, but int8 reads those bits "
                            "as a signed number, from -128 to 127, and the conversion to float keeps that number, not "
                            "the bits: which int8 value does the wrap-around of section 4, *Back into uint8: "
                            "truncation and wrap-around*, give 255?"}),
    # a per-pixel mean of 4 uint8 frames, 96 x 96, by NumPy's default: float64, 96 x 96 x 8 = 73,728 bytes
    "03.mean_dtype": ("c", "the mean divides by 4, so NumPy makes floats, and with no dtype given it picks its "
                           "default float, float64: 96 × 96 = 9,216 pixels × 8 bytes = 73,728 bytes per transition, "
                           "8 times the 9,216 bytes of one uint8 frame of that camera; asking the mean for float32 "
                           "halves it",
                      {"a": "a mean of 4 integers need not be an integer, so NumPy does not keep uint8: it makes "
                            "floats, of which type when no dtype is given? (section 4, *NumPy's silent dtype "
                            "changes*)",
                       "b": "float32 is PyTorch's default float, the last line of section 4's table; a mean of "
                            "integers in NumPy with no dtype given takes NumPy's default (section 4, *NumPy's "
                            "silent dtype changes*)"}),
})


check_module(globals())
