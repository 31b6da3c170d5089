"""DQN scaled out on Ray Core, Ape-X style (actors that act, one that learns), with the frame-sharing replay.

::

    RolloutWorker x N  --chunks of frames-->  ReplayServer (MultiStreamMemory, one stream per worker)
      | own env, CPU net,                         |
      | its own ε (Ape-X)                         | batches (prefetched)
      | pulls weights every episode               v
      +<------------  ParameterServer  <------  Learner (GPU when there is one; CPU otherwise)
                      (numpy weights,          pushes weights every `push_every` updates
                       in the object store)    Evaluator plays the latest weights at the end

    python -m dqn_course.distributed --workers 2 --total-steps 20000          # local Ray on this machine
    python -m dqn_course.distributed --address HEAD_IP:6379 --workers 16 ...   # join an existing cluster

Ray places an actor only where its requested resources are free: the learner asks for ``cpus_per_actor``
CPUs (and a GPU when it uses one), every rollout worker and the evaluator for ``cpus_per_actor`` each; the
replay actor, the parameter server and the driver take none. The evaluator starts once the workers are
done and takes their place, so a run needs ``(workers + 1) * cpus_per_actor`` CPUs at once. ``run``
checks that against the cluster before it creates any actor and refuses a run that cannot fit
(``ClusterTooSmallError``); an actor that waits for resources anyway (taken by other jobs) is reported.

Every role is a plain class, turned into an actor by ``ray.remote`` in ``run`` (so tests can also run
one in-process). Workers send ``Chunk``s: K transitions as one new frame per step plus the few full
stacks an episode start needs, far fewer bytes than s and s' stacks, and what the replay actor
stores anyway (notebook 04's layout). Semantics mirror ``dqn_course.train``: rewards are clipped
(``np.sign``) for learning, a lost life is ``done`` but not an episode end. Exploration follows Ape-X
(each worker a fixed ε) rather than ``train``'s annealed ε, and the learner runs as fast as it can
instead of one update per 4 steps: that decoupling is what the distribution buys.
"""
from __future__ import annotations

import argparse
import atexit
import dataclasses
import hashlib
import json
import logging
import math
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

import numpy as np
import psutil

try:
    import ray
    from ray.exceptions import ActorDiedError, ActorUnavailableError
except ImportError as e:  # Ray is the "distributed" extra
    raise ImportError('dqn_course.distributed needs Ray: pip install "dqn-course[distributed]"') from e

from dqn_course import ConfigError, check_fields, check_ranges, parse_bool, require
from dqn_course.cleanup import OwnedTempDir, exit_on_signals, hold_exit_signals, release_exit_signals
from dqn_course.envs import make_breakout
from dqn_course.replay import Batch, MultiStreamMemory

if TYPE_CHECKING:
    import torch

# torch (and the agent, which needs it) is imported inside the roles that run a network: the replay
# actor and the parameter server then start without it, ~1.5 s sooner each.

N_ACTIONS = 4  # Breakout's action set (NOOP, FIRE, RIGHT, LEFT)
Transition = tuple  # (state, action, reward, next_state, done, episode_end), as replay.add takes them


def _dist_flag(name: str) -> str:
    """How the CLI spells a ``DistConfig`` field (``num_workers`` is ``--workers``)."""
    return "--workers" if name == "num_workers" else "--" + name.replace("_", "-")


@dataclass
class DistConfig:
    """One distributed run. Step counts are env (agent) steps summed over all workers."""

    num_workers: int = 2
    total_steps: int = 10_000_000  # stop once the replay actor has ingested this many transitions
    max_learning_seconds: float | None = None  # or stop this long after the learner's first update
    buffer_size: int = 1_000_000  # frames, split evenly between the workers' streams
    chunk: int = 50  # transitions per chunk a worker sends
    learning_starts: int = 80_000  # the learner starts once this many transitions arrived
    batch_size: int = 32
    lr: float = 1e-4
    gamma: float = 0.99
    double: bool = False
    max_grad_norm: float = 10.0
    target_sync_every: int = 250  # learner updates (= train's 1,000 steps at one update per 4 steps)
    push_every: int = 400  # learner updates between weight pushes to the parameter server
    updates_per_call: int = 20  # learner updates per remote call (the driver's bookkeeping grain)
    prefetch: int = 4  # batches per sample request; the next request is in flight while the learner learns
    eps_base: float = 0.4  # Ape-X: worker i of N explores with eps_base ** (1 + eps_alpha * i / (N - 1))
    eps_alpha: float = 7.0
    epsilon: float | None = None  # one fixed ε for every worker instead of Ape-X's spread
    max_episode_steps: int | None = None  # cap episodes (tests, demos); None: the ALE's 27,000
    eval_episodes: int = 10  # games the evaluator plays with the final weights (0: none)
    eval_epsilon: float = 0.05
    eval_max_steps: int = 27_000
    max_restarts: int = 3  # per worker: a killed worker is restarted this many times, then reported dead
    seed: int = 1
    device: str = ""  # learner device; "" picks CUDA when available
    learner_threads: int = 0  # torch threads for a CPU learner; 0: the cores the workers leave free
    prefault: bool = False
    cpus_per_actor: float = 1.0  # Ray CPUs reserved by the learner, each worker and the evaluator (< 1: they share)
    pending_report_seconds: float = 30.0  # report actors still waiting to start (or no result) this often
    start_timeout_seconds: float = 900.0  # fail if an actor has not started after this long; 0: wait for ever

    def validate(self) -> None:
        """Refuse settings that cannot work, before any actor starts: ``ConfigError`` (a ``ValueError``) naming
        the setting, its value and what to change. The same field-type check as ``train.Config``
        (``dqn_course.check_fields``), then ranges, then the rules between fields."""
        flag = _dist_flag
        check_fields(self, flag)
        check_ranges(self, flag=flag,
                     positive=("num_workers", "total_steps", "chunk", "batch_size", "target_sync_every", "push_every",
                               "updates_per_call", "prefetch", "buffer_size", "lr", "max_grad_norm",
                               "max_episode_steps", "eval_max_steps", "max_learning_seconds",
                               "pending_report_seconds"),
                     non_negative=("learning_starts", "eps_alpha", "eval_episodes", "max_restarts", "seed",
                                   "learner_threads", "start_timeout_seconds"),
                     fractions=("gamma", "eps_base", "epsilon", "eval_epsilon"))
        require(self.learning_starts >= self.batch_size + self.num_workers,
                f"--learning-starts must be at least --batch-size + --workers = {self.batch_size + self.num_workers} "
                f"(each stream holds back one transition), got {self.learning_starts}")
        require(self.learning_starts < self.total_steps,
                f"--learning-starts {self.learning_starts} is not below --total-steps {self.total_steps}: the run "
                f"would end before the learner's first update; lower --learning-starts or raise --total-steps")
        require(self.buffer_size // self.num_workers >= self.chunk + 5,
                f"--buffer-size // --workers must be at least --chunk + 5 = {self.chunk + 5} frames per stream, "
                f"got {self.buffer_size} // {self.num_workers}; raise --buffer-size or lower --chunk")
        c = self.cpus_per_actor
        require(c > 0 and (c <= 1 or float(c).is_integer()),
                f"--cpus-per-actor must be a fraction in (0, 1] or a whole number of CPUs (Ray's rule), got {c!r}")
        require(c >= 1e-4, f"--cpus-per-actor must be at least 0.0001 (Ray's resource precision), got {c}")

    def actors_at_once(self) -> int:
        """Actors that hold ``cpus_per_actor`` CPUs at the same time: the learner and every worker."""
        return self.num_workers + 1


