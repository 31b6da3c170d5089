"""Notebook 07c (does my DQN learn?): the capstone's checks and questions.
"""
from __future__ import annotations

from pathlib import Path

from dqn_course.contracts import Count, check_module
from dqn_course.lab.checks.core import (PREDICTIONS, QUESTIONS, Prediction, _call_learner, _not_answered_yet,
                                        _passed, _require_learners_code)


def check_capstone(run: str | Path | None, games: Count = 30) -> bool | None:
    """Notebook 07c's gate: the policy of the learner's run (a run folder or its ``checkpoint.pt``) plays ``games``
    whole games on seeds the run never used (ε = 0.05, unclipped score, ``dqn_course.evaluate``), beside random
    play on the same games; it passes at a mean of ``capstone.GATE_SCORE`` or more over 30 games.

    ``None`` (not run yet) while ``run`` is None, does not exist or is a folder with no policy file. The gate
    judges a run the learner's own loop trained, so before any game is played it refuses: a policy the course
    recorded (the same bytes as a ``checkpoint.pt`` under the repository's ``data/``: the course's runs there, or a
    copy of one); a policy whose folder holds no writer record (``capstone.WRITER_FILE``, written by
    ``capstone.Run``: a folder not written through ``Run``, such as ``python -m dqn_course.train``'s); and one whose
    writer is the course's code (``capstone.written_by_the_course``: ``capstone_solution.dqn_loop``, the gallery's
    loops). A loop defined in the learner's notebook (module ``__main__``) passes this. What the writer record cannot
    prove: it is a plain file, so a record edited by hand to name another loop passes; and it names where a loop was
    defined, not who typed it, so the notebook's *Solution* cell run there, or any copy of the course's loop's text
    defined in the notebook, counts as the learner's. The gate refuses the course's runs and its loops, not copies of
    their text. Raises ``AssertionError`` for such a policy, a damaged file, or a score below the gate (with the
    score, random play, their ratio and the likely causes read from the run's ``log.csv``, ``capstone.diagnose``).
    """
    if run is None:
        return _not_answered_yet("train your loop into a run folder and pass the folder")
    from dqn_course.evaluate import PolicyFileError, policy_path, policy_vs_random
    from dqn_course.lab.capstone import WRITER_FILE, gate_verdict, read_writer, written_by_the_course

    path = Path(run)
    if not path.exists():
        return _not_answered_yet(f"no run of yours yet: {run} does not exist (section 6 trains your loop into it)")
    try:
        file = policy_path(path)
    except PolicyFileError as e:
        return _not_answered_yet(f"{run} holds no policy yet ({e}); run your loop until its first evaluation")
    recorded = _recorded_by_the_course(file)
    assert recorded is None, (
        f"{file} is the policy of {recorded}, a run the course recorded (or a copy of it), not one your loop "
        "trained: the gate judges your own run (section 6)")
    try:
        writer = read_writer(file.parent)
    except ValueError as e:
        raise AssertionError(f"{e}: the gate cannot tell which loop wrote {file.parent}") from None
    assert writer is not None, (
        f"{file.parent} holds no {WRITER_FILE}, the record of the loop that wrote it, which capstone.Run writes when "
        "a loop first writes a new folder: this run was not written through capstone.Run (python -m "
        "dqn_course.train's folders are not) or was begun before Run kept that record. The gate judges a run your "
        "loop trained: train your loop of section 4 into a new folder (section 6)")
    assert not written_by_the_course(writer), (
        f"{file.parent} was written by {writer.get('module')}.{writer.get('qualname')} ({writer.get('file')}), the "
        "course's own code, not your loop: the gate judges a run your loop of section 4 trained (section 6)")
    try:
        result = policy_vs_random(file, games=games)
    except PolicyFileError as e:
        raise AssertionError(str(e)) from None
    passed, message = gate_verdict(file.parent, result)
    assert passed, message
    return _passed(message)


