"""Train DQN on Breakout: the whole loop on one screen, hyperparameters in one dataclass (``config.Config``).

    python -m dqn_course.train --preset quick          # 3,000 steps: does it run here?
    python -m dqn_course.train --preset breakout       # Nature/CleanRL settings, 10M steps: use a GPU
    python -m dqn_course.train --preset breakout-fast  # same learning problem: 8 C++ envs, replay on the GPU

Any field of ``Config`` can be overridden: ``--total-steps 200000 --double true``.
Writes ``log.csv`` (one row per finished game), ``eval.csv``, ``checkpoint.pt`` (the agent alone, for playing:
always the policy of the last evaluation, so the file on disk is a measured policy) and ``state-<step>.ckpt`` (the
whole training state: for resuming) into ``out_dir``. A run evaluates every ``eval_every`` steps, at its last step
and at its deadline; a stop between evaluations (a signal, the watchdog) saves the training state only.

    python -m dqn_course.train --preset quick --resume runs/quick        # carry on after a crash or kill -9
    python -m dqn_course.train --preset quick --max-rss-gb 4             # checkpoint and stop before 4 GB
    python -m dqn_course.train --preset quick --replay-storage lz4       # compressed replay frames
    python -m dqn_course.train --preset breakout-cpu --time-limit 60     # an hour now, --resume later
    python -m dqn_course.train --preset breakout-fast --dry-run         # what it would allocate where, then exit

A run stops cleanly (evaluation at a deadline, the whole state saved at the current step, logs closed,
the ``--resume`` command printed, exit status 0) at ``--time-limit`` minutes, on SIGINT (Ctrl-C) or
SIGTERM (``timeout``, a scheduler's preemption), and when the memory watchdog trips. A second signal
stops at once.
"""
from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from dqn_course.contracts import Count, Probability, check_module
from dqn_course import ConfigError, add_field_options, require
from dqn_course.agent import DQNAgent, td_loss, td_targets
from dqn_course.allocation import check_run, dry_run
from dqn_course.checkpoint import CheckpointError, restore_training_state
from dqn_course.config import PRESETS, Config
from dqn_course.envs import learning_signals, make_vector_envs
from dqn_course.learner import DeviceLearner, EagerLearner
from dqn_course.profiling import InsufficientMemoryError, format_bytes, rss_bytes
from dqn_course.records import RunRecords, load_resume
from dqn_course.replay import MultiStreamMemory
from dqn_course.replay.stores import InsufficientDiskError
from dqn_course.stopping import DiskFullError, StopRequests, is_disk_full
from dqn_course.watchdog import MemoryWatchdog


def linear_epsilon(step: int, start: Probability, end: Probability, decay_steps: int) -> float:
    """ε of ε-greedy at agent step ``step``: ``start`` at step 0, falling linearly to ``end`` at ``decay_steps``,
    then ``end`` for the rest of the run. A learner's own schedule takes the same arguments (``train(cfg,
    epsilon=...)``)."""
    return end + (start - end) * max(0.0, 1.0 - step / decay_steps)


def epsilon_at(step: int, cfg: Config, schedule: Callable[[int, float, float, int], float] = linear_epsilon
               ) -> float:
    """ε at ``step`` of the run ``cfg``: ``schedule`` from eps_start to eps_end over eps_fraction of the run."""
    return schedule(step, cfg.eps_start, cfg.eps_end, max(1, int(cfg.eps_fraction * cfg.total_steps)))


def crossed(before: int, now: int, every: Count) -> bool:
    """Did the step counter pass a multiple of ``every`` (it moves by num_envs at a time)?"""
    return now // every > before // every


def updates_due(cfg: Config, step: int) -> int:
    """Updates due by ``step``: one per ``train_every`` agent steps since ``learning_starts``.

    Steps are summed over the envs: with one env, exactly "update when step % train_every == 0"; with
    n envs, n / train_every updates per vector step.
    """
    return step // cfg.train_every - (cfg.learning_starts - 1) // cfg.train_every


