"""The capstone's pieces (notebook 07c): what a learner's own DQN loop calls to log, evaluate, save and resume.

Not the loop: the learner writes that (acting, storing, sampling, targets, loss, the optimiser step, the target
sync). ``Run`` is the run folder, laid out as ``python -m dqn_course.train`` lays out its own, so every tool that
reads a training run reads the learner's too (``dqn_course.evaluate``, ``lab.diagnostics.plot_diagnostics``,
``lab.checks.check_capstone``):

- ``log.csv``: one row per finished game (``records.LOG_FIELDS``: score, length, the mean loss, max-Q and gradient
  norm of the updates since the last row, ε, replay fill, RSS, steps/s);
- ``eval.csv`` and ``checkpoint.pt``: each evaluation's scores and the policy it measured;
- ``state-<step>.ckpt``: the whole training state (both networks, Adam, the replay memory, the ε generator, the
  counters), written every ``save_minutes`` and at the end, so a kernel restart loses minutes, not the hour.
- ``writer.json``: which loop wrote the folder (``WRITER_FILE``; ``Run`` says more), so notebook 07c's gate can
  tell the learner's run from one the course's own loop trained.

Invariant: the rows of ``log.csv`` and ``eval.csv`` never go past the step of the newest state a resume loads
(``Run.resume`` drops the rows of a timeline it abandons).
"""
from __future__ import annotations

import dataclasses
import json
import re
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from dqn_course.allocation import check_run
from dqn_course.contracts import Probability, check_module
from dqn_course import check_arg, quick_mode
from dqn_course.agent import DQNAgent, batch_to_tensors, update_stats
from dqn_course.checkpoint import list_checkpoints, replacing, restore_training_state
from dqn_course.learner import UpdateStats
from dqn_course.replay.base import Batch, MemoryLike
from dqn_course.config import PRESETS, Config
from dqn_course.records import (EVAL_FIELDS, LOG_FIELDS, CsvLog, GameLog, evaluate_and_log, load_resume,
                                save_checkpoint, save_training_state)

PRESET = "breakout-cpu"  # the learning problem the capstone's loop runs: the library's laptop preset
# A smoke run of a few hundred steps. ε falls over all of it, so the first games are played mostly at random and end
# (an untrained greedy policy can stall a game by never pressing FIRE after a lost life).
QUICK_SIZES = dict(total_steps=600, buffer_size=2_000, learning_starts=200, target_sync_every=100, eps_fraction=1.0,
                   eval_every=300, eval_episodes=1, eval_max_steps=200)


def settings(quick: bool | None = None, **changes) -> Config:
    """The ``breakout-cpu`` preset (``quick``: shrunk to a smoke run of a few hundred steps; None: as
    ``DQN_COURSE_QUICK`` says), with ``changes`` applied and checked (``ConfigError`` names a bad field)."""
    cfg = dataclasses.replace(PRESETS[PRESET], out_dir="runs/my-dqn", progress=False,
                              **(QUICK_SIZES if (quick_mode() if quick is None else quick) else {}))
    cfg = dataclasses.replace(cfg, **changes)
    check_run(cfg)  # the settings, and whether this machine can take the run
    return cfg


def to_tensors(batch: Batch, device: torch.device | str) -> SimpleNamespace:
    """A sampled batch on ``device`` as ``.states``, ``.actions``, ``.rewards``, ``.next_states``, ``.dones``
    (frames stay uint8; rewards and dones float, actions int64), the shapes and dtypes ``td_targets`` and
    ``td_loss`` take."""
    if not isinstance(batch, Batch):
        raise TypeError(f"to_tensors takes the Batch a replay memory's sample() returns, got {type(batch).__name__}")
    t = batch_to_tensors(batch, torch.device(device))
    return SimpleNamespace(states=t["states"], actions=t["actions"].long(), rewards=t["rewards"].float(),
                           next_states=t["next_states"], dones=t["dones"].float())


