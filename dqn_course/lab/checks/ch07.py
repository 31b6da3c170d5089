"""Notebooks 07 (does it learn?) and 07b (training on Colab): their checks, predictions and questions.
"""
from __future__ import annotations

from dqn_course.contracts import check_module
from dqn_course.lab.checks.core import (PREDICTIONS, QUESTIONS, Prediction, _call_learner, _cut_short, _flip_a_byte,
                                        _not_answered_yet, _passed, _require_learners_code, _require_number)


_SCHEDULE = "section 1, *Why ε follows a schedule*"


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
    decay_steps, decay_steps + 1 and 10 x decay_steps. A Python, NumPy or torch scalar passes. Then its behaviour
    in a loop: called again in the order a resumed run asks (a late step first, then earlier ones, one of them
    twice), with the step as a NumPy integer, it must give each step's ε again: ε depends on the step alone. The
    course's schedules (``train.linear_epsilon``, ``train.epsilon_at``) and any def that calls them are refused
    (``_require_learners_code``). Raises ``AssertionError`` with a hint naming the likely mistake (no floor, decay
    to 0, rising, multiplicative decay, integer division, a decay one step short or long, the wrong decay length, a
    schedule that keeps state between calls).
    """
    if epsilon_schedule is None:
        return _not_answered_yet("write epsilon_schedule(step, start, end, decay_steps)")
    _require_learners_code(epsilon_schedule, "epsilon_schedule(step, start, end, decay_steps)",
                           f"a def of the schedule, a straight line down then a floor ({_SCHEDULE})")
    import math

    import numpy as np

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
    for start, end, n in EPSILON_CASES:  # a resumed run: a late step first, then earlier ones, as NumPy integers
        for step in (10 * n, n // 2, n // 2, 1, n):
            call = f"epsilon_schedule({step:_}, {start}, {end}, {n:_}) with the step a NumPy integer"
            value = _call_learner(epsilon_schedule, (np.int64(step), start, end, n), call)
            if getattr(value, "ndim", None) == 0 or getattr(value, "shape", None) == (1,):
                value = value.item()  # a NumPy or torch scalar
            _require_number(value, f"{call} should return ε, a number")
            right = linear_epsilon(step, start, end, n)
            assert math.isclose(float(value), right, rel_tol=1e-6, abs_tol=1e-9), (
                f"{call}, called again after the steps in order, returned {float(value):.6g} instead of {right:.6g}: "
                f"ε must depend on the step alone, not on the calls before it (a resumed run asks for a late step "
                f"first; {_SCHEDULE})")
    return _passed("epsilon_schedule matches train.linear_epsilon: a straight line from start to end over "
                   "decay_steps, then end")


_LOSS = "section 5, *TD loss*"
_MAXQ = "section 5, *Mean max-Q*"
_EPS_FLOOR = "section 5, *ε, replay fill and RSS*"
WARNING_COLUMNS = ("loss", "q_max", "epsilon")  # what run_warnings may flag: the log.csv columns that show trouble


def _synthetic_log(games: int = 200, *, gamma: float = 0.99, q_top: float = 5.0, loss_jump: bool = False,
                   eps_stuck: bool = False) -> dict:
    """A ``log.csv`` as ``playback.read_log`` returns it (column -> float array), made up for ``check_run_warnings``:
    ``games`` rows, the first tenth before learning starts (loss and max-Q NaN, no updates yet); the loss rising
    tenfold as the agent improves (healthy); max-Q rising to ``q_top``; ε falling in a straight line from 1 to 0.01
    over the first half of the games, rounded to 4 decimals as log.csv writes it. ``loss_jump``: one late game's
    loss a thousand times its level; ``eps_stuck``: ε rises again after the decay, as after a resume with a larger
    total_steps (notebook 07's Question 1), and ends at about 0.26."""
    import numpy as np

    i = np.arange(games, dtype=float)
    learning = i >= games // 10
    progress = np.clip((i - games // 10) / (games - games // 10 - 1), 0, 1)
    loss = np.where(learning, 0.01 * 10 ** progress * (1 + 0.2 * np.sin(i)), np.nan)
    if loss_jump:
        loss[int(games * 0.8)] *= 1_000
    q_max = np.where(learning, q_top * progress ** 2 + 0.01 * np.cos(i), np.nan)
    epsilon = np.round(np.maximum(0.01, 1 - 0.99 * i / (games // 2)), 4)
    if eps_stuck:
        epsilon[games * 3 // 4:] = np.round(np.linspace(0.3, 0.26, games - games * 3 // 4), 4)
    steps = np.cumsum(np.full(games, 150.0))
    return {"step": steps, "episode_return": np.round(5 * progress), "episode_length": np.full(games, 150.0),
            "loss": loss, "q_max": q_max, "grad_norm": np.where(learning, 0.5, np.nan), "epsilon": epsilon,
            "replay_size": np.minimum(steps, 10_000), "rss_mb": np.full(games, 500.0),
            "steps_per_s": np.full(games, 100.0)}


def check_run_warnings(run_warnings) -> bool | None:
    """Notebook 07: ``run_warnings(log, gamma, eps_end, r_max)``, the columns of a finished run's ``log.csv`` that
    show trouble: a set of names from ``WARNING_COLUMNS``, empty for a healthy run.

    ``log`` is a dict of float arrays, one per column, as ``playback.read_log`` returns it (NaN where a game had no
    updates). The rules are section 5's: ``"q_max"`` when any game's mean max-Q is above ``r_max`` / (1 -
    ``gamma``), the largest discounted return of rewards of at most ``r_max`` a step (1 when they are clipped);
    ``"loss"`` when any game's loss is more than 100 times the median of the run's logged losses (a jump by orders
    of magnitude, not the slow rise of a learning agent); ``"epsilon"`` when the last game's ε is more than 0.001
    above the floor ``eps_end``. Checked by behaviour on made-up logs (``_synthetic_log``): a healthy run with NaN
    rows before learning starts and a loss that rises tenfold (nothing flagged); max-Q past the bound, at γ = 0.99
    and at γ = 0.9; a max-Q of 300 at γ = 0.999 (no divergence); rewards unclipped, up to 10 a step (notebook 07's
    question on them): a max-Q of 400 (no divergence) and of 1,500 (past the bound); one game's loss a thousand
    times its level; ε rising again after its decay; all three at once. The
    log's arrays must come back unchanged. The course's code and any def that calls it are refused
    (``_require_learners_code``). Raises ``AssertionError`` naming the log and the rule it missed or misapplied.
    """
    if run_warnings is None:
        return _not_answered_yet("write run_warnings(log, gamma, eps_end, r_max)")
    _require_learners_code(run_warnings, "run_warnings(log, gamma, eps_end, r_max)",
                           "a def that reads a run's loss, max-Q and ε columns against section 5's rules (section 5, "
                           "*Reading a run's diagnostics*)")
    import numpy as np

    cases = (  # (what the log is, its arguments γ and r_max, the right answer)
        ("a healthy run: learning from a tenth of its games on, its loss rising tenfold, max-Q up to 5",
         _synthetic_log(), 0.99, 1, set()),
        ("a run whose max-Q climbs to 150 with γ = 0.99", _synthetic_log(q_top=150), 0.99, 1, {"q_max"}),
        ("a healthy run with γ = 0.999 and a max-Q that climbs to 300", _synthetic_log(q_top=300), 0.999, 1, set()),
        ("a run whose max-Q climbs to 15 with γ = 0.9", _synthetic_log(q_top=15), 0.9, 1, {"q_max"}),
        ("a healthy run whose rewards are not clipped, up to 10 a step, and whose max-Q climbs to 400 with γ = 0.99",
         _synthetic_log(q_top=400), 0.99, 10, set()),
        ("a run whose rewards are not clipped, up to 10 a step, and whose max-Q climbs to 1,500 with γ = 0.99",
         _synthetic_log(q_top=1_500), 0.99, 10, {"q_max"}),
        ("a run whose loss jumps a thousandfold in one game", _synthetic_log(loss_jump=True), 0.99, 1, {"loss"}),
        ("a run whose ε rises again after its decay and ends near 0.26", _synthetic_log(eps_stuck=True), 0.99, 1,
         {"epsilon"}),
        ("a run with all three troubles", _synthetic_log(q_top=150, loss_jump=True, eps_stuck=True), 0.99, 1,
         set(WARNING_COLUMNS)),
    )
    hints = {  # (column, flagged wrongly) -> hint
        ("loss", True): "a loss that rises steadily is what a learning agent's TD loss often does (its targets grow "
                        f"with its scores); trouble is a jump by orders of magnitude against the run's usual level, "
                        f"its median loss: two orders, 100 times it, is a jump ({_LOSS})",
        ("q_max", True): "a max-Q below the ceiling can be an honest estimate: the bound is the largest discounted "
                         f"return and depends on γ ({_MAXQ})",
        ("q_max", False): "no discounted return exceeds the ceiling of *Mean max-Q*, a bound that depends on the γ "
                          f"passed in ({_MAXQ})",
        ("loss", False): "one game's loss two orders of magnitude (100 times) above the run's usual level, its "
                         f"median loss, is a jump ({_LOSS})",
        ("epsilon", True): f"ε starts at 1 in every run; what matters is where it ends, at the floor eps_end "
                           f"({_EPS_FLOOR})",
        ("epsilon", False): "a finished run's last games should play at the floor eps_end; here the last game's ε "
                            "is above it by more than log.csv's rounding to 4 decimals (0.001 is a safe margin) "
                            f"({_EPS_FLOOR})",
    }

    def ask(log: dict, gamma: float, r_max: float, call: str):
        got = _call_learner(run_warnings, (log, gamma, 0.01, r_max), call)
        if got is None:
            return None
        assert isinstance(got, (set, frozenset, list, tuple)) and all(isinstance(c, str) for c in got), (
            f"{call} returned {got!r}: return a set of column names, e.g. {{'q_max'}}, or set() when nothing is wrong")
        unknown = set(got) - set(WARNING_COLUMNS)
        assert not unknown, (f"{call} returned {sorted(unknown)}: name the log.csv columns that show trouble, among "
                             f"{', '.join(repr(c) for c in WARNING_COLUMNS)}")
        return set(got)

    for what, log, gamma, r_max, right in cases:
        kept = {k: v.copy() for k, v in log.items()}
        call = f"run_warnings on {what} (γ = {gamma}, eps_end = 0.01, r_max = {r_max})"
        got = ask(log, gamma, r_max, call)
        assert all(np.array_equal(log[k], kept[k], equal_nan=True) for k in log), (
            f"{call} changed the log's arrays: read them, do not overwrite them (the caller plots them after)")
        if got is None:
            if all(ask(c[1], c[2], c[3], "run_warnings(log, ...)") is None for c in cases):
                return _not_answered_yet("run_warnings still returns None; return a set of column names")
            raise AssertionError(f"{call} returned None: return a set of column names, set() when nothing is wrong")
        if got == right:
            continue
        wrong = sorted(got - right) + sorted(right - got)
        column = wrong[0]
        flagged = column in got
        why = hints[column, flagged]
        if column == "q_max" and r_max != 1:  # the ceiling of rewards clipped to 1, used for rewards up to r_max
            why = ("the ceiling is the largest discounted return, and a step here can earn up to r_max, not 1: what "
                   f"does the geometric series add up to then? ({_MAXQ}, and the question on unclipped rewards "
                   "above the exercise)")
        if not flagged:  # missed: is it the NaN rows before learning starts?
            learned = ~np.isnan(log["loss"])
            trimmed = {k: v[learned] for k, v in log.items()}
            again = ask(trimmed, gamma, r_max, call)
            if again is not None and column in again:
                why = ("the games before learning starts have no updates, so their loss and max-Q are NaN; a "
                       "comparison with NaN is False and a max or median over NaN is NaN: leave those games out "
                       "(section 5, *Reading a run's diagnostics*)")
        raise AssertionError(f"{call} returned {sorted(got) or 'set()'}, not {sorted(right) or 'set()'}: "
                             f"{'flagged' if flagged else 'missed'} {column!r}: {why}.")
    return _passed("run_warnings flags max-Q past r_max / (1 - γ), a loss jump by orders of magnitude and ε left above "
                   "its floor, and leaves a healthy run, whose loss rises as it learns, alone")


_RECONNECT = "section 4, *One cell to run after every reconnect*"
_DRIVE = "section 1, *Where the run lives*"


def _whole_state(path, step: int) -> None:
    """A small training state in the course's checkpoint format, written as a run writes it (what the check's run
    folders hold; a learner's test of a whole file then meets the real format). Its size grows with the step, as a
    run's does while its replay memory fills, so a file's size cannot stand in for its digest."""
    import numpy as np

    from dqn_course.checkpoint import write_checkpoint

    write_checkpoint(path, {"weights": np.arange(step // 2, dtype=np.float32) + step}, {"step": step})


def check_resume_from(resume_from) -> bool | None:
    """Notebook 07b: ``resume_from(folder)``, the state file the next Colab session carries on from, or ``None``
    when it must start a new run.

    Checked by behaviour, on run folders built in a temporary folder the way a run and Drive leave them (small
    files in the course's checkpoint format; nothing is trained): a first session's folder that does not exist yet
    and an empty one (``None``); a folder with only ``log.csv``, ``eval.csv`` and ``checkpoint.pt``, the policy of
    an evaluation, not a training state (``None``); two kept states beside a ``.tmp`` of a save cut short, newest by
    step (the state of the largest step); the same with the older file touched last, as a copy or a Drive sync
    does (still the largest step, not the newest time); a ``.tmp`` alone (``None``); the newest state cut to half
    its bytes, cut to a size still above the older whole state's (state files grow with the step), and the newest
    state empty, as an upload cut short leaves them on Drive, and the newest state at its full length with one byte
    changed (the older whole state each time: a whole file ends with the SHA-256 of every byte before it, section 6);
    and an empty state alone (``None``). A
    ``str`` or a path passes. The course's code (``checkpoint.list_checkpoints``, ``checkpoint.read_checkpoint``,
    ``colab.latest_step`` ...) and any def that calls it are refused (``_require_learners_code``). Raises
    ``AssertionError`` naming the case and the section that explains it.
    """
    if resume_from is None:
        return _not_answered_yet("write resume_from(folder)")
    _require_learners_code(resume_from, "resume_from(folder)",
                           f"a def that finds the newest whole training state of a run folder ({_RECONNECT})")
    import os
    import tempfile
    from pathlib import Path

    def state(step: int) -> str:
        return f"state-{step:010d}.ckpt"

    def build(folder: Path, files: list[str], touched_last: str | None = None, cut: dict | None = None) -> Path:
        """``files`` in ``folder``, each written after the one before; ``cut``: name -> the share of its bytes an
        upload cut short left (0: an empty file), or ``"flip"``: all its bytes, one of them changed."""
        folder.mkdir(parents=True)
        for i, name in enumerate(files):
            path = folder / name
            if name.startswith("state-"):
                _whole_state(path, 500 * (i + 1))
                if cut and cut.get(name) == "flip":
                    _flip_a_byte(path)
                elif name.endswith(".tmp") or (cut and name in cut):
                    _cut_short(path, cut.get(name, 0.5) if cut else 0.5)
            else:
                path.write_bytes(b"x" * (10 + i))
            os.utime(path, (1_000_000 + i, 1_000_000 + i))  # each file written after the one before
        if touched_last:
            os.utime(folder / touched_last, (2_000_000, 2_000_000))
        return folder

    cut_short = ("that state file is not whole: an upload cut short leaves a file shorter than the run wrote it, "
                 "or empty, under its final name. A whole file ends with the SHA-256 of every byte before it; a "
                 "file that fails that test cannot be resumed, so carry on from the newest state that passes "
                 "(section 6, *A file cut short*)")
    with tempfile.TemporaryDirectory(prefix="dqn07b-check-") as tmp:
        root = Path(tmp)
        stopped = [state(500), state(1_000), "log.csv", "eval.csv", "checkpoint.pt"]
        cases = [  # (what the folder is, the folder, the right answer, hints by the name the learner returned)
            ("a first session's run folder, not made yet", root / "new" / "run", None, {}),
            ("an empty run folder", build(root / "empty", []), None, {}),
            ("a run folder stopped before its first save", build(root / "unsaved", ["log.csv", "eval.csv",
                                                                                    "checkpoint.pt"]), None,
             {"checkpoint.pt": f"checkpoint.pt holds the policy of the last evaluation, for playing: no optimizer, "
                               f"no replay memory, no step to carry on from ({_DRIVE})"}),
            ("two kept states and a save cut short", build(root / "cut", stopped + [state(1_500) + ".tmp"]),
             state(1_000),
             {state(1_500) + ".tmp": "a .tmp file is a save cut short, never renamed: only whole state files can be "
                                     "resumed (section 2, the third file written before the oldest goes)",
              state(500): f"that is the older of the two kept states: carry on from the newest, the largest step "
                          f"({_RECONNECT})",
              "checkpoint.pt": f"checkpoint.pt holds the policy of the last evaluation, for playing, not the whole "
                               f"training state ({_DRIVE})"}),
            ("two kept states, the older one copied to Drive last", build(root / "copied", stopped, state(500)),
             state(1_000),
             {state(500): "the file's time says when it was last written or copied, not how far the run got: a sync "
                          f"or a copy touches an old state; its step, in its name, does not change ({_RECONNECT})"}),
            ("a folder holding only a save cut short", build(root / "tmp-only", [state(500) + ".tmp"]), None,
             {state(500) + ".tmp": "a .tmp file is a save cut short, never renamed: with no whole state, the session "
                                   "starts a new run (section 2)"}),
            ("two kept states, the newest cut to half its bytes by an upload cut short",
             build(root / "half", stopped, cut={state(1_000): 0.5}), state(500), {state(1_000): cut_short}),
            ("two kept states, the newest cut short by an upload yet still larger than the older whole one",
             build(root / "long-cut", stopped, cut={state(1_000): 0.9}), state(500), {state(1_000): cut_short}),
            ("two kept states, the newest at its full length with one byte changed",
             build(root / "flipped", stopped, cut={state(1_000): "flip"}), state(500),
             {state(1_000): "that state file has its full length, but its bytes are not the ones the run wrote: its "
                            "size cannot tell it from a whole file, its SHA-256 digest can (section 6, *A file cut "
                            "short*)"}),
            ("two kept states, the newest left empty (0 bytes) by a failed upload",
             build(root / "empty-newest", stopped, cut={state(1_000): 0}), state(500), {state(1_000): cut_short}),
            ("a folder whose only state file is empty (0 bytes), its upload failed",
             build(root / "empty-only", [state(500), "log.csv"], cut={state(500): 0}), None,
             {state(500): "that state file is empty: with no whole state, the session starts a new run (section 6, "
                          "*A file cut short*)"}),
        ]
        for what, folder, right, hints in cases:
            call = f"resume_from(folder) on {what}"
            got = _call_learner(resume_from, (folder,), call,
                                {"No such file": f"the first session finds no run folder yet: that is a new run "
                                                 f"({_RECONNECT})"})
            if got is None and right is None:
                continue
            if got is None:
                if all(_call_learner(resume_from, (f,), "resume_from(folder)") is None for _, f, _r, _h in cases):
                    return _not_answered_yet("resume_from still returns None, also for a folder that holds saved "
                                             "states; return the state file to carry on from")
                raise AssertionError(f"{call} returned None, a new run, though {right} is there, whole: a lost "
                                     f"session's work would be played again from step 0 ({_RECONNECT})")
            assert isinstance(got, (str, os.PathLike)), (
                f"{call} returned {got!r}: return the path of the state file (or None for a new run)")
            path = Path(got)
            if not path.is_absolute() and not path.parent.name:
                path = folder / path  # a bare file name: in the folder
            assert right is not None, (
                f"{call} returned {path.name}, but no whole state file is there: "
                + hints.get(path.name, f"the session must start a new run, None ({_RECONNECT})"))
            assert path.name == right and path.resolve().parent == folder.resolve(), (
                f"{call} returned {path.name}, not {right}: "
                + hints.get(path.name, f"carry on from the whole state file of the largest step ({_RECONNECT})"))
    return _passed("resume_from finds the newest whole state by its step, leaves the policy file, a save cut short "
                   "and a file an upload cut short alone, and starts a new run when there is no whole state (or no "
                   "folder) yet")


PREDICTIONS.update({
    # The mean of ε over a breakout-cpu run: 0.2 of its steps on the line from 1 to 0.01 (mean 0.505), the rest at
    # 0.01. The mistakes are made of the preset's own settings, printed above the prediction.
    "07.random_share": Prediction(
        "the share of a breakout-cpu run's agent steps that act at random", 0.05, lambda m: {
            (1 + 0.01) / 2: "that is the share during the decay alone; the run goes on after it, at the floor "
                            f"eps_end, for the steps that are left ({_SCHEDULE})",
            0.2 * (1 + 0.01) / 2: "the steps after the decay still act at random now and then, at the floor's rate "
                                  f"eps_end ({_SCHEDULE})",
            0.01: f"ε sits at its floor only once the decay is over; before that it falls from eps_start ({_SCHEDULE})",
            0.2: "eps_fraction is the share of the run that the decay lasts, not the share of random actions: during "
                 f"the decay ε falls along a straight line ({_SCHEDULE})",
            0.1 * (1 + 0.01) / 2 + 0.9 * 0.01: "those are breakout's settings, a decay over 0.1 of the run; "
                                               f"breakout-cpu's decay lasts its own eps_fraction ({_SCHEDULE})"},
        "ε falls in a straight line over eps_fraction of the run, then holds eps_end: the share of random actions is "
        f"the mean of ε over all the run's steps ({_SCHEDULE})"),
    "07b.state_file": Prediction("the newest state file of this run, in MB", 0.02,
                                 lambda m, fixed_mb, steps, capacity: {
        fixed_mb: "that is the fixed part alone: the file also holds the replay memory, whose lz4-compressed frames "
                  "and bookkeeping the last session's stop line reports as `replay` (section 4)",
        m - fixed_mb: "that is the replay part alone: every state file also holds the fixed part, the two networks "
                      "and Adam's two moments (section 2, *A state file, by arithmetic*)",
        fixed_mb + steps * 7_072 / 1e6: "that is the replay kept raw, 7,072 bytes a slot; this run keeps its frames "
                                        "lz4-compressed, and the file holds them as they are in RAM (section 2)",
        fixed_mb + capacity * 7_072 / 1e6: "that is a full raw memory; the file holds the slots the run has written, "
                                           "lz4-compressed, as the last stop line's `replay` reports them (section 2)",
        2 * m: "that is two files: the question asks for one, the newest (section 2, the kept states)"},
        "a state file is section 2's fixed part plus the replay memory as the run holds it, which the last session's "
        "stop line reports as `replay` (sections 2 and 4)"),
})


QUESTIONS.update({
    "07b.lost_runtime": ("b", "the next session resumes from the newest state file and plays again what came after "
                              "it: at most one save interval. Counted in minutes, that interval holds twice as many "
                              "steps on a GPU twice as fast, played again in up to the same 30 minutes",
                         {"a": "a save interval bounds what is lost in its own unit: here minutes, not steps. How many "
                               "steps does each GPU make in one interval? (section 3)",
                          "c": "saves counted in minutes come after the same wall time on either GPU; what the speed "
                               "changes is the steps made in between (section 3)"}),
    "07b.fast_state": ("b", "only the last layer depends on the actions: (512 x 18 + 18) - (512 x 4 + 4) = 7,182 "
                            "more weights, x 4 bytes x 4 copies, about 0.1 MB beside a fixed part of 27.0 MB. A slot "
                            "keeps its action in one byte either way, so the replay part is what lz4 makes of "
                            "Seaquest's frames, which compress otherwise than Breakout's",
                       {"a": "which layers of section 2's table depend on the number of actions? The convolutions "
                             "and the first dense layer see only the frames (section 2, *A state file, by "
                             "arithmetic*)",
                        "c": "a slot keeps its action in one byte of its 16 of bookkeeping (section 2, the replay "
                             "part): how many actions does one byte tell apart?"}),
    "07.eps_start": ("c", "ε is worked out at every step from the step and eps_fraction x total_steps: with "
                          "20,000,000 steps the decay ends at step 2,000,000, and at step 1,500,000 ε = 1 - 0.99 x "
                          "0.75, about 0.26. A quarter of the actions turn random again and fill the memory with that "
                          "play; to extend a run and keep its decay where it was, lower eps_fraction with it",
                     {"a": "the schedule is worked out at every step from the run's settings, total_steps among them "
                           "(section 1, *Why ε follows a schedule*): where does the decay end with the new total?",
                      "b": "a resume carries on from the saved step, 1,500,000, not from 0 (section 2): ε is the "
                           "schedule's value at that step, under the new settings (section 1, *Why ε follows a "
                           "schedule*)"}),
    "07.q_explodes": ("a", "no discounted return exceeds the largest reward of a step times 1 / (1 - γ): 10 / "
                           "(1 - 0.99) = 1,000 here, so 400 can be an honest estimate of a game played well. "
                           "Section 5's 100 is the same series for rewards clipped to 1; a max-Q past 1,000 would be "
                           "divergence",
                      {"b": "the ceiling is the largest discounted return (section 5, *Mean max-Q*): what does its "
                            "geometric series add up to when a step can earn 10, not 1?",
                       "c": "max-Q has a bound of its own, whatever the loss does: the largest discounted return "
                            "(section 5, *Mean max-Q*)"}),
    "07.loss_rises": ("b", "a sync replaces the targets the network was fitting with its own newer values one step "
                           "ahead: its errors against them are larger at first and shrink as it fits them, until the "
                           "next sync. A loss that doubles and falls back, beside a rising score, is the targets "
                           "moving, not trouble",
                      {"a": "the jumps come right after the syncs, not after unusual updates: what does a sync do to "
                            "the targets the loss is measured against? (section 5, *TD loss*)",
                       "c": "divergence shows as a jump by orders of magnitude, or a max-Q past its bound (section 5, "
                            "*TD loss* and *Mean max-Q*): does a loss that doubles and falls back before each next "
                            "sync look like that?"}),
    "07.dead_agent": ("b", "each waiting step's target is its −1 plus γ times the next waiting state's value, and the "
                           "clock's cut-off does not end that sum (a truncated game still bootstraps, notebook 06), "
                           "so the waiting states' values sink toward the geometric series of −1s, −1/(1 − γ) = −100 "
                           "with γ = 0.99, while the score stays at its floor; in Breakout, where waiting earns 0, the "
                           "same agent's max-Q stays flat instead",
                      {"a": "in Breakout a waiting step earns 0; here each one earns −1: what do the discounted "
                            "rewards of a long wait add up to? (section 5, *Mean max-Q*: the geometric series)",
                       "c": "a bootstrapped value follows the rewards its targets carry: with −1 at every step and no "
                            "other reward, can any discounted return lie above 0? (section 5, *Mean max-Q*)"}),
})


check_module(globals())