def replay_storage_args(cfg: Config) -> dict:
    """Where the replay frames live: ``storage`` for the memory, and a folder when that is the disk."""
    if cfg.replay_storage == "ram":
        return {}
    if cfg.replay_storage == "disk":
        folder = Path(cfg.replay_path or Path(cfg.out_dir) / "replay")
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob("frames-*.u8"):  # left by a killed run of this folder (no finalizer ran)
            stale.unlink()
        return {"storage": "disk", "path": str(folder)}
    return {"storage": cfg.replay_storage}


def build(cfg: Config, device: torch.device, targets: Callable = td_targets, loss: Callable = td_loss):
    """The vector envs, the replay memory (prioritized if ``cfg.per``), the agent (learning by ``targets`` and
    ``loss``) and its learner ``cfg`` describes.

    Frames on the device (``replay_on_device``) get the ``DeviceLearner`` (one CUDA graph per update on a GPU);
    otherwise updates are ``agent.update`` calls on sampled batches.
    """
    envs = make_vector_envs(cfg.num_envs, seed=cfg.seed, backend=cfg.env_backend)
    memory = MultiStreamMemory(cfg.buffer_size, cfg.num_envs, envs.single_observation_space.shape, seed=cfg.seed,
                               prefault=cfg.prefault, device=device if cfg.replay_on_device else None,
                               **replay_storage_args(cfg))
    agent = DQNAgent(int(envs.single_action_space.n), device, lr=cfg.lr, gamma=cfg.gamma, double=cfg.double,
                     max_grad_norm=cfg.max_grad_norm, seed=cfg.seed, targets=targets, loss=loss, float64=cfg.float64)
    if cfg.per:
        from dqn_course.per import PrioritizedMemory, beta_at  # numba: loaded only by runs that use it

        memory = PrioritizedMemory(memory, alpha=cfg.per_alpha, seed=cfg.seed)
        learner = EagerLearner(agent, memory, cfg.batch_size, lambda step: beta_at(step, cfg.total_steps,
                                                                                   cfg.per_beta0))
    elif cfg.replay_on_device:
        learner = DeviceLearner(agent, memory, cfg.batch_size, graph=None if cfg.cuda_graph else False,
                                compile=cfg.compile_update)
    else:
        learner = EagerLearner(agent, memory, cfg.batch_size)
    return envs, memory, agent, learner


class Run(NamedTuple):
    """What ``set_up`` built for a run: its envs, replay memory, agent, learner, counters (step, updates, games)
    and the step it resumed from (None for a new run)."""

    envs: object
    memory: object
    agent: DQNAgent
    learner: EagerLearner | DeviceLearner
    counters: dict
    resumed: int | None


def set_up(cfg: Config, targets: Callable, loss: Callable, epsilon: Callable) -> Run:
    """Check the settings, the machine and the learning rule, read the state to resume (before allocating: a bad
    file fails fast), build the run and restore that state into it. Writes nothing. Raises ``ConfigError``,
    ``InsufficientMemoryError``, ``InsufficientDiskError`` or ``CheckpointError``."""
    device = check_run(cfg)
    require(not (cfg.per and loss is not td_loss),
            "--per true weights each transition's Huber loss by its importance weight; a loss function given to "
            "train() cannot take those weights: use the default loss with PER, or --per false")
    arrays, meta, path = load_resume(cfg)
    np.random.seed(cfg.seed)
    envs, memory, agent, learner = build(cfg, device, targets, loss)
    if arrays is None:
        return Run(envs, memory, agent, learner, {"step": 0, "updates": 0, "episodes": 0}, None)
    counters = restore_training_state(arrays, meta, agent, memory)
    memory.end_episode()  # the envs restart: the next transition begins a new episode
    print(f"resumed from {path} at step {counters['step']:,}")
    return Run(envs, memory, agent, learner, counters, counters["step"])


