"""What a run allocates where, by arithmetic, and whether this machine can take it: the plan ``--dry-run`` prints.

``plan_allocation(cfg)`` counts the bytes a run preallocates in host RAM, on its device and on disk;
``check_machine`` refuses (before anything is built) a run whose replay does not fit there or whose folders
cannot be written; ``dry_run`` prints the plan and that verdict without raising it.
"""
from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from dqn_course.contracts import Count, check_module
from dqn_course import ConfigError
from dqn_course.config import Config
from dqn_course.device import FIT_FRACTION, check_device, check_fits_on_device, free_memory, pick_device
from dqn_course.networks import NatureCNN
from dqn_course.profiling import InsufficientMemoryError, available_bytes, check_fits, format_bytes
from dqn_course.replay.stores import CODECS, InsufficientDiskError, check_disk_space, planned_host_bytes


FRAME_SHAPE = (84, 84)  # one preprocessed screen: what the replay memory stores per agent step
N_ACTIONS = 4  # Breakout's action set: the size of the networks' last layer
SLOT_BYTES = 16  # replay bookkeeping per frame slot: action (uint8), reward (float32), done, first, valid, id (int64)


REPLAY_FRAMES = "replay frames"
BOOKKEEPING = f"replay bookkeeping ({SLOT_BYTES} B per frame slot)"
NETWORKS = "networks (online, target, gradients, Adam's 2 moments)"
STAGING = "checkpoint writes: the device's frames copied to host RAM"
REPLAY_FILE = "replay frames file"
STATES = "state checkpoints (state-*.ckpt)"
POLICY = "policy checkpoint (checkpoint.pt)"


@dataclass(frozen=True)
class AllocationPlan:
    """What a run preallocates, in bytes, by where and what (``plan_allocation``)."""

    device: torch.device  # the training device
    frames: int  # replay frame slots: buffer_size rounded down to a multiple of num_envs
    host: dict[str, int]  # host RAM
    device_memory: dict[str, int]  # memory on ``device`` (empty when that is the CPU: it is host RAM then)
    disk: dict[str, int]  # the most the run's files take at once
    state_files: int  # state checkpoints on disk at once, at most (while a new one is written)

    def total(self, where: str) -> int:
        """Bytes in ``where``: "host", "device_memory" or "disk"."""
        return sum(getattr(self, where).values())


def network_parameters(in_channels: Count = 4) -> int:
    """Parameters of the Q-network (``NatureCNN`` for Breakout), counted on the meta device: nothing allocated."""
    with torch.device("meta"):
        return sum(p.numel() for p in NatureCNN(N_ACTIONS, in_channels).parameters())


