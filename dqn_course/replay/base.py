"""What every replay memory shares: the ``Batch`` it returns, input checks, a preallocated ring.

The API every memory keeps (``dqn_course.replay`` lists the memories)::

    memory.add(state, action, reward, next_state, done, episode_end)
    batch = memory.sample(32)        # Batch(states, actions, rewards, next_states, dones, ids)
    memory.nbytes                    # bytes the memory holds right now

``done`` means "do not bootstrap from ``next_state``" (the game ended, or a life was lost and the
learner treats that as terminal). ``episode_end`` means "the observation stream restarts after this
step" (``env.reset()`` is called: the game ended or was truncated). They differ twice: a lost life
is ``done`` without ``episode_end`` (the game and its frames go on); a time-limit truncation is
``episode_end`` without ``done`` (the learner must still bootstrap from the real last frame).

``ids`` in a batch are the transitions' running numbers (0 for the first ``add`` ever), so a test
can look every sampled transition up in a plain list.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

from dqn_course.contracts import Count, check_module
from dqn_course.profiling import check_fits


class Batch(NamedTuple):
    """A sampled minibatch; arrays share their first axis (the batch)."""

    states: np.ndarray  # (B, stack, H, W), the memory's observation dtype
    actions: np.ndarray  # (B,) int64
    rewards: np.ndarray  # (B,) float32
    next_states: np.ndarray  # (B, stack, H, W)
    dones: np.ndarray  # (B,) float32, 1.0 where the target must not bootstrap
    ids: np.ndarray  # (B,) int64, running number of each transition
    weights: np.ndarray | None = None  # (B,) float32 importance-sampling weights (prioritized replay only)
    indices: np.ndarray | None = None  # (B,) int64 where to send new priorities (prioritized replay only)


_FLOAT32_MAX = float(np.finfo(np.float32).max)


def check_obs_shape(obs_shape) -> tuple[int, ...]:
    """``obs_shape`` as a tuple ``(stack, *frame_shape)``, at least two positive whole numbers; else ``ValueError``.
    The memories of stacks of 2-D frames take three (their annotation, ``StackShape``); the blog's deque keeps
    frames with a channel axis too."""
    if isinstance(obs_shape, (str, bytes)) or not isinstance(obs_shape, (tuple, list, np.ndarray)):
        raise ValueError(f"obs_shape must be a tuple (stack, *frame_shape) such as (4, 84, 84), got {obs_shape!r}")
    if any(isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)) for d in obs_shape):
        raise ValueError(f"obs_shape must hold whole numbers (stack, height, width), got {obs_shape!r}")
    obs_shape = tuple(int(d) for d in obs_shape)
    if len(obs_shape) < 2 or min(obs_shape) < 1:
        raise ValueError(f"obs_shape must be (stack, *frame_shape) with positive sizes, got {obs_shape}")
    return obs_shape


DType = type | np.dtype | str  # what np.dtype takes here: np.uint8, np.dtype('float32'), 'uint8'
Seed = int | np.random.SeedSequence | np.random.BitGenerator | np.random.Generator | None  # what default_rng takes


def check_seed(seed: Seed) -> None:
    """A seed numpy's ``default_rng`` takes: None, a whole number >= 0, a ``SeedSequence`` or a generator."""
    if seed is None or isinstance(seed, (np.random.SeedSequence, np.random.BitGenerator, np.random.Generator)):
        return
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be None or a whole number >= 0, got {seed!r}")


def check_stack_shift(state_bytes: bytes, next_bytes: bytes, stack: Count) -> None:
    """A transition's ``next_state`` continues its ``state`` (both given as their bytes, ``tobytes()``): its first
    ``stack - 1`` frames are ``state``'s last ``stack - 1``, as a frame stack shifts by one frame per step.
    Compared with ``memcmp`` on the bytes, cheaper than ``np.array_equal`` (``benchmarks/ab/ab_add_checks.py``).
    Raises ``ValueError`` saying what to pass instead."""
    f = len(state_bytes) // stack
    if next_bytes[:-f] != state_bytes[f:]:
        raise ValueError(f"next_state does not continue state: its first {stack - 1} frames must be state's last "
                         f"{stack - 1} (a frame stack shifts by one frame per step); pass the next_state the env "
                         f"returned for this state")


