"""Notebooks 00 (setup), 01 (the naive agent) and 01b (measuring honestly): their checks, predictions, questions.
"""
from __future__ import annotations


import contextlib
import gc
import io
import mmap
import sys
import tracemalloc
from collections.abc import Callable

import numpy as np

from dqn_course.contracts import check_module
from dqn_course.lab.checks.core import (PREDICTIONS, QUESTIONS, Prediction, _call_learner, _not_answered_yet,
                                        _passed, _require_learners_code)
from dqn_course.profiling import rss_bytes

RAW_SCREEN = (210, 160, 3)  # one raw Breakout screen: height x width x colour channels, uint8
GRAY_FRAME = (84, 84)  # one preprocessed frame
STACK = 4  # screens (or frames) in a state


def _screens(shape: tuple, n: int, seed: int) -> np.ndarray:
    """``n`` uint8 screens of ``shape``, each filled with its own random values (so that any two differ)."""
    return np.random.default_rng(seed).integers(0, 256, size=(n, *shape), dtype=np.uint8)


def _next_stack_mistake(got: np.ndarray, frames: np.ndarray) -> str:
    """The hint for a next state of the right shape and dtype but the wrong screens (``frames``: the 4 screens of
    the state, then the new one)."""
    shown = {"the state itself, unchanged": frames[:4], "the 4 screens in newest-first order": frames[4:0:-1],
             "the newest screen first": frames[[4, 1, 2, 3]], "the newest screen in place of the previous newest":
             frames[[0, 1, 2, 4]], "the state's screens, the new one nowhere": frames[[1, 2, 3, 3]]}
    what = next((w for w, expected in shown.items() if np.array_equal(got, expected)), None)
    hints = {
        "the state itself, unchanged": "the step's new screen is missing: s' is what the agent sees after the step",
        "the 4 screens in newest-first order": "the order is reversed: a state keeps its screens oldest first, the "
                                               "newest last (section 4's picture: next_obs[3] is the newest)",
        "the newest screen first": "the new screen goes last, where the newest screen of a state is (section 4's "
                                   "picture), and the others move one place towards the front",
        "the newest screen in place of the previous newest": "the screen to drop is the oldest, the first one: "
                                                             "s' keeps the 3 newest screens of s",
        "the state's screens, the new one nowhere": "the new screen is missing: s' ends with the screen the step "
                                                    "returned",
    }
    return (f"it holds {what}: {hints[what]}" if what else
            "s' should hold the 3 newest screens of s, oldest first, then the screen the step returned (section 4: "
            "a state is the 4 most recent screens)")


def check_next_stack(next_stack) -> bool | None:
    """Notebook 00: ``next_stack(state, screen)``, the blog agent's next state: the 3 newest screens of ``state``
    (a stack of 4, oldest first), then ``screen``, as a new array that shares no memory with ``state``.

    Run on stacks of raw 210x160x3 screens and of 84x84 gray frames (random values, so every screen differs),
    twice in a row (s' becomes the next s). ``state`` must come back unchanged: a blog memory has already stored it
    as a transition's s. The pass message prints no figure: the top rung's bytes have one home, notebook 00's
    prediction's measuring cell, which builds a transition with the learner's function (``next_stack_passes``). The
    course's or a library's function is refused (``_require_learners_code``); any other failure raises
    ``AssertionError`` with a hint.
    """
    if next_stack is None:
        return _not_answered_yet("write `next_stack(state, screen)` and pass the function")
    _require_learners_code(next_stack, "next_stack(state, screen)")
    for shape, seed in ((RAW_SCREEN, 0), (GRAY_FRAME, 1)):
        frames = _screens(shape, STACK + 2, seed)
        state = frames[:STACK].copy()
        for step in range(2):  # s' of the first call is the s of the second
            window = frames[step:step + STACK + 1]
            screen = window[-1].copy()
            given = state.copy()
            call = f"next_stack(state, screen) on {STACK} screens of {shape}"
            got = _call_learner(next_stack, (state, screen), call)
            if got is None:
                return _not_answered_yet("next_stack still returns None; return the next state")
            assert isinstance(got, np.ndarray), (
                f"{call} returned a {type(got).__name__}: return one NumPy array, a stack of {STACK} screens like "
                "the state (section 4)")
            assert np.array_equal(state, given), (
                f"{call} changed the state it was given: that array is already stored as a transition's s, so s' "
                "must be a new array and s stay as it was (the exercise's first paragraph)")
            assert got.shape == state.shape, (
                f"{call} returned shape {got.shape}, expected {state.shape}: s' is a stack of the {STACK} most recent "
                f"screens, as s is (section 4)")
            assert got.dtype == np.uint8, (
                f"{call} returned {got.dtype} values: a screen is uint8, one byte a value (section 3), and s' keeps "
                "the screens as they are; a larger dtype multiplies the bytes of every transition")
            assert np.array_equal(got, window[1:]), f"{call}: {_next_stack_mistake(got, window)}."
            assert not np.shares_memory(got, state) and not np.shares_memory(got, screen), (
                f"{call} returned an array that shares memory with the state or the screen it was given: the blog's "
                "s and s' are separate copies, so that changing one cannot change the other")
            root = got
            while isinstance(root.base, np.ndarray):
                root = root.base
            assert root.nbytes == got.nbytes, (
                f"{call} returned a view (an array that shows part of another array's memory) of a "
                f"{root.nbytes:,}-byte array: the view keeps all of it in RAM, more than the {got.nbytes:,} bytes of "
                "s': return an array of its own")
            state = got
    return _passed("next_stack builds s' right, on raw screens and on gray frames, as a new array, and leaves s "
                   "alone; the cells under *How heavy is the top rung?* build a top-rung transition with it")


