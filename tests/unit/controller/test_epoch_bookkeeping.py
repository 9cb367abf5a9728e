"""The epoch bookkeeping table of reference §1.3.3, one row per test, through compute + apply."""

from __future__ import annotations

from controller_factories import (
    NOBODY,
    admin_elect,
    alive,
    alter_req,
    broker_elect,
    clean_req,
    commit,
    controller_elect,
    led_state,
    make_state,
    sync_of,
)

from brokergroup.controller import core
from brokergroup.controller.codes import ResponseCode
from brokergroup.controller.model import ControllerState


def epochs(state: ControllerState) -> tuple[int | None, int, set[int], int]:
    sync = sync_of(state)
    return sync.master_broker_id, sync.master_epoch, set(sync.sync_state_set), sync.sync_state_set_epoch


def test_first_elect_sets_one_one_and_requester() -> None:
    state = make_state()
    commit(state, core.elect_master(state, broker_elect(2), NOBODY, enable_elect_unclean_master=False))
    assert epochs(state) == (2, 1, {2}, 1)


def test_elect_new_master_bumps_both_and_resets_set() -> None:
    state = led_state(master=1, in_sync=(1, 2, 3))
    commit(state, core.elect_master(state, controller_elect(), alive(2), enable_elect_unclean_master=False))
    assert epochs(state) == (2, 2, {2}, 3)


def test_controller_elect_finding_nobody_bumps_master_epoch_only() -> None:
    state = led_state(master=1, in_sync=(1, 2))
    commit(state, core.elect_master(state, controller_elect(), NOBODY, enable_elect_unclean_master=False))
    assert epochs(state) == (None, 2, {1, 2}, 2)


def test_alter_bumps_sync_state_set_epoch_only() -> None:
    state = led_state(master=1, in_sync=(1, 2))
    commit(state, core.alter_sync_state_set(state, alter_req([1, 2, 3]), alive(1, 2, 3)))
    assert epochs(state) == (1, 1, {1, 2, 3}, 3)


def test_master_still_exist_changes_nothing() -> None:
    state = led_state(master=1, in_sync=(1, 2))
    result = commit(state, core.elect_master(state, admin_elect(1), alive(1), enable_elect_unclean_master=False))
    assert result.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST
    assert epochs(state) == (1, 1, {1, 2}, 2)


def test_elect_master_failed_changes_nothing() -> None:
    state = led_state(master=1, in_sync=(1, 2))
    result = commit(state, core.elect_master(state, broker_elect(3), alive(3), enable_elect_unclean_master=False))
    assert result.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    assert epochs(state) == (1, 1, {1, 2}, 2)


def test_clean_with_ids_removes_ids_and_keeps_epochs() -> None:
    state = led_state(master=1, in_sync=(1, 2, 3))
    commit(state, core.clean_broker_data(state, clean_req("3"), alive(1, 2)))
    assert epochs(state) == (1, 1, {1, 2}, 2)