def _recorded_by_the_course(file: Path) -> str | None:
    """``data/<run>`` when ``file`` has the same bytes as that recorded run's ``checkpoint.pt`` (the course's own
    policy, wherever the learner put it), else None."""
    import filecmp

    from dqn_course.lab.playback import DATA_DIR

    size = file.stat().st_size
    for recorded in sorted(DATA_DIR.glob("**/checkpoint.pt")):
        if recorded.stat().st_size == size and filecmp.cmp(recorded, file, shallow=False):
            return f"data/{recorded.parent.relative_to(DATA_DIR).as_posix()}"
    return None


def check_capstone_loop(my_dqn) -> bool | None:
    """Notebook 07c: the learner's loop ``my_dqn(cfg, folder, td_targets, td_loss, epsilon_schedule, minutes=None)``
    on the quick settings (``capstone.settings(quick=True)``: a few hundred steps) in a temporary folder, with the
    library's rule. The first call is interrupted (``KeyboardInterrupt``, as the stop button sends) at step
    ``CAPSTONE_STOP``; the second, on the same folder, must carry on from what the first saved to the last step.
    Together they must log finished games with the updates' diagnostics and a falling ε, in growing steps, evaluate
    every ``eval_every`` steps and return the last step. Their saved states must show what learning needs
    (``_check_saved_state``): one optimizer step per update, none before ``learning_starts`` and then one every
    ``train_every`` steps, a target network synced every ``target_sync_every`` steps (not at every step, not never)
    and a done for each lost life. Its TD targets must come from the target network it syncs, not from the online
    one (``td_targets`` is watched), with the settings' discount ``cfg.gamma``; the saved optimizer's learning rate
    must be ``cfg.lr``. Before those two calls, a short one on a fresh folder watches its game
    (``_check_acting_and_storing``): where the schedule gives ε = 1 its actions must be random, where it gives ε = 0
    the online network's best; the game there pays rewards of 4 and 7 and cuts games by the clock and ends them, and
    the memory must hold each step's reward clipped to its sign, a done for a game's end and a lost life, and none
    for a cut. Not checked: that a resume replays no game and restores the ε draws' random state. The loop must be
    the learner's: it may build with the pieces section 2's table hands it (``capstone_pieces``), but the course's
    own loops (``capstone_solution.dqn_loop``, ``train.train``), any def that calls them and any piece passed in its
    place are refused (``_require_learners_code``). Raises ``AssertionError`` naming the first thing missing and the
    section of the page that explains it.
    """
    if my_dqn is None:
        return _not_answered_yet("write my_dqn(cfg, folder, td_targets, td_loss, epsilon_schedule, minutes=None)")
    _require_learners_code(my_dqn, "my_dqn(cfg, folder, td_targets, td_loss, epsilon_schedule, minutes=None)",
                           "a def of the loop that joins the pieces of section 2: act, store, learn, sync, evaluate "
                           "and save (section 4)", allowed=capstone_pieces())
    import csv
    import tempfile
    from pathlib import Path

    from dqn_course.agent import td_loss, td_targets
    from dqn_course.checkpoint import latest_checkpoint, list_checkpoints
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
        acted = _check_acting_and_storing(my_dqn, Path(tmp) / "watched", call)  # first: needs no finished game
        if acted is None:
            return _not_answered_yet("my_dqn still returns None; run the loop, then return the last step")
        folder = Path(tmp) / "run"
        try:
            first = _call_learner(my_dqn, (cfg, folder, td_targets, td_loss, interrupted), call)
        except KeyboardInterrupt:
            first = "interrupted"
        if first is None:
            return _not_answered_yet("my_dqn still returns None; run the loop, then return the last step")
        assert list_checkpoints(folder), (
            f"interrupted at step {CAPSTONE_STOP}, the loop left no saved state in its folder: save in a way that "
            "runs however the loop ends, so a stop, an error or the end all keep what was learned (section 4, step 6)")
        before = rows(folder / "log.csv")
        saved = max(int(p.stem.split("-")[1]) for p in list_checkpoints(folder))
        at_stop, stop_meta, _ = latest_checkpoint(folder)  # the state the interruption saved: the networks then
        _check_update_count(cfg, at_stop, stop_meta, saved)
        updates, from_online, gammas = [], [], []

        def counted_loss(q_values, actions, targets):
            updates.append(1)
            return td_loss(q_values, actions, targets)

        def watched_targets(rewards, dones, next_states, online, target, gamma, double=False):
            from_online.append(target is online or _same_weights(online, target))
            gammas.append(gamma)
            return td_targets(rewards, dones, next_states, online, target, gamma, double)

        last = _call_learner(my_dqn, (cfg, folder, watched_targets, counted_loss, linear_epsilon), call + " again")
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
        _check_saved_state(cfg, at_stop, saved, *latest_checkpoint(folder)[:2], games=len(log))
        assert from_online and not all(from_online), (  # after the saved states: the syncs and steps are right
            f"after the resume, all {len(from_online)} TD target(s) came from a network with the online network's "
            "weights: the targets come from the target network, the copy synced only every cfg.target_sync_every "
            "steps, not from the network being trained (notebook 06, \"Why a target network\"; section 4, step 4)")
        import math

        wrong_gamma = [g for g in gammas if not math.isclose(float(g), cfg.gamma)]
        assert not wrong_gamma, (
            f"after the resume, TD targets were computed with the discount γ = {float(wrong_gamma[0])}, not the "
            f"settings' cfg.gamma ({cfg.gamma}): the targets discount the next state's value by the run's γ "
            "(section 4, step 4)")
        rates = [g.get("lr") for g in latest_checkpoint(folder)[1].get("param_groups", [])]
        assert rates and all(isinstance(r, (int, float)) and math.isclose(r, cfg.lr) for r in rates), (
            f"the saved optimizer's learning rate is {rates or 'missing'}, not the settings' cfg.lr ({cfg.lr}): "
            "build Adam with the settings' learning rate (section 4, step 1)")
        evals = [int(r["step"]) for r in rows(folder / "eval.csv")]
        expected = list(range(cfg.eval_every, cfg.total_steps + 1, cfg.eval_every))
        assert evals == expected, (
            f"evaluations at steps {evals}, expected {expected}: evaluate once at each multiple of cfg.eval_every, "
            "also across a resume (section 4, step 6)")
    return _passed(f"your loop survived an interruption at step {CAPSTONE_STOP}, carried on from its save to step "
                   f"{last}, logged {len(log)} game(s) with the updates' diagnostics and a falling ε, took its TD "
                   f"targets from the target network, evaluated at steps {expected}, and acted ε-greedily ({acted})")