def plan_allocation(cfg: Config, device: torch.device) -> AllocationPlan:
    """What the run ``cfg`` describes would preallocate, where, by arithmetic: nothing is built or measured.

    Host RAM: the replay's frames (``replay.stores.planned_host_bytes``: a numpy array, a compressed store's list
    slots, nothing for a disk or GPU store) and its per-slot bookkeeping; for frames on a GPU, the copy of them a
    checkpoint write makes in host RAM. GPU memory (``device`` not the CPU): the replay bank when
    ``replay_on_device``, and the networks (on the CPU those are host RAM). Disk: the replay file
    (``replay_storage="disk"``) and the checkpoints, ``keep_checkpoints`` state files (plus the one being written;
    0 = one per ``checkpoint_every``) each the size of the replay's frames, bookkeeping and the networks (a
    compressed store's are smaller: its frames are written compressed). Not counted: the process itself (Python,
    torch, the envs), CUDA's context and the learner's work buffers. ``device``: the training device, picked once
    by the caller (``check_run``, ``dry_run``).
    """
    device = torch.device(device)
    frames = cfg.buffer_size // cfg.num_envs * cfg.num_envs
    frame_bytes = int(np.prod(FRAME_SHAPE))
    params = network_parameters()
    networks = 5 * 4 * params  # float32: online weights, target weights, gradients, Adam's exp_avg and exp_avg_sq
    on_gpu = device.type != "cpu"
    host = {REPLAY_FRAMES: planned_host_bytes(cfg.replay_storage, frames, FRAME_SHAPE,
                                              device if cfg.replay_on_device else None),
            BOOKKEEPING: SLOT_BYTES * frames}
    device_memory: dict[str, int] = {}
    if cfg.replay_on_device and on_gpu:
        device_memory[REPLAY_FRAMES] = frames * frame_bytes
        host[STAGING] = frames * frame_bytes
    (device_memory if on_gpu else host)[NETWORKS] = networks
    saved = cfg.total_steps // cfg.checkpoint_every + int(cfg.total_steps % cfg.checkpoint_every != 0)
    state_files = saved if cfg.keep_checkpoints == 0 else min(cfg.keep_checkpoints + 1, saved)
    state_bytes = frames * (frame_bytes + SLOT_BYTES) + 4 * 4 * params  # + online, target, Adam's 2 moments
    disk = {STATES: state_files * state_bytes, POLICY: 4 * params}
    if cfg.replay_storage == "disk":
        disk[REPLAY_FILE] = frames * frame_bytes
    return AllocationPlan(device, frames, host, device_memory, disk, state_files)


def check_run(cfg: Config) -> torch.device:
    """Everything a run checks before it builds anything: its settings (``Config.validate``), the device it names
    (``ConfigError`` if torch cannot use it here) and this machine (``check_machine``). Returns that device, picked
    once here for the run to build on (``cfg.device`` "" picks CUDA when there is one). Raises ``ConfigError``,
    ``InsufficientMemoryError`` or ``InsufficientDiskError``."""
    cfg.validate()
    check_device(cfg.device)
    device = pick_device(cfg.device or None)
    check_machine(cfg, plan_allocation(cfg, device))
    return device


def check_machine(cfg: Config, plan: AllocationPlan) -> None:
    """A run's checks against this machine (its device checked before, by ``check_run``): the folders can be written,
    and the replay (``plan``) fits in RAM, in the GPU's free memory and on the disk. Raises ``ConfigError``,
    ``InsufficientMemoryError`` or ``InsufficientDiskError``."""
    out = Path(cfg.out_dir)
    writable_folder(out, "--out-dir")
    if REPLAY_FRAMES in plan.device_memory:
        check_device_replay_fits(cfg, plan)
        check_fits(plan.host[STAGING] + plan.host[BOOKKEEPING],
                   f"a checkpoint of the replay on {plan.device} ({plan.frames:,} frames copied to host RAM to be "
                   f"written, --buffer-size {cfg.buffer_size:,})")
    else:
        check_fits(plan.host[REPLAY_FRAMES] + plan.host[BOOKKEEPING],
                   f"the replay memory (--buffer-size {cfg.buffer_size:,}, --replay-storage {cfg.replay_storage})")
    if cfg.replay_storage == "disk":
        folder = Path(cfg.replay_path or out / "replay")
        writable_folder(folder, "--replay-path")
        check_disk_space(plan.disk[REPLAY_FILE], existing(folder),
                         f"the replay memory (--buffer-size {cfg.buffer_size:,}, --replay-storage disk)")


def existing(folder: Path) -> Path:
    """The nearest folder of ``folder``'s path that exists: the disk it will be on."""
    return next(p for p in (folder, *folder.parents) if p.exists())


