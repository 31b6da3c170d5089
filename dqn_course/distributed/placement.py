"""Placement: does a run fit the cluster, and how its actors stand while they start (reported on stderr).

A run that cannot fit is refused before any actor exists. While actors wait, the reports say what each asked for,
what Ray's actor table says of it and what the cluster has free.

Ray places an actor only where its requested resources are free: the learner asks for ``cpus_per_actor``
CPUs (and a GPU when it uses one), every rollout worker and the evaluator for ``cpus_per_actor`` each; the
replay actor, the parameter server and the driver take none. The evaluator starts once the workers are
done and takes their place, so a run needs ``(workers + 1) * cpus_per_actor`` CPUs at once.
"""
from __future__ import annotations

import math
import sys
import time
from typing import Any

import ray

from dqn_course.contracts import check_module
from dqn_course.distributed.config import DistConfig
from dqn_course.distributed.ray_private import DiagnosticsUnavailable, actor_table_entry, pending_resource_demands


class ClusterTooSmallError(ValueError):
    """The run's actors cannot all hold their resources on the cluster at once; the message says what to change."""


class ActorsPendingError(TimeoutError):
    """Actors not started after ``DistConfig.start_timeout_seconds``; the message says which and what they wait for."""


def learner_gpus(cfg: DistConfig) -> int:
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


def check_cluster_fits(cfg: DistConfig, nodes: list[dict], learner_gpus: int = 0) -> None:
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


def request_text(request: dict) -> str:
    """Resources an actor asked for, as a report names them: ``1 CPU + 1 GPU``, or ``no CPU``."""
    return " + ".join(f"{v:g} {k}" for k, v in request.items() if v) or "no CPU"


def actor_status(handle: Any, unavailable: list[str]) -> str:
    """What Ray's actor table says of an actor: not running yet, starting (pid), alive, restarting, dead.

    When the table cannot be read with this Ray: ``state unknown``, and the reason is appended to
    ``unavailable`` for the report to say once (``cluster_state``).
    """
    try:
        info = actor_table_entry(handle)
    except DiagnosticsUnavailable as err:
        unavailable.append(str(err))
        return "state unknown"
    status = info.get("State", "")
    if status in ("DEPENDENCIES_UNREADY", "PENDING_CREATION"):
        return f"starting (pid {info['Pid']})" if info.get("Pid") else "not running yet"
    return status.lower().replace("_", " ") or "unknown"


def cluster_state(unavailable: list[str]) -> str:
    """Free CPUs, the requests Ray cannot place for want of resources (``ray status``'s pending demands), and
    each distinct reason in ``unavailable`` (or its own) why a diagnostic could not be read with this Ray."""
    try:
        free, total = ray.available_resources().get("CPU", 0), ray.cluster_resources().get("CPU", 0)
    except Exception:  # Ray's public API, yet a report must never fail the run
        return "cluster: state unknown"
    parts = [f"cluster: {free:g} of {total:g} CPUs free"]
    try:
        demands = pending_resource_demands()
    except DiagnosticsUnavailable as err:
        unavailable = [*unavailable, str(err)]
    else:
        parts.append("waiting for resources no node has free: " + ", ".join(
            f"{n} request{'s' if n > 1 else ''} for {request_text(bundle)}" for bundle, n in demands)
            if demands else "no request waits for resources")
    return "; ".join(parts + list(dict.fromkeys(unavailable)))


def report(message: str) -> None:
    """One line on stderr, ``dqn_course.distributed: <message>``, flushed at once."""
    print(f"dqn_course.distributed: {message}", file=sys.stderr, flush=True)


def wait_started(actors: dict[str, tuple[Any, dict]], cfg: DistConfig) -> dict[str, dict]:
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
        unavailable: list[str] = []
        waiting = "; ".join(f"{name} ({request_text(actors[name][1])}): {actor_status(actors[name][0], unavailable)}"
                            for name in refs.values())
        message = (f"{len(refs)} of {len(actors)} actors not started after {now - t0:.0f} s: {waiting} "
                   f"({cluster_state(unavailable)})")
        if now >= deadline:
            raise ActorsPendingError(f"{message}. Gave up after start_timeout_seconds={cfg.start_timeout_seconds:g}: "
                                     f"free the cluster's CPUs, or ask for less (--workers, --cpus-per-actor)")
        report(message + ", still waiting")
        next_report = now + cfg.pending_report_seconds
    return out


check_module(globals())
