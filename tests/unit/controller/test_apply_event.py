"""apply_event: the table of reference §1.2, and determinism."""

from __future__ import annotations

import dataclasses

import pytest
from controller_factories import CLUSTER, SET_A, SET_B, addr, check_code, led_state, make_state, sync_of

from brokergroup.controller import core
from brokergroup.controller.model import (
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    CleanBrokerDataEvent,
    ControllerState,
    ElectMasterEvent,
    Event,
    UpdateBrokerAddressEvent,
    event_from_dict,
)


def apply_id(broker_id: int, name: str = SET_A, cluster: str = CLUSTER) -> ApplyBrokerIdEvent:
    return ApplyBrokerIdEvent(
        broker_name=name,
        cluster_name=cluster,
        broker_address=addr(broker_id),
        new_broker_id=broker_id,
        register_check_code=check_code(broker_id),
    )


# ---- ApplyBrokerIdEvent ---------------------------------------------------------------------------------


def test_apply_id_for_unknown_set_creates_both_maps() -> None:
    state = ControllerState()
    core.apply_event(state, apply_id(3, cluster="cl-9"))
    replica, sync = state.replica_info[SET_A], state.sync_state_info[SET_A]
    assert (replica.cluster_name, replica.broker_name, replica.next_assign_broker_id) == ("cl-9", SET_A, 2)
    assert replica.broker_id_info == {3: (addr(3), check_code(3))}
    assert (sync.cluster_name, sync.master_broker_id, sync.master_epoch, sync.sync_state_set_epoch) == (
        "cl-9",
        None,
        0,
        0,
    )
    assert sync.sync_state_set == set()


def test_apply_id_for_known_set_adds_and_increments() -> None:
    state = make_state(ids=(1,), next_assign=2)
    core.apply_event(state, apply_id(5))
    assert sorted(state.replica_info[SET_A].broker_id_info) == [1, 5]
    assert state.replica_info[SET_A].next_assign_broker_id == 3


def test_apply_id_already_present_is_a_no_op() -> None:
    state = make_state(ids=(1, 2), next_assign=3)
    before = state.to_dict()
    core.apply_event(state, dataclasses.replace(apply_id(2), register_check_code="other;1"))
    assert state.to_dict() == before


# ---- UpdateBrokerAddressEvent -----------------------------------------------------------------------------


def update(broker_id: int, address: str, name: str = SET_A) -> UpdateBrokerAddressEvent:
    return UpdateBrokerAddressEvent(broker_name=name, cluster_name=CLUSTER, broker_address=address, broker_id=broker_id)


def test_update_address_keeps_check_code() -> None:
    state = make_state(ids=(1,))
    core.apply_event(state, update(1, "h:1"))
    assert state.replica_info[SET_A].broker_id_info[1] == ("h:1", check_code(1))


@pytest.mark.parametrize("event", [update(1, "h:1", name=SET_B), update(7, "h:1")])
def test_update_address_of_unknown_set_or_id_is_a_no_op(event: UpdateBrokerAddressEvent) -> None:
    state = make_state(ids=(1,))
    before = state.to_dict()
    core.apply_event(state, event)
    assert state.to_dict() == before


# ---- ElectMasterEvent -----------------------------------------------------------------------------------


def test_elect_event_sets_master_and_single_member_set() -> None:
    state = led_state(master=1, in_sync=(1, 2, 3))
    core.apply_event(state, ElectMasterEvent(broker_name=SET_A, new_master_elected=True, new_master_broker_id=3))
    sync = sync_of(state)
    assert (sync.master_broker_id, sync.master_epoch, sync.sync_state_set, sync.sync_state_set_epoch) == (
        3,
        2,
        {3},
        3,
    )


def test_no_master_event_keeps_set_and_set_epoch() -> None:
    state = led_state(master=1, in_sync=(1, 2))
    core.apply_event(state, ElectMasterEvent(broker_name=SET_A, new_master_elected=False))
    sync = sync_of(state)
    assert (sync.master_broker_id, sync.master_epoch, sync.sync_state_set, sync.sync_state_set_epoch) == (
        None,
        2,
        {1, 2},
        2,
    )


def test_elected_event_without_id_counts_as_no_master() -> None:
    state = led_state(master=1, in_sync=(1, 2))
    core.apply_event(state, ElectMasterEvent(broker_name=SET_A, new_master_elected=True))
    assert (sync_of(state).master_broker_id, sync_of(state).master_epoch, sync_of(state).sync_state_set) == (
        None,
        2,
        {1, 2},
    )


