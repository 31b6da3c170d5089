"""Notebooks 04 (frame sharing) and 05 (the ring buffer): their checks, predictions and questions.
"""
from __future__ import annotations

from typing import Any

from dqn_course.contracts import check_module
from dqn_course.lab.checks.core import (PREDICTIONS, QUESTIONS, Prediction, _call_learner, _not_answered_yet,
                                        _passed, _require_learners_code)


_LIFE = "section 5, *Losing a life is not the end of an episode*"


_STACK_LIFE = f"too few frames stored again at each lost life: count the frames of the state that follows it which " \
              f"padding cannot rebuild ({_LIFE})"


_HEAD = "the opening of notebook 05: the *write head* goes back to slot 0 after the last slot"


_RING_METHODS = ("__init__", "add", "__len__", "sample")


_BY_INDEX = "section 2, *Building a stack by index*"
_PADDING = "section 3, *Episode starts: padding*"
_WRAP = "section 4, *The write head*"


def _stack_cases():
    """The rings ``check_stack_at`` reads, as (memory, transitions, wrapped): toy episodes (some one step long) in
    rings that never wrap, with stacks of 2 to 5 frames; then rings whose head has wrapped: one game longer than
    the ring (windows that cross from slot 0 back to the last slot), a game that starts exactly at slot 0 after a
    wrap (with the previous game's last frame still in the last slot), and random episodes in small rings."""
    import numpy as np

    from dqn_course.lab.toy import numbered_transitions
    from dqn_course.replay import FrameSharingMemory

    rng = np.random.default_rng(404)
    plans = []
    for stack in (4, 4, 2, 3, 5):
        lengths = [int(n) for n in rng.integers(1, 9, size=6)]
        plans.append((lengths, stack, sum(lengths) + len(lengths), False))
    plans += [([30], 4, 12, True), ([9, 6], 4, 10, True), ([9, 6], 3, 10, True)]
    for stack in (4, 2, 5):
        lengths = [int(n) for n in rng.integers(1, 12, size=5)]
        plans.append((lengths, stack, int(rng.integers(stack + 4, 16)), True))
    for lengths, stack, capacity, wrapped in plans:
        lost = {int(i) for i in rng.choice(sum(lengths), size=3, replace=False)}
        memory = FrameSharingMemory(capacity, (stack, 2, 3), seed=0)
        transitions = numbered_transitions(lengths, stack, (2, 3), life_lost=lost)
        for transition in transitions:
            memory.add(*transition)
        if wrapped != (memory.written > capacity):
            raise RuntimeError("check_stack_at's ring did not wrap as planned: a bug in dqn_course, not in your "
                               "answer; please report it")
        yield memory, transitions, wrapped


def _window(first, t: int, stack: int) -> list[int]:
    """The slots of the stack whose newest frame is slot ``t``: walk back one slot at a time (past slot 0 to the
    last slot), and stay on a slot flagged ``first`` once reached (its episode's padding)."""
    idx = [t]
    for _ in range(stack - 1):
        k = idx[0]
        idx.insert(0, k if first[k] else (k - 1) % len(first))
    return idx


def _stack_hint(got, frames, first, t: int, stack: int) -> str:
    """What a wrong stack ``got`` most likely did: it is compared with the usual mistakes."""
    import numpy as np

    idx = _window(first, t, stack)
    expected = frames[idx]
    back = np.arange(t - stack + 1, t + 1)
    crosses = any(i > t for i in idx)
    starts = np.flatnonzero(first[:t + 1])
    from_slot_0 = frames[np.maximum(back, starts[-1] if len(starts) else 0)]
    zeros = expected.copy()
    zeros[:idx.count(idx[0]) - 1] = 0
    if np.array_equal(got, expected[::-1]):
        return f"the order is reversed: oldest frame first, frames[t] last ({_BY_INDEX})"
    if crosses and (np.array_equal(got, from_slot_0) or np.array_equal(got, frames[np.maximum(back, 0)])):
        return (f"the window stopped at slot 0, but no episode starts there: the head has wrapped, so the slot "
                f"before slot 0 is the ring's last slot, and the window goes on there ({_WRAP})")
    if np.array_equal(got, frames[back % len(frames)]) or np.array_equal(got, frames[np.maximum(back, 0)]):
        return (f"the stack reaches back across an episode start into the previous episode: a window stops at its "
                f"episode's first frame, and copies of that frame fill the places before it ({_PADDING})")
    if idx.count(idx[0]) > 1 and np.array_equal(got, zeros):
        return f"positions before the episode's first frame repeat that first frame, not zeros ({_PADDING})"
    if np.array_equal(got, np.repeat(frames[t:t + 1], stack, axis=0)):
        return f"only an episode's first frame is repeated; later stacks hold consecutive frames ({_PADDING})"
    return f"compare your stack with the expected one, frame by frame ({_BY_INDEX}, {_PADDING} and {_WRAP})"


