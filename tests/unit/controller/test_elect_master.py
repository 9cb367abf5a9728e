"""electMaster (reference §1.3.3): the seven steps, response data and events."""

from __future__ import annotations

from controller_factories import (
    CLUSTER,
    NOBODY,
    SET_A,
    SET_B,
    addr,
    admin_elect,
    alive,
    broker_elect,
    commit,
    controller_elect,
    led_state,
    live_info,
    make_state,
    sync_of,
)

from brokergroup.controller import core
from brokergroup.controller.codes import ResponseCode
from brokergroup.controller.model import ControllerState, ElectMasterEvent, LivenessView, Result
from brokergroup.controller.protocol import BrokerMemberGroup, ElectMasterRequest, ElectMasterResponse


def run(state: ControllerState, req: ElectMasterRequest, live: LivenessView, *, unclean: bool = False) -> Result:
    return core.elect_master(state, req, live, enable_elect_unclean_master=unclean)


def elected(result: Result) -> int | None:
    assert isinstance(result.response, ElectMasterResponse)
    return result.response.master_broker_id


# ---- step 1: unknown set ---------------------------------------------------------------------------------


def test_unknown_set_must_register_first() -> None:
    result = run(ControllerState(), broker_elect(1), alive(1))
    assert result.code == ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    assert result.remark == "Broker hasn't been registered"
    assert result.response is None and result.events == ()


def test_set_missing_from_one_map_is_unknown() -> None:
    state = make_state(ids=(1,))
    del state.sync_state_info[SET_A]
    assert run(state, broker_elect(1), alive(1)).code == ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED


# ---- step 3: first-time election -------------------------------------------------------------------------


def test_first_time_the_requesting_broker_wins_outright() -> None:
    state = make_state(ids=(1, 2, 3))
    result = run(state, broker_elect(2), NOBODY)
    assert result.code == ResponseCode.SUCCESS
    assert result.response == ElectMasterResponse(
        master_broker_id=2,
        master_address=addr(2),
        master_epoch=1,
        sync_state_set_epoch=1,
        sync_state_set=[2],
        broker_member_group=BrokerMemberGroup(
            cluster=CLUSTER, broker_name=SET_A, broker_addrs={"1": addr(1), "2": addr(2), "3": addr(3)}
        ),
    )
    assert result.events == (ElectMasterEvent(broker_name=SET_A, new_master_elected=True, new_master_broker_id=2),)


def test_first_time_ignores_ranking_of_alive_brokers() -> None:
    live = alive(live_info(1, epoch=9, max_offset=10**9), live_info(3))
    assert elected(run(make_state(), broker_elect(3), live)) == 3


def test_first_time_admin_designation_wins_outright() -> None:
    assert elected(run(make_state(), admin_elect(3), NOBODY)) == 3


def test_first_time_does_not_check_registration_of_the_id() -> None:
    # RocketMQ behaviour, kept: the id is used without any check; its address is unknown.
    result = run(make_state(ids=(1,)), broker_elect(9), NOBODY)
    assert result.ok
    assert isinstance(result.response, ElectMasterResponse)
    assert (result.response.master_broker_id, result.response.master_address) == (9, None)


def test_first_time_commit_yields_epochs_one_one() -> None:
    state = make_state()
    commit(state, run(state, broker_elect(1), NOBODY))
    sync = sync_of(state)
    assert (sync.master_broker_id, sync.master_epoch, sync.sync_state_set, sync.sync_state_set_epoch) == (
        1,
        1,
        {1},
        1,
    )


def test_first_time_controller_trigger_goes_through_policy_and_fails() -> None:
    state = make_state()
    result = commit(state, run(state, controller_elect(), alive(1, 2, 3)))
    assert result.code == ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE
    assert (sync_of(state).master_epoch, sync_of(state).master_broker_id) == (1, None)


def test_after_failed_first_controller_trigger_brokers_cannot_win_without_unclean() -> None:
    state = make_state()
    commit(state, run(state, controller_elect(), alive(1, 2, 3)))
    failed = run(state, broker_elect(1), alive(1, 2, 3))
    assert failed.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    assert elected(run(state, broker_elect(1), alive(1, 2, 3), unclean=True)) == 1


# ---- step 5: master still exists -------------------------------------------------------------------------


def test_controller_trigger_with_alive_master_reports_master_still_exists() -> None:
    state = led_state(master=1, in_sync=(1, 2))
    result = run(state, controller_elect(), alive(1, 2))
    assert result.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST
    assert result.remark == "The old master 1 is still alive, not need to elect new master for broker broker-a"
    assert result.response == ElectMasterResponse(
        master_broker_id=1,
        master_address=addr(1),
        master_epoch=1,
        sync_state_set_epoch=2,
        sync_state_set=[1, 2],
        broker_member_group=None,
    )
    assert result.events == ()