CAPSTONE_STOP = 450  # the step at which check_capstone_loop interrupts the learner's first call
GREEDY_FROM = 120  # in _check_acting_and_storing's run, the schedule gives ε = 1 up to this step and ε = 0 after it
PLANTED_REWARDS = {10: 4.0, 20: 7.0}  # its game pays these at these steps of each game (Breakout's upper bricks)
CUT_AT = 40  # and stops each game at this step: cut by the clock (truncated) in odd games, ended in even ones


def _same_weights(a, b) -> bool:
    """Whether two networks hold the same weights, tensor for tensor."""
    import torch

    with torch.no_grad():
        return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def _check_acting_and_storing(my_dqn, folder: Path, call: str) -> str | None:
    """Run the learner's loop on a fresh ``folder`` for 240 steps of the quick settings with a schedule that gives
    ε = 1 up to step ``GREEDY_FROM`` and ε = 0 after, and a loss with no gradient (so the online network keeps its
    first weights), while the game it builds with ``make_breakout`` is watched: each action is paired with the last ε
    the schedule gave and the state the game showed. Where ε = 1, fewer than 3 in 4 actions may equal the online
    network's best (a uniformly random one of 4 does so about 1 time in 4); where ε = 0, at least 95% must.

    The watched game also plants what Breakout's first minutes rarely show: it pays ``PLANTED_REWARDS`` and stops
    every game at step ``CUT_AT``, alternately cut by the clock and ended, so the saved memory can be held against
    what was played (``_check_stored``). Returns what it saw, or None when the loop returned None (not written yet);
    raises ``AssertionError`` when it cannot watch the game, the actions are not ε-greedy or the memory does not hold
    what the target needs."""
    import gymnasium
    import numpy as np
    import torch

    import dqn_course.envs as envs
    from dqn_course.agent import td_targets
    from dqn_course.checkpoint import latest_checkpoint, list_checkpoints
    from dqn_course.lab.capstone import settings
    from dqn_course.networks import NatureCNN

    import dqn_course.evaluate  # noqa: F401  imported before the patch below, so its games are never the watched one

    seen, last_eps = [], []  # (ε, state, action) of each step; the last ε the schedule gave
    played = []  # (reward, terminated, truncated, life lost) of each step, as the loop was handed them

    class Watched(gymnasium.Wrapper):
        games = 0

        def reset(self, **kwargs):
            self.shown, info = self.env.reset(**kwargs)
            self.games, self.length = self.games + 1, 0
            return self.shown, info

        def step(self, action):
            seen.append((last_eps[-1] if last_eps else None, np.array(self.shown), int(action)))
            self.shown, reward, terminated, truncated, info = self.env.step(action)
            self.length += 1
            reward = PLANTED_REWARDS.get(self.length, reward)
            if self.length == CUT_AT and not (terminated or truncated):
                truncated, terminated = self.games % 2 == 1, self.games % 2 == 0
            played.append((float(reward), bool(terminated), bool(truncated), bool(info.get("life_lost"))))
            return self.shown, reward, terminated, truncated, info

    real = envs.make_breakout

    def watched_make_breakout(*args, **kwargs):
        return Watched(real(*args, **kwargs))

    def explore_then_greedy(step, start, end, decay_steps):
        last_eps.append(1.0 if step <= GREEDY_FROM else 0.0)
        return last_eps[-1]

    def no_gradient(q_values, actions, targets):  # Adam moves no weight with zero gradients from the start
        return (q_values * 0).sum()

    names = [k for k, v in my_dqn.__globals__.items() if v is real]
    cfg = settings(quick=True, total_steps=240)
    try:
        envs.make_breakout = watched_make_breakout
        for k in names:
            my_dqn.__globals__[k] = watched_make_breakout
        returned = _call_learner(my_dqn, (cfg, folder, td_targets, no_gradient, explore_then_greedy),
                                 call + " on a new folder")
    finally:
        envs.make_breakout = real
        for k in names:
            my_dqn.__globals__[k] = real
    if returned is None:
        return None
    explored = [s for s in seen if s[0] == 1.0]
    greedy = [s for s in seen if s[0] == 0.0]
    assert explored and greedy, (
        f"the check watched {len(seen)} step(s) of your game, {len(explored)} at ε = 1 and {len(greedy)} at ε = 0: "
        "build the game with make_breakout, and ask your schedule for ε at every step before acting (section 2, "
        "the pieces; section 4, steps 1 and 2)")
    if not list_checkpoints(folder):
        return "not watched: no saved state"  # the calls that follow name what is missing (a save in finally)
    arrays, _, _ = latest_checkpoint(folder)
    q = NatureCNN(4)
    q.load_state_dict({k.split("/", 2)[2]: torch.as_tensor(np.array(v)) for k, v in arrays.items()
                       if k.startswith("agent/q/")})

    def share_greedy(steps: list) -> float:
        with torch.no_grad():
            best = q(torch.as_tensor(np.stack([s[1] for s in steps]))).argmax(1).numpy()
        return float(np.mean(best == np.array([s[2] for s in steps])))

    _check_stored(arrays, played)
    at_one, at_zero = share_greedy(explored), share_greedy(greedy)
    assert at_one < 0.75, (
        f"at ε = 1 your loop took the online network's best action at {at_one:.0%} of {len(explored)} steps, where a "
        "uniformly random action does so about 1 time in 4: act with the ε your schedule gives for the step, with "
        "probability ε a uniformly random action (notebook 07, section 1, ε-greedy; section 4, step 2)")
    assert at_zero >= 0.95, (
        f"at ε = 0 your loop took the online network's best action at only {at_zero:.0%} of {len(greedy)} steps: "
        "act with the ε your schedule gives for the step, and otherwise take the action the online network values "
        "most in the state the game shows (notebook 07, section 1, ε-greedy; section 4, step 2)")
    return f"at ε = 1 the network's best action {at_one:.0%} of the time, at ε = 0 {at_zero:.0%}"


