"""The command line, ``python -m dqn_course.distributed``: a flag per ``DistConfig`` field, ``--address``, ``--json``.

A setting that cannot work, or a run that cannot start, ends it the way argparse does (``error: ...``, no traceback).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from dataclasses import dataclass
from typing import NoReturn

import numpy as np

from dqn_course.contracts import check_module
from dqn_course import ConfigError, add_field_options
from dqn_course.distributed.config import DistConfig
from dqn_course.distributed.driver import run
from dqn_course.distributed.placement import ActorsPendingError, ClusterTooSmallError
from dqn_course.distributed.ray_private import RayVersionError
from dqn_course.distributed.session import ClusterJoinError

DESCRIPTION = ("DQN scaled out on Ray Core, Ape-X style (actors that act, one that learns), "
               "with the frame-sharing replay.")


@dataclass
class Command:
    """What the command line asks for: the run's settings, the cluster to join (None: local Ray), JSON output."""

    cfg: DistConfig
    address: str | None = None
    json: bool = False


def parse_command(argv: list[str] | None = None) -> Command:
    """The flags in ``argv`` (default: ``sys.argv[1:]``) as a ``Command``; argparse exits with status 2 on a flag it
    cannot read. Each setting is checked against its kind and range as the config is made (``ConfigError``); the
    rules between settings are not checked here (``DistConfig.validate``)."""
    p = argparse.ArgumentParser(prog="python -m dqn_course.distributed", description=DESCRIPTION)
    p.add_argument("--address", default=None, help="join the Ray cluster at HOST:PORT (default: local Ray)")
    p.add_argument("--workers", type=int, default=DistConfig.num_workers, help="rollout workers")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    add_field_options(p, DistConfig, skip={"num_workers"})
    args = p.parse_args(argv)
    fields = {f.name for f in dataclasses.fields(DistConfig)}
    cfg = DistConfig(num_workers=args.workers, **{k: v for k, v in vars(args).items() if k in fields})
    return Command(cfg, args.address, args.json)


def _fail(message: str, status: int) -> NoReturn:
    """End the CLI the way argparse does: ``error: <message>`` on stderr, no traceback, exit ``status``."""
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(status)


def main(argv: list[str] | None = None) -> None:
    """The CLI: ``run`` with the parsed settings, then its summary (``--json``: one JSON object on stdout).

    A setting that cannot work, or a run that cannot fit the cluster, ends with ``error: ...`` on stderr
    and exit status 2 (as argparse does); a cluster that cannot be joined, actors that never start, or a Ray
    without an API a local session needs, the same way with status 1.
    """
    try:
        command = parse_command(argv)  # a config is checked as it is made
        cfg = command.cfg
        cfg.validate()
    except ConfigError as err:
        _fail(str(err), 2)
    try:
        summary = run(cfg, address=command.address)
    except ClusterTooSmallError as err:
        _fail(str(err), 2)
    except (ClusterJoinError, ActorsPendingError, RayVersionError) as err:
        _fail(str(err), 1)
    if command.json:
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


check_module(globals())