def worker_epsilons(num_workers: int, base: float = 0.4, alpha: float = 7.0, fixed: float | None = None) -> list[float]:
    """Ape-X's fixed ε per worker, ``base ** (1 + alpha * i / (N - 1))``: a spread from 0.4 to 0.4**8.

    A few workers explore a lot and most act nearly greedily, so together they cover both without an
    annealing schedule. One worker has no spread: it uses ``base``. ``fixed`` gives every worker that ε.
    """
    if not isinstance(num_workers, int) or num_workers < 1:
        raise ValueError(f"num_workers must be a positive integer, got {num_workers!r}")
    if fixed is not None or num_workers == 1:
        return [base if fixed is None else fixed] * num_workers
    return [base ** (1 + alpha * i / (num_workers - 1)) for i in range(num_workers)]


# -- what travels --------------------------------------------------------------------------------------


@dataclass
class Chunk:
    """K consecutive transitions of one worker, sent as one object: one new frame per step.

    ``next_state`` of step i is ``state[1:]`` plus ``frames[i]`` (a frame stack shifts by one frame),
    and ``state`` of step i+1 is that ``next_state`` unless step i ended the episode, when it is the
    next entry of ``reset_states``. So full stacks travel only at episode starts and once per chunk.
    """

    worker: int
    first_state: np.ndarray  # (stack, H, W) uint8: the state of the first transition
    frames: np.ndarray  # (K, H, W) uint8: the newest frame of each next_state
    actions: np.ndarray  # (K,) int64
    rewards: np.ndarray  # (K,) float32, clipped
    dones: np.ndarray  # (K,) bool: no bootstrap (game over or life lost)
    episode_ends: np.ndarray  # (K,) bool: the env was reset after this step
    reset_states: np.ndarray  # (E, stack, H, W): the state after each episode end, except after the last step
    new_episode: bool = False  # the stream restarts here (a new or restarted worker): what came before is cut

    @classmethod
    def from_transitions(cls, worker: int, transitions: list[Transition], new_episode: bool = False) -> Chunk:
        """Pack (state, action, reward, next_state, done, episode_end) tuples, checking they chain."""
        if not transitions:
            raise ValueError("a chunk needs at least one transition")
        resets = []
        for i, (state, _, _, next_state, _, episode_end) in enumerate(transitions):
            if not np.array_equal(next_state[:-1], state[1:]):
                raise ValueError(f"transition {i}: next_state is not state shifted by one frame (a frame stack)")
            if i + 1 < len(transitions):
                following = transitions[i + 1][0]
                if episode_end:
                    resets.append(following)
                elif not np.array_equal(following, next_state):
                    raise ValueError(f"transition {i + 1} does not start from transition {i}'s next_state: "
                                     f"mark episode_end=True where the env was reset")
        first = transitions[0][0]
        return cls(worker, first.copy(), np.stack([t[3][-1] for t in transitions]),
                   np.array([t[1] for t in transitions], np.int64), np.array([t[2] for t in transitions], np.float32),
                   np.array([t[4] for t in transitions], bool), np.array([t[5] for t in transitions], bool),
                   np.stack(resets) if resets else np.empty((0, *first.shape), first.dtype), new_episode)

    def transitions(self) -> Iterator[Transition]:
        """The transitions again, with full stacks, in order."""
        state, resets = self.first_state, iter(self.reset_states)
        for i in range(len(self)):
            next_state = np.concatenate([state[1:], self.frames[i][None]])
            episode_end = bool(self.episode_ends[i])
            yield state, int(self.actions[i]), float(self.rewards[i]), next_state, bool(self.dones[i]), episode_end
            if i + 1 < len(self):
                state = next(resets) if episode_end else next_state

    def __len__(self) -> int:
        return len(self.frames)

    @property
    def nbytes(self) -> int:
        """Bytes of arrays this chunk carries (what the object store holds for it, give or take a header)."""
        return sum(a.nbytes for a in (self.first_state, self.frames, self.actions, self.rewards, self.dones,
                                      self.episode_ends, self.reset_states))


def weights_to_numpy(module: torch.nn.Module) -> dict[str, np.ndarray]:
    """A network's weights as numpy arrays: what the parameter server puts in the object store."""
    return {k: v.detach().cpu().numpy().copy() for k, v in module.state_dict().items()}


def load_numpy_weights(module: torch.nn.Module, weights: dict[str, np.ndarray]) -> None:
    """Load object-store weights (read-only numpy views) into ``module``; ``torch.tensor`` copies them."""
    import torch

    module.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})


def weights_digest(weights: dict[str, np.ndarray]) -> str:
    """A short hash of a weights dict, so two processes can show they hold the same network."""
    h = hashlib.sha1()
    for k in sorted(weights):
        h.update(k.encode())
        h.update(np.ascontiguousarray(weights[k]).tobytes())
    return h.hexdigest()[:12]


