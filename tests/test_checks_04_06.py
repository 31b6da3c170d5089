"""The self-checks of notebooks 04-06: right answers pass, wrong ones raise AssertionError, None only prints."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from dqn_course.lab import checks
from dqn_course.replay import FrameSharingMemory, NaiveDequeMemory, StackedRingMemory

# -- notebook 04: stack_at --------------------------------------------------------------------------


def stack_at_right(frames, first, t, stack=4):
    slots = [t]
    for _ in range(stack - 1):  # walk back; past slot 0 to the last slot; stay on an episode's first frame
        k = slots[0]
        slots.insert(0, k if first[k] else (k - 1) % len(frames))
    return frames[slots]


def stack_at_vectorised(frames, first, t, stack=4):
    back = (t - np.arange(stack)) % len(frames)  # newest first
    flagged = np.flatnonzero(first[back])
    stop = flagged[0] if len(flagged) else stack - 1  # positions from the newest back to the episode's first frame
    return frames[back[np.minimum(np.arange(stack), stop)][::-1]]


def stack_at_across_episodes(frames, first, t, stack=4):
    return frames[np.maximum(np.arange(t - stack + 1, t + 1), 0)]


def stack_at_zero_padding(frames, first, t, stack=4):
    start = int(np.flatnonzero(first[:t + 1])[-1])
    idx = np.arange(t - stack + 1, t + 1)
    out = frames[np.maximum(idx, start)].copy()
    out[idx < start] = 0
    return out


def stack_at_reversed(frames, first, t, stack=4):
    return stack_at_right(frames, first, t, stack)[::-1]


def stack_at_ignores_stack(frames, first, t, stack=4):
    return stack_at_right(frames, first, t, 4)


def stack_at_list(frames, first, t, stack=4):
    return list(stack_at_right(frames, first, t, stack))


def stack_at_no_wrap(frames, first, t, stack=4):
    """Right in a ring that has not wrapped: the episode's start is looked for at or before slot t only."""
    start = int(np.flatnonzero(first[:t + 1])[-1])
    return frames[np.maximum(np.arange(t - stack + 1, t + 1), start)]


def stack_at_stops_at_slot_0(frames, first, t, stack=4):
    starts = np.flatnonzero(first[:t + 1])
    return frames[np.maximum(np.arange(t - stack + 1, t + 1), starts[-1] if len(starts) else 0)]


def stack_at_modulo_only(frames, first, t, stack=4):
    return frames[np.arange(t - stack + 1, t + 1) % len(frames)]


def stack_at_view(frames, first, t, stack=4):
    if t >= stack - 1 and not first[t - stack + 2:t + 1].any():
        return frames[t - stack + 1:t + 1]  # no padding needed: a slice, which is a view into the ring
    return stack_at_right(frames, first, t, stack)


@pytest.mark.parametrize("answer", [stack_at_right, stack_at_vectorised, stack_at_list])
def test_stack_at_right(answer, capsys):
    assert checks.check_stack_at(answer) is True
    out = capsys.readouterr().out
    assert out.startswith("✓") and "padded at an episode start" in out and "across the wrap" in out