def check_device_replay_fits(cfg: Config, plan: AllocationPlan) -> None:
    """Refuse a replay bank on a CUDA device that cannot hold it with the networks, before anything is built:
    ``InsufficientMemoryError`` naming the bank's size, the device's free memory and the two fixes (the largest
    ``--buffer-size`` that fits, ``--replay-on-device false``)."""
    free = free_memory(plan.device)
    if free is None:
        return
    bank, networks = plan.device_memory[REPLAY_FRAMES], plan.device_memory[NETWORKS]
    frame_bytes = int(np.prod(FRAME_SHAPE))
    fits = max(0, int(FIT_FRACTION * free - networks)) // frame_bytes // cfg.num_envs * cfg.num_envs
    check_fits_on_device(
        bank + networks, plan.device,
        f"the replay bank on the GPU (--buffer-size {cfg.buffer_size:,} frames: {format_bytes(bank)}) with the "
        f"networks ({format_bytes(networks)})",
        f"Fixes: --buffer-size {fits:,} or less (what fits in the free memory), or --replay-on-device false (the "
        f"frames stay in host RAM and each update copies its batch to the GPU).")




def writable_folder(path: Path, what: str) -> None:
    """``path`` is a writable folder, or can be made in one: a probe file is created (and removed) in the
    nearest folder that exists, so permissions, read-only mounts and pseudo-filesystems all count."""
    nearest = existing(path)
    try:
        if not nearest.is_dir():
            raise NotADirectoryError(f"{nearest} is a file")
        with tempfile.TemporaryFile(dir=nearest):
            pass
    except OSError as e:
        raise ConfigError(f"{what} {path} cannot be written ({e}): choose another folder") from None



def dry_run(cfg: Config, preset: str) -> str:
    """What ``--dry-run`` prints: the run's ``plan_allocation`` and whether this machine would take it.

    The settings are checked as a run checks them (``ConfigError``); the machine's refusals (RAM, GPU memory,
    disk, a device it lacks) are reported, not raised: the plan is worth reading on a machine that cannot run it.
    A device this machine lacks (``--device cuda`` on a laptop) is planned for all the same.
    """
    cfg.validate()
    try:
        device = pick_device(cfg.device or None)
    except RuntimeError as e:
        raise ConfigError(f"--device {cfg.device}: not a torch device ({e}); use cpu, cuda, cuda:N or mps") from None
    plan = plan_allocation(cfg, device)
    out = Path(cfg.out_dir)
    visible = device.type == "cuda" and torch.cuda.is_available() and (device.index or 0) < torch.cuda.device_count()
    free = free_memory(device) if visible else None
    sections = [("host RAM", "host", f"{format_bytes(available_bytes())} available here"),
                (f"{device} memory", "device_memory", None if free is None else f"{format_bytes(free)} free here"),
                (f"disk ({out})", "disk", f"{format_bytes(shutil.disk_usage(existing(out)).free)} free here")]
    lines = [f"dry run: --preset {preset} on {device}, {plan.frames:,} replay frames ({cfg.replay_storage}"
             f"{f', on {device}' if cfg.replay_on_device else ''}); nothing allocated, no envs built"]
    for title, where, have in sections:
        items = getattr(plan, where)
        if not items:
            continue
        lines.append(f"{title + ':':<62}{format_bytes(plan.total(where)):>12}" + (f"   ({have})" if have else ""))
        for what, n in items.items():
            if not n:
                continue
            shown = f"{what}, {plan.state_files} at once" if what == STATES else what
            lines.append(f"  {shown:<60}{format_bytes(n):>12}")
    if cfg.replay_storage in CODECS:
        lines.append(f"+ the {cfg.replay_storage} frames, in host RAM as they arrive (not preallocated; less than "
                     f"{format_bytes(plan.frames * int(np.prod(FRAME_SHAPE)))} uncompressed), and in the state "
                     f"checkpoints (smaller than planned above)")
    lines.append("not counted: the process itself (Python, torch, the envs), CUDA's context and work buffers")
    try:
        check_device(cfg.device)
        check_machine(cfg, plan)
        lines.append("this machine: the run passes its RAM, GPU memory and disk checks")
    except (ConfigError, InsufficientMemoryError, InsufficientDiskError) as e:
        lines.append(f"this machine would refuse the run: {e}")
    return "\n".join(lines)


check_module(globals())