def test_broker_trigger_is_not_elect_me() -> None:
    state = led_state(master=1)
    result = run(state, broker_elect(3), alive(1, 2, live_info(3, epoch=9, max_offset=10**9)))
    assert result.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST
    assert elected(result) == 1


# ---- step 6: new master ----------------------------------------------------------------------------------


def test_master_dies_best_alive_member_wins_and_epochs_announced() -> None:
    state = led_state(master=1, in_sync=(1, 2, 3))
    live = alive(live_info(2, epoch=1, max_offset=100), live_info(3, epoch=1, max_offset=120))
    result = run(state, controller_elect(), live)
    assert result.ok
    assert isinstance(result.response, ElectMasterResponse)
    r = result.response
    assert (r.master_broker_id, r.master_address, r.master_epoch, r.sync_state_set_epoch, r.sync_state_set) == (
        3,
        addr(3),
        2,
        3,
        [3],
    )
    assert result.events == (ElectMasterEvent(broker_name=SET_A, new_master_elected=True, new_master_broker_id=3),)


def test_broker_trigger_picks_best_member_not_the_requester() -> None:
    state = led_state(master=1, in_sync=(1, 2, 3))
    live = alive(live_info(2, max_offset=5), live_info(3, max_offset=50))
    assert elected(run(state, broker_elect(2), live)) == 3


def test_member_group_lists_every_registered_broker_dead_or_alive() -> None:
    state = led_state(ids=(1, 2, 3, 4), master=1, in_sync=(1, 2))
    result = run(state, controller_elect(), alive(2))
    assert isinstance(result.response, ElectMasterResponse)
    assert result.response.broker_member_group == BrokerMemberGroup(
        cluster=CLUSTER, broker_name=SET_A, broker_addrs={str(i): addr(i) for i in (1, 2, 3, 4)}
    )


def test_member_group_uses_the_sets_cluster_not_the_requests() -> None:
    state = make_state(cluster="cluster-x", master=1, master_epoch=1, sync_state_set=(1, 2), sync_state_set_epoch=1)
    result = run(state, controller_elect(), alive(2))
    assert isinstance(result.response, ElectMasterResponse)
    assert result.response.broker_member_group is not None
    assert result.response.broker_member_group.cluster == "cluster-x"


def test_only_the_named_set_is_considered() -> None:
    state = led_state(SET_A, master=1, in_sync=(1, 2))
    led_state_b = led_state(SET_B, master=1, in_sync=(1, 2))
    state.replica_info.update(led_state_b.replica_info)
    state.sync_state_info.update(led_state_b.sync_state_info)
    result = commit(state, run(state, controller_elect(SET_B), alive(2, name=SET_B)))
    assert elected(result) == 2
    assert sync_of(state, SET_A).master_broker_id == 1
    assert sync_of(state, SET_B).master_broker_id == 2


# ---- step 7: nobody electable -----------------------------------------------------------------------------


def test_controller_trigger_with_nobody_electable_commits_no_master() -> None:
    state = led_state(master=1, in_sync=(1, 2))
    result = run(state, controller_elect(), alive(3))
    assert result.code == ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE
    assert result.remark == "Old master has down and failed to elect a new broker master"
    assert result.events == (ElectMasterEvent(broker_name=SET_A, new_master_elected=False),)
    assert result.response is None
    commit(state, result)
    sync = sync_of(state)
    assert (sync.master_broker_id, sync.master_epoch, sync.sync_state_set, sync.sync_state_set_epoch) == (
        None,
        2,
        {1, 2},
        2,
    )


def test_controller_retries_bump_master_epoch_each_time() -> None:
    state = led_state(master=1, in_sync=(1,))
    for _ in range(3):
        commit(state, run(state, controller_elect(), NOBODY))
    assert (sync_of(state).master_epoch, sync_of(state).sync_state_set_epoch) == (4, 2)


def test_broker_trigger_with_nobody_electable_fails_without_event() -> None:
    state = led_state(master=1, in_sync=(1, 2))
    result = run(state, broker_elect(3), alive(3))
    assert result.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    assert result.remark == "Failed to elect a new master"
    assert result.response is None and result.events == ()


def test_broker_id_zero_is_a_real_requester_not_a_controller_trigger() -> None:
    state = led_state(master=1, in_sync=(1,))
    result = run(state, ElectMasterRequest(broker_name=SET_A, broker_id=0), NOBODY)
    assert result.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED


# ---- unclean election --------------------------------------------------------------------------------------


def test_unclean_disabled_out_of_set_broker_cannot_win() -> None:
    state = led_state(master=1, in_sync=(1, 2))
    assert run(state, controller_elect(), alive(3)).code == ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE


def test_unclean_enabled_best_alive_replica_wins() -> None:
    state = led_state(ids=(1, 2, 3, 4), master=1, in_sync=(1, 2))
    live = alive(live_info(3, max_offset=10), live_info(4, max_offset=20))
    result = run(state, controller_elect(), live, unclean=True)
    assert elected(result) == 4
    assert isinstance(result.response, ElectMasterResponse)
    assert result.response.sync_state_set == [4]


def test_unclean_enabled_still_prefers_alive_set_members() -> None:
    state = led_state(master=1, in_sync=(1, 2))
    live = alive(live_info(2, max_offset=1), live_info(3, max_offset=10**6))
    assert elected(run(state, controller_elect(), live, unclean=True)) == 2


# ---- designated (admin) election ------------------------------------------------------------------------------


def test_designated_alive_member_wins_over_alive_current_master() -> None:
    state = led_state(master=1, in_sync=(1, 2, 3))
    result = commit(state, run(state, admin_elect(3), alive(1, 2, 3)))
    assert result.ok and elected(result) == 3
    assert (sync_of(state).master_broker_id, sync_of(state).master_epoch) == (3, 2)


def test_designating_the_alive_current_master_reports_master_still_exists() -> None:
    state = led_state(master=1)
    result = run(state, admin_elect(1), alive(1, 2, 3))
    assert result.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST
    assert result.events == ()


def test_designated_broker_outside_the_set_fails_without_unclean() -> None:
    state = led_state(master=1, in_sync=(1, 2))
    result = run(state, admin_elect(3), alive(1, 2, 3))
    assert result.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    assert result.events == ()


def test_designated_broker_outside_the_set_wins_with_unclean() -> None:
    state = led_state(master=1, in_sync=(1, 2))
    assert elected(run(state, admin_elect(3), alive(1, 2, 3), unclean=True)) == 3


def test_designated_dead_member_fails_even_if_master_is_dead_too() -> None:
    state = led_state(master=1, in_sync=(1, 2, 3))
    result = run(state, admin_elect(3), alive(2))
    assert result.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED


def test_designated_alive_member_wins_when_master_is_dead() -> None:
    state = led_state(master=1, in_sync=(1, 2, 3))
    live = alive(live_info(2, epoch=5, max_offset=10**6), live_info(3))
    assert elected(run(state, admin_elect(3), live)) == 3


def test_designated_unregistered_id_fails() -> None:
    state = led_state(master=1)
    assert run(state, admin_elect(9), alive(1, 2, 3)).code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED


# ---- the controller scan --------------------------------------------------------------------------------------


def test_scan_reports_sets_with_dead_master_and_some_alive_replica() -> None:
    state = led_state(SET_B, master=1)
    make_state(SET_A, master=2, master_epoch=1, sync_state_set=(2,), sync_state_set_epoch=1, state=state)
    make_state("broker-c", master=1, master_epoch=1, sync_state_set=(1,), state=state)
    make_state("broker-d", master=None, master_epoch=3, sync_state_set=(1,), state=state)
    live = LivenessView(
        brokers={
            (SET_A, 3): live_info(3, SET_A),
            (SET_B, 2): live_info(2, SET_B),
            ("broker-d", 1): live_info(1, "broker-d"),
        }
    )
    assert core.scan_need_reelect_broker_sets(state, live) == [SET_A, SET_B]


def test_scan_skips_set_with_alive_master() -> None:
    assert core.scan_need_reelect_broker_sets(led_state(master=1), alive(1)) == []


def test_scan_skips_set_where_nobody_is_alive() -> None:
    assert core.scan_need_reelect_broker_sets(led_state(master=1), alive(1, name=SET_B)) == []


def test_scan_counts_only_registered_replicas_as_alive() -> None:
    state = led_state(ids=(1, 2), master=1)
    assert core.scan_need_reelect_broker_sets(state, alive(7)) == []


def test_scan_skips_set_without_replica_entry() -> None:
    state = led_state(master=1)
    del state.replica_info[SET_A]
    assert core.scan_need_reelect_broker_sets(state, alive(2)) == []


def test_scan_reports_dangling_master_id() -> None:
    # The master's id was cleaned (master_broker_id dangles); a live replica makes it re-electable.
    state = led_state(ids=(2, 3), master=1, in_sync=(2, 3))
    assert core.scan_need_reelect_broker_sets(state, alive(2)) == [SET_A]