def _writable(batch: Batch) -> Batch:
    """Arrays from the object store are read-only views; torch wants writable ones (one small copy)."""
    return Batch(*(np.array(x) if isinstance(x, np.ndarray) else x for x in batch))


# -- the roles ---------------------------------------------------------------------------------------------


class _Role:
    """What every role answers: where it runs. The driver's first call to each actor, to know it started."""

    def where(self) -> dict:
        """This process: Ray node id and IP (None outside Ray), pid, and the folder ``dqn_course`` came from.

        On a cluster joined with ``--address`` that folder is the copy Ray unpacked from ``py_modules``.
        """
        import dqn_course

        inside = ray.is_initialized()
        return {"node": ray.get_runtime_context().get_node_id() if inside else None,
                "ip": ray.util.get_node_ip_address() if inside else None, "pid": os.getpid(),
                "package": os.path.dirname(os.path.abspath(dqn_course.__file__))}


class ReplayServer(_Role):
    """The replay actor: a ``MultiStreamMemory`` with one stream per worker, filled chunk by chunk.

    Frame sharing needs each stream's frames consecutive, so worker i writes stream i only. The last
    transition of each stream is held back until the next chunk says what follows it: if that chunk
    starts a new episode (the worker was restarted mid-game) the held transition becomes the episode's
    last one (bootstrapped, like a time-limit truncation), so a cut never splices two games together.
    """

    def __init__(self, capacity: int, num_streams: int, seed: int | None = None, prefault: bool = False):
        self.memory = MultiStreamMemory(capacity, num_streams, seed=seed, prefault=prefault)
        self.held: list[Transition | None] = [None] * num_streams
        self.received = [0] * num_streams  # transitions received per stream

    def add_chunk(self, chunk: Chunk) -> int:
        """Store a worker's chunk in its stream; returns the transitions received so far (all streams)."""
        if not 0 <= chunk.worker < len(self.held):
            raise ValueError(f"chunk from worker {chunk.worker}, but this replay has streams 0..{len(self.held) - 1}")
        held = self.held[chunk.worker]
        if held is not None:
            if chunk.new_episode:
                held = (*held[:5], True)
            self.memory.add(*held, stream=chunk.worker)
        transitions = list(chunk.transitions())
        for t in transitions[:-1]:
            self.memory.add(*t, stream=chunk.worker)
        self.held[chunk.worker] = transitions[-1]
        self.received[chunk.worker] += len(chunk)
        return sum(self.received)

    def sample(self, batch_size: int, count: int = 1) -> list[Batch]:
        """``count`` independent batches in one call: one round trip feeds several learner updates."""
        return [self.memory.sample(batch_size) for _ in range(count)]

    def stream_transitions(self, stream: int) -> Batch:
        """Every sampleable transition of one stream, oldest first (to check what arrived)."""
        s = self.memory.streams[stream]
        slots = np.flatnonzero(s.valid[: min(s.written, s.capacity)])
        return s.batch_at(slots[np.argsort(s.ids[slots])])

    def stats(self) -> dict:
        return {"received": list(self.received), "stored": len(self.memory), "nbytes": self.memory.nbytes}


class ParameterServer(_Role):
    """Holds the newest weights as one object in Ray's object store (numpy arrays: zero-copy to read).

    ``push`` puts the weights in the store (this actor owns them: they live as long as it does, whoever
    pushed them); ``latest`` hands out only a reference, so a worker fetches the 6.7 MB network once per
    version.
    """

    def __init__(self):
        self.version = -1
        self.ref: list | None = None  # [ObjectRef]: a list, so Ray passes the reference, not the weights

    def push(self, version: int, weights: dict[str, np.ndarray]) -> int:
        self.ref, self.version = [ray.put(weights)], version
        return version

    def latest(self, have: int = -1) -> tuple[int, list] | None:
        """(version, [ref]) when newer than ``have``, else None."""
        return None if self.version <= have else (self.version, self.ref)


class _PullsWeights(_Role):
    """Shared by the worker and the evaluator: a CPU network kept at the parameter server's version."""

    def _init_agent(self, ps: str, seed: int) -> None:
        import torch

        from dqn_course.agent import DQNAgent

        torch.set_num_threads(1)  # one core per worker; parallelism comes from the workers
        self.ps, self.version = ray.get_actor(ps), -1
        self.agent = DQNAgent(N_ACTIONS, "cpu", seed=seed)
        deadline = time.monotonic() + 600
        while not self.pull_weights():  # the learner publishes version 0 while the workers start
            if time.monotonic() > deadline:
                raise TimeoutError("the parameter server has had no weights for 10 minutes: is the learner up?")
            time.sleep(0.05)

    def pull_weights(self) -> bool:
        """Load newer weights if the parameter server has them; True when it did."""
        latest = ray.get(self.ps.latest.remote(self.version))
        if latest is None:
            return False
        self.version, (ref,) = latest
        load_numpy_weights(self.agent.q, ray.get(ref))
        return True

    def weights_info(self) -> tuple[int, str]:
        """(version, digest) of the network this process acts with."""
        return self.version, weights_digest(weights_to_numpy(self.agent.q))


