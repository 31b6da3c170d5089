"""dqn_course.distributed.ray_private: each private Ray API the run uses answers with the installed Ray, and when one
is gone or raises, the run says "cluster diagnostics unavailable with this Ray version" (or refuses to start a local
session, for ``_temp_dir``) instead of an empty or made-up answer."""
from __future__ import annotations

import os
import sys
import tempfile
import time
from types import SimpleNamespace

import pytest
import ray
import ray._private.state
import ray.autoscaler.v2.sdk

from dqn_course.distributed import RaySession, main, placement, ray_private
from dqn_course.distributed.ray_private import UNAVAILABLE, DiagnosticsUnavailable, RayVersionError

HANDLE = SimpleNamespace(_actor_id=SimpleNamespace(hex=lambda: "00" * 16))  # what actor_table_entry reads


def _fail(*args, **kwargs):
    raise RuntimeError("the GCS moved")


# -- the actor table -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("break_it", ["gone", "raises", "other answer", "handle without _actor_id"])
def test_actor_table_unavailable_says_so(monkeypatch, break_it):
    handle = HANDLE
    if break_it == "gone":
        monkeypatch.delattr(ray._private.state, "actors")
    elif break_it == "raises":
        monkeypatch.setattr(ray._private.state, "actors", _fail)
    elif break_it == "other answer":
        monkeypatch.setattr(ray._private.state, "actors", lambda actor_id: [actor_id])
    else:
        handle = object()
    with pytest.raises(DiagnosticsUnavailable) as err:
        ray_private.actor_table_entry(handle)
    message = str(err.value)
    assert message.startswith(f"{UNAVAILABLE} (ray {ray.__version__}: ray._private.state.actors failed with ")
    unavailable: list[str] = []
    assert placement.actor_status(handle, unavailable) == "state unknown" and unavailable == [message]


# -- the requests waiting for resources ----------------------------------------------------------------------


@pytest.fixture
def cluster_with_free_cpus(monkeypatch):
    """The public resource calls answer 1 of 3 CPUs free, without a Ray session."""
    monkeypatch.setattr(ray, "available_resources", lambda: {"CPU": 1.0})
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 3.0})


@pytest.mark.parametrize("break_it", ["gone", "raises"])
def test_pending_demands_unavailable_says_so(monkeypatch, cluster_with_free_cpus, break_it):
    if break_it == "gone":
        monkeypatch.setitem(sys.modules, "ray.autoscaler.v2.sdk", None)  # its import fails
    else:
        monkeypatch.setattr(ray.autoscaler.v2.sdk, "get_cluster_resource_state", _fail)
    with pytest.raises(DiagnosticsUnavailable, match="ray.autoscaler.v2.sdk.get_cluster_resource_state failed"):
        ray_private.pending_resource_demands()
    state = placement.cluster_state([])
    assert state.startswith(f"cluster: 1 of 3 CPUs free; {UNAVAILABLE} (ray {ray.__version__}: "), state
    assert "no request waits" not in state and "waiting for resources" not in state


def test_a_report_names_each_reason_once(monkeypatch, cluster_with_free_cpus):
    monkeypatch.delattr(ray._private.state, "actors")
    monkeypatch.setattr(placement, "pending_resource_demands", lambda: [({"CPU": 1.0}, 2)])
    unavailable: list[str] = []
    statuses = [placement.actor_status(HANDLE, unavailable) for _ in range(3)]
    state = placement.cluster_state(unavailable)
    assert statuses == ["state unknown"] * 3
    assert state.startswith("cluster: 1 of 3 CPUs free; waiting for resources no node has free: 2 requests for 1 CPU; "
                            f"{UNAVAILABLE} (ray ")
    assert state.count(UNAVAILABLE) == 1


# -- a local session's folder --------------------------------------------------------------------------------


def _refuse_temp_dir(**kwargs):
    if "_temp_dir" in kwargs:
        raise RuntimeError("Unknown keyword argument(s): _temp_dir")


def _session_folders() -> set[str]:
    return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith(f"dqn-ray-{os.getpid()}-")}


def test_a_ray_without_temp_dir_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(ray, "init", _refuse_temp_dir)
    before = _session_folders()
    with pytest.raises(RayVersionError, match=r"has no ray.init\(_temp_dir=...\)"):
        RaySession()
    assert _session_folders() == before  # the session's folder went with it
    monkeypatch.setattr(ray, "init", _fail)
    with pytest.raises(RuntimeError, match="the GCS moved"):  # any other failure is Ray's own
        ray_private.init_local("/nowhere")


def test_the_cli_ends_with_an_error_line_when_ray_lacks_temp_dir(monkeypatch, capsys):
    monkeypatch.setattr(ray, "init", _refuse_temp_dir)
    with pytest.raises(SystemExit) as exit_:
        main(["--workers", "1"])
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: ray {ray.__version__} has no ray.init(_temp_dir=...)") and "Traceback" not in err


# -- with the installed Ray, each answers ----------------------------------------------------------------------


def test_the_private_apis_answer_with_this_ray():
    """On a 1-CPU session where one actor holds the CPU, another asking for it waits: the actor table says which
    runs and which waits, and Ray's pending demands list the waiting request. A Ray that moved them fails here."""
    with RaySession(num_cpus=1, object_store_mb=128):
        @ray.remote(num_cpus=1)
        class Holder:
            def ping(self) -> int:
                return 1

        holder = Holder.remote()
        assert ray.get(holder.ping.remote(), timeout=300) == 1  # it runs, holding the only CPU
        waiting = Holder.remote()
        assert ray_private.actor_table_entry(holder)["State"] == "ALIVE"
        assert placement.actor_status(waiting, []) == "not running yet"
        deadline = time.monotonic() + 60  # the raylet reports its demands to the GCS every few hundred ms
        while not (demands := ray_private.pending_resource_demands()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert demands == [({"CPU": 1.0}, 1)], demands