def _check_stored(arrays: dict, played: list) -> None:
    """The saved memory (``arrays``, a training state) against the watched game's steps (``played``: reward,
    terminated, truncated, life lost, in the order played): one transition per step, each reward stored as its
    sign, done where the game ended or a life was lost, and not done where the clock cut a game (its target still
    bootstraps). Raises ``AssertionError`` at the first step stored otherwise, naming what the target needs."""
    import numpy as np

    ring = {k.split("/", 1)[1]: np.asarray(v) for k, v in arrays.items() if k.startswith("replay/")}
    valid = ring["valid"].astype(bool)
    order = np.argsort(ring["ids"][valid], kind="stable")  # the memory's transitions in the order they were added
    rewards, dones = ring["rewards"][valid][order], ring["dones"][valid][order].astype(bool)
    assert len(rewards) == len(played), (
        f"the check's game played {len(played)} steps and your memory holds {len(rewards)} transitions: store each "
        "step's transition once (section 4, step 3)")
    for i, ((reward, terminated, truncated, life_lost), kept, done) in enumerate(zip(played, rewards, dones)):
        assert kept == np.sign(reward), (
            f"at step {i + 1} of the check's game the reward was {reward:g} (as Breakout's upper bricks pay 4 and 7) "
            f"and your memory holds {float(kept):g}: store the clipped reward, its sign (notebook 06, Exercise 1; "
            "section 4, step 3)")
        if done == (terminated or life_lost):
            continue
        assert not (life_lost and not terminated), (
            f"at step {i + 1} of the check's game a life was lost and your memory does not mark it done: a lost life "
            "ends the episode for the target too, not only the end of a game (section 4, step 3)")
        assert not terminated, (
            f"at step {i + 1} of the check's game the game ended (terminated) and your memory does not mark it done: "
            "after a game's end there is nothing to bootstrap from (notebook 06, \"Why (1 − done)\"; section 4, "
            "step 3)")
        assert not truncated, (
            f"at step {i + 1} of the check's game the clock cut the game (truncated; no life lost, no end) and your "
            "memory marks it done: a cut game did not end, so its target still bootstraps from the next state "
            "(notebook 06, \"Why (1 − done)\"; section 4, step 3)")
        raise AssertionError(
            f"at step {i + 1} of the check's game nothing ended (no lost life, no end, no cut) and your memory marks "
            "it done: done is the game's end or a lost life (notebook 06, \"Why (1 − done)\"; section 4, step 3)")