class RolloutWorker(_PullsWeights):
    """One env and a CPU copy of the network; plays ``chunk`` steps per call and ships them to the replay.

    Weights are pulled at the start of every episode. A restarted worker starts a new episode (its
    first chunk says so) with a fresh env seed. The parameter server and replay actor are found by
    name (``replay=None``: only ``rollout`` works): Ray re-runs ``__init__`` on a restart, and actor
    handles passed as constructor arguments would have to survive in the object store until then.
    """

    def __init__(self, worker: int, cfg: DistConfig, ps: str, replay: str | None = None):
        self.restarted = _was_restarted()
        self.worker, self.replay = worker, replay and ray.get_actor(replay)
        self.epsilon = worker_epsilons(cfg.num_workers, cfg.eps_base, cfg.eps_alpha, cfg.epsilon)[worker]
        seed = cfg.seed + 1_000 * worker + (10_000 if self.restarted else 0)
        self.env = make_breakout(seed=seed, max_episode_steps=cfg.max_episode_steps)
        if self.env.action_space.n != N_ACTIONS:
            raise ValueError(f"the learner's network has {N_ACTIONS} actions, this env {self.env.action_space.n}")
        self._init_agent(ps, seed)
        self.state: np.ndarray | None = None  # None: the next step starts an episode
        self.new_episode = True
        self.returns: list[float] = []  # whole-game scores (unclipped), as train logs them

    def rollout(self, steps: int) -> Chunk:
        """Play ``steps`` steps with this worker's ε; returns them as a chunk (nothing is sent)."""
        out = []
        for _ in range(steps):
            if self.state is None:
                self.pull_weights()
                self.state, _ = self.env.reset()
            action = int(self.agent.act(self.state, self.epsilon)[0])
            next_state, reward, terminated, truncated, info = self.env.step(action)
            episode_end = terminated or truncated
            out.append((self.state, action, float(np.sign(reward)), next_state, terminated or info["life_lost"],
                        episode_end))
            if episode_end:
                self.returns.append(float(info["episode"]["r"]))
            self.state = None if episode_end else next_state
        chunk = Chunk.from_transitions(self.worker, out, self.new_episode)
        self.new_episode = False
        return chunk

    def collect(self, steps: int) -> dict:
        """Roll out one chunk and wait until the replay actor stored it (backpressure: no unbounded queue)."""
        returns_before = len(self.returns)
        chunk = self.rollout(steps)
        ray.get(self.replay.add_chunk.remote(chunk))
        return {"worker": self.worker, "steps": len(chunk), "returns": self.returns[returns_before:],
                "version": self.version, "epsilon": self.epsilon, "chunk_bytes": chunk.nbytes,
                "restarted": self.restarted, "incarnation": ray.get_runtime_context().get_worker_id()}


class Learner(_Role):
    """DQN updates as fast as batches arrive; pushes its weights every ``push_every`` updates."""

    def __init__(self, cfg: DistConfig, replay: str, ps: str):
        import torch

        from dqn_course.agent import DQNAgent
        from dqn_course.device import pick_device

        self.cfg, self.replay, self.ps = cfg, ray.get_actor(replay), ray.get_actor(ps)
        self.device = pick_device(cfg.device or None)
        if self.device.type == "cpu":
            threads = cfg.learner_threads or max(1, (os.cpu_count() or 1) - cfg.num_workers)
            torch.set_num_threads(threads)
        self.agent = DQNAgent(N_ACTIONS, self.device, lr=cfg.lr, gamma=cfg.gamma, double=cfg.double,
                              max_grad_norm=cfg.max_grad_norm, seed=cfg.seed)
        self.updates = 0
        self.queue: list[Batch] = []
        self.next_ref = None  # the sample request in flight

    def publish(self) -> int:
        """Push the current weights to the parameter server; returns their version (= updates so far)."""
        return ray.get(self.ps.push.remote(self.updates, weights_to_numpy(self.agent.q)))

    def _next_batch(self) -> Batch:
        if not self.queue:
            if self.next_ref is None:
                self.next_ref = self.replay.sample.remote(self.cfg.batch_size, self.cfg.prefetch)
            self.queue = ray.get(self.next_ref)[::-1]
            self.next_ref = self.replay.sample.remote(self.cfg.batch_size, self.cfg.prefetch)
        return _writable(self.queue.pop())

    def train(self, updates: int) -> dict:
        """``updates`` gradient steps; returns the running count, mean loss and the time they took."""
        t0, losses = time.perf_counter(), []
        for _ in range(updates):
            losses.append(self.agent.learn(self._next_batch()))
            self.updates += 1
            if self.updates % self.cfg.target_sync_every == 0:
                self.agent.sync_target()
            if self.updates % self.cfg.push_every == 0:
                self.publish()
        return {"updates": self.updates, "loss": float(np.mean(losses)), "seconds": time.perf_counter() - t0}

    def weights_info(self) -> tuple[int, str]:
        return self.updates, weights_digest(weights_to_numpy(self.agent.q))

    def describe(self) -> dict:
        import torch

        return {"device": str(self.device), "threads": torch.get_num_threads()}


class Evaluator(_PullsWeights):
    """Plays whole games with the parameter server's newest weights (``train.evaluate``, ε = eval_epsilon)."""

    def __init__(self, cfg: DistConfig, ps: str):
        from dqn_course.train import Config

        self.cfg = Config(seed=cfg.seed, eval_epsilon=cfg.eval_epsilon, eval_max_steps=cfg.eval_max_steps)
        self._init_agent(ps, cfg.seed)

    def evaluate(self, episodes: int) -> dict:
        from dqn_course.train import evaluate

        self.pull_weights()
        return {"version": self.version, "returns": evaluate(self.agent, self.cfg, episodes)}


def _was_restarted() -> bool:
    """True inside an actor that Ray restarted after it died (False in a driver or outside Ray)."""
    if not ray.is_initialized() or ray.get_runtime_context().get_actor_id() is None:
        return False
    return bool(ray.get_runtime_context().was_current_actor_reconstructed)


# -- the Ray session -----------------------------------------------------------------------------------


class ClusterTooSmallError(ValueError):
    """The run's actors cannot all hold their resources on the cluster at once; the message says what to change."""


class ClusterJoinError(ConnectionError):
    """``RaySession(address=...)`` could not join the cluster; the message says why and what to check."""


class ActorsPendingError(TimeoutError):
    """Actors not started after ``DistConfig.start_timeout_seconds``; the message says which and what they wait for."""


