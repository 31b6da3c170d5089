"""Checkpoint and resume the whole training state: networks, optimiser, replay memory, RNGs, counters (notebook 09b).

Pickling a deque of transition tuples to disk is "extremely slow" (as a post the course answers found):
pickle walks millions of Python objects. A replay memory that is a handful of big arrays can be written as raw
bytes at disk speed, so this module stores *arrays only*, in one file laid out as::

    MAGIC (8 bytes) | format version (uint32) | reserved (uint32) | header length (uint64)
    header: UTF-8 JSON {"meta": ..., "arrays": [{"name", "dtype", "shape", "offset", "nbytes"}, ...]}
    the arrays' raw bytes, each starting at a 64-byte boundary
    SHA-256 of every byte before it (32 bytes)

Why each part is there:

* **Atomic.** The file is written as ``NAME.tmp``, flushed to disk (``fsync``), then renamed over
  its final name. A crash or ``kill -9`` mid-write leaves the previous checkpoint untouched and at
  worst a ``.tmp`` that nobody reads (the next write replaces it).
* **Versioned.** A file from a newer format is refused by name, instead of being misread.
* **Checked.** The expected size follows from the header, so a truncated file is caught before
  anything is read; the trailing SHA-256 catches any flipped byte. A refused file raises
  ``CheckpointError`` saying what is wrong; ``latest_checkpoint`` then falls back to the newest file
  that passes, so the previous good one is what a resume uses.

The training loop's side (which arrays make up "the training state") is ``training_state`` /
``restore_training_state`` at the bottom.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from dqn_course.contracts import Count, check_module
from dqn_course.replay.base import MemoryLike
from dqn_course.rng import parse_rng_state, rng_state_array

if TYPE_CHECKING:  # the parts' types only: this module imports torch where it reads or writes tensors
    import torch

@runtime_checkable
class TrainingParts(Protocol):
    """What a training state keeps of the learner: a ``DQNAgent``, or a loop's own networks, optimiser and rng."""

    q: torch.nn.Module
    target: torch.nn.Module
    optimizer: torch.optim.Optimizer
    rng: np.random.Generator


MAGIC = b"DQNCKPT\n"
FORMAT_VERSION = 1
_ALIGN = 64
_DIGEST = 32  # bytes of SHA-256
_PREFIX = len(MAGIC) + 4 + 4 + 8


class CheckpointError(Exception):
    """A checkpoint file that cannot be trusted: not ours, a newer format, truncated or corrupt."""


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def _layout(arrays: dict[str, np.ndarray], meta: dict) -> tuple[bytes, list[dict]]:
    """The header bytes and each array's place; offsets count from the start of the file."""
    entries = [{"name": k, "dtype": a.dtype.str, "shape": list(a.shape), "nbytes": int(a.nbytes)}
               for k, a in arrays.items()]
    # Offsets depend on the header's length, which depends on the offsets' digits: fix the width.
    for e in entries:
        e["offset"] = 10**15
    header_len = _aligned(_PREFIX + len(json.dumps({"meta": meta, "arrays": entries}).encode())) - _PREFIX
    pos = _PREFIX + header_len
    for e in entries:
        e["offset"] = pos
        pos = _aligned(pos + e["nbytes"])
    header = json.dumps({"meta": meta, "arrays": entries}).encode()
    return header.ljust(header_len), entries


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary file beside ``path`` (its name + ``.tmp``) to write in; once the block ends without error it
    replaces ``path`` in one rename, so a reader never sees a file half written. If the block raises (a full disk,
    an interrupt), the temporary file is removed and ``path`` is left as it was."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        yield tmp
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def write_checkpoint(path: str | os.PathLike, arrays: dict[str, np.ndarray], meta: dict) -> int:
    """Write ``arrays`` (any dtype but object) and JSON-able ``meta`` atomically; returns the file size."""
    path = Path(path)
    for name, a in arrays.items():
        if not isinstance(a, np.ndarray) or a.dtype.hasobject:
            raise TypeError(f"checkpoint array {name!r} must be a numpy array of plain values, got {type(a).__name__}"
                            + (f" of dtype {a.dtype}" if isinstance(a, np.ndarray) else ""))
    header, entries = _layout(arrays, meta)
    digest = hashlib.sha256()
    with replacing(path) as tmp, open(tmp, "wb") as f:  # a failed write leaves the previous checkpoint as it was
        def put(data) -> None:
            digest.update(data)
            f.write(data)

        put(MAGIC + np.array([FORMAT_VERSION, 0], "<u4").tobytes() + np.array([len(header)], "<u8").tobytes())
        put(header)
        for e in entries:
            put(b"\0" * (e["offset"] - f.tell()))
            put(np.ascontiguousarray(arrays[e["name"]]).reshape(-1).view(np.uint8))
        put(b"\0" * (_aligned(f.tell()) - f.tell()))
        f.write(digest.digest())
        f.flush()
        os.fsync(f.fileno())
        size = f.tell()
    dir_fd = os.open(path.parent, os.O_RDONLY)  # make the rename itself durable
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return size


