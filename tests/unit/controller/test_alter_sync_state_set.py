"""alterSyncStateSet (reference §1.3.5): the seven checks in order, then success."""

from __future__ import annotations

from controller_factories import (
    NOBODY,
    SET_A,
    SET_B,
    alive,
    alter_req,
    commit,
    led_state,
    live_info,
    make_state,
    sync_of,
)

from brokergroup.controller import core
from brokergroup.controller.codes import ResponseCode
from brokergroup.controller.model import AlterSyncStateSetEvent, ControllerState
from brokergroup.controller.protocol import AlterSyncStateSetResponse

PREFIX = "Rejecting alter syncStateSet request because"


def base() -> ControllerState:
    """Master 1, masterEpoch 1, set {1, 2}, ssEpoch 2; ids 1..4 registered."""
    return led_state(ids=(1, 2, 3, 4), master=1, in_sync=(1, 2))


# ---- success ----------------------------------------------------------------------------------------


def test_expand_succeeds_with_next_epoch_and_sorted_set() -> None:
    state = base()
    result = core.alter_sync_state_set(state, alter_req([3, 1, 2]), alive(1, 2, 3))
    assert result.code == ResponseCode.SUCCESS
    assert result.response == AlterSyncStateSetResponse(sync_state_set=[1, 2, 3], sync_state_set_epoch=3)
    assert result.events == (AlterSyncStateSetEvent(broker_name=SET_A, new_sync_state_set=(1, 2, 3)),)


def test_shrink_to_master_alone_succeeds_and_apply_matches_response() -> None:
    state = base()
    result = commit(state, core.alter_sync_state_set(state, alter_req([1]), alive(1)))
    assert result.ok
    sync = sync_of(state)
    assert (sync.sync_state_set, sync.sync_state_set_epoch, sync.master_epoch) == ({1}, 3, 1)


def test_any_superset_or_subset_containing_master_is_allowed() -> None:
    state = base()
    result = core.alter_sync_state_set(state, alter_req([1, 3, 4]), alive(1, 3, 4))
    assert isinstance(result.response, AlterSyncStateSetResponse)
    assert result.response.sync_state_set == [1, 3, 4]


def test_duplicates_in_the_request_collapse() -> None:
    state = base()
    result = core.alter_sync_state_set(state, alter_req([1, 3, 3, 1]), alive(1, 3))
    assert result.events == (AlterSyncStateSetEvent(broker_name=SET_A, new_sync_state_set=(1, 3)),)


def test_a_stale_proposal_is_fenced_after_a_successful_one() -> None:
    state = base()
    commit(state, core.alter_sync_state_set(state, alter_req([1, 2, 3]), alive(1, 2, 3)))
    stale = core.alter_sync_state_set(state, alter_req([1]), alive(1, 2, 3))
    assert stale.code == ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH


# ---- check 1: unknown set ------------------------------------------------------------------------------


def test_1_unknown_set_wins_over_everything() -> None:
    result = core.alter_sync_state_set(base(), alter_req([9], name=SET_B, master=7, master_epoch=9), NOBODY)
    assert result.code == ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
    assert result.remark == "Broker metadata is not existed"
    assert result.events == () and result.response is None


# ---- check 2: equal set ----------------------------------------------------------------------------------


def test_2_equal_set_wins_over_wrong_master_and_epochs() -> None:
    result = core.alter_sync_state_set(
        base(), alter_req([2, 1], master=3, master_epoch=7, sync_state_set_epoch=7), NOBODY
    )
    assert result.code == ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
    assert result.remark == "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet"


# ---- check 3: master ----------------------------------------------------------------------------------


def test_3_wrong_master_wins_over_epochs_and_members() -> None:
    result = core.alter_sync_state_set(
        base(), alter_req([2, 9], master=2, master_epoch=7, sync_state_set_epoch=7), NOBODY
    )
    assert result.code == ResponseCode.CONTROLLER_INVALID_MASTER
    assert result.remark == f"{PREFIX} the current leader is:{{1}}, not {{2}}"


def test_3_no_master_prints_null() -> None:
    state = make_state(master=None, master_epoch=2, sync_state_set=(1, 2), sync_state_set_epoch=1)
    result = core.alter_sync_state_set(
        state, alter_req([1], master=1, master_epoch=2, sync_state_set_epoch=1), alive(1)
    )
    assert result.code == ResponseCode.CONTROLLER_INVALID_MASTER
    assert result.remark == f"{PREFIX} the current leader is:{{null}}, not {{1}}"


# ---- check 4: master epoch ----------------------------------------------------------------------------


