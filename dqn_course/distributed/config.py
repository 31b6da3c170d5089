"""``DistConfig``, one distributed run's settings and their checks, and Ape-X's ε per rollout worker."""
from __future__ import annotations

from dataclasses import dataclass

from dqn_course.contracts import Probability, check_module
from dqn_course import check_fields, check_ranges, require


def dist_flag(name: str) -> str:
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

    def __post_init__(self) -> None:
        """A config is made with every field of its kind and in its range (``ConfigError``); the rules between
        fields wait for ``validate`` (fields may still change before it)."""
        self._check_fields()

    def _check_fields(self) -> None:
        check_fields(self, dist_flag)
        check_ranges(self, flag=dist_flag,
                     positive=("num_workers", "total_steps", "chunk", "batch_size", "target_sync_every", "push_every",
                               "updates_per_call", "prefetch", "buffer_size", "lr", "max_grad_norm",
                               "max_episode_steps", "eval_max_steps", "max_learning_seconds",
                               "pending_report_seconds"),
                     non_negative=("learning_starts", "eps_alpha", "eval_episodes", "max_restarts", "seed",
                                   "learner_threads", "start_timeout_seconds"),
                     fractions=("gamma", "eps_base", "epsilon", "eval_epsilon"))

    def validate(self) -> None:
        """Refuse settings that cannot work, before any actor starts: ``ConfigError`` (a ``ValueError``) naming
        the setting, its value and what to change. The same field-type check as ``train.Config``
        (``dqn_course.check_fields``), then ranges, then the rules between fields."""
        self._check_fields()
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


def worker_epsilons(num_workers: int, base: Probability = 0.4, alpha: float = 7.0,
                    fixed: float | None = None) -> list[float]:
    """Ape-X's fixed ε per worker, ``base ** (1 + alpha * i / (N - 1))``: a spread from 0.4 to 0.4**8.

    A few workers explore a lot and most act nearly greedily, so together they cover both without an
    annealing schedule. One worker has no spread: it uses ``base``. ``fixed`` gives every worker that ε.
    """
    if not isinstance(num_workers, int) or num_workers < 1:
        raise ValueError(f"num_workers must be a positive integer, got {num_workers!r}")
    if fixed is not None or num_workers == 1:
        return [base if fixed is None else fixed] * num_workers
    return [base ** (1 + alpha * i / (num_workers - 1)) for i in range(num_workers)]


check_module(globals())
