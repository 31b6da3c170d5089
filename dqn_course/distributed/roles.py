"""The roles, plain classes that ``ray.remote`` turns into actors, and the ``Chunk`` of transitions a worker sends.

The roles: rollout workers, the replay actor, the parameter server, the learner and the evaluator.

Each role also runs in-process (tests build one directly). torch (and the agent, which needs it) is imported
inside the roles that run a network: the replay actor and the parameter server then start without it.
"""
from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import ray

from dqn_course.contracts import Count, SignedInt, check_module
from dqn_course.distributed.config import DistConfig, worker_epsilons
from dqn_course.envs import learning_signals, make_breakout
from dqn_course.replay import Batch, MultiStreamMemory

if TYPE_CHECKING:
    import torch

N_ACTIONS = 4  # Breakout's action set (NOOP, FIRE, RIGHT, LEFT)
Transition = tuple  # (state, action, reward, next_state, done, episode_end), as replay.add takes them

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

    def __init__(self, capacity: Count, num_streams: Count, seed: int | None = None, prefault: bool = False):
        self.memory = MultiStreamMemory(capacity, num_streams, seed=seed, prefault=prefault)
        self.held: list[Transition | None] = [None] * num_streams
        self.received = [0] * num_streams  # transitions received per stream
        self.sampled = 0  # transitions drawn for batches, all calls together

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

    def sample(self, batch_size: Count, count: Count = 1) -> list[Batch]:
        """``count`` independent batches in one call: one round trip feeds several learner updates."""
        batches = [self.memory.sample(batch_size) for _ in range(count)]
        self.sampled += batch_size * count
        return batches

    def stream_transitions(self, stream: int) -> Batch:
        """Every sampleable transition of one stream, oldest first (to check what arrived)."""
        s = self.memory.streams[stream]
        slots = np.flatnonzero(s.valid[: min(s.written, s.capacity)])
        return s.batch_at(slots[np.argsort(s.ids[slots])])

    def stats(self) -> dict:
        """Transitions received per stream, stored (sampleable) and drawn for batches; the memory's bytes."""
        return {"received": list(self.received), "stored": len(self.memory), "sampled": self.sampled,
                "nbytes": self.memory.nbytes}


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

    def latest(self, have: SignedInt = -1) -> tuple[int, list] | None:
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
            clipped, done, episode_end = learning_signals(reward, terminated, truncated, info["life_lost"])
            out.append((self.state, action, float(clipped), next_state, done, episode_end))
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

    def _request(self, left: int | None) -> None:
        """Ask the replay for the next ``prefetch`` batches, or for at most ``left`` (none when ``left`` is 0)."""
        n = self.cfg.prefetch if left is None else min(self.cfg.prefetch, left)
        self.next_ref = self.replay.sample.remote(self.cfg.batch_size, n) if n > 0 else None

    def _next_batch(self, left: int | None) -> Batch:
        """The next batch; ``left``: the batches the current call still needs, this one included (None: no bound,
        the next request may draw beyond the call)."""
        if not self.queue:
            if self.next_ref is None:
                self._request(left)
            self.queue = ray.get(self.next_ref)[::-1]
            self._request(None if left is None else left - len(self.queue))
        return _writable(self.queue.pop())

    def train(self, updates: int, draw_ahead: bool = True) -> dict:
        """``updates`` gradient steps; returns the running count, mean loss and the time they took.

        ``draw_ahead``: the replay draws the next ``prefetch`` batches while the learner learns, beyond this
        call too (the next call finds them ready). False draws only the batches this call uses, so the samples
        drawn from the replay are exactly ``updates`` batches when the call returns: what a rate limiter counts.
        """
        t0, losses = time.perf_counter(), []
        for k in range(updates):
            losses.append(self.agent.learn(self._next_batch(None if draw_ahead else updates - k)))
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
    """Plays whole games with the parameter server's newest weights (``records.play_evaluation``, ε = eval_epsilon)."""

    def __init__(self, cfg: DistConfig, ps: str):
        from dqn_course.train import Config

        self.cfg = Config(seed=cfg.seed, eval_epsilon=cfg.eval_epsilon, eval_max_steps=cfg.eval_max_steps)
        self._init_agent(ps, cfg.seed)

    def evaluate(self, episodes: Count) -> dict:
        from dqn_course.records import play_evaluation

        self.pull_weights()
        return {"version": self.version, "returns": play_evaluation(self.agent, self.cfg, episodes)}


def _was_restarted() -> bool:
    """True inside an actor that Ray restarted after it died (False in a driver or outside Ray)."""
    if not ray.is_initialized() or ray.get_runtime_context().get_actor_id() is None:
        return False
    return bool(ray.get_runtime_context().was_current_actor_reconstructed)


check_module(globals())