def train(cfg: Config, *, targets: Callable = td_targets, loss: Callable = td_loss,
          epsilon: Callable[[int, float, float, int], float] = linear_epsilon) -> dict:
    """Run DQN with ``cfg``; returns ``summary``'s dict (steps/s, last returns, files written, why it stopped).

    ``targets``, ``loss`` and ``epsilon`` are the learning rule and the exploration schedule, with the arguments
    of ``agent.td_targets``, ``agent.td_loss`` and ``linear_epsilon``: a learner's own functions train the agent
    in their place (a custom ``loss`` cannot take prioritized replay's weights: refused with ``cfg.per``).
    Raises what ``set_up`` raises before anything is written, and ``DiskFullError`` when a save fills the disk.
    """
    envs, memory, agent, learner, counters, resumed = run = set_up(cfg, targets, loss, epsilon)
    step = first_step = counters["step"]
    watchdog = MemoryWatchdog(int(cfg.max_rss_gb * 1e9), int(cfg.min_available_gb * 1e9))
    obs, info = envs.reset(seed=cfg.seed + step)  # a resumed run starts new games, not the same ones again
    lives, resetting = info["lives"].copy(), np.zeros(cfg.num_envs, bool)  # resetting: the envs this step resets
    stopped = None
    with RunRecords(cfg, step, resumed, counters, memory, closing=[envs]) as records, \
            StopRequests(cfg.time_limit * 60) as stop:
        timer = records.timer
        while step < cfg.total_steps:
            # -- act in every env; learn while they step ---------------------------------------------------------
            before, step = step, step + cfg.num_envs
            eps = epsilon_at(step, cfg, epsilon)
            timer.lap("other")
            actions = agent.act(obs, eps)
            envs.send(actions)  # ale-py's C++ threads step the envs during the updates below
            timer.lap("act")
            # The updates due by this step, from what is stored so far. The step after a finished game stores
            # nothing, so the memory can hold a little less than learning_starts: wait for a batch.
            if step >= cfg.learning_starts and len(memory) >= cfg.batch_size:
                due = updates_due(cfg, step)
                learner.learn(due - counters["updates"], step)
                counters["updates"] = max(counters["updates"], due)
                timer.learning_from(step)  # the clock starts after the first learn: its one-off capture left out
            timer.lap("learn")

            # -- store what happened: clipped rewards; a lost life is terminal for the target, not for the game ---
            next_obs, rewards, terminated, truncated, info = envs.recv()
            timer.lap("envs")  # what the envs took beyond the acting and learning they overlapped
            clipped, dones, ended = learning_signals(rewards, terminated, truncated, info["lives"] < lives)
            real = ~resetting  # the envs that played this step (the others only reset)
            memory.add_batch(obs, actions, clipped, next_obs, dones=dones, episode_ends=ended, mask=real)
            records.games.record(rewards, real, ended, step, eps, learner.diagnostics, len(memory))
            obs, lives, resetting = next_obs, info["lives"].copy(), ended
            timer.lap("store")

            # -- sync the target network; evaluate (keeping the policy measured); save the state; stop -----------
            if crossed(before, step, cfg.target_sync_every):
                agent.sync_target()
            stopped = watchdog.check() or stop.reason()
            if crossed(before, step, cfg.eval_every) or step >= cfg.total_steps or (stopped and stop.timed_out):
                records.evaluate(agent, step)
            if crossed(before, step, cfg.checkpoint_every) or step >= cfg.total_steps or stopped:
                records.save_state(agent, step)
            records.bar.update(cfg.num_envs)
            if stopped:
                print(f"{stopped}: saved the training state at step {step:,} and stopped", flush=True)
                break
    return summary(run, records, step, first_step, stopped)


