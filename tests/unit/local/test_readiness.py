"""From one frozen snapshot: how far a cluster has come up, and the status tables."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from brokergroup.controller import protocol
from brokergroup.local import status
from brokergroup.local.snapshot import ClusterSnapshot, ControllerView, ReplicaView, SetView, readiness
from brokergroup.local.state import ClusterState, ProcessRecord, SetRecord

SET = "local-broker-0"


def controllers(leader: str | None, known: list[str | None]) -> tuple[ControllerView, ...]:
    return tuple(
        ControllerView(f"n{i}", f"127.0.0.1:{9000 + i}", {"serving": f"n{i}" == leader, "leaderId": k, "term": 2})
        for i, k in enumerate(known)
    )


def broker(i: int, role: str, *, lease: int = 1000, max_offset: int = 500) -> ReplicaView:
    return ReplicaView(
        f"{SET}-{i}",
        f"127.0.0.1:{10000 + i}",
        {
            "role": role,
            "brokerId": i + 1,
            "masterEpoch": 3,
            "writeLeaseRemainingMs": lease if role == "master" else 0,
            "store": {"maxOffset": max_offset, "confirmOffset": max_offset},
        },
    )


def info(master: int | None, in_sync: list[int], alive: set[int] | None = None) -> protocol.ReplicasInfo:
    alive = set(in_sync) if alive is None else alive
    return protocol.ReplicasInfo(
        master_broker_id=master,
        master_address=f"127.0.0.1:{10000 + master - 1}" if master else None,
        master_epoch=3,
        sync_state_set_epoch=5,
        in_sync_replicas=[
            protocol.ReplicaIdentity(
                broker_name=SET, broker_id=b, broker_address=f"127.0.0.1:{10000 + b - 1}", alive=b in alive
            )
            for b in in_sync
        ],
        not_in_sync_replicas=[],
    )


def snap(ctl: tuple[ControllerView, ...], *sets: SetView) -> ClusterSnapshot:
    return ClusterSnapshot(controllers=ctl, sets=sets)


UP = controllers("n1", ["n1", "n1", "n1"])


def test_nothing_is_ready_before_a_leader_everybody_knows() -> None:
    undecided = snap(controllers("n1", ["n1", None, "n1"]), SetView(SET, None, (broker(0, "none"),)))
    ready = readiness(undecided, 3)
    assert not ready.done and ready.completed == 0
    assert ready.waiting_for() == "controller leader elected"


def test_a_master_counts_only_with_a_write_lease() -> None:
    replicas = (broker(0, "master", lease=0), broker(1, "slave"), broker(2, "slave"))
    ready = readiness(snap(UP, SetView(SET, info(1, [1, 2, 3]), replicas)), 3)
    assert [ok for _, ok in ready.steps] == [True, False, True]
    assert ready.waiting_for() == f"{SET}: master elected"


def test_ready_when_every_replica_is_in_sync() -> None:
    replicas = (broker(0, "master"), broker(1, "slave"), broker(2, "slave"))
    assert not readiness(snap(UP, SetView(SET, info(1, [1, 2]), replicas)), 3).done
    ready = readiness(snap(UP, SetView(SET, info(1, [1, 2, 3]), replicas)), 3)
    assert ready.done and ready.completed == ready.total == 3 and ready.waiting_for() == "ready"


def test_dead_members_of_the_sync_state_set_do_not_count() -> None:
    replicas = (broker(0, "master"), broker(1, "slave"), broker(2, "slave"))
    assert not readiness(snap(UP, SetView(SET, info(1, [1, 2, 3], alive={1, 2}), replicas)), 3).done


def test_lag_is_measured_against_the_master() -> None:
    view = SetView(SET, info(1, [1, 2]), (broker(0, "master", max_offset=900), broker(1, "slave", max_offset=600)))
    assert view.lag(view.replicas[1]) == 300
    assert view.lag(view.replicas[0]) == 0


def _render(renderable: Any) -> str:
    console = Console(width=200, record=True)
    console.print(renderable)
    return console.export_text()


def test_status_tables_name_the_master_and_show_lag_and_dead_members() -> None:
    replicas = (
        broker(0, "master", max_offset=900),
        broker(1, "slave", max_offset=600),
        ReplicaView(f"{SET}-2", "127.0.0.1:10002", None, False),
    )
    view = snap(UP, SetView(SET, info(1, [1, 2, 3], alive={1, 2}), replicas))
    state = ClusterState(
        "local",
        "fast",
        "sync",
        (),
        (SetRecord(SET, tuple(ProcessRecord(r.name, r.api, "/d", "/l", 1, 1) for r in replicas)),),
        "t",
    )
    text = _render(status.render(state, view))
    assert "controller leader n1 (term 2)" in text
    assert f"{SET}-0" in text and "masterEpoch" in text and "confirmOffset" in text
    assert "3 (dead)" in text
    assert "300" in text  # lag of the slave
    assert "down" in text  # the dead replica's role
    masters = _render(status.masters_table(view))
    assert f"{SET}-0" in masters and "127.0.0.1:10000" in masters


def test_a_master_without_lease_is_shown_as_not_serving() -> None:
    replicas = (broker(0, "master", lease=0), broker(1, "slave"))
    text = _render(status.sets_table(snap(UP, SetView(SET, info(1, [1, 2]), replicas))))
    assert f"{SET}-0 (not serving)" in text