def next_stack_passes(next_stack: Callable) -> bool:
    """Whether the learner's ``next_stack`` passes ``check_next_stack``, checked again without printing anything:
    ``False`` while it still returns ``None`` or while the check fails (the exercise cell shows its hint).

    Notebook 00's measuring cell (the top rung's prediction) builds its top-rung transition's s' with the learner's
    function once it passes, and with a copy before, saying which. Raises ``TypeError`` if ``next_stack`` is not
    callable.
    """
    if not callable(next_stack):
        raise TypeError(f"next_stack must be the function you wrote, got {type(next_stack).__name__}")
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            return check_next_stack(next_stack) is True
        except AssertionError:
            return False


PRETOUCH_PAGES = 2_048  # pages of each large fresh buffer the check hands to pretouch
PRETOUCH_SLACK = 32  # pages of RSS a large buffer's reading may miss: the interpreter's own frees and allocations
PRETOUCH_EXTRA = 32  # pages pretouch may allocate while it runs (tracemalloc's peak): a page of values, no copy
PRETOUCH_SMALL = 3  # pages of each small fresh buffer, read with no slack: one page missed fails
PRETOUCH_OFFSET = 16  # bytes into its first page where the unaligned buffer starts, as glibc places a large array
PRETOUCH_WRITES = 2  # values pretouch may write per page spanned: one per page, and the last byte's page again
PRETOUCH_WRITE_SLACK = 8  # values it may write beyond that, on any buffer


class _WriteCounting(np.ndarray):
    """An array that counts the values written into it, for ``check_pretouch``: through ``buf[key] = value`` (the
    size of the region selected), through a ufunc's ``out=`` (``buf += 0``, ``np.add(buf, 0, out=buf)``, the
    size of ``out``; ``np.add.at(buf, index, 0)``, the size of the indexed region) and through ``np.copyto`` (the
    size of its destination). A view of it (``reshape``, ``view(np.uint8)``, a slice) is one too and adds to the same
    count, held in ``writes``, a one-item list shared by every view; reading (``sum``, comparisons, copies) counts
    nothing and returns what a plain array would. It counts, it does not forbid: a write by another path (a plain
    ``view(np.ndarray)``, a ``memoryview``) goes uncounted, so the count is a floor."""

    writes: list | None = None

    def __array_finalize__(self, obj) -> None:
        self.writes = getattr(obj, "writes", None)

    def _count(self, values: int) -> None:
        if self.writes is not None:
            self.writes[0] += int(values)

    def _count_selected(self, key) -> None:
        # the size of what `key` selects, read off a broadcast zero-stride array of bools: one byte per value at
        # most, where an index array of its own (a fancy key) is allocated anyway; a basic key allocates nothing
        self._count(np.size(np.broadcast_to(np.False_, self.shape)[key]))

    def __setitem__(self, key, value) -> None:
        self._count_selected(key)
        super().__setitem__(key, value)

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        def plain(x):
            return x.view(np.ndarray) if isinstance(x, _WriteCounting) else x

        if method == "at" and isinstance(inputs[0], _WriteCounting):
            inputs[0]._count_selected(inputs[1])
        if out is not None:
            for target in out:
                if isinstance(target, _WriteCounting):
                    target._count(target.size)
            kwargs["out"] = tuple(plain(target) for target in out)
        result = getattr(ufunc, method)(*(plain(x) for x in inputs), **kwargs)
        if out is not None and method == "__call__":  # in place: hand back the arrays written, as NumPy does
            return out[0] if len(out) == 1 else out
        return result

    def __array_function__(self, func, types, args, kwargs):
        if func is np.copyto:
            destination = args[0] if args else kwargs.get("dst")
            if isinstance(destination, _WriteCounting):
                destination._count(destination.size)
        return super().__array_function__(func, types, args, kwargs)