def test_4_fenced_master_epoch_wins_over_set_epoch_and_members() -> None:
    result = core.alter_sync_state_set(base(), alter_req([1, 9], master_epoch=0, sync_state_set_epoch=7), NOBODY)
    assert result.code == ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH
    assert result.remark == f"{PREFIX} the current master epoch is:{{1}}, not {{0}}"


# ---- check 5: sync-state-set epoch ---------------------------------------------------------------------


def test_5_fenced_set_epoch_wins_over_members() -> None:
    result = core.alter_sync_state_set(base(), alter_req([2, 9], sync_state_set_epoch=1), NOBODY)
    assert result.code == ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
    assert result.remark == f"{PREFIX} the current syncStateSet epoch is:{{2}}, not {{1}}"


# ---- check 6: members registered and alive, in id order -------------------------------------------------


def test_6_unregistered_member_wins_over_missing_master() -> None:
    result = core.alter_sync_state_set(base(), alter_req([2, 9]), alive(2))
    assert result.code == ResponseCode.CONTROLLER_INVALID_REPLICAS
    assert result.remark == f"{PREFIX} the replicas {{9}} don't exist"


def test_6_dead_member_wins_over_missing_master() -> None:
    result = core.alter_sync_state_set(base(), alter_req([2, 3]), alive(2))
    assert result.code == ResponseCode.CONTROLLER_BROKER_NOT_ALIVE
    assert result.remark == f"{PREFIX} the replicas {{3}} don't alive"


def test_6_lower_dead_id_is_reported_before_higher_unregistered_id() -> None:
    result = core.alter_sync_state_set(base(), alter_req([1, 9, 3]), alive(1))
    assert result.code == ResponseCode.CONTROLLER_BROKER_NOT_ALIVE
    assert result.remark == f"{PREFIX} the replicas {{3}} don't alive"


def test_6_lower_unregistered_id_is_reported_before_higher_dead_id() -> None:
    state = led_state(ids=(1, 5), master=1, in_sync=(1,))
    result = core.alter_sync_state_set(state, alter_req([1, 5, 3]), alive(1))
    assert result.code == ResponseCode.CONTROLLER_INVALID_REPLICAS
    assert result.remark == f"{PREFIX} the replicas {{3}} don't exist"


def test_6_a_dead_master_in_the_new_set_is_refused() -> None:
    result = core.alter_sync_state_set(base(), alter_req([1, 3]), alive(3))
    assert result.code == ResponseCode.CONTROLLER_BROKER_NOT_ALIVE
    assert result.remark == f"{PREFIX} the replicas {{1}} don't alive"


def test_6_liveness_is_per_broker_set() -> None:
    result = core.alter_sync_state_set(base(), alter_req([1, 3]), alive(1, 3, name=SET_B))
    assert result.code == ResponseCode.CONTROLLER_BROKER_NOT_ALIVE


# ---- check 7: the master must stay ----------------------------------------------------------------------


def test_7_new_set_without_master_is_refused() -> None:
    result = core.alter_sync_state_set(base(), alter_req([2, 3]), alive(1, 2, 3))
    assert result.code == ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
    assert result.remark == f"{PREFIX} the newSyncStateSet don't contains origin leader {{1}}"
    assert result.events == ()


# ---- brokergroup: an added member holds what the master confirmed (issue 22) ---------------------------


def test_an_expansion_whose_new_member_is_behind_the_masters_confirm_offset_is_refused() -> None:
    state = base()
    view = alive(live_info(1, max_offset=2000), live_info(2, max_offset=2000), live_info(3, max_offset=1000))
    req = alter_req([1, 2, 3]).model_copy(update={"confirm_offset": 2000})
    result = core.alter_sync_state_set(state, req, view)
    assert result.code == ResponseCode.CONTROLLER_INVALID_REPLICAS
    assert result.remark == (
        f"{PREFIX} the replica {{3}} is behind the master's confirm offset 2000: "
        "its last heartbeat reports max offset 1000"
    )
    assert result.events == ()


def test_an_expansion_whose_new_member_has_the_confirmed_data_is_committed() -> None:
    state = base()
    view = alive(live_info(1, max_offset=2000), live_info(2, max_offset=1500), live_info(3, max_offset=2000))
    req = alter_req([1, 2, 3]).model_copy(update={"confirm_offset": 2000})
    assert core.alter_sync_state_set(state, req, view).ok  # 2 is already a member: not re-checked


def test_a_shrink_is_never_refused_for_offsets() -> None:
    state = base()
    req = alter_req([1]).model_copy(update={"confirm_offset": 10**9})
    assert core.alter_sync_state_set(state, req, alive(live_info(1, max_offset=0))).ok