def check_stack_at(stack_at: Any) -> bool | None:
    """Notebook 04: ``stack_at(frames, first, t, stack=4)`` builds the state whose newest frame is ``frames[t]``.

    ``frames`` is a ring's frame store, one frame per slot (shape (C, H, W)), ``first[k]`` is True where slot k holds
    an episode's first frame; once the head has wrapped, the slot before slot 0 is the last slot. Refused first:
    anything that is not the learner's own code (``FrameSharingMemory.stacks_at``, the course's ``stack_windows``, a
    library function, or a def that calls them). Then checked by behaviour as well as value, against
    ``FrameSharingMemory.stacks_at`` and the stacks the agent saw, for the state and next state of every valid slot:
    windows padded at an episode start (never reaching into the previous game, even where it sits just before in the
    ring), windows that cross from slot 0 to the last slot of a wrapped ring, stacks of 2 to 5 frames, and a result
    that is a new array (overwriting the ring afterwards leaves it as it was). Raises ``AssertionError`` with a hint
    naming the section.
    """
    if stack_at is None:
        return _not_answered_yet("write stack_at(frames, first, t, stack=4)")
    _require_learners_code(stack_at, "stack_at(frames, first, t, stack=4)",
                           f"a def that picks the window's frames by their slots ({_BY_INDEX}), stops at the "
                           f"episode's first frame ({_PADDING}) and goes on past slot 0 at the last slot ({_WRAP})")
    import numpy as np

    from dqn_course.lab.toy import frame_numbers

    def numbers(a):
        try:
            return frame_numbers(a)
        except Exception:  # the answer may not even be indexable; the hint still has to print
            return repr(a)

    wrap_hints = {"out of bounds": f"once the head has wrapped, a window goes on past slot 0 at the ring's last "
                                   f"slot, and its episode may have started there ({_WRAP})",
                  "size 0": f"once the head has wrapped, the episode of slot t may have started near the ring's "
                            f"end, after slot t: there is not always an episode start at or before it ({_WRAP})"}
    checked = padded = crossed = 0
    for memory, transitions, wrapped in _stack_cases():
        stack = memory.stack
        frames = np.asarray(memory.frames[:min(memory.written, memory.capacity)])
        first = np.asarray(memory.first[:len(frames)], dtype=bool)
        slots = np.flatnonzero(memory.valid)
        states, next_states = memory.stacks_at(slots)
        for k, s, s2 in zip(slots, states, next_states):
            seen = transitions[int(memory.ids[k])]
            if not (np.array_equal(s, seen[0]) and np.array_equal(s2, seen[3])):
                raise RuntimeError("FrameSharingMemory disagrees with the stacks it was given: a bug in "
                                   "dqn_course, not in your answer; please report it")
            for t, expected in ((int(k), s), ((int(k) + 1) % len(frames), s2)):
                idx = _window(first, t, stack)
                if not np.array_equal(frames[idx], expected):
                    raise RuntimeError("check_stack_at's window disagrees with FrameSharingMemory: a bug in "
                                       "dqn_course, not in your answer; please report it")
                given = frames.copy()
                got = _call_learner(stack_at, (given, first.copy(), t, stack),
                                    f"stack_at(frames, first, t={t}, stack={stack})", wrap_hints if wrapped else None)
                if got is None:
                    return _not_answered_yet("stack_at still returns None; build the stack")
                kept = np.array(got, copy=True)
                ring = (f"a ring of {len(frames)} slots whose head has wrapped" if wrapped else
                        f"{len(frames)} frames in step order")
                start = (f"this episode starts at slot {idx[0]}" if first[idx[0]] else
                         "no episode starts in the window")
                where = (f"at t={t} with stack={stack}, in {ring} (frames numbered by step; {start}): expected "
                         f"frames {numbers(expected)}, got {numbers(kept)}")
                assert kept.shape == expected.shape, (
                    f"stack_at must return one array of shape (stack, H, W) = {expected.shape}, got shape "
                    f"{kept.shape} {where}. A stack is `stack` frames picked by their slots in one go ({_BY_INDEX}).")
                if not np.array_equal(kept, expected):
                    raise AssertionError(f"stack_at is wrong {where}. Hint: "
                                         f"{_stack_hint(kept, frames, first, t, stack)}.")
                given[:] = 255  # the head writes on: a stack taken before must not change with it
                assert np.array_equal(np.array(got), kept), (
                    f"stack_at's stack at t={t} changed when the ring's frames were overwritten afterwards: it is a "
                    f"view into the ring, not a stack of its own. The head overwrites the oldest slot at every step "
                    f"({_WRAP}), so a stack must be a new array: picking frames by their slots in one go copies them "
                    f"({_BY_INDEX})")
                checked += 1
                padded += len(set(idx)) < stack
                crossed += any(i > t for i in idx)
    if not (padded and crossed):
        raise RuntimeError("check_stack_at checked no padded or no wrapped window: a bug in dqn_course, not in your "
                           "answer; please report it")
    return _passed(f"stack_at matches FrameSharingMemory on {checked} stacks: {padded} padded at an episode start, "
                   f"{crossed} across the wrap from slot 0 to the ring's last slot, each a new array")


