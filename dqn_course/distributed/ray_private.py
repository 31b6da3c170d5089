"""Every use of Ray's private and developer APIs, one function each, so that a Ray upgrade that moves one shows here.

Ray keeps no promise about these between releases; ``pyproject.toml`` pins the Ray versions they were tested
with. A diagnostic (an actor's state, the requests waiting for resources) that fails raises
``DiagnosticsUnavailable``, whose message begins "cluster diagnostics unavailable with this Ray version":
the run goes on and its reports say so instead of guessing. Starting a local session needs ``_temp_dir``;
without it ``init_local`` raises ``RayVersionError``, since the session folder could not be removed after.
"""
from __future__ import annotations

from typing import Any

import ray

from dqn_course.contracts import check_module

UNAVAILABLE = "cluster diagnostics unavailable with this Ray version"


class DiagnosticsUnavailable(RuntimeError):
    """A private Ray API the reports read is gone or failed; the message names it, the error and Ray's version."""

    def __init__(self, api: str, err: BaseException):
        super().__init__(f"{UNAVAILABLE} (ray {ray.__version__}: {api} failed with {type(err).__name__}: {err})")


class RayVersionError(RuntimeError):
    """This Ray lacks a private API the run cannot do without; the message names it and Ray's version."""


def actor_table_entry(handle: Any) -> dict:
    """What Ray's actor table (``ray._private.state.actors``, no dashboard needed) holds of the actor ``handle``.

    A dict with ``State`` (``DEPENDENCIES_UNREADY``, ``PENDING_CREATION``, ``ALIVE``, ``RESTARTING``, ``DEAD``)
    and ``Pid`` among others; empty when the table has no such actor yet. Raises ``DiagnosticsUnavailable``
    when the API (or the handle's private ``_actor_id``) is gone, fails or answers something else.
    """
    api = "ray._private.state.actors"
    try:
        from ray._private import state

        info = state.actors(handle._actor_id.hex())
    except Exception as err:
        raise DiagnosticsUnavailable(api, err) from err
    if not isinstance(info, dict):
        raise DiagnosticsUnavailable(api, TypeError(f"expected a dict, got {type(info).__name__}"))
    return info


def pending_resource_demands() -> list[tuple[dict[str, float], int]]:
    """The requests Ray cannot place for want of resources, ``ray status``'s pending demands, as (bundle, count).

    Read from the GCS through the autoscaler's developer SDK (``ray.autoscaler.v2.sdk``); raises
    ``DiagnosticsUnavailable`` when it is gone or fails.
    """
    try:
        from ray._private.worker import global_worker
        from ray.autoscaler.v2.sdk import get_cluster_resource_state

        pending = get_cluster_resource_state(global_worker.gcs_client).pending_resource_requests
        return [(dict(r.request.resources_bundle), int(r.count)) for r in pending]
    except Exception as err:
        raise DiagnosticsUnavailable("ray.autoscaler.v2.sdk.get_cluster_resource_state", err) from err


def init_local(temp_dir: str, **kwargs: Any) -> None:
    """``ray.init`` of a local session whose files all go to ``temp_dir`` (``ray.init``'s ``_temp_dir``).

    ``kwargs`` go to ``ray.init`` as they are. Raises ``RayVersionError`` when this Ray refuses ``_temp_dir``.
    """
    try:
        ray.init(_temp_dir=temp_dir, **kwargs)
    except (RuntimeError, TypeError) as err:  # how Ray refuses an unknown keyword argument
        if "_temp_dir" not in str(err):
            raise
        raise RayVersionError(f"ray {ray.__version__} has no ray.init(_temp_dir=...), which a local session needs "
                              f"to keep its files in a folder it removes: install a Ray version that "
                              f"dqn-course[distributed] allows") from err


check_module(globals())