def test_elect_event_for_unknown_set_is_a_no_op() -> None:
    state = make_state(ids=(1,))
    del state.sync_state_info[SET_A]
    before = state.to_dict()
    core.apply_event(state, ElectMasterEvent(broker_name=SET_A, new_master_elected=True, new_master_broker_id=1))
    assert state.to_dict() == before


# ---- AlterSyncStateSetEvent -------------------------------------------------------------------------------


def test_alter_event_replaces_set_and_bumps_its_epoch() -> None:
    state = led_state(master=1, in_sync=(1,))
    core.apply_event(state, AlterSyncStateSetEvent(broker_name=SET_A, new_sync_state_set=(1, 3)))
    assert (sync_of(state).sync_state_set, sync_of(state).sync_state_set_epoch, sync_of(state).master_epoch) == (
        {1, 3},
        3,
        1,
    )


def test_alter_event_for_unknown_set_is_a_no_op() -> None:
    state = led_state()
    before = state.to_dict()
    core.apply_event(state, AlterSyncStateSetEvent(broker_name=SET_B, new_sync_state_set=(1,)))
    assert state.to_dict() == before


# ---- CleanBrokerDataEvent ----------------------------------------------------------------------------------


@pytest.mark.parametrize("ids", [None, ()])
def test_clean_event_without_ids_removes_the_set(ids: tuple[int, ...] | None) -> None:
    state = led_state()
    make_state(SET_B, state=state)
    core.apply_event(state, CleanBrokerDataEvent(broker_name=SET_A, broker_id_set_to_clean=ids))
    assert list(state.replica_info) == [SET_B] and list(state.sync_state_info) == [SET_B]


def test_clean_event_without_ids_removes_a_half_known_set() -> None:
    state = make_state()
    del state.sync_state_info[SET_A]
    core.apply_event(state, CleanBrokerDataEvent(broker_name=SET_A))
    assert state.replica_info == {}


def test_clean_event_with_ids_for_unknown_set_is_a_no_op() -> None:
    state = make_state()
    del state.sync_state_info[SET_A]
    before = state.to_dict()
    core.apply_event(state, CleanBrokerDataEvent(broker_name=SET_A, broker_id_set_to_clean=(1,)))
    assert state.to_dict() == before


def test_clean_event_with_ids_keeps_epochs_and_master() -> None:
    state = led_state(master=1, in_sync=(1, 2, 3))
    core.apply_event(state, CleanBrokerDataEvent(broker_name=SET_A, broker_id_set_to_clean=(1, 3)))
    sync = sync_of(state)
    assert (sync.master_broker_id, sync.master_epoch, sync.sync_state_set, sync.sync_state_set_epoch) == (
        1,
        1,
        {2},
        2,
    )
    assert sorted(state.replica_info[SET_A].broker_id_info) == [2]


# ---- dispatch and determinism ---------------------------------------------------------------------------------


def test_unknown_event_type_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class Strange(Event):
        TYPE = "STRANGE"

    with pytest.raises(TypeError, match="Strange"):
        core.apply_event(ControllerState(), Strange(broker_name=SET_A))


HISTORY: list[Event] = [
    apply_id(1),
    apply_id(2),
    apply_id(1, name=SET_B),
    ElectMasterEvent(broker_name=SET_A, new_master_elected=True, new_master_broker_id=1),
    AlterSyncStateSetEvent(broker_name=SET_A, new_sync_state_set=(1, 2)),
    UpdateBrokerAddressEvent(broker_name=SET_A, cluster_name=CLUSTER, broker_address="h:2", broker_id=2),
    ElectMasterEvent(broker_name=SET_A, new_master_elected=False),
    ElectMasterEvent(broker_name=SET_A, new_master_elected=True, new_master_broker_id=2),
    CleanBrokerDataEvent(broker_name=SET_A, broker_id_set_to_clean=(1,)),
    CleanBrokerDataEvent(broker_name=SET_B),
]


def test_apply_events_replays_a_history() -> None:
    state = ControllerState()
    core.apply_events(state, HISTORY)
    assert state.to_dict() == {
        "replicaInfo": {
            SET_A: {"clusterName": CLUSTER, "nextAssignBrokerId": 3, "brokers": {"2": ["h:2", check_code(2)]}}
        },
        "syncStateInfo": {
            SET_A: {
                "clusterName": CLUSTER,
                "masterBrokerId": 2,
                "masterEpoch": 3,
                "syncStateSet": [2],
                "syncStateSetEpoch": 3,
            }
        },
    }


def test_replaying_serialized_events_gives_the_same_state() -> None:
    direct, replayed = ControllerState(), ControllerState()
    core.apply_events(direct, HISTORY)
    core.apply_events(replayed, [event_from_dict(e.to_dict()) for e in HISTORY])
    assert replayed == direct
    assert replayed.to_dict() == direct.to_dict()
