"""registerBroker (reference §1.3.1): confirms an applied id, never elects."""

from __future__ import annotations

from controller_factories import CLUSTER, NOBODY, SET_A, SET_B, addr, alive, commit, led_state, make_state
from controller_factories import register_req as req

from brokergroup.controller import core
from brokergroup.controller.codes import ResponseCode
from brokergroup.controller.model import ControllerState, UpdateBrokerAddressEvent
from brokergroup.controller.protocol import RegisterResponse


def test_unknown_set_must_register_first() -> None:
    result = core.register_broker(ControllerState(), req(1), NOBODY)
    assert result.code == ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    assert result.remark == "Broker-set: broker-a hasn't been registered in controller"
    assert result.response is None and result.events == ()


def test_set_without_sync_state_entry_is_unknown() -> None:
    state = make_state()
    del state.sync_state_info[SET_A]
    result = core.register_broker(state, req(1), NOBODY)
    assert result.code == ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    assert result.remark == "Broker-set: broker-a hasn't been registered in controller"


def test_unknown_id_must_register_first() -> None:
    result = core.register_broker(make_state(ids=(1, 2)), req(5), alive(1, 2))
    assert result.code == ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    assert result.remark == "BrokerId: 5 hasn't been registered in broker-set: broker-a"
    assert result.events == ()


def test_alive_master_is_returned() -> None:
    state = led_state(master=2, in_sync=(2, 3))
    result = core.register_broker(state, req(1), alive(2))
    assert result.code == ResponseCode.SUCCESS
    assert result.response == RegisterResponse(
        master_broker_id=2,
        master_address=addr(2),
        master_epoch=1,
        sync_state_set_epoch=2,
        sync_state_set=[2, 3],
    )
    assert result.events == ()


def test_dead_master_is_not_returned_but_the_set_is() -> None:
    state = led_state(master=2, in_sync=(2, 3))
    result = core.register_broker(state, req(1), alive(1, 3))
    assert result.response == RegisterResponse(
        master_broker_id=None,
        master_address=None,
        master_epoch=None,
        sync_state_set_epoch=2,
        sync_state_set=[2, 3],
    )


def test_master_alive_in_another_set_does_not_count() -> None:
    state = led_state(master=2)
    result = core.register_broker(state, req(1), alive(2, name=SET_B))
    assert isinstance(result.response, RegisterResponse)
    assert result.response.master_broker_id is None


def test_no_master_yet() -> None:
    result = core.register_broker(make_state(), req(3), alive(1, 2, 3))
    assert result.response == RegisterResponse(
        master_broker_id=None,
        master_address=None,
        master_epoch=None,
        sync_state_set_epoch=0,
        sync_state_set=[],
    )


def test_registration_never_elects() -> None:
    state = make_state()
    before = state.to_dict()
    result = commit(state, core.register_broker(state, req(1), alive(1, 2, 3)))
    assert result.ok
    assert state.to_dict() == before


def test_changed_address_emits_update_event_and_apply_keeps_check_code() -> None:
    state = make_state(ids=(1, 2))
    old_code = state.replica_info[SET_A].broker_id_info[2][1]
    result = core.register_broker(state, req(2, address="10.7.7.7:10911"), NOBODY)
    assert result.ok
    assert result.events == (
        UpdateBrokerAddressEvent(broker_name=SET_A, cluster_name=CLUSTER, broker_address="10.7.7.7:10911", broker_id=2),
    )
    commit(state, result)
    assert state.replica_info[SET_A].broker_id_info[2] == ("10.7.7.7:10911", old_code)


def test_same_address_emits_no_event() -> None:
    assert core.register_broker(make_state(), req(1), NOBODY).events == ()


def test_master_address_after_master_re_registers_with_new_address() -> None:
    state = led_state(master=1)
    commit(state, core.register_broker(state, req(1, address="10.8.8.8:10911"), alive(1)))
    result = core.register_broker(state, req(2), alive(1))
    assert isinstance(result.response, RegisterResponse)
    assert result.response.master_address == "10.8.8.8:10911"
