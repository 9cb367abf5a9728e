"""Reads: getReplicaInfo and getSyncStateData (reference §1.3.6)."""

from __future__ import annotations

from controller_factories import NOBODY, SET_A, SET_B, addr, alive, led_state, live_info, make_state, view_of

from brokergroup.controller import core
from brokergroup.controller.codes import ResponseCode
from brokergroup.controller.model import ControllerState
from brokergroup.controller.protocol import (
    ReplicaIdentity,
    ReplicaInfoResponse,
    ReplicasInfo,
    SyncStateDataRequest,
    SyncStateDataResponse,
)


def identity(broker_id: int, alive_: bool, name: str = SET_A) -> ReplicaIdentity:
    return ReplicaIdentity(broker_name=name, broker_id=broker_id, broker_address=addr(broker_id), alive=alive_)


# ---- getReplicaInfo ------------------------------------------------------------------------------------


def test_replica_info_of_known_set_ignores_liveness() -> None:
    result = core.get_replica_info(led_state(master=2, in_sync=(3, 2)), SET_A)
    assert result.code == ResponseCode.SUCCESS and result.events == ()
    assert result.response == ReplicaInfoResponse(
        master_broker_id=2, master_address=addr(2), master_epoch=1, sync_state_set=[2, 3], sync_state_set_epoch=2
    )


def test_replica_info_without_master() -> None:
    result = core.get_replica_info(make_state(master_epoch=3, sync_state_set=(1,)), SET_A)
    assert result.response == ReplicaInfoResponse(
        master_broker_id=None, master_address=None, master_epoch=3, sync_state_set=[1], sync_state_set_epoch=0
    )


def test_replica_info_of_unknown_set() -> None:
    result = core.get_replica_info(ControllerState(), SET_A)
    assert result.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST
    assert result.remark == "Broker metadata is not existed"
    assert result.response is None


# ---- getSyncStateData -----------------------------------------------------------------------------------


def test_sync_state_data_splits_registered_replicas_and_reports_liveness() -> None:
    state = led_state(ids=(4, 1, 3, 2), master=1, in_sync=(3, 1))
    result = core.get_sync_state_data(state, SyncStateDataRequest(broker_names=[SET_A]), alive(1, 2))
    assert result.code == ResponseCode.SUCCESS and result.events == ()
    assert result.response == SyncStateDataResponse(
        replicas_info_table={
            SET_A: ReplicasInfo(
                master_broker_id=1,
                master_address=addr(1),
                master_epoch=1,
                sync_state_set_epoch=2,
                in_sync_replicas=[identity(1, True), identity(3, False)],
                not_in_sync_replicas=[identity(2, True), identity(4, False)],
            )
        }
    )


def test_sync_state_data_omits_unknown_names() -> None:
    state = led_state(SET_B, master=1)
    result = core.get_sync_state_data(state, SyncStateDataRequest(broker_names=[SET_A, SET_B, SET_A]), NOBODY)
    assert isinstance(result.response, SyncStateDataResponse)
    assert list(result.response.replicas_info_table) == [SET_B]


def test_sync_state_data_of_only_unknown_names_is_empty_success() -> None:
    result = core.get_sync_state_data(ControllerState(), SyncStateDataRequest(broker_names=["nope"]), NOBODY)
    assert result.ok
    assert result.response == SyncStateDataResponse(replicas_info_table={})


def test_sync_state_data_liveness_is_per_set() -> None:
    state = led_state(SET_A, master=1, in_sync=(1,))
    result = core.get_sync_state_data(state, SyncStateDataRequest(broker_names=[SET_A]), view_of([live_info(1, SET_B)]))
    assert isinstance(result.response, SyncStateDataResponse)
    assert [r.alive for r in result.response.replicas_info_table[SET_A].in_sync_replicas] == [False]


def test_sync_state_data_with_dangling_master_has_no_master_address() -> None:
    state = led_state(ids=(2, 3), master=1, in_sync=(2, 3))
    result = core.get_sync_state_data(state, SyncStateDataRequest(broker_names=[SET_A]), NOBODY)
    assert isinstance(result.response, SyncStateDataResponse)
    info = result.response.replicas_info_table[SET_A]
    assert (info.master_broker_id, info.master_address) == (1, None)
