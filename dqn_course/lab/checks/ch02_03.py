"""Notebooks 02 (downsampling) and 03 (dtypes): their checks, predictions and questions.
"""
from __future__ import annotations


from dqn_course.contracts import check_module
from dqn_course.lab.checks.core import (PREDICTIONS, QUESTIONS, Prediction, _not_answered_yet, _passed)


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


_FLOAT64 = "section 4, *The float64 trap*"


_BATCH = "section 3, *Scale on the device, at learn time*"


PREDICTIONS.update({
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
})


QUESTIONS.update({
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
})


check_module(globals())
