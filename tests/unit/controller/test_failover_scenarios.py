"""Whole scenarios of reference §1.4, driven through compute + apply like the real controller."""

from __future__ import annotations

from controller_factories import (
    NOBODY,
    SET_A,
    alive,
    alter_req,
    broker_elect,
    commit,
    controller_elect,
    live_info,
    register,
    register_req,
    sync_of,
)

from brokergroup.controller import core
from brokergroup.controller.codes import ResponseCode
from brokergroup.controller.model import ControllerState, LivenessView, Result
from brokergroup.controller.protocol import ElectMasterRequest, ElectMasterResponse, RegisterResponse


def elect(state: ControllerState, req: ElectMasterRequest, live: LivenessView, *, unclean: bool = False) -> Result:
    return commit(state, core.elect_master(state, req, live, enable_elect_unclean_master=unclean))


def bootstrap() -> ControllerState:
    """Three brokers registered; 1 became master first; it expanded the set to {1, 2}."""
    state = ControllerState()
    register(state, SET_A, (1, 2, 3))
    assert elect(state, broker_elect(1), alive(1)).ok
    expanded = commit(state, core.alter_sync_state_set(state, alter_req([1, 2], sync_state_set_epoch=1), alive(1, 2)))
    assert expanded.ok
    return state


def test_bootstrap_state() -> None:
    sync = sync_of(bootstrap())
    assert (sync.master_broker_id, sync.master_epoch, sync.sync_state_set, sync.sync_state_set_epoch) == (
        1,
        1,
        {1, 2},
        2,
    )


def test_master_dies_alive_set_member_takes_over_and_others_rejoin_by_expansion() -> None:
    state = bootstrap()
    result = elect(state, controller_elect(), alive(live_info(2, epoch=1, max_offset=70), 3))
    assert result.ok
    sync = sync_of(state)
    assert (sync.master_broker_id, sync.master_epoch, sync.sync_state_set, sync.sync_state_set_epoch) == (
        2,
        2,
        {2},
        3,
    )
    rejoin = commit(
        state,
        core.alter_sync_state_set(
            state, alter_req([2, 3], master=2, master_epoch=2, sync_state_set_epoch=3), alive(2, 3)
        ),
    )
    assert rejoin.ok and sync_of(state).sync_state_set == {2, 3}


def test_master_dies_no_alive_member_without_unclean_leaves_set_masterless() -> None:
    state = bootstrap()
    result = elect(state, controller_elect(), alive(3))
    assert result.code == ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE
    sync = sync_of(state)
    assert (sync.master_broker_id, sync.master_epoch, sync.sync_state_set) == (None, 2, {1, 2})
    assert elect(state, broker_elect(3), alive(3)).code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED


def test_master_dies_no_alive_member_with_unclean_elects_outsider() -> None:
    state = bootstrap()
    result = elect(state, controller_elect(), alive(3), unclean=True)
    assert result.ok
    assert (sync_of(state).master_broker_id, sync_of(state).sync_state_set) == (3, {3})


def _all_shut_down() -> ControllerState:
    state = bootstrap()
    elect(state, controller_elect(), NOBODY)
    assert sync_of(state).master_broker_id is None
    return state


def test_all_replicas_restart_registration_returns_no_master_and_the_retained_set() -> None:
    state = _all_shut_down()
    for bid in (1, 2, 3):
        result = commit(state, core.register_broker(state, register_req(bid), alive(1, 2, 3)))
        assert result.response == RegisterResponse(
            master_broker_id=None, master_address=None, master_epoch=None, sync_state_set_epoch=2, sync_state_set=[1, 2]
        )


def test_all_replicas_restart_without_unclean_outsider_stays_fenced_until_member_returns() -> None:
    state = _all_shut_down()
    assert elect(state, broker_elect(3), alive(3)).code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    assert sync_of(state).master_epoch == 2
    result = elect(state, broker_elect(3), alive(2, 3))
    assert isinstance(result.response, ElectMasterResponse)
    assert (result.response.master_broker_id, result.response.master_epoch) == (2, 3)
    assert elect(state, broker_elect(1), alive(1, 2, 3)).code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST


def test_all_replicas_restart_with_unclean_any_alive_replica_can_win() -> None:
    state = _all_shut_down()
    result = elect(state, broker_elect(3), alive(3), unclean=True)
    assert result.ok
    assert (sync_of(state).master_broker_id, sync_of(state).master_epoch, sync_of(state).sync_state_set) == (
        3,
        3,
        {3},
    )


def test_all_replicas_restart_with_unclean_members_still_come_first() -> None:
    state = _all_shut_down()
    live = alive(live_info(1, max_offset=5), live_info(3, max_offset=10**9))
    assert elect(state, broker_elect(3), live, unclean=True).ok
    assert sync_of(state).master_broker_id == 1


def test_failed_first_controller_election_fences_the_set_until_unclean() -> None:
    state = ControllerState()
    register(state, SET_A, (1, 2))
    assert elect(state, controller_elect(), alive(1, 2)).code == ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE
    assert elect(state, broker_elect(1), alive(1, 2)).code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    assert elect(state, broker_elect(1), alive(1, 2), unclean=True).ok
    assert (sync_of(state).master_broker_id, sync_of(state).master_epoch) == (1, 2)