def _read_header(f, path: Path, size: int) -> tuple[dict, list[dict], int]:
    prefix = f.read(_PREFIX)
    if len(prefix) < _PREFIX or prefix[: len(MAGIC)] != MAGIC:
        raise CheckpointError(f"{path} is not a DQN course checkpoint (it does not start with {MAGIC!r})")
    version = int(np.frombuffer(prefix, "<u4", 1, len(MAGIC))[0])
    if version != FORMAT_VERSION:
        upgrade = " (upgrade dqn_course to read it)" if version > FORMAT_VERSION else ""
        raise CheckpointError(f"{path} has checkpoint format version {version}; this dqn_course reads version "
                              f"{FORMAT_VERSION}{upgrade}")
    header_len = int(np.frombuffer(prefix, "<u8", 1, len(MAGIC) + 8)[0])
    if _PREFIX + header_len > size:
        raise CheckpointError(f"{path} is truncated: {size:,} bytes, but its header alone needs "
                              f"{_PREFIX + header_len:,}")
    try:  # parsed before the SHA-256 is checked, so any damage here must still end as a CheckpointError
        header = json.loads(f.read(header_len))
        meta, entries = header["meta"], header["arrays"]
        end = _aligned(max([_PREFIX + header_len] + [int(e["offset"]) + int(e["nbytes"]) for e in entries]))
    except (ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{path} has a corrupt header ({type(e).__name__}: {e})") from None
    if size != end + _DIGEST:
        raise CheckpointError(f"{path} is {'truncated' if size < end + _DIGEST else 'too long'}: {size:,} bytes, "
                              f"its header says {end + _DIGEST:,}")
    return meta, entries, end


def read_checkpoint(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict]:
    """Read and verify a checkpoint: returns (arrays, meta), or raises ``CheckpointError`` saying why not."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}")
    size = path.stat().st_size
    with open(path, "rb") as f:
        meta, entries, end = _read_header(f, path, size)
        f.seek(0)
        digest = hashlib.sha256()
        remaining = end
        while remaining:
            chunk = f.read(min(remaining, 64 << 20))
            digest.update(chunk)
            remaining -= len(chunk)
        if f.read(_DIGEST) != digest.digest():
            raise CheckpointError(f"{path} is corrupt: its SHA-256 does not match its contents")
    arrays = {}
    for e in entries:
        dtype, shape = np.dtype(e["dtype"]), tuple(e["shape"])
        if e["nbytes"] >= 1 << 20:  # big arrays (replay frames) are mapped, not read: no second copy in RAM
            arrays[e["name"]] = np.memmap(path, dtype, mode="r", offset=e["offset"], shape=shape)
        else:
            count = int(np.prod(shape, dtype=np.int64))
            arrays[e["name"]] = np.fromfile(path, dtype, count=count, offset=e["offset"]).reshape(shape)
    return arrays, meta


def checkpoint_path(directory: str | os.PathLike, step: int) -> Path:
    return Path(directory) / f"state-{step:010d}.ckpt"


_NAME = re.compile(r"state-(\d+)\.ckpt")  # what checkpoint_path writes; nothing else in a run folder is ours


def checkpoint_step(path: str | os.PathLike) -> int:
    """The step in a ``state-<step>.ckpt`` name (``ValueError`` for any other name)."""
    match = _NAME.fullmatch(Path(path).name)
    if match is None:
        raise ValueError(f"{Path(path).name!r} is not a checkpoint name (state-<step>.ckpt)")
    return int(match.group(1))


def list_checkpoints(directory: str | os.PathLike) -> list[Path]:
    """Training-state checkpoints in ``directory``, oldest first (by the step in their name).

    Only names ``checkpoint_path`` writes (``state-<digits>.ckpt``) count: any other file a user puts in the
    run folder (``state-abc.ckpt``, ``state-1.ckpt.bak``) is neither read nor pruned.
    """
    return sorted((p for p in Path(directory).glob("state-*.ckpt") if _NAME.fullmatch(p.name)), key=checkpoint_step)


def latest_checkpoint(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict, Path]:
    """Read ``path`` (a file), or the newest checkpoint in ``path`` (a folder) that passes its checks.

    A refused newer file is reported with a warning and the next older one is tried: a run killed
    while its disk filled up resumes from the last good checkpoint instead of not at all.
    """
    path = Path(path)
    if path.is_file() or not path.exists():
        return (*read_checkpoint(path), path)
    candidates = list_checkpoints(path)
    if not candidates:
        raise CheckpointError(f"no checkpoint (state-*.ckpt) in {path}")
    errors = []
    for candidate in reversed(candidates):
        try:
            arrays, meta = read_checkpoint(candidate)
        except CheckpointError as e:
            errors.append(str(e))
            warnings.warn(f"skipping a checkpoint that fails its checks: {e}", stacklevel=2)
            continue
        return arrays, meta, candidate
    raise CheckpointError(f"every checkpoint in {path} was refused:\n  " + "\n  ".join(errors))


def prune_checkpoints(directory: str | os.PathLike, keep: int, step: int) -> None:
    """After writing the checkpoint of ``step``: keep it and the ``keep - 1`` before it (``keep=0``: all).

    Checkpoints of later steps are deleted: they belong to the timeline a resume from an earlier
    checkpoint abandoned (or were refused), and a later ``--resume`` of the folder must not pick them.
    Stale ``.tmp`` files of killed writes go too.
    """
    kept = [p for p in list_checkpoints(directory) if checkpoint_step(p) <= step]
    for old in [p for p in list_checkpoints(directory) if checkpoint_step(p) > step] + (kept[:-keep] if keep else []):
        old.unlink()
    for tmp in Path(directory).glob("state-*.ckpt.tmp"):
        if _NAME.fullmatch(tmp.name[:-len(".tmp")]):
            tmp.unlink()


# -- the training state -----------------------------------------------------------------------------------------

def _torch_arrays(prefix: str, state: dict) -> dict[str, np.ndarray]:
    return {f"{prefix}/{k}": v.detach().cpu().numpy() for k, v in state.items()}


def _torch_state(arrays: dict[str, np.ndarray], prefix: str) -> dict:
    import torch

    n = len(prefix) + 1
    return {k[n:]: torch.from_numpy(np.array(v)) for k, v in arrays.items() if k.startswith(prefix + "/")}


def training_state(agent: TrainingParts, memory: MemoryLike, counters: dict, config: dict
                   ) -> tuple[dict[str, np.ndarray], dict]:
    """Everything a resumed run needs, as (arrays, meta) for ``write_checkpoint``.

    The optimiser's per-parameter tensors (Adam's moments and step) are arrays; its hyperparameters
    (``param_groups``) are small and go into the JSON meta. RNG states: the agent's ε-greedy
    generator, torch's CPU (and CUDA) generators, and the replay memory's own (inside its state).
    """
    import torch

    arrays = {**_torch_arrays("agent/q", agent.q.state_dict()),
              **_torch_arrays("agent/target", agent.target.state_dict())}
    opt = agent.optimizer.state_dict()
    for index, slots in opt["state"].items():
        arrays.update(_torch_arrays(f"agent/optimizer/{index}", slots))
    arrays["rng/agent"] = rng_state_array(agent.rng)
    arrays["rng/torch"] = torch.get_rng_state().numpy()
    if torch.cuda.is_available():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            arrays[f"rng/cuda{i}"] = s.numpy()
    arrays.update({f"replay/{k}": v for k, v in memory.state_dict().items()})
    meta = {"kind": "dqn_course training state", "config": config, "counters": counters,
            "param_groups": opt["param_groups"], "optimizer_state_keys": sorted(opt["state"]),
            "replay_digest": replay_digest(memory)}
    return arrays, meta


RUN_LOCAL = ("capturable", "foreach", "fused", "differentiable")  # optimiser settings a resume keeps its own of


def restore_training_state(arrays: dict[str, np.ndarray], meta: dict, agent: TrainingParts, memory: MemoryLike) -> dict:
    """Load what ``training_state`` saved into a freshly built agent and memory; returns the counters.

    Raises ``CheckpointError`` if the restored replay memory does not sample what the saved one
    would have (the digest taken at save time), so a resume never trains on silently wrong data.
    """
    import torch

    agent.q.load_state_dict(_torch_state(arrays, "agent/q"))
    agent.target.load_state_dict(_torch_state(arrays, "agent/target"))
    # JSON turned tuples (Adam's betas) into lists: give them back the types the live optimiser uses. How the
    # optimiser runs (``capturable``: a CUDA-graph learner's Adam) belongs to this run, not to the saved one.
    groups = [{k: tuple(v) if isinstance(live.get(k), tuple) else live[k] if k in RUN_LOCAL else v
               for k, v in saved.items()}
              for saved, live in zip(meta["param_groups"], agent.optimizer.state_dict()["param_groups"])]
    agent.optimizer.load_state_dict({
        "state": {int(i): _torch_state(arrays, f"agent/optimizer/{i}") for i in meta["optimizer_state_keys"]},
        "param_groups": groups})
    try:
        agent.rng.bit_generator.state = parse_rng_state(agent.rng, arrays["rng/agent"])
    except ValueError as e:
        raise CheckpointError(f"the agent's generator state does not fit: {e}") from None
    torch.set_rng_state(torch.from_numpy(np.array(arrays["rng/torch"])))
    cuda = sorted(k for k in arrays if k.startswith("rng/cuda"))
    if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all([torch.from_numpy(np.array(arrays[k])) for k in cuda])
    try:
        memory.load_state_dict({k[len("replay/"):]: v for k, v in arrays.items() if k.startswith("replay/")})
    except ValueError as e:  # a memory of another shape or kind: say so as a refused checkpoint
        raise CheckpointError(f"the saved replay memory does not fit this one: {e}") from None
    if replay_digest(memory) != meta["replay_digest"]:
        raise CheckpointError("the restored replay memory does not sample what the saved one did "
                              "(its digest differs): refusing to resume from it")
    return meta["counters"]


def replay_digest(memory: MemoryLike, batch_size: Count = 64) -> str | None:
    """SHA-256 of the next batch ``memory.sample`` would return, without moving its generators.

    Saved with a checkpoint and recomputed after a restore: equal digests mean the restored memory
    holds the same transitions *and* draws the same batches from here on.
    """
    if len(memory) < batch_size:
        return None
    generators = memory.generators()  # the memory names every generator its sample draws from
    saved = [g.bit_generator.state for g in generators]
    try:
        batch = memory.sample(batch_size)
    finally:
        for g, s in zip(generators, saved):
            g.bit_generator.state = s
    digest = hashlib.sha256()
    for part in (batch.states, batch.next_states, batch.actions, batch.rewards, batch.dones, batch.ids):
        part = part.cpu().numpy() if hasattr(part, "cpu") else np.asarray(part)
        digest.update(np.ascontiguousarray(part).tobytes())
    return digest.hexdigest()


check_module(globals())
