"""Persistent broker ids: getNextBrokerId and applyBrokerId (reference §1.3.1)."""

from __future__ import annotations

from controller_factories import (
    CLUSTER,
    SET_A,
    SET_B,
    addr,
    apply_req,
    check_code,
    commit,
    make_state,
    snapshot,
)

from brokergroup.controller import core
from brokergroup.controller.codes import ResponseCode
from brokergroup.controller.model import ApplyBrokerIdEvent, ControllerState
from brokergroup.controller.protocol import ApplyIdResponse, NextIdRequest, NextIdResponse


def next_id(state: ControllerState, name: str = SET_A) -> int:
    result = core.next_broker_id(state, NextIdRequest(cluster_name=CLUSTER, broker_name=name))
    assert result.code == ResponseCode.SUCCESS and not result.events
    assert isinstance(result.response, NextIdResponse)
    assert (result.response.cluster_name, result.response.broker_name) == (CLUSTER, name)
    return result.response.next_broker_id


# ---- getNextBrokerId ----------------------------------------------------------------------------------


def test_next_id_of_unknown_set_is_one() -> None:
    assert next_id(ControllerState()) == 1


def test_next_id_of_known_set_is_next_assign() -> None:
    state = make_state(ids=(1, 2), next_assign=3)
    assert next_id(state) == 3
    assert next_id(state, SET_B) == 1


def test_next_id_grows_once_per_added_id_even_when_ids_are_sparse() -> None:
    state = ControllerState()
    commit(state, core.apply_broker_id(state, apply_req(1)))
    commit(state, core.apply_broker_id(state, apply_req(7)))
    assert next_id(state) == 3
    assert sorted(state.replica_info[SET_A].broker_id_info) == [1, 7]


def test_next_id_reads_replica_table_even_without_sync_state_entry() -> None:
    state = make_state(ids=(1, 3), next_assign=4)
    del state.sync_state_info[SET_A]
    assert next_id(state) == 4


# ---- applyBrokerId -------------------------------------------------------------------------------------


def test_first_id_of_unknown_set_is_accepted() -> None:
    state = ControllerState()
    result = core.apply_broker_id(state, apply_req(1))
    assert result.code == ResponseCode.SUCCESS
    assert result.response == ApplyIdResponse(cluster_name=CLUSTER, broker_name=SET_A)
    assert result.events == (
        ApplyBrokerIdEvent(
            broker_name=SET_A,
            cluster_name=CLUSTER,
            broker_address=addr(1),
            new_broker_id=1,
            register_check_code=check_code(1),
        ),
    )
    assert state.to_dict() == ControllerState().to_dict()


def test_other_id_of_unknown_set_is_refused() -> None:
    result = core.apply_broker_id(ControllerState(), apply_req(2))
    assert result.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID
    assert result.remark == (
        "Broker-set: broker-a hasn't been registered in controller, but broker try to apply brokerId: 2"
    )
    assert result.events == ()


def test_any_unused_id_of_known_set_is_accepted() -> None:
    state = make_state(ids=(1,))
    result = core.apply_broker_id(state, apply_req(42))
    assert result.ok
    assert [e.new_broker_id for e in result.events if isinstance(e, ApplyBrokerIdEvent)] == [42]


def test_retry_with_same_check_code_is_accepted_and_idempotent() -> None:
    state = make_state(ids=(1, 2))
    before, _ = snapshot(state)
    result = commit(state, core.apply_broker_id(state, apply_req(2)))
    assert result.ok and len(result.events) == 1
    assert state.to_dict() == before


def test_used_id_with_other_check_code_is_refused() -> None:
    state = make_state(ids=(1, 2))
    result = core.apply_broker_id(state, apply_req(2, code="10.0.0.99:10911;1"))
    assert result.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID
    assert result.remark == "Fail to apply brokerId: 2 in broker-set: broker-a"
    assert result.events == ()


def test_address_is_the_check_code_up_to_the_first_semicolon() -> None:
    state = ControllerState()
    result = commit(state, core.apply_broker_id(state, apply_req(1, code="10.1.1.1:10911;123;extra")))
    assert state.replica_info[SET_A].broker_id_info[1] == ("10.1.1.1:10911", "10.1.1.1:10911;123;extra")
    assert result.ok


def test_check_code_without_semicolon_is_the_address() -> None:
    result = core.apply_broker_id(ControllerState(), apply_req(1, code="host:1"))
    event = result.events[0]
    assert isinstance(event, ApplyBrokerIdEvent)
    assert event.broker_address == "host:1"


def test_applying_first_id_creates_both_maps() -> None:
    state = ControllerState()
    commit(state, core.apply_broker_id(state, apply_req(1)))
    assert state.to_dict() == {
        "replicaInfo": {
            SET_A: {
                "clusterName": CLUSTER,
                "nextAssignBrokerId": 2,
                "brokers": {"1": [addr(1), check_code(1)]},
            }
        },
        "syncStateInfo": {
            SET_A: {
                "clusterName": CLUSTER,
                "masterBrokerId": None,
                "masterEpoch": 0,
                "syncStateSet": [],
                "syncStateSetEpoch": 0,
            }
        },
    }
