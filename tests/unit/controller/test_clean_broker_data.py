"""cleanBrokerData (reference §1.3.7), including RocketMQ's quirks that we keep."""

from __future__ import annotations

import pytest
from controller_factories import (
    NOBODY,
    SET_A,
    SET_B,
    alive,
    apply_req,
    broker_elect,
    clean_req,
    commit,
    led_state,
    make_state,
    register_req,
)

from brokergroup.controller import core
from brokergroup.controller.codes import ResponseCode
from brokergroup.controller.model import CleanBrokerDataEvent, ControllerState
from brokergroup.controller.protocol import NextIdRequest, NextIdResponse, ReplicaInfoResponse

INVALID = ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
FORMAT = "Please set the option <brokerControllerIdsToClean> according to the format, exception: "


# ---- without ids ------------------------------------------------------------------------------------


@pytest.mark.parametrize("ids", [None, "", "   "])
def test_no_ids_and_a_master_is_refused(ids: str | None) -> None:
    result = core.clean_broker_data(led_state(master=1), clean_req(ids), NOBODY)
    assert result.code == INVALID
    assert result.remark == "Broker broker-a is still alive, clean up failure"
    assert result.events == ()


def test_no_ids_and_no_master_wipes_the_set() -> None:
    state = make_state(master=None, master_epoch=2, sync_state_set=(1,))
    make_state(SET_B, state=state)
    result = commit(state, core.clean_broker_data(state, clean_req(None), alive(1, 2, 3)))
    assert result.code == ResponseCode.SUCCESS
    assert result.events == (CleanBrokerDataEvent(broker_name=SET_A, broker_id_set_to_clean=None),)
    assert list(state.replica_info) == [SET_B] and list(state.sync_state_info) == [SET_B]


def test_no_ids_on_unknown_set_is_refused() -> None:
    result = core.clean_broker_data(ControllerState(), clean_req(None), NOBODY)
    assert result.code == INVALID
    assert result.remark == "Broker broker-a is not existed,clean broker data failure."


# ---- with ids ------------------------------------------------------------------------------------------


def test_dead_ids_are_removed_with_sorted_event() -> None:
    state = led_state(ids=(1, 2, 3, 4), master=1, in_sync=(1, 2, 3))
    result = commit(state, core.clean_broker_data(state, clean_req("4;3;3"), alive(1, 2)))
    assert result.events == (CleanBrokerDataEvent(broker_name=SET_A, broker_id_set_to_clean=(3, 4)),)
    assert sorted(state.replica_info[SET_A].broker_id_info) == [1, 2]
    assert state.sync_state_info[SET_A].sync_state_set == {1, 2}


def test_cleaning_keeps_next_assign_broker_id() -> None:
    state = make_state(ids=(1, 2, 3), next_assign=4, sync_state_set=(1,))
    commit(state, core.clean_broker_data(state, clean_req("3"), NOBODY))
    result = core.next_broker_id(state, NextIdRequest(cluster_name="c", broker_name=SET_A))
    assert isinstance(result.response, NextIdResponse)
    assert result.response.next_broker_id == 4


def test_first_alive_id_in_id_order_is_reported() -> None:
    result = core.clean_broker_data(led_state(master=1), clean_req("3;2;9"), alive(2, 3))
    assert result.code == INVALID
    assert result.remark == "Broker [broker-a,  2] is still alive, clean up failure"
    assert result.events == ()


def test_liveness_checks_run_before_existence() -> None:
    result = core.clean_broker_data(ControllerState(), clean_req("1"), alive(1))
    assert result.remark == "Broker [broker-a,  1] is still alive, clean up failure"


def test_dead_ids_of_unknown_set_are_refused() -> None:
    result = core.clean_broker_data(ControllerState(), clean_req("1;2"), NOBODY)
    assert result.code == INVALID
    assert result.remark == "Broker broker-a is not existed,clean broker data failure."


def test_ids_may_be_given_while_a_master_exists() -> None:
    result = core.clean_broker_data(led_state(master=1), clean_req("3"), alive(1, 2))
    assert result.ok


def test_unregistered_ids_are_accepted_and_ignored_by_apply() -> None:
    state = led_state(master=1)
    before = state.to_dict()
    result = commit(state, core.clean_broker_data(state, clean_req("99"), alive(1)))
    assert result.ok
    assert state.to_dict() == before


# ---- id parsing (Java String.split(";") + Long.valueOf) -----------------------------------------------------


@pytest.mark.parametrize(
    ("ids", "bad"),
    [
        ("1;x", "x"),
        ("1;;2", ""),
        (";1", ""),
        (" 1", " 1"),
        ("1.0", "1.0"),
        ("+", "+"),
        ("9223372036854775808", "9223372036854775808"),
        ("1_000", "1_000"),
    ],
)
def test_malformed_ids_are_refused_with_javas_message(ids: str, bad: str) -> None:
    result = core.clean_broker_data(led_state(master=1), clean_req(ids), NOBODY)
    assert result.code == INVALID
    assert result.remark == f'{FORMAT}java.lang.NumberFormatException: For input string: "{bad}"'
    assert result.events == ()


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("1", {1}),
        ("1;2;3", {1, 2, 3}),
        ("1;2;", {1, 2}),
        ("1;2;;;", {1, 2}),
        ("+3;-4;0", {3, -4, 0}),
        ("9223372036854775807", {2**63 - 1}),
        (";", set()),
    ],
)
def test_parse_broker_ids_follows_java(text: str, ids: set[int]) -> None:
    assert core.parse_broker_ids(text) == ids


