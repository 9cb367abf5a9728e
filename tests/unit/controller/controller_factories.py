"""Scenario builders for the controller's unit tests.

States are built two ways: `make_state` writes the replicated maps directly (for edge cases that
are hard to reach), and `register` / `elect` drive the real compute + apply path. Liveness is a
`LivenessView` built from `alive(...)`; nothing here reads a clock.

The module name is specific on purpose: tests run in pytest's default `prepend` import mode, so a
generic `factories` module could shadow another test folder's module of the same name.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from hypothesis import HealthCheck, settings

from brokergroup.controller import core
from brokergroup.controller.heartbeat import DEFAULT_ELECTION_PRIORITY
from brokergroup.controller.model import (
    BrokerLiveInfo,
    BrokerReplicaInfo,
    ControllerState,
    LivenessView,
    Result,
    SyncStateInfo,
)
from brokergroup.controller.protocol import (
    AlterSyncStateSetRequest,
    ApplyIdRequest,
    CleanBrokerDataRequest,
    ElectMasterRequest,
    RegisterRequest,
)

CLUSTER = "cluster-1"
SET_A = "broker-a"
SET_B = "broker-b"

PROPERTY_SETTINGS = settings(
    database=None, deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow]
)
"""Hypothesis settings for this folder: no example database on disk, no per-example deadline."""


def addr(broker_id: int, port: int = 10911) -> str:
    return f"10.0.0.{broker_id}:{port}"


def check_code(broker_id: int, millis: int = 1_700_000_000_000) -> str:
    return f"{addr(broker_id)};{millis}"


# ---- state ----------------------------------------------------------------------------------------


def make_state(
    name: str = SET_A,
    *,
    ids: Iterable[int] = (1, 2, 3),
    master: int | None = None,
    master_epoch: int = 0,
    sync_state_set: Iterable[int] = (),
    sync_state_set_epoch: int = 0,
    next_assign: int | None = None,
    cluster: str = CLUSTER,
    state: ControllerState | None = None,
) -> ControllerState:
    """A state with one broker set written directly (added to `state` if given)."""
    state = ControllerState() if state is None else state
    id_list = list(ids)
    state.replica_info[name] = BrokerReplicaInfo(
        cluster_name=cluster,
        broker_name=name,
        next_assign_broker_id=next_assign if next_assign is not None else max(id_list, default=0) + 1,
        broker_id_info={bid: (addr(bid), check_code(bid)) for bid in id_list},
    )
    state.sync_state_info[name] = SyncStateInfo(
        cluster_name=cluster,
        broker_name=name,
        master_epoch=master_epoch,
        sync_state_set_epoch=sync_state_set_epoch,
        sync_state_set=set(sync_state_set),
        master_broker_id=master,
    )
    return state


def led_state(
    name: str = SET_A, *, ids: Iterable[int] = (1, 2, 3), master: int = 1, in_sync: Iterable[int] = (1, 2, 3)
) -> ControllerState:
    """A set that has been running: master elected (epoch 1), set expanded (ssEpoch 2)."""
    return make_state(name, ids=ids, master=master, master_epoch=1, sync_state_set=in_sync, sync_state_set_epoch=2)


def register(state: ControllerState, name: str = SET_A, ids: Iterable[int] = (1, 2, 3)) -> None:
    """Apply for ids and register them through the real compute + apply path."""
    for bid in ids:
        applied = core.apply_broker_id(state, apply_req(bid, name))
        assert applied.ok, applied.remark
        core.apply_events(state, applied.events)
        registered = core.register_broker(state, register_req(bid, name), LivenessView())
        assert registered.ok, registered.remark
        core.apply_events(state, registered.events)


def commit(state: ControllerState, result: Result) -> Result:
    """Apply a result's events (what Raft does once they are committed); return the result."""
    core.apply_events(state, result.events)
    return result


def snapshot(state: ControllerState) -> tuple[dict[str, Any], ControllerState]:
    return state.to_dict(), copy.deepcopy(state)


def sync_of(state: ControllerState, name: str = SET_A) -> SyncStateInfo:
    return state.sync_state_info[name]


# ---- liveness -------------------------------------------------------------------------------------


def live_info(
    broker_id: int,
    name: str = SET_A,
    *,
    epoch: int = 0,
    max_offset: int = 0,
    priority: int = DEFAULT_ELECTION_PRIORITY,
    last_update_ms: int = 0,
    timeout_ms: int = 10_000,
) -> BrokerLiveInfo:
    return BrokerLiveInfo(
        cluster_name=CLUSTER,
        broker_name=name,
        broker_id=broker_id,
        broker_addr=addr(broker_id),
        last_update_ms=last_update_ms,
        heartbeat_timeout_ms=timeout_ms,
        epoch=epoch,
        max_offset=max_offset,
        confirm_offset=-1,
        election_priority=priority,
    )


def alive(*brokers: int | BrokerLiveInfo, name: str = SET_A) -> LivenessView:
    """A view where the given brokers (ids of `name`, or full infos) are alive."""
    infos = [b if isinstance(b, BrokerLiveInfo) else live_info(b, name) for b in brokers]
    return view_of(infos)


def view_of(infos: Iterable[BrokerLiveInfo]) -> LivenessView:
    table: Mapping[tuple[str, int], BrokerLiveInfo] = {(i.broker_name, i.broker_id): i for i in infos}
    return LivenessView(brokers=table)


NOBODY = LivenessView()


# ---- requests -------------------------------------------------------------------------------------


def apply_req(broker_id: int, name: str = SET_A, code: str | None = None) -> ApplyIdRequest:
    return ApplyIdRequest(
        cluster_name=CLUSTER,
        broker_name=name,
        applied_broker_id=broker_id,
        register_check_code=check_code(broker_id) if code is None else code,
    )


def register_req(broker_id: int, name: str = SET_A, address: str | None = None) -> RegisterRequest:
    return RegisterRequest(
        cluster_name=CLUSTER,
        broker_name=name,
        broker_id=broker_id,
        broker_address=addr(broker_id) if address is None else address,
    )


def controller_elect(name: str = SET_A) -> ElectMasterRequest:
    """RocketMQ `ofControllerTrigger`."""
    return ElectMasterRequest(broker_name=name)


def broker_elect(broker_id: int, name: str = SET_A) -> ElectMasterRequest:
    """RocketMQ `ofBrokerTrigger`."""
    return ElectMasterRequest(cluster_name=CLUSTER, broker_name=name, broker_id=broker_id)


def admin_elect(broker_id: int, name: str = SET_A) -> ElectMasterRequest:
    """RocketMQ `ofAdminTrigger` (mqadmin electMaster -b)."""
    return ElectMasterRequest(cluster_name=CLUSTER, broker_name=name, broker_id=broker_id, designate_elect=True)


def alter_req(
    members: Iterable[int],
    *,
    name: str = SET_A,
    master: int = 1,
    master_epoch: int = 1,
    sync_state_set_epoch: int = 2,
) -> AlterSyncStateSetRequest:
    return AlterSyncStateSetRequest(
        broker_name=name,
        master_broker_id=master,
        master_epoch=master_epoch,
        sync_state_set=list(members),
        sync_state_set_epoch=sync_state_set_epoch,
    )


def clean_req(
    ids: str | None = None,
    *,
    name: str = SET_A,
    living: bool = False,
    cluster: str | None = CLUSTER,
    force: bool = False,
) -> CleanBrokerDataRequest:
    return CleanBrokerDataRequest(
        cluster_name=cluster,
        broker_name=name,
        broker_controller_ids_to_clean=ids,
        is_clean_living_broker=living,
        force=force,
    )
