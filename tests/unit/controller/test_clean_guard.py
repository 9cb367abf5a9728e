"""Issue 23 items 2 and 4: clean-broker-data must not strand a set's replicas, nor open an unchecked election.

Item 2: cleaning the ids of a set's whole sync-state-set while other replicas remain is refused unless
forced, with a remark naming the replicas. Item 4: once a set is half-removed (its sync-state entry
dropped, replica ids left), the apply-id that recreates it also commits a failed election, so the next
election goes through the policy and is gated by enableElectUncleanMaster, instead of being a
"first-time" election that the first broker to ask wins unchecked.
"""

from __future__ import annotations

from controller_factories import (
    NOBODY,
    SET_A,
    addr,
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
from brokergroup.controller.model import CleanBrokerDataEvent, ControllerState, ElectMasterEvent
from brokergroup.controller.protocol import ElectMasterResponse, NextIdRequest, NextIdResponse

INVALID = ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA


# ---- item 2: the guard -----------------------------------------------------------------------------------


def test_cleaning_the_only_in_sync_member_while_replicas_remain_is_refused_naming_them() -> None:
    state = led_state(ids=(1, 2, 3), master=1, in_sync=(1,))
    before = state.to_dict()
    result = core.clean_broker_data(state, clean_req("1"), alive(2))
    assert result.code == INVALID
    assert result.events == ()
    assert result.remark.startswith(
        f"Broker broker-a: cleaning [1] would empty the sync-state-set [1] while other replicas remain "
        f"(alive: 2 ({addr(2)}); not alive: 3 ({addr(3)})). The set would become unknown to the controller"
    )
    assert "clean with force" in result.remark and "enableElectUncleanMaster" in result.remark
    assert state.to_dict() == before


def test_cleaning_the_whole_sync_state_set_is_refused_too() -> None:
    result = core.clean_broker_data(led_state(ids=(1, 2, 3), in_sync=(1, 2)), clean_req("1;2"), NOBODY)
    assert result.code == INVALID
    assert "not alive: 3 (" in result.remark and "alive: none" in result.remark


def test_an_id_of_a_never_elected_set_is_refused() -> None:
    # A never-elected set has an empty sync-state-set: removing any id would drop its entry.
    result = core.clean_broker_data(make_state(ids=(1, 2)), clean_req("2"), alive(1))
    assert result.code == INVALID
    assert f"alive: 1 ({addr(1)}); not alive: none" in result.remark


def test_force_cleans_anyway_and_the_set_becomes_unknown() -> None:
    state = led_state(ids=(1, 2, 3), master=1, in_sync=(1,))
    result = commit(state, core.clean_broker_data(state, clean_req("1", force=True), alive(2)))
    assert result.ok
    assert result.events == (CleanBrokerDataEvent(broker_name=SET_A, broker_id_set_to_clean=(1,)),)
    assert SET_A in state.replica_info and not state.contains(SET_A)


def test_cleaning_a_member_outside_the_sync_state_set_is_allowed() -> None:
    state = led_state(ids=(1, 2, 3), master=1, in_sync=(1, 2))
    assert commit(state, core.clean_broker_data(state, clean_req("3"), alive(1))).ok
    assert sorted(state.replica_info[SET_A].broker_id_info) == [1, 2]


def test_cleaning_an_in_sync_member_that_leaves_another_in_sync_is_allowed() -> None:
    state = led_state(ids=(1, 2, 3), master=1, in_sync=(1, 2))
    assert commit(state, core.clean_broker_data(state, clean_req("1"), alive(2))).ok
    assert state.sync_state_info[SET_A].sync_state_set == {2}


def test_cleaning_every_id_is_allowed() -> None:
    state = led_state(ids=(1, 2), master=1, in_sync=(1,))
    assert commit(state, core.clean_broker_data(state, clean_req("1;2"), NOBODY)).ok
    assert state == ControllerState()


# ---- item 4: no unchecked first-time election after a recreation --------------------------------------


def _half_removed() -> ControllerState:
    """A set whose only in-sync member (the dead master 1) was cleaned while 2 and 3 remain."""
    state = led_state(ids=(1, 2, 3), master=1, in_sync=(1,))
    core.apply_event(state, CleanBrokerDataEvent(broker_name=SET_A, broker_id_set_to_clean=(1,)))
    assert SET_A in state.replica_info and SET_A not in state.sync_state_info
    return state


def _recreate_with(state: ControllerState, broker_id: int) -> None:
    next_id = core.next_broker_id(state, NextIdRequest(cluster_name="c", broker_name=SET_A))
    assert isinstance(next_id.response, NextIdResponse) and next_id.response.next_broker_id == 4
    applied = commit(state, core.apply_broker_id(state, apply_req(broker_id)))
    assert applied.ok, applied.remark
    assert applied.events[1:] == (ElectMasterEvent(broker_name=SET_A, new_master_elected=False),)


def test_the_first_broker_to_ask_after_a_recreation_does_not_win_unchecked() -> None:
    state = _half_removed()
    _recreate_with(state, 4)
    sync = state.sync_state_info[SET_A]
    assert (sync.master_broker_id, sync.master_epoch, sync.sync_state_set) == (None, 1, set())
    # Broker 4 has no heartbeat, no sync-state membership and no offset: it must not win.
    result = core.elect_master(state, broker_elect(4), NOBODY, enable_elect_unclean_master=False)
    assert result.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    assert result.events == ()


def test_a_live_replica_after_a_recreation_wins_only_with_the_unclean_flag() -> None:
    state = _half_removed()
    _recreate_with(state, 4)
    assert commit(state, core.register_broker(state, register_req(4), alive(4))).ok
    clean_off = core.elect_master(state, broker_elect(4), alive(4), enable_elect_unclean_master=False)
    assert clean_off.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    unclean_on = core.elect_master(state, broker_elect(4), alive(4), enable_elect_unclean_master=True)
    assert unclean_on.ok
    assert isinstance(unclean_on.response, ElectMasterResponse)
    assert (unclean_on.response.master_broker_id, unclean_on.response.master_epoch) == (4, 2)


def test_a_retried_apply_after_the_recreation_commits_no_second_failed_election() -> None:
    state = _half_removed()
    _recreate_with(state, 4)
    retry = core.apply_broker_id(state, apply_req(4))
    assert retry.ok and len(retry.events) == 1


def test_a_brand_new_set_still_elects_its_first_broker() -> None:
    # The RocketMQ bootstrap is unchanged: a set the controller never knew elects the first asker.
    state = ControllerState()
    assert commit(state, core.apply_broker_id(state, apply_req(1))).ok
    assert state.sync_state_info[SET_A].master_epoch == 0
    assert core.elect_master(state, broker_elect(1), NOBODY, enable_elect_unclean_master=False).ok