@pytest.mark.parametrize("answer, hint", [
    (stack_at_across_episodes, "previous episode"),
    (stack_at_modulo_only, "previous episode"),
    (stack_at_zero_padding, "not zeros"),
    (stack_at_reversed, "reversed"),
    (stack_at_ignores_stack, "shape"),
    (lambda frames, first, t, stack=4: frames[t], "shape"),
    (stack_at_no_wrap, r"raised IndexError.*once the head has wrapped.*section 4"),
    (stack_at_stops_at_slot_0, r"stopped at slot 0.*ring's last slot.*section 4"),
    (stack_at_view, r"view into the ring.*section 4"),
])
def test_stack_at_wrong(answer, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_stack_at(answer)


def _stacks_of_the_course(frames, first, t, stack=4):
    memory = FrameSharingMemory(len(frames), (stack, *frames.shape[1:]))
    return memory.stacks_at(np.array([t]))[0][0]


def _windows_of_the_course(frames, first, t, stack=4):
    from dqn_course.replay.frame_sharing import stack_windows

    index, _ = stack_windows(np.array([t]), first.__getitem__, stack, len(frames))
    return frames[index[0, :stack]]


@pytest.mark.parametrize("answer", ["FrameSharingMemory.stacks_at", "memory.stacks_at", "stack_windows",
                                    "frame_numbers", "describe_ring", "numbered_transitions", "random_frames",
                                    "np.take", "a def around stacks_at", "a def around stack_windows"])
def test_stack_at_refuses_the_course_and_the_pages_imports(answer):
    from dqn_course.envs import random_frames
    from dqn_course.lab.toy import describe_ring, frame_numbers, numbered_transitions
    from dqn_course.replay.frame_sharing import stack_windows

    answers = {"FrameSharingMemory.stacks_at": FrameSharingMemory.stacks_at,
               "memory.stacks_at": FrameSharingMemory(8, (4, 1, 1)).stacks_at, "stack_windows": stack_windows,
               "frame_numbers": frame_numbers, "describe_ring": describe_ring,
               "numbered_transitions": numbered_transitions, "random_frames": random_frames, "np.take": np.take,
               "a def around stacks_at": _stacks_of_the_course, "a def around stack_windows": _windows_of_the_course}
    with pytest.raises(AssertionError, match=r"write it yourself: a def .*section 2.*section 3.*section 4"):
        checks.check_stack_at(answers[answer])


def test_stack_at_unanswered(capsys):
    assert checks.check_stack_at(None) is None
    assert checks.check_stack_at(lambda frames, first, t, stack=4: None) is None
    assert "not answered yet" in capsys.readouterr().out.lower()


# -- notebook 05: the ring ----------------------------------------------------------------------------


class RingRight:
    def __init__(self, capacity, item_shape, dtype=np.uint8):
        self.items = np.zeros((capacity, *item_shape), dtype)
        self.capacity, self.head, self.size = capacity, 0, 0

    def add(self, item):
        self.items[self.head] = item
        self.head = (self.head + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def __len__(self):
        return self.size

    def sample(self, batch_size, rng):
        return self.items[rng.integers(0, self.size, size=batch_size)]


class RingSamplesUnwritten(RingRight):
    def sample(self, batch_size, rng):
        return self.items[rng.integers(0, self.capacity, size=batch_size)]


class RingStopsWhenFull(RingRight):
    def add(self, item):
        if self.size < self.capacity:
            super().add(item)


class RingKeepsReferences:
    def __init__(self, capacity, item_shape, dtype=np.uint8):
        from collections import deque

        self.items = deque(maxlen=capacity)

    def add(self, item):
        self.items.append(item)

    def __len__(self):
        return len(self.items)

    def sample(self, batch_size, rng):
        return np.stack([self.items[i] for i in rng.integers(0, len(self.items), size=batch_size)])


class RingFloat(RingRight):
    def __init__(self, capacity, item_shape, dtype=np.uint8):
        super().__init__(capacity, item_shape, np.float32)


class RingNoWrap(RingRight):
    def add(self, item):
        self.items[self.head] = item
        self.head += 1
        self.size = min(self.size + 1, self.capacity)


class RingWrapsEarly(RingRight):
    def add(self, item):
        self.items[self.head] = item
        self.head = (self.head + 1) % (self.capacity - 1)
        self.size = min(self.size + 1, self.capacity)


class RingWrapsToOne(RingRight):
    def add(self, item):
        self.items[self.head] = item
        self.head = self.head + 1 if self.head + 1 < self.capacity else 1
        self.size = min(self.size + 1, self.capacity)


class RingLenGrows(RingRight):
    def __len__(self):
        return self.count

    def add(self, item):
        super().add(item)
        self.count = getattr(self, "count", 0) + 1


class RingFixedDtype(RingRight):
    def __init__(self, capacity, item_shape, dtype=np.uint8):
        super().__init__(capacity, item_shape, np.uint8)


class RingKeepsGivenArrays(RingRight):
    def __init__(self, capacity, item_shape, dtype=np.uint8):
        super().__init__(capacity, item_shape, dtype)
        self.items = [None] * capacity

    def sample(self, batch_size, rng):
        return np.stack([self.items[i] for i in rng.integers(0, self.size, size=batch_size)])


class RingIgnoresItsGenerator(RingRight):
    """Uniform, but draws from numpy's global random state: a seeded run does not repeat."""

    def sample(self, batch_size, rng):
        return self.items[np.random.randint(0, self.size, size=batch_size)]


class RingSkewed(RingRight):
    """Draws one index past the held ones and clips it to the last: that slot gets twice the share of the others."""

    def sample(self, batch_size, rng):
        return self.items[np.minimum(rng.integers(0, self.size + 1, size=batch_size), self.size - 1)]


class RingRolls(RingRight):
    """Keeps the newest items by rolling all of them one slot on each add into a new array: no write head."""

    def add(self, item):
        self.items = np.roll(self.items, -1, 0)
        self.items[-1] = item
        self.size = min(self.size + 1, self.capacity)

    def sample(self, batch_size, rng):
        return self.items[self.capacity - self.size + rng.integers(0, self.size, size=batch_size)]


class RingShiftsInPlace(RingRolls):
    """The same shift as RingRolls, copied within the one array: the storage stays, but every slot is rewritten."""

    def add(self, item):
        self.items[:-1] = self.items[1:]
        self.items[-1] = item
        self.size = min(self.size + 1, self.capacity)


class RingOfTheCourse(FrameSharingMemory):
    """A subclass that inherits the course's ring: refused, whatever it would do."""


class RingUnanswered:
    def __init__(self, capacity, item_shape, dtype=np.uint8):
        pass

    def add(self, item):
        pass

    def __len__(self):
        return 0

    def sample(self, batch_size, rng):
        return None


def test_ring_right(capsys):
    assert checks.check_ring(RingRight) is True
    assert capsys.readouterr().out.startswith("✓")


@pytest.mark.parametrize("answer, hint", [
    (RingSamplesUnwritten, "written so far"),
    (RingStopsWhenFull, "oldest"),
    (RingKeepsReferences, "references"),
    (RingFloat, "dtype"),
    (RingFixedDtype, "float32"),
    (RingNoWrap, "goes back to slot 0"),
    (RingWrapsEarly, "never written"),
    (RingWrapsToOne, "should hold"),
    (RingLenGrows, "at most `capacity` items"),
    (RingKeepsGivenArrays, "kept the array itself"),
    (RingIgnoresItsGenerator, "seeded alike gave different batches.*Generator it is passed.*notebook 05"),
    (RingSkewed, "about 25% of the time.*uniform replay.*notebook 05"),
    (RingRolls, "replaced its storage array `items`.*write head.*notebook 05"),
    (RingShiftsInPlace, "changed 6 of its slots.*write head.*wraps.*notebook 05"),
])
def test_ring_wrong(answer, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_ring(answer)


@pytest.mark.parametrize("answer", [FrameSharingMemory, NaiveDequeMemory, StackedRingMemory, RingOfTheCourse])
def test_ring_refuses_the_course_and_the_pages_imports(answer):
    with pytest.raises(AssertionError, match="course's own|not yours|not a function of yours"):
        checks.check_ring(answer)


def test_ring_unanswered(capsys):
    assert checks.check_ring(None) is None
    assert checks.check_ring(RingUnanswered) is None
    assert "not answered yet" in capsys.readouterr().out.lower()


def test_05_prefault_key_np_ones_writes_every_page_of_one_array():
    """05's Q3 (05.prefault): an array made with np.ones costs RSS of its size at once (key b, not np.zeros's
    nothing, a), and only once: no second array on the way, so its peak is not twice that (option c)."""
    from _subprocess_helpers import allocate_and_keep

    from dqn_course.profiling import measure_in_subprocess

    assert checks.QUESTIONS["05.prefault"][0] == "b"
    # np.ones(200 MB, uint8), kept alive; tracemalloc's peak sees any second array numpy made on the way (the child's
    # ru_maxrss does not bound it: in this suite it reads well above the child's RSS with the array alive)
    m = measure_in_subprocess(allocate_and_keep, 200, trace=True, timeout=300)
    assert m.result == 200_000_000 and m.rss_growth > 0.9 * m.result, m
    assert m.result <= m.traced_peak < 1.5 * m.result, m


# -- the notebooks' solution cells (committed without outputs, skipped by nbval) run here -----------------------

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _solution_sources(notebook: str) -> list[str]:
    cells = json.loads((NOTEBOOKS / notebook).read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if "solution" in c.get("metadata", {}).get("tags", [])]


@pytest.mark.parametrize("notebook", ["04_frame_sharing.ipynb", "05_ring_buffer.ipynb", "06_batched_targets.ipynb"])
def test_solution_cells_pass_their_checks(notebook, capsys):
    sources = _solution_sources(notebook)
    assert sources, f"{notebook} has no cell tagged 'solution'"
    for source in sources:
        exec(compile(source, f"{notebook}:solution", "exec"), {"np": np, "torch": torch, "checks": checks})
    out = capsys.readouterr().out
    assert "✓" in out and "Not answered yet" not in out


def test_predictions(capsys):
    assert checks.check_prediction(None, 10, "x") is None
    assert "not answered yet" in capsys.readouterr().out.lower()
    assert checks.check_prediction(100, 100.5, "x") is True
    assert checks.check_prediction(33, 33, "frames", rel=0) is True
    assert "measured 33" in capsys.readouterr().out  # once answered, the value may be shown
    with pytest.raises(AssertionError, match="number"):
        checks.check_prediction("100", 100, "x")


MEASURED = 7_225_344  # notebook 03's float64 batch: its digits must never appear in a failure message


@pytest.mark.parametrize("prediction, rel, expected", [
    (MEASURED * 50, 0.02, "too high, off by more than 10x"),
    (MEASURED / 40, 0.02, "too low, off by more than 10x"),
    (MEASURED * 2.1, 0.02, "too high, off by about 2x"),
    (MEASURED / 1.6, 0.02, "too low, off by about 2x"),
    (MEASURED * 6.8, 0.02, "too high, off by about 7x"),
    (MEASURED * 1.3, 0.02, "too high, off by between 10% and 50%"),
    (MEASURED * 0.95, 0.02, "too low, within 10% but not within 2%"),
    (MEASURED * 0.995, 0.001, "too low, within 10% but not within 0.1%"),
    (MEASURED + 1, 0, "too high, within 10% but not exact"),
    (-MEASURED, 0.02, "not even the same sign"),
    (0, 0.02, "zero, where the measurement is not"),
])
def test_prediction_hints_never_reveal_the_value(prediction, rel, expected):
    prediction = round(prediction)
    with pytest.raises(AssertionError) as raised:
        checks.check_prediction(prediction, MEASURED, "the bytes", rel=rel)
    message = str(raised.value)
    assert expected in message and "redo the arithmetic" in message
    for digits in (f"{MEASURED:,}", str(MEASURED), f"{MEASURED:.3g}", f"{MEASURED / 1e6:.1f}"):
        assert digits not in message.replace(f"{prediction:,}", "<prediction>"), message


def test_prediction_forgot_names_the_likely_mistake():
    forgot = {8.0: "stored as float64", 0.5: "counted s and s' once"}
    for prediction, why, band in ((MEASURED * 8, "stored as float64", "too high, off by about 8x"),
                                  (MEASURED * 8 * 1.04, "stored as float64", "too high, off by about 8x"),
                                  (MEASURED // 2, "counted s and s' once", "too low, off by about 2x")):
        with pytest.raises(AssertionError) as raised:
            checks.check_prediction(round(prediction), MEASURED, "the bytes", forgot=forgot)
        message = str(raised.value)
        assert f"{band}: {why}" in message and "redo the arithmetic" not in message
        assert f"{MEASURED:,}" not in message and str(MEASURED) not in message
    with pytest.raises(AssertionError) as raised:  # more than 5% away from every factor: the generic hint
        checks.check_prediction(MEASURED * 3, MEASURED, "the bytes", forgot=forgot)
    assert "redo the arithmetic" in str(raised.value) and "float64" not in str(raised.value)


def test_prediction_forgot_factor_near_one_matches_only_close_by():
    measured = 100_000 * (84 * 84 + 16)
    forgot = {7_056 / 7_072: "left out the 16 bytes of bookkeeping"}
    with pytest.raises(AssertionError, match="too low, within 10% but not exact: left out the 16 bytes"):
        checks.check_prediction(100_000 * 7_056, measured, "the bytes", rel=0, forgot=forgot)
    with pytest.raises(AssertionError) as raised:  # as near to the answer, on the other side: not that mistake
        checks.check_prediction(100_000 * 7_088, measured, "the bytes", rel=0, forgot=forgot)
    assert "too high" in str(raised.value) and "16 bytes" not in str(raised.value)
    assert f"{measured:,}" not in str(raised.value)


# Each named prediction with a measurement and inputs like its notebook's (data/executions.json keeps the answers).
PREDICTION_EXAMPLES = {
    "01.predict_calls": (61, {"batch": 32, "ending": 3}), "01b.page_rss": (81.92, {}),
    "01.kept_alive": (33_600, {"frame": 100_800, "state": 8_400}),
    "02.ball_at_42": (46, {"gray": 110, "pixels": 8}),
    "03.batch_over_255": (7_225_344, {}), "03.transitions_in_ram": (390_633, {}),
    "04.frames_stored": (55, {}), "05.deque_bytes": (1.98, {}),
    "06.step_calls": (65, {}), "06.reward_half_life": (69, {}), "06b.top_factor": (113.7, {}),
    "06b.blog_factor": (5.35, {}),
    "07.random_share": (0.109, {}),
    "07b.state_file": (28.0, {"fixed_mb": 26.979, "steps": 2_000, "capacity": 10_000}),  # a quick-mode run
    "08.walk_nodes": (18, {}),
    "08.per_step_ratio": (1.09, {}),
    "09.noisy_ratio": (3.21, {"clean": 16.3}), "09b.checkpoint_mb": (380.6, {}),
    "00.top_rung_gb": (806.4, {}), "07c.rss_rise": (0.778, {}), "10.ray_updates": (0.9, {"steps_vs_train": 5.78}),
}


def test_every_named_prediction_has_an_example():
    assert set(PREDICTION_EXAMPLES) == set(checks.PREDICTIONS)


@pytest.mark.parametrize("key", sorted(checks.PREDICTIONS))
def test_named_prediction_hints_name_the_mistake_not_the_value(key, capsys):
    measured, given = PREDICTION_EXAMPLES[key]
    what, rel, mistakes, otherwise = checks.PREDICTIONS[key]
    assert checks.check_prediction_of(key, None, measured, **given) is None
    assert checks.check_prediction_of(key, measured * (1 + rel / 2), measured, **given) is True
    assert what in capsys.readouterr().out
    for wrong, why in mistakes(measured, **given).items():
        assert abs(wrong - measured) > rel * measured, f"{key}: the mistake {wrong} would pass"
        with pytest.raises(AssertionError) as raised:
            checks.check_prediction_of(key, wrong, measured, **given)
        message = str(raised.value)
        assert why in message and what in message, (wrong, message)
        assert f"{measured:,}" not in message and f" {measured} " not in message, message
    odd = measured * 3.3  # near no mistake: the question's own way to work the number out
    assert all(abs(odd / wrong - 1) > 0.05 for wrong in mistakes(measured, **given) if wrong)
    with pytest.raises(AssertionError, match="off by about 3x") as raised:
        checks.check_prediction_of(key, odd, measured, **given)
    assert str(raised.value).endswith(f": {otherwise}.")


def test_an_unknown_prediction_is_refused():
    with pytest.raises(ValueError, match="no prediction called '03.nope'"):
        checks.check_prediction_of("03.nope", 1, 2)


@pytest.mark.parametrize("key", sorted(checks.QUESTIONS))
def test_questions(key, capsys):
    """Every notebook's short questions: the right letter (any case) passes, each wrong one gets its hint."""
    right, _, hints = checks.QUESTIONS[key]
    assert checks.check_question(key, right.upper()) is True
    assert capsys.readouterr().out.startswith("✓")
    assert checks.check_question(key, None) is None
    for wrong in set("abc") - {right}:
        with pytest.raises(AssertionError, match=f"not '{wrong}'") as raised:
            checks.check_question(key, wrong)
        assert hints.get(wrong, "look again at the measurements above") in str(raised.value)
    with pytest.raises(AssertionError, match="one letter"):
        checks.check_question(key, "episode_end")


# -- dqn_course.lab.ladder_plots (notebooks 05 and 06b) ----------------------------------------------------------

def test_06b_quotes_the_blog_agent_from_notebook_01s_record(tmp_path, monkeypatch, capsys):
    """06b reads notebook 01's recorded figure in its answer cell and prints it, with where it was measured, in
    section 2; without the record, FigureMissing."""
    from dqn_course.lab import figures

    cells = json.loads((NOTEBOOKS / "06b_the_whole_ladder.ipynb").read_text(encoding="utf-8"))["cells"]
    sources = ["".join(c["source"]) for c in cells]
    (quote,) = [line for s in sources for line in s.splitlines() if 'figures.quote("01_naive_agent"' in line]
    (shown,) = [s for s in sources if 'figures.context("01_naive_agent")' in s]
    source = quote + "\n" + shown
    assert "run notebook 01 first" not in source
    monkeypatch.setenv("DQN_COURSE_MEASURED_DIR", str(tmp_path))
    monkeypatch.setenv("DQN_COURSE_QUICK", "1")  # quick mode: quote notes nothing, nothing is written
    with pytest.raises(figures.FigureMissing, match="01_naive_agent"):
        exec(source, {"figures": figures})
    (tmp_path / "01_naive_agent.json").write_text(json.dumps({
        "figures": {"blog_no_learning_bytes_per_step": 38_635}, "written": "2026-01-02T03:04:05+00:00",
        "machine": {"cpu": "Test CPU", "cores": 2, "ram_gib": 8.0}}), encoding="utf-8")
    namespace = {"figures": figures}
    exec(source, namespace)
    assert namespace["blog"] == 38_635
    out = capsys.readouterr().out
    assert "38,635 bytes per step" in out
    assert "measured by notebook 01_naive_agent on a 2-core Test CPU, 9 GB RAM, 2026-01-02 03:04 UTC" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["01_naive_agent.json"]
    import dqn_course.lab.ladder_plots as ladder_plots
    assert not hasattr(ladder_plots, "blog_agent_bytes_per_step")  # no second reading of 01's outputs


def test_course_ladder_goes_down_one_rung_at_a_time():
    from dqn_course.lab import ladder
    from dqn_course.lab.ladder_plots import COURSE_RUNGS, course_order, plot_course_ladder, plot_memory_layouts

    sizes = [ladder.STAGES_BY_NAME[name].arithmetic_bytes for name, _ in COURSE_RUNGS]
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == len(sizes)
    assert sizes[0] == 806_400 and sizes[-1] == 84 * 84
    rows = [{"stage": s.name, "label": s.label, "bytes_per_transition": s.arithmetic_bytes * 1.01,
             "arithmetic_bytes": s.arithmetic_bytes, "gb_per_million": s.arithmetic_bytes / 1e3}
            for s in reversed(ladder.STAGES)]
    ordered = course_order(rows)
    assert [r["stage"] for r in ordered] == [name for name, _ in COURSE_RUNGS]
    assert ordered[0]["notebook"] == "00"
    assert plot_course_ladder(rows, 40_847).axes and plot_course_ladder(rows).axes
    assert len(plot_memory_layouts().axes) == 2