def _fresh_buffer(nbytes: int, dtype: str, shape: tuple, offset: int = 0) -> np.ndarray:
    """An array of ``nbytes`` over a fresh anonymous mapping of whole pages, private to this process, none of them
    written yet: the OS backs a page with RAM (RSS) when it is first written. The array starts ``offset`` bytes into
    the mapping's first page (a large ``np.zeros`` array from glibc starts 16 bytes in, after the allocator's
    header), so it spans ``ceil((offset + nbytes) / page)`` pages. Where the OS takes the advice, the mapping asks
    for no huge pages, so that one write makes one page resident, not a 2 MB block of them."""
    size = -(-(offset + nbytes) // mmap.PAGESIZE) * mmap.PAGESIZE
    mapping = mmap.mmap(-1, size) if sys.platform == "win32" else mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        mapping.madvise(mmap.MADV_NOHUGEPAGE)
    return np.frombuffer(mapping, dtype, count=nbytes // np.dtype(dtype).itemsize, offset=offset).reshape(shape)


def _pretouch_growth(pretouch, nbytes: int, dtype: str, shape: tuple,
                     offset: int = 0) -> tuple[int, int, int]:
    """``(RSS growth, peak allocated, values written)`` of this process over one ``pretouch(buf)`` call on a fresh
    buffer (``_fresh_buffer``, ``offset`` bytes into its first page, handed over as a ``_WriteCounting`` array): the
    growth from before the call to after it, the most bytes that Python's and NumPy's allocators held at once during
    the call beyond what they held before it (``tracemalloc``'s peak; tracing is started for the call and stopped
    after it unless it was already on), and the values the call wrote into the buffer or its views, counted in
    whatever dtype each write used (a write of one ``uint8`` byte and of one ``float32`` value both count 1).
    Raises ``AssertionError`` if the call raises."""
    buf = _fresh_buffer(nbytes, dtype, shape, offset).view(_WriteCounting)
    buf.writes = [0]
    gc.collect()
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        held = tracemalloc.get_traced_memory()[0]
        before = rss_bytes()
        _call_learner(pretouch, (buf,), f"pretouch(buf) on a fresh {dtype} buffer of shape {shape}")
        growth = rss_bytes() - before
        peak = tracemalloc.get_traced_memory()[1] - held
    finally:
        if not tracing:
            tracemalloc.stop()
    return growth, peak, buf.writes[0]


def _pretouch_cases(page: int) -> tuple[tuple[str, int, tuple, int, int], ...]:
    """The fresh buffers ``check_pretouch`` hands to pretouch, as ``(dtype, nbytes, shape, offset, slack)``: two
    large ones of about ``PRETOUCH_PAGES`` pages (a ``uint8`` one a few bytes short of whole pages, then ``float32``
    84x84 frames), read with ``PRETOUCH_SLACK`` pages of slack; then two small ones read with none: ``uint8``, a few
    bytes short of ``PRETOUCH_SMALL`` pages, and ``float32`` values filling exactly that many pages' worth of bytes
    but starting ``PRETOUCH_OFFSET`` bytes into a page, so that their last bytes lie in one page more."""
    frame = GRAY_FRAME[0] * GRAY_FRAME[1] * 4  # one float32 84x84 frame, in bytes
    frames = -(-PRETOUCH_PAGES * page // frame)
    large, small = PRETOUCH_PAGES * page - 100, PRETOUCH_SMALL * page
    return (("uint8", large, (large,), 0, PRETOUCH_SLACK),
            ("float32", frames * frame, (frames, *GRAY_FRAME), 0, PRETOUCH_SLACK),
            ("uint8", small - 100, (small - 100,), 0, 0),
            ("float32", small, (small // 4,), PRETOUCH_OFFSET, 0))


def _pretouch_hint(dtype: str, share: float, missing: int, offset: int, nbytes: int, page: int) -> str:
    """Why a pretouch left pages unwritten, from what it left: the ``share`` of the pages RSS saw written and the
    pages ``missing``, on a ``dtype`` buffer of ``nbytes`` starting ``offset`` bytes into a page of ``page`` bytes."""
    if share < 0.05:
        return ("(almost) no page became resident: a page costs RSS when it is first written, whatever is written; "
                "reading it is not enough, and NumPy skips assigning an array to itself (the same memory), so that "
                "writes nothing either (the exercise's text)")
    if dtype == "float32" and abs(share - 1 / np.dtype(dtype).itemsize) < 0.05:
        return (f"about a quarter of the pages were written: a page is {page:,} bytes, and a float32 value takes 4 of "
                f"them, so a step of {page:,} values jumps over 4 pages (section 3: pages are counted in bytes)")
    if missing == 1 and offset:
        tail = (offset + nbytes) % page
        return (f"every page but the last was written: this buffer starts {offset} bytes into a page, as a large "
                f"np.zeros array does, so its last {tail:,} bytes lie in one more page than its nbytes alone would "
                "fill; pages are counted from the page boundaries, not from the array's first byte (the exercise's "
                "second paragraph)")
    if missing == 1:
        return ("every page but the last was written: the last page holds the buffer's final bytes, less than a "
                "page of them, and needs its write too; RSS counts a page once any byte of it is written (section 3)")
    return ("only part of the pages were written: every page of the buffer needs one write, whatever the array's "
            "shape and dtype, since a page is a stretch of bytes in memory (section 3)")


def check_pretouch(pretouch) -> bool | None:
    """Notebook 01b: ``pretouch(buf)`` writes every page of a NumPy array once, so that RSS grows by every page the
    array spans, with about one write per page, and leaves every value as it was.

    Measured, not read off the code: each fresh buffer of ``_pretouch_cases`` is made untouched (``_fresh_buffer``),
    RSS is read before and after one call, and the growth must reach the pages the buffer spans, less its slack:
    ``PRETOUCH_SLACK`` pages for the two large buffers, none for the two small ones, one of which starts
    ``PRETOUCH_OFFSET`` bytes into a page, so that a pretouch which misses the last page fails (the page size is the
    OS's, ``mmap.PAGESIZE``; no timing is involved). The call may allocate at most ``PRETOUCH_EXTRA`` pages while it
    runs (``tracemalloc``'s peak): a pretouch that copies the buffer needs twice its RAM at the moment a pretouch is
    for. The buffer counts the values written into it (``_WriteCounting``): at most ``PRETOUCH_WRITES`` per page it
    spans, plus ``PRETOUCH_WRITE_SLACK``, since one write per page is what makes a page resident, and a pretouch
    that writes every value (``buf += 0``) does a buffer's worth of work for what a page's worth does. Then a buffer
    that holds data, ``uint8`` and ``float32``, must hold the same values after the call. The course's or a
    library's function is refused (``_require_learners_code``); a wrong one raises ``AssertionError`` with a hint,
    which names the likely mistake: no page written, a page counted in values instead of bytes (a quarter of a
    ``float32`` buffer), the last page missed (the buffer's own or, where it starts inside a page, the one its last
    bytes spill into), part of them, a copy of the buffer, every value written instead of one per page.
    """
    if pretouch is None:
        return _not_answered_yet("write `pretouch(buf)` and pass the function")
    _require_learners_code(pretouch, "pretouch(buf)")
    page = mmap.PAGESIZE
    for dtype, nbytes, shape, offset, slack in _pretouch_cases(page):
        growth, peak, writes = _pretouch_growth(pretouch, nbytes, dtype, shape, offset)
        spanned = -(-(offset + nbytes) // page)
        where = f", starting {offset} bytes into its first page" if offset else ""
        called = f"pretouch(buf) on a fresh {dtype} buffer of shape {shape} ({nbytes:,} bytes{where}"
        assert peak <= PRETOUCH_EXTRA * page, (  # first: a copy's own pages can make RSS grow, or not, as it may
            f"{called}) allocated {peak:,} bytes while it ran, {peak / nbytes:.0%} of the buffer's size: a pretouch is "
            "for a buffer the machine can only just hold, and a copy of it needs its RAM a second time at that very "
            "moment; write each page in place, where one value per page is all it takes (section 3)")
        problems = []
        if growth < (spanned - slack) * page:
            written = max(growth, 0) // page
            problems.append(f"RSS grew by {written:,} pages, {written / spanned:.0%} of them: "
                            f"{_pretouch_hint(dtype, written / spanned, spanned - written, offset, nbytes, page)}")
        if writes > PRETOUCH_WRITES * spanned + PRETOUCH_WRITE_SLACK:
            problems.append(f"it wrote {writes:,} values, about {writes / spanned:,.0f} per page: RSS counts a page "
                            "once any byte of it is written, so one write per page is enough, and writing every "
                            "value of a buffer that can be gigabytes costs a pass over all of it where one value per "
                            "page does (section 3, a page becomes resident when it is first written)")
        if problems:
            raise AssertionError(f"{called}, {spanned:,} pages of {page:,} bytes): " + "; and ".join(problems) + ".")
    rng = np.random.default_rng(0)
    for data in (rng.integers(1, 256, size=3 * page + 7, dtype=np.uint8),
                 rng.normal(size=(3, *GRAY_FRAME)).astype(np.float32)):
        kept = data.copy()
        _call_learner(pretouch, (data,), f"pretouch(buf) on a {data.dtype} buffer that holds data")
        changed = np.flatnonzero(data.reshape(-1) != kept.reshape(-1))
        assert not changed.size, (
            f"pretouch(buf) changed {changed.size:,} of the {data.size:,} values of a {data.dtype} buffer that held "
            f"data (the first at flat index {changed[0]:,}): a buffer may already hold frames, and pretouching must "
            "keep them; to the OS a write is a write, whatever value it stores (section 3)")
    return _passed(f"pretouch works: on fresh uint8 and float32 buffers of about {PRETOUCH_PAGES:,} pages each "
                   f"({page:,} bytes a page here), RSS grew by every page they span, and on small ones, one starting "
                   f"{PRETOUCH_OFFSET} bytes into a page, by every page to the last, with about one write per page; "
                   "buffers that held data kept their values")


BLOG_STATE = (105, 80, 1)  # the blog's stored state: every second row and column of the gray image, a channel axis
OWNED_SLACK = 1_024  # bytes a kept state may hold beyond its pixels: the array's header, tracemalloc's own records
_VIEW_SECTION = "section 1: what a *view* is, and why the state it stores keeps the whole gray image alive"


def _blog_state(frame: np.ndarray) -> np.ndarray:
    """The blog's recipe, the reference values (``frames.blog_preprocess`` with its channel axis)."""
    from dqn_course.lab.frames import blog_preprocess

    return blog_preprocess(frame)[..., None]


def _shape_hint(shape: tuple) -> str:
    """Why ``shape`` is not the ``BLOG_STATE`` that ``own_preprocess`` returns, in the words of notebook 01's
    section 1, which prints the stored state as ``(1, 105, 80, 1)``: the recipe's (105, 80, 1) with the batch axis
    the agent's loop puts in front."""
    stored = (1, *BLOG_STATE)
    if shape == stored:
        return (f"that is the state as section 1 prints it stored, {stored}, batch axis included; the agent's loop "
                "adds that batch axis of 1 in front when it stores a state, so own_preprocess returns what the "
                f"recipe makes before it: {BLOG_STATE}, 105 × 80 pixels and a channel axis of 1 (section 1, "
                "*Preprocessing*)")
    return (f"own_preprocess returns what the recipe makes, {BLOG_STATE}: 105 × 80 pixels and a channel axis of 1; "
            f"section 1 prints the stored state as {stored}, because the agent's loop adds a batch axis of 1 in front "
            "when it stores it (section 1, *Preprocessing*)")


def _kept_alive(fn, frame: np.ndarray) -> tuple[np.ndarray, int, bool]:
    """Call ``fn(frame)`` and return its result, the bytes that stay allocated while only that result is held
    (measured with ``tracemalloc``: everything the call made and did not free), and whether ``frame`` itself is
    still alive once the caller drops it (a weak reference to it, read after ``frame`` is deleted)."""
    import tracemalloc
    import weakref

    frame = frame.copy()  # the only reference is ours, so dropping it frees it unless the result keeps it
    alive = weakref.ref(frame)
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        got = _call_learner(fn, (frame,), "own_preprocess(frame)")
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        if started:
            tracemalloc.stop()
    del frame
    gc.collect()
    return got, held, alive() is not None


def check_own_preprocess(own_preprocess) -> bool | None:
    """Notebook 01: ``own_preprocess(frame)``, the blog's preprocessing fixed: from a raw 210x160x3 uint8 frame, the
    same 105x80x1 uint8 values as the blog's recipe (``naive.preprocess``), in an array that keeps nothing else
    alive.

    Run on random frames (so every pixel matters). Its behaviour is measured, not its code read: while only the
    result is held, ``tracemalloc`` counts the bytes the call left allocated, which must be the state's own
    8,400 bytes (within ``OWNED_SLACK``), not the 33,600-byte gray image a view keeps; and a weak reference to the
    raw frame must be dead once the frame is dropped. The course's functions, a wrapper around them and a library's
    function are refused (``_require_learners_code``). Once right, it prints the bytes
    one stored state keeps alive with the blog's recipe and with the learner's, both measured the same way.
    """
    if own_preprocess is None:
        return _not_answered_yet("write `own_preprocess(frame)` and pass the function")
    _require_learners_code(own_preprocess, "own_preprocess(frame)",
                           "a preprocessing whose state owns its bytes (section 1, what a *view* is)")
    frames = _screens(RAW_SCREEN, 3, seed=10)
    for frame in frames:
        got, held, frame_alive = _kept_alive(own_preprocess, frame)
        if got is None:
            return _not_answered_yet("own_preprocess still returns None; return the stored state")
        assert isinstance(got, np.ndarray), (
            f"own_preprocess(frame) returned a {type(got).__name__}: return one NumPy array, the state the blog "
            "stores (section 1, *Preprocessing*)")
        assert got.shape == BLOG_STATE, f"own_preprocess(frame) returned shape {got.shape}: {_shape_hint(got.shape)}"
        assert got.dtype == np.uint8, (
            f"own_preprocess(frame) returned {got.dtype}: the gray mean is float64 until it is cast, one byte a "
            "pixel is uint8 (section 1, *Preprocessing*, and the trap printed under it)")
        expected = _blog_state(frame)
        assert np.array_equal(got, expected), (
            f"own_preprocess(frame) differs from the blog's recipe at {int(np.sum(got != expected)):,} of "
            f"{got.size:,} pixels: keep its values (unweighted mean over the colours, cast, every second row and "
            "column, section 1, *Preprocessing*); only where the bytes live changes")
        assert not frame_alive, (
            "the raw frame stays alive as long as your state does: the state reads the frame's bytes "
            f"({_VIEW_SECTION})")
        assert held <= got.nbytes + OWNED_SLACK, (
            f"while your state is held, {held:,} bytes stay allocated for its {got.nbytes:,} bytes of pixels: it is "
            f"a view of a bigger array, which it keeps alive ({_VIEW_SECTION}); the state must own its bytes")
    _, blog_held, _ = _kept_alive(lambda f: _blog_state(f), frames[0])
    return _passed(f"own_preprocess keeps the blog's values in a state that owns its bytes: while one state is "
                   f"held, {held:,} bytes stay allocated (the blog's recipe: {blog_held:,}), and the raw frame is "
                   "freed once dropped")


PAGE_RSS_BYTES, PAGE_RSS_STRIDE = 200 * 10**6, 10_000  # notebook 01b, section 3: the fresh mapping, a 1 every STRIDE


def _page_rss_mistakes(measured: float, page: int | None = None) -> dict[float, str]:
    """The MB of RSS growth a learner who made a likely mistake would predict for notebook 01b's strided writes
    (``PAGE_RSS_BYTES`` of fresh zero pages, a 1 every ``PAGE_RSS_STRIDE`` bytes), each with its hint. Built from
    the page size, ``page`` (``mmap.PAGESIZE`` unless given: a test passes an Apple-silicon Mac's 16,384), against
    the stride, not from ``measured`` (only the MiB slip is a unit of it): where a page is smaller than the stride,
    each write makes a page of its own resident, and the whole array is a mistake; where it is larger, every page
    is written, the whole array is the answer, and one page per write counts pages twice."""
    page = page or mmap.PAGESIZE
    writes = len(range(0, PAGE_RSS_BYTES, PAGE_RSS_STRIDE))
    section = "(section 3, the first paragraph)"
    mistakes = {
        0: f"fresh zero pages cost nothing until written, but here some are written: RSS counts every page written at "
           f"least once, however little of it {section}",
        writes / 1e6: f"that counts the bytes written; RSS counts whole pages, however little of each is written: how "
                      f"many pages do the writes touch? {section}",
        measured * 1e6 / 2**20: "that is MiB; a MB here is 10⁶ bytes, as everywhere in the course"}
    if page < PAGE_RSS_STRIDE:
        mistakes[PAGE_RSS_BYTES / 1e6] = (
            f"that is the whole array: a page ({page:,} bytes here) is smaller than the {PAGE_RSS_STRIDE:,} bytes "
            f"between two writes, so the pages between them are never written and cost no RAM {section}")
    else:
        mistakes[writes * page / 1e6] = (
            f"that counts a page per write, more pages than the array has: a page ({page:,} bytes here) is larger "
            f"than the {PAGE_RSS_STRIDE:,} bytes between two writes, so neighbouring writes land in the same page, "
            f"and RSS counts a page once {section}")
    if page != 4_096:
        mistakes.setdefault(writes * 4_096 / 1e6, (
            f"that takes a page to be 4,096 bytes, as on most PCs; this machine's page is {page:,} bytes (the "
            f"measuring cell prints it) {section}"))
    return mistakes


def _top_rung_mistakes(measured: float) -> dict[float, str]:
    """The GB of 1M top-rung transitions (notebook 00's last section) a learner who made a likely mistake would
    write, each with its hint: one stack where the rung keeps two, one screen where a state stacks 4, one byte a
    pixel where a raw screen has 3 colour channels, or the wrong unit."""
    exercise = "the exercise: s and s' are separate stacks of the 4 most recent raw screens"
    return {
        measured / 2: f"that counts one stack a transition; the top rung stores s and s' as two arrays, each in full "
                      f"({exercise})",
        measured / 4: "that counts one screen a state; a state is a stack of the 4 most recent screens (section 4)",
        measured / 8: f"that is one raw screen a transition (section 5's last line); a transition holds two stacks "
                      f"of 4 screens ({exercise})",
        measured / 3: "that counts one byte a pixel; a raw screen has 3 colour channels, one byte each (section 3)",
        measured * 1e9 / 2**30: "that is GiB (2³⁰ bytes); a GB here is 10⁹ bytes, as everywhere in the course",
        measured / 1e3: "that is TB; the question asks for GB (10⁹ bytes)",
        measured * 1e3: "that is MB; the question asks for GB (10⁹ bytes)"}


_LEARNING = "section 1, *Learning*"
_RECIPE = "section 1, *Preprocessing*: the order of its steps, and what a *view* is"


PREDICTIONS.update({
    # one replay() of `batch` sampled transitions, `ending` of which end a game: Q(s) for each, Q(s') for the rest
    "01.predict_calls": Prediction("the predict calls in one replay()", 0, lambda m, batch, ending: {
        m + ending: "a transition that ends a game needs no Q-values of its next state: its TD target is its reward "
                    f"alone, with no future to add ({_LEARNING})",
        batch: "one call per sampled transition is half the story: a target starts from the Q-values of its state s, "
               f"and the TD target in it needs those of its next state s' where the game goes on ({_LEARNING})",
        batch - ending: "a transition that ends a game still needs the Q-values of its state s: its target row "
                        f"starts from them, and only the taken action's entry is replaced ({_LEARNING})",
        1: "one batched call for the whole minibatch is notebook 06's fix; the posted replay() forwards one state at "
           "a time (section 6, *Predict, then measure*)",
        2: "one batched call for the states and one for the next states is notebook 06's fix; the posted replay() "
           "forwards one state at a time (section 6, *Predict, then measure*)",
        4 * m: "one forward pass of a state gives the Q-values of all 4 actions at once: no pass per action "
               f"({_LEARNING})",
        m + 1: "that adds act()'s greedy call: the question is one replay() alone (act() is counted in the cell "
               "after the check)"},
        "count the forward passes replay() makes for a transition whose game goes on, then for one that ends it, "
        f"then for the whole minibatch ({_LEARNING})"),
    # one stored state of the blog's recipe: a view, so what it keeps allocated is the array its bytes belong to
    "01.kept_alive": Prediction("the bytes one stored state keeps allocated", 0.02, lambda m, frame, state: {
        state: "that is the stored state's own bytes; a slice is a view, which owns none: it reads the bytes of the "
               f"array it was sliced from, and that array stays allocated as long as the view is held ({_RECIPE})",
        frame: "that is the raw frame; the mean over the colour axis makes a new array, so nothing stored reads the "
               f"frame's bytes: follow the recipe to the last step that makes a new array ({_RECIPE})",
        frame // 3 * 8: "that is the gray mean at 8 bytes a pixel, float64; the cast to uint8 comes before the "
                        f"slice and makes a new array of one byte a pixel, and the float array is freed ({_RECIPE})",
        m + state: "a view owns no bytes: the stored state adds none to the array whose bytes it reads; count "
                   f"that array once ({_RECIPE})"},
        "follow the recipe step by step: which steps make a new array, which make a view of the one before, and "
        f"which arrays are still referenced once the state is stored ({_RECIPE})"),
    "01b.page_rss": Prediction("the MB of RSS growth, a 1 written every 10,000 bytes", 0.02, _page_rss_mistakes,
                               "count the writes, then the pages they touch (how far apart two writes are, against "
                               "a page's size), and what RSS counts for each page (section 3, the first paragraph)"),
    "00.top_rung_gb": Prediction("the GB of 1M top-rung transitions", 0.01, _top_rung_mistakes,
                                 "work out the bytes of one raw screen (section 5), then of a stack of 4, then of a "
                                 "transition that keeps s and s' apart (the exercise), then of a million"),
})


QUESTIONS.update({
    "00.invaders_life_and_clock": ("a", "the step's reward is the points of its 4 frames, 10, clipped to r = 1; the "
                                        "lost life in the same step makes `done` 1 whatever the clock does, so the "
                                        "target drops the future term: y = 1 + 0.9 × (1 − 1) × 5.0 = 1; the time "
                                        "limit only decides that a new game starts next (the score keeps the 10)",
                                   {"b": "a time limit keeps the future term only while nothing else cuts the target: "
                                         "in this step a life is lost too, and the course counts a lost life as "
                                         "`done` (section 6, *DQN in one page*, the lost-life case)",
                                    "c": "the 10 points stay in the score, but learning sees the reward clipped "
                                         "to its sign: r is −1, 0 or +1 whatever the points (section 6, *DQN in one "
                                         "page*, the clipping of the TD target's reward)"}),
    "01.killed_scaling": ("b", "the baseline is in RAM on either machine, paid once: all the added RAM goes to "
                               "transitions, so the process lives twice your steps plus the baseline's worth of "
                               "steps (the baseline over the bytes per step)",
                          {"a": "the baseline cancels in the bytes per step (the slope of section 2's fit), not in "
                                "the step at which a process is killed: work that step out for each machine from the "
                                "RAM it has left once the baseline is in (section 3, *Extrapolate*)",
                           "c": "your machine pays the baseline out of its RAM too: compare the RAM each machine has "
                                "left for steps once the baseline is in, not the RAM each has (section 3, "
                                "*Extrapolate*)"}),
    "01b.which_tool_sees": ("b", "an np.memmap's bytes come from its file, which the OS maps into the process: "
                                 "NumPy's allocator, the one that reports to tracemalloc (section 2), never handed "
                                 "them out; RSS counts the mapped pages while they sit in RAM",
                            {"a": "a view owns no bytes, but the array behind it does, and tracemalloc counts that "
                                  "array when an allocator hands its bytes out, written or not (section 3's flat "
                                  "tracemalloc line): 100,000 × 7,056 bytes would show, whatever writes them; what "
                                  "differs here is who provides the bytes (section 2)",
                             "c": "written pages of a mapped file stay in RAM, in the OS's page cache, until it needs "
                                  "the room, and RSS counts them; tracemalloc would miss them even there: who "
                                  "provides those bytes? (section 2)"}),
    "01b.refill_rss": ("b", "the 105 × 80 states are small blocks, below glibc's mmap threshold: freed, they stay in "
                            "the allocator's heap, and the refill reuses them without asking the OS for pages, so RSS "
                            "barely moves while tracemalloc counts the same bytes as in round 1",
                       {"a": "that is what a process that calls malloc_trim after each free shows; freed with del "
                             "alone, small blocks stay with the C allocator, and the refill reuses them (section 1, "
                             "where freed memory goes, and its mmap threshold)",
                        "c": "scattered free blocks can cost reuse when sizes differ, but a refill asks for as many "
                             "bytes as the first fill, in blocks of one size: each freed block fits a request "
                             "exactly, so does the refill need the OS at all? (section 1, where freed memory goes)"}),
})


check_module(globals())