def test_a_lone_semicolon_wipes_the_whole_set_even_with_a_master() -> None:
    # RocketMQ quirk, kept: ";" is not blank, splits to nothing, and an empty id set wipes the set.
    state = led_state(master=1)
    result = commit(state, core.clean_broker_data(state, clean_req(";"), alive(1, 2, 3)))
    assert result.events == (CleanBrokerDataEvent(broker_name=SET_A, broker_id_set_to_clean=()),)
    assert not state.contains(SET_A) and state.replica_info == {} and state.sync_state_info == {}


# ---- clean living broker (-l) ---------------------------------------------------------------------------


def test_clean_living_ignores_ids_and_checks_and_wipes_the_set() -> None:
    state = led_state(master=1)
    result = commit(state, core.clean_broker_data(state, clean_req("2", living=True), alive(1, 2, 3)))
    assert result.events == (CleanBrokerDataEvent(broker_name=SET_A, broker_id_set_to_clean=None),)
    assert state.replica_info == {} and state.sync_state_info == {}


def test_clean_living_ignores_malformed_ids() -> None:
    assert core.clean_broker_data(led_state(master=1), clean_req("x", living=True), NOBODY).ok


def test_clean_living_on_unknown_set_is_refused() -> None:
    result = core.clean_broker_data(ControllerState(), clean_req(None, living=True), NOBODY)
    assert result.remark == "Broker broker-a is not existed,clean broker data failure."


def test_cluster_name_is_optional() -> None:
    assert core.clean_broker_data(led_state(master=1), clean_req("3", cluster=None), NOBODY).ok


# ---- quirks of apply ----------------------------------------------------------------------------------


def test_cleaning_the_master_id_leaves_master_id_dangling() -> None:
    state = led_state(master=1, in_sync=(1, 2))
    commit(state, core.clean_broker_data(state, clean_req("1"), alive(2)))
    sync = state.sync_state_info[SET_A]
    assert (sync.master_broker_id, sync.sync_state_set, sync.master_epoch) == (1, {2}, 1)
    assert 1 not in state.replica_info[SET_A].broker_id_info
    info = core.get_replica_info(state, SET_A)
    assert isinstance(info.response, ReplicaInfoResponse)
    assert (info.response.master_broker_id, info.response.master_address) == (1, None)


def test_dangling_master_can_be_replaced_by_election() -> None:
    state = led_state(master=1, in_sync=(1, 2))
    commit(state, core.clean_broker_data(state, clean_req("1"), alive(2)))
    result = core.elect_master(state, broker_elect(2), alive(2), enable_elect_unclean_master=False)
    assert result.ok


def test_cleaning_every_id_drops_both_maps() -> None:
    state = led_state(ids=(1, 2), master=1, in_sync=(1, 2))
    commit(state, core.clean_broker_data(state, clean_req("1;2"), NOBODY))
    assert state.replica_info == {} and state.sync_state_info == {}


def test_emptying_the_sync_state_set_makes_the_set_unknown_although_ids_remain() -> None:
    state = led_state(ids=(1, 2, 3), master=2, in_sync=(2,))
    commit(state, core.clean_broker_data(state, clean_req("2", force=True), alive(1, 3)))
    assert SET_A in state.replica_info and SET_A not in state.sync_state_info
    assert sorted(state.replica_info[SET_A].broker_id_info) == [1, 3]
    elect = core.elect_master(state, broker_elect(1), alive(1, 3), enable_elect_unclean_master=True)
    assert elect.code == ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    assert core.register_broker(state, register_req(1), alive(1)).code == (
        ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    )
    assert core.get_replica_info(state, SET_A).code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST
    assert core.clean_broker_data(state, clean_req("1"), NOBODY).remark == (
        "Broker broker-a is not existed,clean broker data failure."
    )


def test_after_the_set_became_unknown_next_apply_recreates_it_from_scratch() -> None:
    state = led_state(ids=(1, 2, 3), master=2, in_sync=(2,))
    commit(state, core.clean_broker_data(state, clean_req("2", force=True), alive(1, 3)))
    next_id = core.next_broker_id(state, NextIdRequest(cluster_name="c", broker_name=SET_A))
    assert isinstance(next_id.response, NextIdResponse)
    assert next_id.response.next_broker_id == 4
    applied = commit(state, core.apply_broker_id(state, apply_req(4)))
    assert applied.ok
    replica, sync = state.replica_info[SET_A], state.sync_state_info[SET_A]
    assert (sorted(replica.broker_id_info), replica.next_assign_broker_id) == ([4], 2)
    # brokergroup: the recreation also commits a failed election (masterEpoch 1): see test_clean_guard.py.
    assert (sync.master_broker_id, sync.master_epoch, sync.sync_state_set) == (None, 1, set())


def test_cleaning_an_id_of_a_never_elected_set_drops_its_sync_state_entry() -> None:
    state = make_state(ids=(1, 2))
    commit(state, core.clean_broker_data(state, clean_req("2", force=True), alive(1)))
    assert SET_A in state.replica_info and SET_A not in state.sync_state_info