def summary(run: Run, records: RunRecords, step: int, first_step: int, stopped: str | None) -> dict:
    """What ``train`` returns: the timer's figures (``steps``: the run's last step; ``seconds`` and steps/s: this
    session's, whose own steps are ``session_steps``; learning steps/s, where the time went), the counters,
    the last games' returns, the replay's size and place, RSS, the device, the run folder, the step it resumed from,
    why it stopped (None: it ran to the end), how the updates ran (``updates_ran``) and why a CUDA graph was given
    up (``graph_fallback``, None when it was not)."""
    return {**records.timer.summary(step, first_step), "session_steps": step - first_step,
            "updates": run.counters["updates"],
            "episodes": run.counters["episodes"], "last_returns": list(records.games.last),
            "replay_bytes": run.memory.nbytes, "replay_device": str(run.memory.device or "host"),
            "rss_bytes": rss_bytes(), "device": str(run.agent.device), "out_dir": str(records.out),
            "resumed_from": run.resumed, "stopped": stopped, "updates_ran": run.learner.path,
            "graph_fallback": run.learner.fallback_reason}


def parse_command(argv: list[str] | None = None) -> tuple[Config, str, bool]:
    """``--preset NAME``, ``--field value`` overrides for any ``Config`` field, and ``--dry-run``: returns the
    config, the preset's name and whether to dry-run."""
    parser = argparse.ArgumentParser(prog="python -m dqn_course.train", description=__doc__.split("\n")[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="quick")
    parser.add_argument("--dry-run", action="store_true",
                        help="print what the run would allocate where (host RAM, GPU memory, disk) and exit")
    add_field_options(parser, Config, defaults=False)
    args = vars(parser.parse_args(argv))
    preset, dry = args.pop("preset"), args.pop("dry_run")
    overrides = {k: v for k, v in args.items() if v is not None}
    return dataclasses.replace(PRESETS[preset], **overrides), preset, dry


def parse_args(argv: list[str] | None = None) -> Config:
    """The ``Config`` of a command line (``parse_command`` without the rest)."""
    return parse_command(argv)[0]


def resume_command(argv: list[str], out_dir: str) -> str:
    """The command line that carries on a stopped run: the same arguments, ``--resume`` pointing at its folder."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--resume":
            skip = True
        elif not arg.startswith("--resume="):
            kept.append(arg)
    return " ".join(["python -m dqn_course.train", *map(shlex.quote, kept), "--resume", shlex.quote(out_dir)])


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    try:
        cfg, preset, dry = parse_command(argv)  # a config is checked as it is made
        if dry:
            print(dry_run(cfg, preset))
            return
        summary = train(cfg)
    except (ConfigError, CheckpointError, InsufficientMemoryError, InsufficientDiskError) as e:
        print(f"error: {e}", file=sys.stderr)  # a setting to change, not a bug: no traceback, argparse's status
        raise SystemExit(2) from None
    except DiskFullError as e:  # stopped like a signal stops it, from the other side: what was kept, how to go on
        print(f"stopped: {e.strerror}", file=sys.stderr)
        then = (f"resume with: {resume_command(argv, cfg.out_dir)}" if e.kept is not None
                else "run the same command again")
        print(f"free {format_bytes(e.needed)} or more there, then {then}", file=sys.stderr)
        raise SystemExit(3) from None
    except OSError as e:
        if not is_disk_full(e):
            raise
        print(f"stopped: the disk filled while the run set up its files ({e.filename or 'a file'}: {e.strerror}); "
              "no training state was changed: free space there, then run the same command again", file=sys.stderr)
        raise SystemExit(3) from None
    steps = f"{summary['steps']:,} steps"
    if summary["session_steps"] != summary["steps"]:  # resumed: the time and the rate are this session's
        steps += f" ({summary['session_steps']:,} this session)"
    print(f"{'stopped' if summary['stopped'] else 'done'}: {steps} in {summary['seconds']:.0f} s "
          f"({summary['steps_per_s']:.0f} steps/s on {summary['device']}), {summary['episodes']} games, "
          f"replay {format_bytes(summary['replay_bytes'])}; files in {summary['out_dir']}")
    if summary["graph_fallback"]:
        print(f"updates ran eagerly, without a CUDA graph: {summary['graph_fallback']}")
    if summary["stopped"]:
        print(f"why: {summary['stopped']}\nresume with: {resume_command(argv, summary['out_dir'])}")


if __name__ == "__main__":
    main()


check_module(globals())