def _check_write_head(ring_class: type, add) -> None:
    """Raise ``AssertionError`` unless each add into a full ring writes one slot of storage made once: a ring of 6
    holding items 1..6 takes 7..12, and after each add exactly one row of its storage (the instance's arrays whose
    first dimension is the capacity) differs, in the same array objects, each slot written once in the 6 adds. A ring
    that shifts every item along (``np.roll`` or a slice copy) holds the newest items too and keeps no memory, but
    copies its whole storage on every add: only this test tells it from a write head."""
    import numpy as np

    capacity = 6
    ring = ring_class(capacity, (2, 3), np.uint8)
    for v in range(1, capacity + 1):
        add(ring, np.full((2, 3), v, np.uint8))
    attributes = dict(getattr(ring, "__dict__", {}))
    attributes.update({s: getattr(ring, s) for c in type(ring).__mro__ for s in getattr(c, "__slots__", ())
                       if isinstance(s, str) and hasattr(ring, s)})
    storage = {k: a for k, a in attributes.items() if isinstance(a, np.ndarray) and a.ndim and len(a) == capacity}
    assert storage, (
        f"a ring of capacity {capacity} has no array attribute with {capacity} slots: its storage is one array of the "
        f"given dtype with a slot per item, made in __init__ (the exercise; {_HEAD})")
    written = []
    for v in range(capacity + 1, 2 * capacity + 1):
        before = {k: a.copy() for k, a in storage.items()}
        add(ring, np.full((2, 3), v, np.uint8))
        rebound = [k for k, a in storage.items() if getattr(ring, k, None) is not a]
        assert not rebound, (
            f"one add into a full ring replaced its storage array `{rebound[0]}` with a new one: a ring's storage is "
            f"made once and each add writes the new item into the one slot at the write head ({_HEAD})")
        rows = set()
        for k, a in storage.items():
            changed = np.any(a.reshape(capacity, -1) != before[k].reshape(capacity, -1), axis=1)
            rows.update(int(i) for i in np.flatnonzero(changed))
        assert len(rows) == 1, (
            f"one add into a full ring of {capacity} changed {len(rows)} of its slots: moving every item along keeps "
            f"the newest items but copies the whole memory on each add. A ring writes the new item into the one slot "
            f"at its write head, moves the head on and wraps it to slot 0 after the last slot ({_HEAD})")
        written += rows
    assert len(set(written)) == capacity, (
        f"{capacity} adds into a full ring of {capacity} wrote slots {written}, not each slot once: the write head "
        f"moves on by one slot per add and wraps to slot 0 after the last ({_HEAD})")