class Run:
    """A learner's run folder (``folder``) for the settings ``cfg``: logs, evaluations, saves and resumes.

    Call ``resume`` once, after building the networks, optimiser, memory and ε generator: it loads the newest saved
    state into them (nothing when there is none) and returns the step to carry on from. Then, in the loop:
    ``updated`` after each gradient step, ``game_over`` when a game ends, ``evaluate`` every ``cfg.eval_every``
    steps, ``save`` when ``save_due()`` says so and at the end, ``close`` last. Raises ``CheckpointError`` when the
    folder's state was saved with other fixed settings (``records.RESUME_FIXED``) or does not fit what was built.

    The writer: ``Run(...)`` notes the function that built it (the loop): its module's ``__name__``, its qualified
    name and its source file. ``resume`` writes that, atomically, to ``writer.json`` (``WRITER_FILE``) when it
    first writes a folder that holds no saved state and no writer record yet; later sessions on the folder keep the
    first writer. A folder with a saved state but no record (a ``python -m dqn_course.train`` run, or one begun
    before ``Run`` recorded its writer) stays without one. Why: ``checks.check_capstone`` judges the learner's own
    loop, so it refuses a run with no record or one written by the course's code (``written_by_the_course``).
    """

    def __init__(self, folder: str | Path, cfg: Config, save_minutes: float = 5.0):
        if not isinstance(cfg, Config):
            raise TypeError(f"Run(folder, cfg): cfg must be a train.Config (capstone.settings() makes one), "
                            f"got {type(cfg).__name__}")
        check_arg("save_minutes", save_minutes, low=0.0)
        check_run(cfg)
        self.folder, self.cfg, self.save_minutes = Path(folder), cfg, float(save_minutes)
        self.counters = {"step": 0, "updates": 0, "episodes": 0}
        self.stats: UpdateStats | None = None
        self._games: GameLog | None = None
        self._evals: CsvLog | None = None
        self._saved_at = time.monotonic()
        self.writer = _caller()

    def _parts(self, q, target, optimizer, rng) -> SimpleNamespace:
        if not (isinstance(q, torch.nn.Module) and isinstance(target, torch.nn.Module)):
            raise TypeError("q and target must be the online and target networks (torch.nn.Module)")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be the loop's numpy Generator (np.random.default_rng), got {type(rng).__name__}")
        return SimpleNamespace(q=q, target=target, optimizer=optimizer, rng=rng)

    def resume(self, q: torch.nn.Module, target: torch.nn.Module, optimizer: torch.optim.Optimizer,
               memory: MemoryLike, rng: np.random.Generator) -> int:
        """Load the newest good ``state-<step>.ckpt`` of the folder into these objects; returns its step (0 when the
        folder holds none: a fresh run, with fresh logs)."""
        parts = self._parts(q, target, optimizer, rng)
        step = None
        fresh = not (self.folder.is_dir() and list_checkpoints(self.folder))
        if not fresh:
            arrays, meta, _ = load_resume(dataclasses.replace(self.cfg, resume=str(self.folder)))  # checks RESUME_FIXED
            self.counters = restore_training_state(arrays, meta, parts, memory)
            memory.end_episode()  # the game restarts: the next transition begins a new episode
            step = self.counters["step"]
        self.folder.mkdir(parents=True, exist_ok=True)
        if fresh and not (self.folder / WRITER_FILE).exists():
            with replacing(self.folder / WRITER_FILE) as tmp:  # a reader sees the whole record or none
                tmp.write_text(json.dumps(self.writer, indent=1) + "\n")
        device = next(q.parameters()).device
        self.stats = UpdateStats(device)
        self._games = GameLog(CsvLog(self.folder / "log.csv", LOG_FIELDS, step), 1, step or 0, self.counters)
        self._evals = CsvLog(self.folder / "eval.csv", EVAL_FIELDS, step)
        self._saved_at = time.monotonic()
        return step or 0

    def _started(self) -> None:
        if self.stats is None:
            raise RuntimeError("call run.resume(q, target, optimizer, memory, rng) once before the loop")

    def updated(self, loss: torch.Tensor, q_values: torch.Tensor, grad_norm: torch.Tensor) -> None:
        """Count one gradient update: its loss, the Q-values of the sampled states (B, n_actions) and the gradient
        norm before clipping (what ``clip_grad_norm_`` returns). Summed on the device; read when a row is logged."""
        self._started()
        for name, value in (("loss", loss), ("q_values", q_values), ("grad_norm", grad_norm)):
            if not torch.is_tensor(value):
                raise TypeError(f"updated(): {name} must be a tensor, got {type(value).__name__}")
        if q_values.dim() != 2:
            raise ValueError(f"updated(): q_values must be (batch, n_actions), got shape {tuple(q_values.shape)}")
        self.stats.add(update_stats(loss.reshape(()), q_values, grad_norm.reshape(())))
        self.counters["updates"] += 1

    def game_over(self, step: int, score: float, length: int, epsilon: Probability, replay_size: int) -> None:
        """Log one finished game (unclipped ``score``, ``length`` in agent steps) at ``step`` with the ε it was
        played with and the transitions in the memory."""
        self._started()
        check_arg("step", step, integer=True, low=0)
        check_arg("length", length, integer=True, low=1)
        check_arg("epsilon", epsilon, low=0.0, high=1.0)
        check_arg("replay_size", replay_size, integer=True, low=0)
        check_arg("score", score)
        self._games.game(step, float(score), length, float(epsilon), self.stats.mean() or {}, replay_size)

    def evaluate(self, step: int, q: torch.nn.Module) -> float:
        """Play ``cfg.eval_episodes`` games with ``q`` (ε = ``cfg.eval_epsilon``, the run's evaluation seeds), write
        the row of ``eval.csv`` and the policy to ``checkpoint.pt``; returns the mean score."""
        self._started()
        check_arg("step", step, integer=True, low=0)
        first = next(q.parameters())
        agent = DQNAgent(q.net[-1].out_features, first.device, seed=self.cfg.seed)
        agent.q.load_state_dict(q.state_dict())
        was_training = q.training
        returns = evaluate_and_log(agent, self.cfg, self._evals, step)
        save_checkpoint(self.folder / "checkpoint.pt", agent, self.cfg, step, returns)
        q.train(was_training)
        return float(np.mean(returns))

    def save_due(self) -> bool:
        """Whether ``save_minutes`` have passed since the last save (or the resume)."""
        return time.monotonic() - self._saved_at >= self.save_minutes * 60

    def save(self, step: int, q: torch.nn.Module, target: torch.nn.Module, optimizer: torch.optim.Optimizer,
             memory: MemoryLike, rng: np.random.Generator) -> Path:
        """Write the whole training state at ``step`` (``state-<step>.ckpt``, atomically; the older ones but one
        go); returns its path."""
        self._started()
        check_arg("step", step, integer=True, low=0)
        self.counters["step"] = step
        path = save_training_state(self.folder, self._parts(q, target, optimizer, rng), memory, self.cfg,
                                   self.counters)
        self._saved_at = time.monotonic()
        return path

    def close(self) -> None:
        """Close the log files (the loop's last call)."""
        for log in (self._games.log if self._games else None, self._evals):
            if log is not None:
                log.close()