def _optimizer_steps(state: dict) -> set[float]:
    """The step counts a saved training state's optimizer holds (Adam keeps one per parameter; none before its
    first step)."""
    import numpy as np

    return {float(np.asarray(v)) for k, v in state.items() if k.startswith("agent/optimizer/") and k.endswith("/step")}


def _check_update_count(cfg, at_stop: dict, meta: dict, stop_step: int) -> None:
    """The updates the loop made by ``stop_step``, read from the state it saved there (the optimizer's steps, or
    the updates it told the run of, whichever is more: the checks after this one name a loop that does one without
    the other): once every ``cfg.train_every`` steps from ``cfg.learning_starts`` on and never before, one more or
    fewer allowed (a count from the step after). Raises ``AssertionError`` with section 4's step 4."""
    made = int(max(max(_optimizer_steps(at_stop), default=0.0), float(meta["counters"]["updates"])))
    due = sum(1 for t in range(cfg.learning_starts, stop_step + 1) if t % cfg.train_every == 0)
    assert abs(made - due) <= 1, (
        f"by step {stop_step} your loop made {made} update(s), where learning from cfg.learning_starts "
        f"({cfg.learning_starts}) on, once every cfg.train_every ({cfg.train_every}) steps, makes {due}: no update "
        "before learning starts (the memory first holds enough varied play), then one every train_every steps "
        "(section 4, step 4)")