def check_ring(ring_class: Any) -> bool | None:
    """Notebook 05: a preallocated ring ``ring_class(capacity, item_shape, dtype)`` with
    ``add(item)``, ``len(ring)`` and ``sample(batch_size, rng)`` (an array of ``batch_size`` items).

    Refused first: a class whose ``__init__``, ``add``, ``__len__`` or ``sample`` is not the learner's own code (the
    course's memories, which the page imports, or a subclass that inherits their methods). Then checked by behaviour:
    it keeps the dtype it is given (uint8 and float32), holds at most ``capacity`` items and, added one at a time
    past capacity, holds exactly the newest ``capacity`` after every add (the write head wraps at capacity, not one
    slot early or late), copies each item (changing the array after ``add`` changes nothing stored), samples only what
    it holds, all of it, uniformly (40,000 draws from a full ring of 4: each share within 1.25 points of 25%, which a
    right ring misses with probability under 1e-7) and with the Generator it is given (two Generators seeded alike
    give the same batch), and copies items into storage made once in ``__init__`` instead of keeping the arrays it is
    given (measured with tracemalloc). Once full, each add writes exactly one slot of that storage, each slot in
    turn (a write head, not a shift of every item). Raises ``AssertionError`` with a hint naming the section.
    """
    if ring_class is None:
        return _not_answered_yet("write the ring class")
    assert isinstance(ring_class, type), f"pass the class itself, e.g. check_ring(Ring), got {ring_class!r}"
    write = f"a ring of your own, its storage made once and a write head that wraps ({_HEAD})"
    _require_learners_code(ring_class, f"{ring_class.__name__}(capacity, item_shape, dtype)", write)
    for name in _RING_METHODS:
        assert hasattr(ring_class, name), f"{ring_class.__name__} has no `{name}`: the ring needs {_RING_METHODS}"
        _require_learners_code(getattr(ring_class, name), f"{ring_class.__name__}.{name}(...)", write)
    import numpy as np

    from dqn_course.profiling import TraceMalloc

    rng = np.random.default_rng(505)
    past_the_end = {"out of bounds": f"the head moved past the last slot: it goes back to slot 0 there ({_HEAD})"}

    def item(v, shape=(2, 3), dtype=np.uint8):
        return np.full(shape, v, dtype)

    def add(ring, x):
        _call_learner(ring.add, (x,), "add(item)", past_the_end)

    def held(ring, draws):
        batch = np.asarray(ring.sample(draws, rng))
        assert all(len(set(np.unique(x))) == 1 for x in batch), (
            "each sampled item must be one whole stored item: a draw picks slots, and each slot hands back the "
            "whole item stored in it (the opening of notebook 05: sampling draws slot indices, then copies those "
            "slots out)")
        return set(int(x.flat[0]) for x in batch)

    ring = ring_class(5, (2, 3), np.uint8)
    for v in (10, 11, 12):
        add(ring, item(v))
    batch = ring.sample(300, rng)
    if batch is None:
        return _not_answered_yet("sample() still returns None; return an array of sampled items")
    batch = np.asarray(batch)
    assert batch.shape == (300, 2, 3), (
        f"sampling 300 items should return an array of 300 items, shape (300, 2, 3), got {batch.shape}: one "
        "stored item per slot drawn, stacked into one array (the opening of notebook 05: one draw of slot indices, "
        "then those slots copied out together)")
    assert batch.dtype == np.uint8, (
        f"sampled items have dtype {batch.dtype}, the ring was made for uint8: preallocate storage with the "
        "dtype passed to __init__")
    assert len(ring) == 3, f"after 3 adds into capacity 5, len(ring) should be 3, got {len(ring)}"
    got = held(ring, 300)
    assert got <= {10, 11, 12}, (
        f"after adding items 10, 11, 12 the ring sampled {sorted(got)}: sample only the slots written so far "
        "(the opening of notebook 05: a draw picks among the slots that hold items, not every slot of the capacity)")
    assert got == {10, 11, 12}, f"300 draws from 3 items should see all of them, saw only {sorted(got)}"

    floats = ring_class(3, (2,), np.float32)
    add(floats, item(0.5, (2,), np.float32))
    sampled = np.asarray(floats.sample(4, rng))
    assert sampled.dtype == np.float32 and np.all(sampled == 0.5), (
        f"a ring made for float32 returned {sampled.dtype} items {sampled.ravel()[:4]}, not 0.5: preallocate storage "
        "with the dtype passed to __init__, not a fixed one")

    given = item(7)
    ring = ring_class(4, (2, 3), np.uint8)
    add(ring, given)
    given[:] = 99  # the caller reuses its array, as an environment's step does
    assert held(ring, 50) == {7}, (
        "changing an array after adding it changed what the ring holds: the ring kept the array itself, not a copy "
        "of its values in a slot of its own (section 1: a deque keeps references, a ring copies into its slots)")
    for v in range(8, 20):  # items 7..19 into capacity 4, one at a time, checked after every add
        add(ring, item(v))
        newest = set(range(max(7, v - 3), v + 1))
        assert len(ring) == len(newest), (
            f"after {v - 6} adds into capacity 4, len(ring) should be {len(newest)}, got {len(ring)}: a ring holds at "
            "most `capacity` items")
        got = held(ring, 400)
        if got == newest:
            continue
        if v >= 11 and got == set(range(7, 11)):
            hint = f"the ring stopped storing once full; it must overwrite the oldest item ({_HEAD})"
        elif 0 in got:
            hint = (f"a slot never written (its zeros) was sampled: the head wraps before it reaches the last slot, "
                    f"so one slot is never filled ({_HEAD})")
        else:
            hint = (f"after the last slot the write head goes back to slot 0, so each add past capacity "
                    f"overwrites the oldest item ({_HEAD})")
        raise AssertionError(f"after adding items 7..{v} one at a time into capacity 4 the ring should hold "
                             f"{sorted(newest)}, it sampled {sorted(got)}. Hint: {hint}.")

    _check_write_head(ring_class, add)

    # `ring` is now full, holding items 16..19. Two Generators seeded alike must give the same batch: the ring draws
    # with the Generator it is given, not numpy's global state nor one of its own.
    twice = [np.asarray(ring.sample(64, np.random.default_rng(7))) for _ in range(2)]
    assert np.array_equal(twice[0], twice[1]), (
        "two Generators seeded alike gave different batches: sample must draw its slots with the Generator it is "
        "passed (the `rng` argument), not numpy's global random state or a generator of its own, so that a seeded run "
        "repeats exactly (the exercise's description of sample, and the opening of notebook 05: sampling is one draw "
        "of slot indices from that Generator)")
    # Uniform: 40,000 draws give each of the 4 items 10,000 on average, standard deviation sqrt(40,000 x 1/4 x 3/4)
    # = 86.6. A right ring lands further than 500 (5.8 standard deviations) from 10,000 with probability about 8e-9
    # per item, under 4e-8 for any of the four.
    draws = 40_000
    values = np.asarray(ring.sample(draws, rng)).reshape(draws, -1)[:, 0].astype(int)
    counts = {v: int(np.sum(values == v)) for v in range(16, 20)}
    if any(abs(n - draws // 4) > 500 for n in counts.values()):
        shares = ", ".join(f"item {v}: {n / draws:.1%}" for v, n in counts.items())
        raise AssertionError(
            f"{draws:,} draws from a full ring of 4 items gave {shares}; each should come up about 25% of the time. "
            "Hint: uniform replay draws every held slot with the same probability, with replacement (the exercise's "
            "description of sample, and the opening of notebook 05 on sampling); favouring some items is "
            "prioritized replay, notebook 08, and is not this ring's job")

    big = ring_class(500, (84, 84), np.uint8)
    with TraceMalloc() as tm:
        for v in range(1_500):
            big.add(item(v % 256, (84, 84)))
    assert tm.current < 500 * 84 * 84 // 4, (
        f"adding 1,500 frames kept {tm.current:,} more bytes allocated: the ring keeps the arrays it is given "
        "(a list or deque of references) or allocates per add. All the storage is made once, in __init__, with "
        "a slot for every item, and each add copies its item into a slot (the layouts drawn at the top, and section "
        "1: a deque keeps references, a ring copies into its own slots)")
    return _passed("the ring keeps its dtype, copies each item into storage made once, holds the newest `capacity` "
                   "items after every add past capacity, each add writing one slot (its head wraps at the last slot), "
                   "and samples only them, uniformly, with the Generator it is given")


PREDICTIONS.update({
    "04.frames_stored": Prediction("frames stored for 3 games of 10 transitions, 2 lives lost in each", 0, lambda m: {
        33: "that is what the memory stores when it is told where the games end; given only done, what does it make "
            f"of a lost life? ({_LIFE})",
        57: "four frames again at every lost life; but the state after a game's 2nd transition still holds "
            "padding: which of its frames can padding rebuild? (section 3, *Episode starts: padding*, and "
            f"{_LIFE})",
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
    # a ratio of two byte counts: 3% forgives the Python objects (a few hundred bytes a row, beside 28,224 bytes of
    # pixels a stack) and each episode's first stack, so it asks only how many stacks a row keeps of its own
    "05.deque_bytes": Prediction("the copying deque's bytes per transition over the sharing "
                                 "deque's", 0.03, lambda m: {
        m / 2: "copying changed nothing? With copies, a row's next state is no longer the next row's state: every "
               "row keeps stacks of its own (section 1, the first paragraph, and what copying changes)",
        1 / m: "that is the sharing deque over the copying one: the question asks the copying deque's bytes per "
               "transition over the sharing deque's",
        4 * m: "that sets the copying deque against one frame per transition, notebook 04's frame-sharing ring; the "
               "deque of section 1 already keeps a whole stack per row (section 1, the first paragraph)"},
        "count the stacks each row keeps of its own in either deque (section 1: a row that shares s' keeps one), "
        "then set the two against each other; the Python objects are a small share of either"),
})


QUESTIONS.update({
    "04.strided_stack": ("a", "s holds frames t−6, t−4, t−2 and t, s′ frames t−5, t−3, t−1 and t+1: they share "
                              "no frame, so a window holding both spans all eight frames from t−6 to t+1. The "
                              "frame-sharing ring still writes each frame once, at its own step, and rebuilds a state "
                              "from the slots of the frames it holds: one frame per transition, with a lookback (and "
                              "episode-start padding) that reaches six slots back instead of three",
                         {"b": "a window of one stack and one more frame holds s′ only when s′ shares s's three "
                               "newest frames: list the frames of each for this agent and count the frames the two "
                               "have in common (section 1, *The same transitions in four memories*, and section 2, "
                               "*Building a stack by index*)",
                          "c": "a state is rebuilt from the slots of the frames it holds, wherever in the ring they "
                               "lie, and each of those frames was written once, at its own step: does that need s "
                               "and s′ to share a frame? (section 2, *Building a stack by index*)"}),
    "04.episode_end": ("c", "the two flags answer two questions (section 5): done, whether s′ has a future to "
                            "bootstrap from, and the game is lost, so it has none, whatever the clock did; "
                            "episode_end, whether the frame stream restarts, and the game is reset. A truncation "
                            "keeps bootstrapping only because the clock cut a future the game still had",
                       {"a": "the clock stopped the game, but the game was also lost on that step: is there still a "
                             "future after s′ for the target to bootstrap from? (section 5, *Losing a life is not "
                             "the end of an episode*: what done decides)",
                        "b": "the transition is a real one: the agent acted, got its reward and lost the game on "
                             "that step, and the clock cut nothing the target needs, since a lost game has no future "
                             "to bootstrap from; left out, the memory loses the one step that teaches the network "
                             "the game ends there. Which flag says there is no future, and which that the frame "
                             "stream restarts? (section 5, *Losing a life is not the end of an episode*, its table)"}),
    "04.write_head": ("b", "a transition can be sampled only once its next state is whole (section 4, *The write "
                           "head*), and a 3-step transition's next state ends three slots on: the three newest slots "
                           "wait for it. A state reaches back through its older frames only, so, as with one-step "
                           "targets, the three slots after the head lost a frame of their 4-frame states: "
                           "1,000 - 3 - 3",
                      {"a": "a 3-step transition bootstraps from the state three steps on: when is that state's "
                            "newest frame written, and until then can the transition be sampled? (section 4, *The "
                            "write head*, when a transition becomes valid)",
                       "c": "the head writes over the oldest slots first: of the frames a transition needs, which "
                            "does it reach first, those behind the transition's slot or those ahead of it? (section "
                            "2, *Building a stack by index*, and section 4, *The write head*)"}),
    "04.valid_after_write": ("b", "frame 10 over slot 0 destroys frame 0, so the transition at slot 0 and those at "
                                  "slots 1-3, whose states look back through slot 0 (slots 1 and 2 also hold padding "
                                  "copies of frame 0), stop being valid; slot 4's state starts at frame 1 and stays "
                                  "whole; and slot 9 becomes valid, since frame 10 is its next-state frame",
                             {"a": "frame 0 is in more states than the one of slot 0: which transitions' states hold "
                                   "it, as a frame or as padding copies of it? And what does the new frame complete? "
                                   f"({_WRAP}, which transitions a write invalidates)",
                              "c": "a write also completes a transition: whose next-state frame is frame 10? "
                                   f"({_WRAP}, when a transition becomes valid)"}),
    "05.list_per_batch": ("b", "the list is built again for every batch, and building it visits all 1,000,000 "
                               "rows (a pointer each), where the 32 walks of random.sample skip through the deque's "
                               "blocks 64 rows at a time: far more work, and it grows with N all the same",
                          {"a": "reading a list by position costs one step, but the list must be built first, every "
                                "batch: count the rows that building visits against the blocks 32 walks skip (the "
                                "opening *Why*, and section 2, *Slow: sampling time against capacity*)",
                           "c": "the list holds the same rows, but making it is not free: it visits every row of the "
                                "deque, once per batch (the opening *Why*: what grows with N)"}),
    "05.ring_newest": ("a", "this head moves on before it writes, so item k goes into slot k mod 1,000: slot 0 took "
                            "items 1,000 and then 2,000, and item 2,500 sits in slot 500. A full ring holds the last "
                            "1,000 items, 1,501 to 2,500, whatever slot its head started at, and the oldest is the "
                            "one the next write overwrites: item 1,501, in slot 501",
                      {"b": "once full, a ring does not start again from slot 0: its head keeps going round from "
                            "wherever it stands. Count where this head put item 1,000, then item 2,000 (the opening "
                            "of this notebook: the write head)",
                       "c": "the array's order is not the items' order once the head has wrapped: the oldest item "
                            "is the one the next write overwrites. Where does the head stand after item 2,500? "
                            "(the opening of this notebook: the write head)"}),
    "05.prefault": ("b", "a page costs RSS when it is first written, whatever is written: filling in the ones writes "
                         "every page at construction, as prefault does, while np.zeros leaves them unwritten until "
                         "frames arrive; and np.ones fills one array, the one it returns, so the growth is the "
                         "frames' 10.6 GB once, not twice",
                    {"a": "RSS counts pages written, not frames stored: what must np.ones do to every byte before it "
                          "returns? (section 3, *Fitting at the start is not fitting at the end*)",
                     "c": "np.ones makes one array of the size asked for and writes a one into each of its bytes; "
                          "no second array is made. What does RSS count, pages reserved or pages written? (section "
                          "3, *Fitting at the start is not fitting at the end*)"}),
})


check_module(globals())