WRITER_FILE = "writer.json"  # in a run folder: the loop that first wrote it (Run's docstring)
_PACKAGE_DIR = Path(__file__).resolve().parents[1]  # dqn_course/


def _caller() -> dict:
    """The function that called ``Run(...)``, skipping this module's frames and the argument checker's wrapper:
    ``module`` (its globals' ``__name__``), ``qualname`` and ``file`` (its code's file name)."""
    frame = sys._getframe(1)
    while frame is not None and (frame.f_globals.get("__name__") == __name__
                                 or frame.f_code.co_filename.startswith("<checked ")):
        frame = frame.f_back
    if frame is None:
        return {"module": None, "qualname": None, "file": None}
    return {"module": frame.f_globals.get("__name__"), "qualname": frame.f_code.co_qualname,
            "file": frame.f_code.co_filename}


def read_writer(folder: str | Path) -> dict | None:
    """The writer record of a run folder (``module``, ``qualname``, ``file``; see ``Run``), or None when it holds
    none. Raises ``ValueError`` for a record that is not a JSON object."""
    path = Path(folder) / WRITER_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path} is damaged: {e}") from None
    if not isinstance(record, dict):
        raise ValueError(f"{path} is damaged: it holds a {type(record).__name__}, not a JSON object")
    return record


