"""A training run's settings: ``Config``, one dataclass with a line per field, and its presets.

``Config.validate`` refuses settings which cannot work before anything is built (``allocation.check_run`` adds
the runs this machine cannot take).

``PRESETS`` names the learning problems the course runs: ``breakout`` (CleanRL ``dqn_atari``'s settings,
with a Huber loss and gradient norms clipped at 10), ``breakout-fast`` (the same on the GPU path),
``breakout-cpu`` (shrunk to hours on a laptop) and ``quick`` (does it run?).
``python -m dqn_course.train --preset NAME --field value`` overrides any field.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from dqn_course.contracts import check_module
from dqn_course import ConfigError, check_fields, check_ranges, require
from dqn_course.replay.stores import STORAGES

ENV_BACKENDS = ("gymnasium", "ale")
_POSITIVE = ("total_steps", "buffer_size", "batch_size", "target_sync_every", "train_every", "eval_every",
             "eval_episodes", "eval_max_steps", "checkpoint_every", "num_envs", "lr", "max_grad_norm")
_NON_NEGATIVE = ("learning_starts", "keep_checkpoints", "time_limit", "max_rss_gb", "min_available_gb", "per_alpha",
                 "seed")
_FRACTIONS = ("gamma", "eps_start", "eps_end", "eval_epsilon", "per_beta0")  # each in [0, 1]


@dataclass
class Config:
    """Defaults are the ``breakout`` preset: CleanRL ``dqn_atari``'s settings (Adam 1e-4, 1M replay, 10M steps,
    target sync every 1,000, 80k steps before learning), with a Huber loss and gradient norms clipped at 10."""

    total_steps: int = 10_000_000  # agent steps (x4 frames)
    buffer_size: int = 1_000_000  # frames in the frame-sharing replay memory
    lr: float = 1e-4
    gamma: float = 0.99
    batch_size: int = 32
    target_sync_every: int = 1_000
    eps_start: float = 1.0
    eps_end: float = 0.01
    eps_fraction: float = 0.10  # ε decays linearly over this fraction of total_steps
    learning_starts: int = 80_000
    train_every: int = 4
    double: bool = False
    max_grad_norm: float = 10.0
    eval_every: int = 250_000
    eval_episodes: int = 10
    eval_epsilon: float = 0.05
    eval_max_steps: int = 27_000  # agent steps per evaluation game (the ALE's 108k-frame limit)
    checkpoint_every: int = 100_000  # agent steps between checkpoints (agent export + full training state)
    keep_checkpoints: int = 2  # full training states kept (0 = all); older ones go once a newer one is written
    resume: str = ""  # a state-*.ckpt file, or a run folder to resume from its newest good checkpoint
    time_limit: float = 0.0  # minutes of wall time; then evaluate, save the whole state and stop (0 = none)
    max_rss_gb: float = 0.0  # memory watchdog: checkpoint and stop when this process's RSS reaches it (0 = off)
    min_available_gb: float = 0.0  # ... or when the machine's available RAM falls to it (0 = off)
    replay_storage: str = "ram"  # replay frames: "ram", "lz4" / "zstd" (compressed in RAM) or "disk" (memmap)
    replay_path: str = ""  # folder for replay_storage="disk" ("" = <out_dir>/replay); the run owns its frames-*.u8
    seed: int = 1
    device: str = ""  # "" picks CUDA when available
    num_envs: int = 1  # agent steps are counted across all envs; updates stay one per train_every of them
    env_backend: str = "gymnasium"  # "gymnasium" (envs stepped in Python) or "ale" (AtariVectorEnv, C++ threads)
    replay_on_device: bool = False  # keep replay frames on the training device (1M frames = 7 GB of GPU memory)
    cuda_graph: bool = True  # frames on a GPU: capture each update as one CUDA graph (false: plain eager updates)
    compile_update: bool = False  # frames on the device: the update through torch.compile (then captured as it is)
    float64: bool = False  # the networks in float64: slower, and a run's decisions no longer hang on how one CPU's
    # float32 kernels round (the refactor guard in tests/test_train.py replays a recorded run so, on any CPU)
    per: bool = False  # prioritized replay (proportional, Schaul et al. 2016)
    per_alpha: float = 0.6
    per_beta0: float = 0.4  # importance-sampling exponent, annealed to 1 over the run
    out_dir: str = "runs/breakout"
    prefault: bool = True  # touch the replay memory's pages at start: fail now, not in hour 5
    progress: bool = True
    tensorboard: bool = False  # also write log.csv's and eval.csv's scalars to <out_dir>/tensorboard (needs the
    # tensorboard extra: pip install "dqn-course[tensorboard]"); log.csv stays the record the notebooks read

    def validate(self) -> None:
        """Refuse settings that cannot work, before anything is built; raises ``ConfigError`` saying what to change.

        What the settings say, cheapest first: every field against its annotation (``dqn_course.check_fields``,
        shared with ``DistConfig``: ``double="false"`` or ``lr="fast"`` are refused by name), then ranges, then the
        rules between fields. numpy numbers and paths are stored back as plain ints, floats and strings. Whether
        this machine can take the run (its device, RAM, GPU memory and disk) is ``allocation.check_run``'s to say,
        where a run is set up.
        """
        self._check_fields()
        require(0 < self.eps_fraction <= 1, f"--eps-fraction (of total steps over which ε decays) must be in (0, 1], "
                                           f"got {self.eps_fraction!r}")
        if self.replay_storage not in STORAGES:
            raise ConfigError(f"--replay-storage must be one of {', '.join(STORAGES)}, got {self.replay_storage!r}")
        if self.env_backend not in ENV_BACKENDS:
            raise ConfigError(f"--env-backend must be one of {', '.join(ENV_BACKENDS)}, got {self.env_backend!r}")
        if self.replay_on_device and self.replay_storage != "ram":
            raise ConfigError(f"--replay-on-device keeps frames as a tensor on the device; it works with "
                              f"--replay-storage ram only, got {self.replay_storage!r}")
        per_stream = self.buffer_size // self.num_envs
        if per_stream < 5:
            raise ConfigError(f"--buffer-size {self.buffer_size} over {self.num_envs} envs leaves {per_stream} frames "
                              f"per env; each env's ring needs at least 5 (a 4-frame stack and the next frame)")
        if self.learning_starts < self.batch_size:
            raise ConfigError(f"--learning-starts {self.learning_starts} is too early for --batch-size "
                              f"{self.batch_size}: the first update samples {self.batch_size} stored transitions; use "
                              f"--learning-starts {self.batch_size} or more (the Nature setting is 50,000)")
        require(self.learning_starts < self.total_steps,
                f"--learning-starts {self.learning_starts} is not below --total-steps {self.total_steps}: the run "
                f"would end before its first update; lower --learning-starts or raise --total-steps")
        if self.tensorboard and importlib.util.find_spec("tensorboard") is None:
            raise ConfigError('--tensorboard true needs the tensorboard package: pip install "dqn-course[tensorboard]" '
                              "(or pip install tensorboard), or --tensorboard false (log.csv has the same numbers)")
        require(not (self.per and self.replay_on_device),
                "--per true needs --replay-on-device false: prioritized replay samples on the host (its sum tree and "
                "importance weights), and the device learner samples on the device; drop one of the two")

    def __post_init__(self) -> None:
        """A config is made with every field of its kind and in its range (``ConfigError``); the rules between
        fields wait for ``validate`` (fields may still change before it)."""
        self._check_fields()

    def _check_fields(self) -> None:
        check_fields(self)
        check_ranges(self, positive=_POSITIVE, non_negative=_NON_NEGATIVE, fractions=_FRACTIONS)


PRESETS: dict[str, Config] = {
    "breakout": Config(),
    "breakout-fast": Config(num_envs=8, env_backend="ale", replay_on_device=True, out_dir="runs/breakout-fast"),
    # A laptop CPU (2 cores: an update of batch 32 takes tens of ms there): the same learning problem, shrunk
    # to fit hours instead of days. Each change from ``breakout``, and why:
    # - total_steps 500k (not 10M): at tens of agent steps/s, 10M steps would take days; the
    #   schedules below are sized so learning shows within the first few hundred thousand steps.
    # - buffer_size 100k frames (not 1M): 500k steps would fill 1M only half; 100k is 0.7 GB and the
    #   oldest data it drops is from the exploration phase.
    # - learning_starts 20k (not 80k) and ε over the first 100k steps (eps_fraction 0.2; breakout: 1M):
    #   every hour of a CPU run spent acting at random is an hour not learning.
    # - eval every 50k steps (not 250k), 10 games as in breakout: a curve with ten points; checkpoints
    #   every 25k steps, so a stopped laptop loses minutes, not an hour.
    # Unchanged: DQN with a target network synced every 1,000 steps, Huber loss, Adam 1e-4, batch 32,
    # one update per 4 agent steps, γ 0.99, gradient norm 10, lost life = terminal for learning.
    "breakout-cpu": Config(total_steps=500_000, buffer_size=100_000, learning_starts=20_000, eps_fraction=0.2,
                           eval_every=50_000, checkpoint_every=25_000, out_dir="runs/breakout-cpu"),
    "quick": Config(total_steps=3_000, buffer_size=10_000, learning_starts=500, target_sync_every=250,
                    eps_fraction=0.5, eval_every=1_500, eval_episodes=2, eval_max_steps=300, checkpoint_every=1_000,
                    out_dir="runs/quick"),
}


check_module(globals())