def _check_saved_state(cfg, at_stop: dict, stop_step: int, arrays: dict, meta: dict, games: int) -> None:
    """What the loop did, read from its saved training states (the one the interruption left at ``stop_step``, and
    the last one): the optimizer stepped once per update, the target network was synced every
    ``cfg.target_sync_every`` steps (no more often, no less) and the memory holds a done for each lost life. Raises
    ``AssertionError`` naming the step of section 4 that explains what is wrong."""
    import numpy as np

    def net(state: dict, name: str) -> dict:
        return {k.split("/", 2)[2]: np.asarray(v) for k, v in state.items() if k.startswith(f"agent/{name}/")}

    def same(a: dict, b: dict) -> bool:
        return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)

    updates = int(meta["counters"]["updates"])
    steps = _optimizer_steps(arrays)
    assert steps == {float(updates)}, (
        f"the optimizer's state counts {sorted(steps) or 'no'} step(s) where the loop told the run of {updates} "
        "updates: each update ends with one step of the optimizer, after the loss's gradient (section 4, step 4)")
    last_sync = stop_step - stop_step % cfg.target_sync_every
    if cfg.learning_starts + cfg.train_every <= last_sync < stop_step - cfg.train_every:
        assert not same(net(at_stop, "q"), net(at_stop, "target")), (
            f"at step {stop_step} the target network equals the online one, though its last sync was due at step "
            f"{last_sync} and updates followed: sync it only every cfg.target_sync_every steps (section 4, step 5)")
    if cfg.learning_starts < stop_step + cfg.target_sync_every <= cfg.total_steps:
        assert not same(net(at_stop, "target"), net(arrays, "target")), (
            f"the target network did not change from step {stop_step} to step {cfg.total_steps}, though syncs were "
            "due and the online network learned: copy the online network into it every cfg.target_sync_every steps "
            "(section 4, step 5)")
    stored = int(meta.get("counters", {}).get("step", cfg.total_steps))
    dones = int(np.asarray(arrays["replay/dones"]).sum())
    assert dones > games, (
        f"the memory marks {dones} transition(s) done in {stored} steps where {games} game(s) finished: a lost life "
        "ends the episode for the target too, not only the end of a game (section 4, step 3)")


def capstone_pieces() -> tuple:
    """The course's objects notebook 07c's loop is handed to build with (its section 2's table): the game, the
    network, the memory, the batch's tensors, the run folder and the device. ``check_capstone_loop`` lets the
    learner's loop read these; anything else of the course's (its own loop above all) is refused."""
    from dqn_course.device import pick_device
    from dqn_course.envs import make_breakout
    from dqn_course.lab.capstone import Run, to_tensors
    from dqn_course.networks import NatureCNN
    from dqn_course.replay import FrameSharingMemory

    return make_breakout, NatureCNN, FrameSharingMemory, to_tensors, Run, pick_device


_SLOT = "one slot of the course's memory keeps one 84 x 84 frame of uint8 (notebooks 02 to 05)"
_FILLS = "RAM comes page by page as frames are first written there, section 9, *the dotted RSS line*"

PREDICTIONS.update({
    # Run C's RSS rise, from its first logged game to its highest: the ring's 100,000 slots x 7,056 bytes of frames
    # (0.706 GB), given page by page as they are first written, plus what learning allocates (Adam's moments, the
    # batches): within 12%. The mistakes are made of section 1's settings and the frame printed in section 2.
    "07c.rss_rise": Prediction(
        "run C's RSS rise, from its first game to its highest, in GB", 0.12, lambda m: {
            100_000 * 4 * 7_056 / 1e9: f"a slot does not keep the stack of 4, nor float32 pixels: {_SLOT}; the "
                                       "stack is read from the slots before it",
            100_000 * 2 * 7_056 / 1e9: "a transition's next state is the next slot's frame, not a second copy: "
                                       f"{_SLOT}",
            150_000 * 7_056 / 1e9: "the ring holds buffer_size slots; once it is full a new frame overwrites the "
                                   f"oldest, in a page already given: {_FILLS}",
            50_000 * 7_056 / 1e9: f"run C was recorded past the step at which its ring is full, so every slot has "
                                  f"been written: {_FILLS}",
            100_000 * 7_056 / 2**30: "that is in GiB (2^30 bytes); the answer is in GB (10^9 bytes)",
            100_000 * 7_056 / 1e6: "that is in MB; the answer is in GB (10^9 bytes)",
            100_000 * 7_056 * 8 / 1e9: f"pixels are uint8, one byte each, not float64: {_SLOT}",
            100_000 * 210 * 160 * 3 / 1e9: "the memory keeps the downsampled gray frame (notebook 02), not the "
                                           "emulator's colour screen"},
        f"RSS grows by the pages of the ring as its frames are first written, until every slot holds one: {_SLOT}, "
        "and section 1 gives the number of slots; what learning allocates beside it is small"),
})