def written_by_the_course(writer: dict) -> bool:
    """Whether a writer record names the course's code: a module named ``dqn_course`` or ``dqn_course.<...>``, or a
    source file inside the ``dqn_course`` package (``python -m dqn_course.lab.capstone_solution`` runs its loop in
    a module named ``__main__``)."""
    module, file = str(writer.get("module") or ""), writer.get("file")
    if module == "dqn_course" or module.startswith("dqn_course."):
        return True
    if not isinstance(file, str) or file.startswith("<"):
        return False
    try:
        return Path(file).resolve().is_relative_to(_PACKAGE_DIR)
    except (OSError, ValueError):
        return False


# -- a recorded run's wall time, as its README gives it ----------------------------------------------------------------

_SESSION_LINE = re.compile(r"^\s*- session \d+,", re.MULTILINE)
_SESSION = re.compile(r"^\s*- session (\d+), (\d\d):(\d\d):(\d\d)-(\d\d):(\d\d):(\d\d) UTC", re.MULTILINE)
_MACHINE = re.compile(r"\*\*Machine:\*\* ([^;]+);[^;]*; (\d{4}-\d\d-\d\d)\.( Not alone)?")


def recorded_sessions(folder: str | Path) -> SimpleNamespace:
    """The sessions of a recorded run of the worked loop (``data/capstone-seed1``) and their wall time, read from its
    ``README.md`` (a run of ``train()`` in one session gives its time in ``stdout.txt``:
    ``playback.recorded_wall_time``), so a page can say how long the long run took without typing it:
    ``sessions`` (the seconds of each line ``- session N, HH:MM:SS-HH:MM:SS UTC``, in order; one that passes
    midnight counts through it), ``total`` (their sum), ``machine`` and ``date`` (the line ``**Machine:**
    <machine>; <software>; <date>.``) and ``alone`` (False when that line goes on "Not alone": other work shared
    the machine, so the time is no measure of the loop's speed).
    Raises ``ValueError`` when a session line gives no start and end, or the README has none or no machine line."""
    readme = (Path(folder) / "README.md").read_text()
    found = [m.groups() for m in _SESSION.finditer(readme)]
    machine = _MACHINE.search(readme)
    if not found or len(found) != len(_SESSION_LINE.findall(readme)) or machine is None:
        raise ValueError(f"{folder}/README.md does not give each session's start and end (- session N, "
                         "HH:MM:SS-HH:MM:SS UTC) and its machine line (**Machine:** ...; ...; YYYY-MM-DD.)")
    sessions = []
    for _, *clock in found:
        h0, m0, s0, h1, m1, s1 = map(int, clock)
        sessions.append((3600 * (h1 - h0) + 60 * (m1 - m0) + s1 - s0) % 86_400)
    return SimpleNamespace(sessions=sessions, total=sum(sessions), machine=machine.group(1).strip(),
                           date=machine.group(2), alone=machine.group(3) is None)


# -- the gate: does the learner's run pass, and if not, why not? -----------------------------------------------------

GATE_SCORE = 15.0  # mean unclipped score on 30 fresh games (ε = 0.05): about 10x random play
GATE_GAMES = 30
LEARNING_FIELDS = ("total_steps", "buffer_size", "lr", "gamma", "batch_size", "target_sync_every", "eps_start",
                   "eps_end", "eps_fraction", "learning_starts", "train_every", "double", "max_grad_norm")