@runtime_checkable
class MemoryLike(Protocol):
    """A replay memory as the loops, checkpoints and benchmarks use it: any ``ReplayMemory``, or a wrapper that
    keeps its API (``dqn_course.per.PrioritizedMemory``)."""

    def add(self, *args, **kwargs) -> None: ...

    def sample(self, batch_size: Count, *args, **kwargs) -> Batch: ...

    def __len__(self) -> int: ...


class ReplayMemory:
    """What all memories share: input checks, the seeded generator, the sample-size check."""

    def __init__(self, capacity: Count, obs_shape: Sequence[int], obs_dtype: DType = np.uint8, seed: Seed = None):
        obs_shape = check_obs_shape(obs_shape)
        check_seed(seed)
        if not isinstance(capacity, (int, np.integer)) or isinstance(capacity, bool) or capacity < 1:
            raise ValueError(f"capacity must be a positive integer, got {capacity!r}")
        self.capacity = int(capacity)
        self.obs_shape = obs_shape
        self.obs_dtype = np.dtype(obs_dtype)
        self.stack = obs_shape[0]
        self.frame_shape = obs_shape[1:]
        self.rng = np.random.default_rng(seed)
        self.added = 0  # transitions ever added; the next one gets this id

    # -- input checks ---------------------------------------------------------------------------
    def _check_obs(self, name: str, obs) -> np.ndarray:
        if not isinstance(obs, np.ndarray):
            raise TypeError(f"{name} must be a numpy array of shape {self.obs_shape}, got {type(obs).__name__}")
        if obs.shape != self.obs_shape:
            raise ValueError(f"{name} has shape {obs.shape}, this memory stores {self.obs_shape}")
        if obs.dtype != self.obs_dtype:
            raise TypeError(
                f"{name} has dtype {obs.dtype}, this memory stores {self.obs_dtype} "
                f"(convert on purpose, e.g. obs.astype(np.{self.obs_dtype}), so the cost is visible)"
            )
        return obs

    @staticmethod
    def _check_action(action) -> int:
        if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)):
            if isinstance(action, np.ndarray) and action.ndim == 0 and np.issubdtype(action.dtype, np.integer):
                action = int(action)
            else:
                raise TypeError(f"action must be an integer, got {action!r}")
        if not 0 <= action < 256:
            raise ValueError(f"action must be in [0, 256), got {action}")
        return int(action)

    @staticmethod
    def _check_reward(reward) -> float:
        """A real number that stays finite as the float32 the memory stores (1e40 would become inf)."""
        if type(reward) is not float and (isinstance(reward, (bool, np.bool_)) or not isinstance(
                reward, (int, float, np.integer, np.floating))):
            if isinstance(reward, np.ndarray) and reward.ndim == 0 and reward.dtype.kind in "iuf":
                reward = reward.item()
            else:
                raise TypeError(f"reward must be a real number (int or float), got {reward!r}")
        reward = float(reward)
        if not -_FLOAT32_MAX <= reward <= _FLOAT32_MAX:
            raise ValueError(f"reward must be finite, got {reward} (stored as a float32: "
                             f"|reward| <= {_FLOAT32_MAX:.3g})")
        return reward

    @staticmethod
    def _check_flag(name: str, value) -> bool:
        """``done`` / ``episode_end``: a bool, a numpy bool or the ints 0 and 1 (not a string: "no" is true)."""
        if type(value) is bool or type(value) is np.bool_:
            return bool(value)
        if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "biu":
            value = value.item()
        if isinstance(value, (int, np.integer)) and value in (0, 1):
            return bool(value)
        raise TypeError(f"{name} must be True or False (a bool, numpy bool, 0 or 1), got {value!r}")

    def _check_batch_size(self, batch_size: int) -> None:
        if isinstance(batch_size, (bool, np.bool_)) or not isinstance(batch_size, (int, np.integer)):
            raise TypeError(f"batch_size must be an integer (int or numpy integer), got {batch_size!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if len(self) < batch_size:
            raise ValueError(
                f"cannot sample {batch_size} transitions: only {len(self)} can be sampled so far "
                f"(fill the memory first, e.g. wait until len(memory) >= batch_size)"
            )

    def _checked(self, state, action, reward, next_state):
        return (self._check_obs("state", state), self._check_action(action), self._check_reward(reward),
                self._check_obs("next_state", next_state))

    # -- the API --------------------------------------------------------------------------------
    def add(self, state, action, reward, next_state, done: bool, episode_end: bool | None = None) -> None:
        raise NotImplementedError

    def sample(self, batch_size: Count) -> Batch:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    @property
    def nbytes(self) -> int:
        raise NotImplementedError


class PreallocatedRing(ReplayMemory):
    """A ring of preallocated host arrays; the memory guard runs before any of them exists.

    ``arrays`` maps a name to (shape without the capacity axis, dtype). ``prefault=True`` writes
    every page once, so a capacity the machine cannot really back fails now, not hours later
    (``np.zeros`` only reserves address space; pages arrive when first written).
    ``extra_host_bytes`` is host RAM a subclass allocates outside ``arrays`` (its frame store),
    checked together with them. ``given`` maps some of the names to ready arrays (views of an owner's
    larger arrays, e.g. one row each of ``MultiStreamMemory``'s joint ring), used as they are and not
    counted again: each must have the shape and dtype ``arrays`` names. Raises ``InsufficientMemoryError``
    when the arrays to allocate do not fit, ``ValueError`` for a given array of the wrong shape or dtype.
    """

    def __init__(self, capacity: Count, obs_shape: Sequence[int], obs_dtype: DType, seed: Seed, arrays: dict,
                 prefault: bool, extra_host_bytes: int = 0,
                 given: dict[str, np.ndarray] | None = None):
        super().__init__(capacity, obs_shape, obs_dtype, seed)
        given = given or {}
        for name, arr in given.items():
            shape, dt = arrays[name]
            if not isinstance(arr, np.ndarray) or arr.shape != (self.capacity, *shape) or arr.dtype != np.dtype(dt):
                raise ValueError(f"given {name} must be a {np.dtype(dt)} array of shape {(self.capacity, *shape)}, "
                                 f"got {type(arr).__name__} {getattr(arr, 'dtype', '')}{list(np.shape(arr))}")
        planned = sum(self.capacity * int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize
                      for name, (shape, dt) in arrays.items() if name not in given)
        check_fits(planned + extra_host_bytes, f"{type(self).__name__}(capacity={self.capacity:,})")
        for name, (shape, dt) in arrays.items():
            arr = given.get(name)
            if arr is None:
                arr = np.zeros((self.capacity, *shape), dtype=dt)
                if prefault:
                    arr.fill(0)
            setattr(self, name, arr)
        self._array_names = tuple(arrays)

    @property
    def nbytes(self) -> int:
        """Bytes held by the ring's arrays."""
        return sum(int(getattr(self, n).nbytes) for n in self._array_names)


# -- checking saved states: flat dicts of numpy arrays, never pickles ---------------------------------------------

def text_array(value: str) -> np.ndarray:
    """A short string as a uint8 array (states hold arrays only)."""
    return np.frombuffer(value.encode(), np.uint8).copy()


def shown(array: np.ndarray) -> str:
    """A config value from a state dict, readable in an error message."""
    array = np.asarray(array)
    return repr(array.tobytes().decode()) if array.dtype == np.uint8 else str(array.tolist())


def require_keys(state: dict, keys: Iterable[str]) -> None:
    """``ValueError`` naming the keys ``state`` lacks."""
    missing = [k for k in keys if k not in state]
    if missing:
        raise ValueError(f"cannot load: the state has no {', '.join(missing)}")


def check_array(name: str, saved: np.ndarray, shape: Sequence[int], dtype: DType) -> None:
    """``ValueError`` unless the saved array has this shape and dtype."""
    saved = np.asarray(saved)
    if saved.shape != tuple(shape) or saved.dtype != np.dtype(dtype):
        raise ValueError(f"cannot load: saved {name} is {saved.dtype}{list(saved.shape)}, "
                         f"this memory's is {np.dtype(dtype)}{list(shape)}")


check_module(globals())