QUESTIONS.update({
    "07c.clip_lr": ("b", "clipping shrinks every gradient by a factor, and Adam moves each weight by a running "
                         "average of its gradient over the square root of a running average of its square: the "
                         "factor cancels, and each step stays about the learning rate. Clipping guards against one "
                         "bad batch among normal ones; a learning rate 100x too large is cured only by the learning "
                         "rate",
                    {"a": "Adam's step is a ratio of two running averages of a weight's gradient (notebook 06, "
                          "section 4, *Adam*): what does that ratio do when every gradient is shrunk by a similar "
                          "factor?",
                     "c": "clipping changes a gradient's length, never its direction (notebook 06, section 4, "
                          "*Gradient-norm clipping*); and how does Adam's step depend on the length of the gradients "
                          "it is given?"}),
    "07c.eps_by_updates": ("c", "an update comes once every train_every agent steps, and none before learning_starts: "
                                "the update count is 0 for the first 20,000 steps, then grows at a quarter of the agent"
                                " step's rate. The schedule, decaying over 100,000 of whatever count it is given, "
                                "reaches its floor after 100,000 updates, near agent step 20,000 + 4 × 100,000 = "
                                "420,000 instead of 100,000: the run explores at high ε for most of its length and "
                                "plays greedily only near its end",
                  {"a": "count the updates a run has made by its agent step 100,000: when do they start, and how many "
                        "agent steps does each one take? (section 1, the settings; notebook 07, section 1, why ε "
                        "follows a schedule)",
                   "b": "is there one update per agent step, or fewer? Which count runs ahead, the updates or the "
                        "agent steps? (section 1, the settings: when learning starts and how often it updates)"}),
    "07c.maze_done": ("a", "only the exit's transition is done, so forgetting the mask changes only its target: it "
                           "gains γ times the network's value of the state after the end, a value no game pays (no "
                           "transition starts after the exit, so nothing trains that value away from its non-zero "
                           "start). The "
                           "states one step before the exit bootstrap from the exit's inflated value and take the "
                           "excess next, then the states before them: the error spreads back from the exit one "
                           "bootstrapped step at a time, as a reward does",
                  {"b": "the mask changes only the targets of transitions that are done: where is this maze's one "
                        "done transition, and how does a change there reach the states before it? (notebook 06, "
                        "*Why (1 − done)*)",
                   "c": "for a transition that does not end the game, 1 − done is 1: what does forgetting it change "
                        "in that target? (notebook 06, *Why (1 − done)*)"}),
    "07c.eps_stuck": ("a", "the TD target takes the max over the next state's actions, whatever action the play "
                           "took, so the network learns the greedy policy's values even from random play; training "
                           "games show ε = 1's play, the evaluation at ε = 0.05 shows what was learned. The loop's "
                           "mistake is still there: it never lowers ε, so the memory never sees the better play",
                      {"b": "which next action's value does the TD target take: the one the random play took next, or "
                            "another? The answer decides what the network learns from random play (notebook 06's TD "
                            "target; section 3, your rule)",
                       "c": "the evaluation plays its own games apart from training and stores nothing they show in "
                            "the replay memory (section 2, the run folder: what run.evaluate writes); so what did "
                            "the network learn from?"}),
})


check_module(globals())