def _join_failure(address: str, err: BaseException) -> str:
    """Why joining ``address`` failed, in one message: Ray's innermost reason and what to check."""
    reasons, e = [], err
    while e is not None and len(reasons) < 5:
        reasons.append(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
        e = e.__cause__ or e.__context__
    text = f"cannot join the Ray cluster at {address}: {reasons[-1]}"
    if any("auth" in r.lower() for r in reasons):
        return (text + ". The cluster uses token authentication: set RAY_AUTH_MODE=token here, with the cluster's "
                "token in ~/.ray/auth_token, RAY_AUTH_TOKEN_PATH or RAY_AUTH_TOKEN (worker nodes need it too)")
    return text + ". Is `ray start --head` running there, and is its port reachable from this machine?"


class RaySession:
    """``ray.init`` that cleans up after itself: local by default, or joining a cluster at ``address``.

    Locally Ray starts a GCS server, a raylet, worker processes and a session folder. Here the folder is
    a fresh ``cleanup.OwnedTempDir`` (``dqn-ray-<pid>-...``), and ``close`` shuts Ray down, waits for (and
    if need be ends) exactly the processes this session started, and removes the folder, so nothing is
    left in /tmp. With ``address`` the cluster is someone else's: ``close`` only disconnects (the cluster
    stays up), and the package's code is shipped to the cluster's nodes (``py_modules``; they still need
    torch, gymnasium and ale-py); a cluster that cannot be joined raises ``ClusterJoinError`` saying why.
    Use it as a context manager, or call ``close()``; it also closes at interpreter exit. A session made
    in the main thread holds ``cleanup.exit_on_signals`` until it closes, so SIGTERM or SIGHUP end the
    program through ``close`` too (``ray.init`` puts its own SIGTERM handler in, which raises
    ``SystemExit`` as well; ``close`` restores the default); after a SIGKILL the next local session
    removes the folder.
    """

    def __init__(self, address: str | None = None, num_cpus: int | None = None, object_store_mb: int = 512,
                 log_to_driver: bool = False):
        if ray.is_initialized():
            raise RuntimeError("Ray is already running in this process: close that session first "
                               "(session.close() or ray.shutdown())")
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        self.address, self.temp_dir, self._processes, self.closed = address, None, [], False
        self._temp: OwnedTempDir | None = None
        self._signals = hold_exit_signals()  # ray.init replaces the SIGTERM handler; close() restores it
        try:
            if address:
                import dqn_course

                try:
                    ray.init(address=address, runtime_env={"py_modules": [dqn_course]},
                             logging_level=logging.WARNING, log_to_driver=log_to_driver)
                except ConnectionError as err:
                    raise ClusterJoinError(_join_failure(address, err)) from err
            else:
                self._temp = OwnedTempDir("dqn-ray-")
                self.temp_dir = self._temp.name
                ray.init(num_cpus=num_cpus or os.cpu_count(), include_dashboard=False, _temp_dir=self.temp_dir,
                         object_store_memory=object_store_mb * 2**20, logging_level=logging.WARNING,
                         log_to_driver=log_to_driver)
        except BaseException:
            self.close()
            raise
        atexit.register(self.close)

    def _ray_processes(self) -> list[psutil.Process]:
        """This process's descendants that belong to Ray (GCS, raylet, its workers, agents)."""
        out = []
        for p in psutil.Process().children(recursive=True):
            try:
                cmd = " ".join(p.cmdline())
                if "ray::" in cmd or "/ray/" in cmd or p.name() in ("raylet", "gcs_server"):
                    out.append(p)
            except psutil.Error:
                pass
        return out

    def close(self, timeout: float = 15.0) -> None:
        """Shut Ray down; locally also wait for its processes to exit and delete the session folder."""
        atexit.unregister(self.close)
        if self.closed:
            return
        self.closed = True
        if self.temp_dir is not None:  # remember who to wait for before raylet goes (workers are its children)
            self._processes = self._ray_processes()
        try:
            if ray.is_initialized():
                ray.shutdown()
            if self._temp is None:
                return
            _, alive = psutil.wait_procs(self._processes, timeout=timeout)
            for p in alive:  # only processes of this session, by pid
                p.kill()
            psutil.wait_procs(alive, timeout=5)
            self._temp.cleanup()
        finally:
            release_exit_signals(self._signals)

    def leftovers(self) -> list[str]:
        """What this session left behind after ``close``: live processes and the session folder."""
        left = []
        for p in self._processes:
            try:
                if p.status() != psutil.STATUS_ZOMBIE:
                    left.append(f"pid {p.pid} ({p.name()})")
            except psutil.NoSuchProcess:
                pass
        if self.temp_dir is not None and os.path.exists(self.temp_dir):
            left.append(self.temp_dir)
        return left

    def __enter__(self) -> RaySession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# -- the driver ------------------------------------------------------------------------------------------


def _learner_gpus(cfg: DistConfig) -> int:
    """The learner's GPUs: 1 when ``device`` asks for CUDA, or when no device is forced and the cluster has one."""
    if cfg.device:
        return 1 if cfg.device.startswith("cuda") else 0
    return 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0


def cluster_nodes() -> list[dict]:
    """The connected cluster's live nodes: ``name`` (IP/start of the node id) and their total ``CPU`` and ``GPU``."""
    return [{"name": f"{n['NodeManagerAddress']}/{n['NodeID'][:6]}", "CPU": float(n["Resources"].get("CPU", 0)),
             "GPU": float(n["Resources"].get("GPU", 0))} for n in ray.nodes() if n.get("Alive")]


def _slots(cpus: float, per_actor: float) -> int:
    """How many actors of ``per_actor`` CPUs a node of ``cpus`` CPUs holds (Ray counts in 1/10,000 CPU)."""
    return round(cpus * 10_000) // round(per_actor * 10_000)


def _fits(nodes: list[dict], actors: int, per_actor: float, learner_gpus: int) -> bool:
    """``actors`` actors of ``per_actor`` CPUs fit on ``nodes``, the first (the learner) with ``learner_gpus`` GPUs.

    Every actor asks for the same CPUs, so any placement that fills nodes one actor at a time is as good as
    any other: they fit when the nodes' slots add up, and a node with the GPU has a slot for the learner.
    """
    slots = [_slots(n["CPU"], per_actor) for n in nodes]
    if learner_gpus and not any(s >= 1 and n["GPU"] >= learner_gpus for s, n in zip(slots, nodes)):
        return False
    return sum(slots) >= actors


def check_fits(cfg: DistConfig, nodes: list[dict], learner_gpus: int = 0) -> None:
    """Raise ``ClusterTooSmallError`` unless the learner and every worker can hold their resources at once.

    ``nodes`` are totals per live node, as ``cluster_nodes`` gives them (not what other jobs leave free:
    their actors end, and this run's then start). Each of ``cfg.actors_at_once()`` actors (the learner
    and the workers; the evaluator later takes a finished worker's place) needs ``cfg.cpus_per_actor``
    CPUs on one node, and the learner ``learner_gpus`` GPUs on its node. The message says what the run
    needs, what the cluster has and which change would make it fit: fewer workers, fractional CPUs, a
    GPU node or more CPUs.
    """
    c, n = cfg.cpus_per_actor, cfg.actors_at_once()
    if _fits(nodes, n, c, learner_gpus):
        return
    have = ", ".join(f"{x['name']}: {x['CPU']:g} CPU" + (f" + {x['GPU']:g} GPU" if x["GPU"] else "")
                     for x in nodes) or "no live node"
    if learner_gpus and not _fits(nodes, 1, c, learner_gpus):
        raise ClusterTooSmallError(
            f"the learner needs {c:g} CPU + {learner_gpus} GPU on one node (device {cfg.device or 'cuda'!r}), but no "
            f"node of the cluster has that ({have}): add a GPU node (`ray start --address=HEAD_IP:PORT "
            f"--num-gpus=1`) or run the learner on the CPU (--device cpu)")
    workers = f"{cfg.num_workers} rollout worker" + ("s" if cfg.num_workers > 1 else "")
    slots = sum(_slots(x["CPU"], c) for x in nodes)
    fixes = []
    if slots >= 2 and _fits(nodes, slots, c, learner_gpus):
        fixes.append(f"fewer workers (--workers {slots - 1})")
    fraction = next((f for f in (0.5, 0.25, 0.2, 0.1, 0.05, 0.02, 0.01) if f < c and _fits(nodes, n, f, learner_gpus)),
                    None)
    if fraction is not None:
        fixes.append(f"fractional CPUs (--cpus-per-actor {fraction:g}: the actors then share cores)")
    more = max(1, math.ceil((n - slots) * c))
    fixes.append(f"{more} more CPU{'s' if more > 1 else ''} (a node started with `ray start --address=HEAD_IP:PORT "
                 f"--num-cpus={more}`)")
    raise ClusterTooSmallError(
        f"this run needs {n} actors of {c:g} CPU at once, {n * c:g} CPUs in all (the learner"
        f"{f' with {learner_gpus} GPU' if learner_gpus else ''} and {workers}; the evaluator takes a finished "
        f"worker's place, the replay actor and the parameter server take none), but the cluster has "
        f"{sum(x['CPU'] for x in nodes):g} CPUs ({have}), room for {slots} such actor{'s' if slots != 1 else ''}. "
        f"Ask for " + ", or ".join(fixes))


def _request_text(request: dict) -> str:
    return " + ".join(f"{v:g} {k}" for k, v in request.items() if v) or "no CPU"


def _actor_status(handle) -> str:
    """What Ray's actor table says of an actor: not running yet, starting (pid), alive, restarting, dead."""
    try:
        from ray._private import state  # Ray's own view of the actor table (no dashboard needed)

        info = state.actors(handle._actor_id.hex())
    except Exception:  # a developer API: a report without it beats a failed run
        return "not started"
    status = info.get("State", "")
    if status in ("DEPENDENCIES_UNREADY", "PENDING_CREATION"):
        return f"starting (pid {info['Pid']})" if info.get("Pid") else "not running yet"
    return status.lower().replace("_", " ") or "unknown"


def _cluster_state() -> str:
    """Free CPUs, and the requests Ray cannot place for want of resources (``ray status``'s pending demands)."""
    try:
        free, total = ray.available_resources().get("CPU", 0), ray.cluster_resources().get("CPU", 0)
        text = f"cluster: {free:g} of {total:g} CPUs free"
    except Exception:
        return "cluster: state unknown"
    try:
        from ray.autoscaler.v2.sdk import get_cluster_resource_state

        pending = get_cluster_resource_state(ray._private.worker.global_worker.gcs_client).pending_resource_requests
        demands = [(dict(r.request.resources_bundle), r.count) for r in pending]
    except Exception:  # developer APIs: without them the free CPUs still say much
        return text
    if not demands:
        return text + "; no request waits for resources"
    return text + "; waiting for resources no node has free: " + ", ".join(
        f"{n} request{'s' if n > 1 else ''} for {_request_text(bundle)}" for bundle, n in demands)


def _report(message: str) -> None:
    print(f"dqn_course.distributed: {message}", file=sys.stderr, flush=True)


def _wait_started(actors: dict[str, tuple], cfg: DistConfig) -> dict[str, dict]:
    """Wait until every actor answered its first call (``where``); returns name -> its ``where()``.

    ``actors`` maps a name to (handle, resources it asked for). Every ``cfg.pending_report_seconds`` the
    ones still waiting are reported on stderr with what they asked for and where they stand; an actor
    whose constructor failed raises its error here; after ``cfg.start_timeout_seconds`` (0: never)
    ``ActorsPendingError``.
    """
    refs = {handle.where.remote(): name for name, (handle, _) in actors.items()}
    out: dict[str, dict] = {}
    t0 = time.monotonic()
    next_report = t0 + cfg.pending_report_seconds
    deadline = t0 + cfg.start_timeout_seconds if cfg.start_timeout_seconds else math.inf
    while refs:
        ready, _ = ray.wait(list(refs), num_returns=1, timeout=max(0.0, min(next_report, deadline) - time.monotonic()))
        for ref in ready:
            out[refs.pop(ref)] = ray.get(ref)  # a constructor's error surfaces here
        now = time.monotonic()
        if not refs or now < min(next_report, deadline):
            continue
        waiting = "; ".join(f"{name} ({_request_text(actors[name][1])}): {_actor_status(actors[name][0])}"
                            for name in refs.values())
        message = (f"{len(refs)} of {len(actors)} actors not started after {now - t0:.0f} s: {waiting} "
                   f"({_cluster_state()})")
        if now >= deadline:
            raise ActorsPendingError(f"{message}. Gave up after start_timeout_seconds={cfg.start_timeout_seconds:g}: "
                                     f"free the cluster's CPUs, or ask for less (--workers, --cpus-per-actor)")
        _report(message + ", still waiting")
        next_report = now + cfg.pending_report_seconds
    return out


@dataclass
class Progress:
    """What the driver knows after each event; ``run``'s callback gets it (e.g. to kill a worker in a test)."""

    steps: int = 0
    updates: int = 0
    elapsed: float = 0.0
    workers: list = dataclasses.field(default_factory=list)  # actor handles, index = worker id
    alive: set = dataclasses.field(default_factory=set)


def run(cfg: DistConfig, address: str | None = None, callback: Callable[[Progress], None] | None = None) -> dict:
    """Train with ``cfg`` on Ray; returns a summary (rates over the learning window, worker events, returns).

    Uses the Ray session this process already has (a notebook's, a test's; ``address`` is then not used)
    or starts one: local (with the CPUs the run needs, at least this machine's) unless ``address`` names
    a cluster to join. Before creating any actor it checks that the run fits the cluster
    (``check_fits``: ``ClusterTooSmallError`` otherwise); actors slow to start are reported on stderr
    (``_wait_started``). The run's actors are ended however it ends, Ctrl-C, SIGTERM and SIGHUP
    included (``cleanup.exit_on_signals``); a session started here is closed (a joined cluster stays up).
    """
    cfg.validate()
    with exit_on_signals():
        session = None
        if not ray.is_initialized():
            cpus = max(os.cpu_count() or 1, math.ceil(cfg.actors_at_once() * cfg.cpus_per_actor))
            session = RaySession(address, num_cpus=cpus)
        actors: list = []
        try:
            return _drive(cfg, callback, actors)
        finally:
            for actor in actors:
                ray.kill(actor)
            if session is not None:
                session.close()


def _drive(cfg: DistConfig, callback, actors: list) -> dict:
    t_start = time.perf_counter()
    gpus = _learner_gpus(cfg)
    nodes = cluster_nodes()
    check_fits(cfg, nodes, gpus)  # before any actor exists: a run that cannot fit is refused, not left waiting
    c = cfg.cpus_per_actor
    free = ray.available_resources().get("CPU", 0)
    if free < cfg.actors_at_once() * c:
        _report(f"the run needs {cfg.actors_at_once() * c:g} CPUs and other jobs hold the cluster's now ({free:g} of "
                f"{sum(n['CPU'] for n in nodes):g} free): its actors start as those free up")
    run_id = uuid.uuid4().hex[:8]  # actor names unique to this run, so runs sharing a cluster never mix
    replay_name, ps_name = f"dqn-replay-{run_id}", f"dqn-params-{run_id}"
    replay = ray.remote(ReplayServer).options(name=replay_name, num_cpus=0).remote(
        cfg.buffer_size, cfg.num_workers, cfg.seed, cfg.prefault)
    ps = ray.remote(ParameterServer).options(name=ps_name, num_cpus=0).remote()
    actors += [replay, ps]
    learner = ray.remote(Learner).options(num_cpus=c, num_gpus=gpus).remote(cfg, replay_name, ps_name)
    actors.append(learner)
    published = learner.publish.remote()  # version 0; the workers start meanwhile and wait for it
    # Ray restarts a dead worker (max_restarts) and re-sends the call it was running (max_task_retries=-1);
    # once restarts run out, calls fail with ActorDiedError and the worker is reported dead.
    worker_cls = ray.remote(RolloutWorker).options(num_cpus=c, max_restarts=cfg.max_restarts, max_task_retries=-1)
    workers = [worker_cls.remote(i, cfg, ps_name, replay_name) for i in range(cfg.num_workers)]
    actors += workers
    requests = {"replay": (replay, {}), "parameter server": (ps, {}),
                "learner": (learner, {"CPU": c, "GPU": gpus}), **{f"worker {i}": (w, {"CPU": c})
                                                                   for i, w in enumerate(workers)}}
    started = _wait_started(requests, cfg)
    ray.get(published)  # a learner that cannot start (no GPU, bad config) fails the run here
    progress = Progress(workers=workers, alive=set(range(cfg.num_workers)))
    pending = {w.collect.remote(cfg.chunk): i for i, w in enumerate(workers)}
    events, returns = [], []
    per_worker, versions, incarnation = [0] * cfg.num_workers, [-1] * cfg.num_workers, [None] * cfg.num_workers
    learner_ref, window = None, None  # window: (time, steps, updates) at the learner's first result
    last_update = (0.0, 0)  # (time, updates) of the newest learner result
    last_result = time.monotonic()

    def done() -> bool:
        if progress.steps >= cfg.total_steps:
            return True
        return (cfg.max_learning_seconds is not None and window is not None
                and time.perf_counter() - window[0] >= cfg.max_learning_seconds)

    while pending or learner_ref is not None:
        if learner_ref is None and not done() and progress.steps >= cfg.learning_starts:
            learner_ref = learner.train.remote(cfg.updates_per_call)
        waiting = list(pending) + ([learner_ref] if learner_ref is not None else [])
        ready, _ = ray.wait(waiting, num_returns=1, timeout=cfg.pending_report_seconds)
        if not ready:  # nothing for a while: say who we wait for and how they stand, then keep waiting
            names = [f"worker {i}" for i in sorted(pending.values())] + (["learner"] if learner_ref else [])
            _report(f"no result for {time.monotonic() - last_result:.0f} s from "
                    + "; ".join(f"{name} ({_actor_status(requests[name][0])})" for name in names)
                    + f" ({_cluster_state()}), still waiting")
            continue
        [ref] = ready
        last_result = time.monotonic()
        now = time.perf_counter()
        if ref == learner_ref:
            stats = ray.get(ref)
            progress.updates = stats["updates"]
            last_update = (now, stats["updates"])
            if window is None:
                window = (now, progress.steps, stats["updates"])
            learner_ref = None if done() else learner.train.remote(cfg.updates_per_call)
        else:
            i = pending.pop(ref)
            try:
                stats = ray.get(ref)
            except ActorUnavailableError:  # unreachable for a moment (restarting, network): ask again
                pending[workers[i].collect.remote(cfg.chunk)] = i
                continue
            except ActorDiedError as err:  # killed for good or out of restarts: report it, go on without it
                progress.alive.discard(i)
                events.append({"worker": i, "event": "died", "at_step": progress.steps, "error": str(err)[:200]})
                if not progress.alive:
                    raise RuntimeError(f"all {cfg.num_workers} rollout workers died: {events}") from err
                continue
            # a restart shows as a new process (or, before its first reply, as a restarted one)
            if stats["incarnation"] != incarnation[i] and (incarnation[i] is not None or stats["restarted"]):
                events.append({"worker": i, "event": "restarted", "at_step": progress.steps})
            incarnation[i], versions[i] = stats["incarnation"], stats["version"]
            progress.steps += stats["steps"]
            per_worker[i] += stats["steps"]
            returns += stats["returns"]
            if not done():
                pending[workers[i].collect.remote(cfg.chunk)] = i
        progress.elapsed = now - t_start
        if callback is not None:
            callback(progress)

    t_end = time.perf_counter()
    for worker in workers:  # done: their CPUs go back to the cluster (the evaluator takes one)
        ray.kill(worker)
    placement = {"learner": started["learner"], "replay": started["replay"], "params": started["parameter server"],
                 "workers": [started[f"worker {i}"] for i in range(cfg.num_workers)]}
    summary = {"workers": cfg.num_workers, "steps": progress.steps, "updates": progress.updates,
               "seconds": t_end - t_start, "steps_per_worker": per_worker, "worker_weight_versions": versions,
               "episodes": len(returns), "last_returns": returns[-10:], "events": events,
               "dead_workers": sorted(set(range(cfg.num_workers)) - progress.alive),
               "epsilons": worker_epsilons(cfg.num_workers, cfg.eps_base, cfg.eps_alpha, cfg.epsilon),
               "learner_gpus": gpus, **{f"learner_{k}": v for k, v in ray.get(learner.describe.remote()).items()},
               "replay": ray.get(replay.stats.remote()), "cpus_per_actor": c,
               "cluster": {"nodes": len(nodes), "CPU": sum(n["CPU"] for n in nodes),
                           "GPU": sum(n["GPU"] for n in nodes)},
               "placement": placement}
    if window is not None and last_update[0] > window[0]:  # rates need a learner result after the first one
        summary["window_s"] = t_end - window[0]
        summary["ingest_steps_per_s"] = (progress.steps - window[1]) / (t_end - window[0])
        summary["updates_per_s"] = (last_update[1] - window[2]) / (last_update[0] - window[0])
    summary["weights_version"] = ray.get(ps.latest.remote())[0]
    if cfg.eval_episodes > 0:
        evaluator = ray.remote(Evaluator).options(num_cpus=c).remote(cfg, ps_name)
        actors.append(evaluator)
        summary["weights_version"] = ray.get(learner.publish.remote())  # evaluate the final network
        placement["evaluator"] = _wait_started({"evaluator": (evaluator, {"CPU": c})}, cfg)["evaluator"]
        summary["eval"] = ray.get(evaluator.evaluate.remote(cfg.eval_episodes))
    summary["nodes_used"] = len({p["node"] for p in (placement["learner"], placement["replay"], placement["params"],
                                                      *placement["workers"], placement.get("evaluator"))
                                 if p is not None})
    return summary


# -- CLI ------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> tuple[DistConfig, argparse.Namespace]:
    p = argparse.ArgumentParser(prog="python -m dqn_course.distributed", description=__doc__.split("\n")[0])
    p.add_argument("--address", default=None, help="join the Ray cluster at HOST:PORT (default: local Ray)")
    p.add_argument("--workers", type=int, default=DistConfig.num_workers, help="rollout workers")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    skip = {"num_workers", "epsilon", "max_learning_seconds", "max_episode_steps"}
    for f in dataclasses.fields(DistConfig):
        if f.name in skip:
            continue
        kind = {"int": int, "float": float, "str": str, "bool": parse_bool}[str(f.type)]
        p.add_argument("--" + f.name.replace("_", "-"), dest=f.name, type=kind, default=f.default)
    for name in ("epsilon", "max_learning_seconds"):
        p.add_argument("--" + name.replace("_", "-"), dest=name, type=float, default=None)
    p.add_argument("--max-episode-steps", dest="max_episode_steps", type=int, default=None)
    args = p.parse_args(argv)
    fields = {f.name for f in dataclasses.fields(DistConfig)}
    cfg = DistConfig(num_workers=args.workers, **{k: v for k, v in vars(args).items() if k in fields})
    return cfg, args


def _fail(message: str, status: int) -> NoReturn:
    """End the CLI the way argparse does: ``error: <message>`` on stderr, no traceback, exit ``status``."""
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(status)


def main(argv: list[str] | None = None) -> None:
    """The CLI: ``run`` with the parsed settings, then its summary (``--json``: one JSON object on stdout).

    A setting that cannot work, or a run that cannot fit the cluster, ends with ``error: ...`` on stderr
    and exit status 2 (as argparse does); a cluster that cannot be joined, or actors that never start,
    the same way with status 1.
    """
    cfg, args = parse_args(argv)
    try:
        cfg.validate()
    except ConfigError as err:
        _fail(str(err), 2)
    try:
        summary = run(cfg, address=args.address)
    except ClusterTooSmallError as err:
        _fail(str(err), 2)
    except (ClusterJoinError, ActorsPendingError) as err:
        _fail(str(err), 1)
    if args.json:
        print(json.dumps(summary))
        return
    rate = (f"{summary['ingest_steps_per_s']:,.0f} env steps/s ingested, {summary['updates_per_s']:,.1f} updates/s "
            f"while learning" if "ingest_steps_per_s" in summary else "too short to time while learning")
    print(f"done: {summary['steps']:,} steps from {cfg.num_workers} worker(s), {summary['updates']:,} updates "
          f"on {summary['learner_device']} in {summary['seconds']:.0f} s ({rate}), on {summary['nodes_used']} "
          f"node(s); {summary['episodes']} games, {len(summary['events'])} worker restarts or deaths, dead: "
          f"{summary['dead_workers'] or 'none'}")
    if "eval" in summary:
        print(f"evaluation of weights version {summary['eval']['version']}: mean return "
              f"{np.mean(summary['eval']['returns']):.1f} over {len(summary['eval']['returns'])} games")


if __name__ == "__main__":
    main()