def diagnose(folder: str | Path, config: dict, policy_step: int) -> list[str]:
    """The likely causes of a run that did not learn, read from its ``log.csv`` and the settings its policy file
    saved (``config``), most basic first; empty when the log shows none of them."""
    from dqn_course.lab.playback import read_log

    preset = PRESETS[PRESET]
    causes = []
    changed = [f"{k} {config.get(k)!r} (the preset's: {getattr(preset, k)!r})" for k in LEARNING_FIELDS
               if config.get(k) != getattr(preset, k)]
    if changed:
        causes.append(f"the wrong preset: it trained with other settings than {PRESET}: " + ", ".join(changed)
                      + ". The gate is for the breakout-cpu learning problem (capstone.settings())")
    total = int(config.get("total_steps", preset.total_steps))
    if policy_step < total:
        causes.append(f"stopped too early: its policy is from step {policy_step:,} of {total:,}. Run the loop again "
                      "on the same folder (notebook 07c, section 6): it carries on from its last save")
    log_path = Path(folder) / "log.csv"
    log = read_log(log_path) if log_path.is_file() else {}
    if not log or not len(log.get("step", [])):
        return causes + ["log.csv holds no finished game: call run.game_over(...) when a game ends"]
    loss, q_max, eps, steps = log["loss"], log["q_max"], log["epsilon"], log["step"]
    learned = ~np.isnan(loss)
    if not learned.any():
        return causes + ["no gradient update was logged: learning never started (is learning_starts reached? is "
                         "run.updated(...) called after each update?)"]
    decay_steps = max(1, int(config.get("eps_fraction", preset.eps_fraction) * total))
    start, end = config.get("eps_start", preset.eps_start), config.get("eps_end", preset.eps_end)
    late = steps >= decay_steps
    if late.any() and np.min(eps[late]) > end + 0.5 * (start - end):
        causes.append(f"ε never decayed: it was still {np.min(eps[late]):.2f} after step {decay_steps:,}, where the "
                      f"schedule reaches its floor {end}, so the agent kept acting at random (notebook 07, the ε "
                      "schedule)")
    bound = 1 / (1 - config.get("gamma", preset.gamma))
    if np.nanmax(q_max) > bound:
        causes.append(f"max-Q diverging: the mean max-Q of the sampled states reached {np.nanmax(q_max):,.4g}, above "
                      f"1 / (1 - γ) = {bound:.0f}, the largest discounted return of rewards clipped to 1 (notebook 07, "
                      "reading a run's diagnostics; notebook 06 on the target: *Why (1 − done)* and *Why a target "
                      "network*)")
    recent = loss[learned][-max(1, learned.sum() // 2):]
    if np.nanmedian(np.abs(recent)) < 1e-6:
        causes.append("the loss is flat at zero: each prediction equals its target, so no gradient teaches anything "
                      "(notebook 06: what the target is computed from, and what the loss compares)")
    return causes


def gate_verdict(folder: str | Path, result: dict, who: str = "your DQN") -> tuple[bool, str]:
    """Whether an evaluation ``result`` (``dqn_course.evaluate.policy_vs_random``'s) passes the gate, and the message:
    the score, random play on the same games and their ratio, and when it fails, the likely causes (``diagnose``).
    ``who`` names the loop that trained the run in the message: the learner's by default, "the worked loop" for the
    course's recorded runs, so a verdict on a run the course trained does not credit the learner."""
    policy, random = result["policy"], result["random"]
    ratio = f"{result['ratio']:.1f}x random" if result.get("ratio") else "random play scored 0"
    head = (f"{policy['mean']:.1f} ± {policy['std']:.1f} over {policy['games']} fresh games (ε = "
            f"{result['protocol']['epsilon']}), random play {random['mean']:.2f} on the same games: {ratio}")
    if policy["mean"] >= GATE_SCORE and policy["games"] >= GATE_GAMES:
        return True, f"{who} learned Breakout: {head}, at or above the gate's {GATE_SCORE:g}"
    from dqn_course.evaluate import POLICY_FILE, load_policy

    file = Path(result["file"])  # as evaluated; from another working folder, the run folder's own policy
    _, info = load_policy(file if file.is_file() else Path(folder) / POLICY_FILE)
    causes = diagnose(folder, info["config"], info["step"])
    if policy["games"] < GATE_GAMES:
        causes.insert(0, f"only {policy['games']} games were played: the gate plays {GATE_GAMES}")
    why = ("\n".join(f"  - {c}" for c in causes) if causes else
           "  - its log shows none of the usual causes: compare its diagnostics with the recorded runs' (section "
           "'When it does not learn')")
    return False, f"not yet: {head}, below the gate's {GATE_SCORE:g}. Likely causes, from its log:\n{why}"


check_module(globals())
