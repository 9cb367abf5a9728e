"""The master's sync-state-set manager: union rule, shrink/expand, confirm offset, acks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokergroup.broker.ha.syncset import ALL_ACK, SyncStateSetManager, merge_acks

LAG = 1000  # max_time_slave_not_catchup_ms


def manager(members: set[int], *, epoch: int = 1, all_ack: bool = True, now: int = 0) -> SyncStateSetManager:
    m = SyncStateSetManager(1, max_time_slave_not_catchup_ms=LAG, all_ack=all_ack)
    m.reset(frozenset(members), epoch, now_ms=now)
    return m


# ---- the synchronizing window (#5663) ---------------------------------------------------------


def test_shrink_proposal_keeps_the_removed_member_until_confirmed() -> None:
    m = manager({1, 2, 3})
    m.mark_synchronizing(frozenset({1, 2}))
    assert m.synchronizing
    assert m.effective() == {1, 2, 3}
    assert m.durable() == {1, 2}
    assert m.in_sync_replicas_nums() == 3
    assert m.local == {1, 2, 3}
    assert m.confirm(frozenset({1, 2}), 2)
    assert not m.synchronizing
    assert m.effective() == m.durable() == {1, 2}
    assert m.in_sync_replicas_nums() == 2


def test_expansion_proposal_counts_the_new_member_at_once() -> None:
    m = manager({1})
    m.mark_synchronizing(frozenset({1, 2}))
    assert m.effective() == {1, 2}
    assert m.durable() == {1}
    assert m.in_sync_replicas_nums() == 2
    assert not m.acked_enough(100, {}, ALL_ACK)
    assert m.acked_enough(100, {2: 100}, ALL_ACK)


def test_confirm_adopts_only_newer_epochs() -> None:
    m = manager({1, 2}, epoch=5)
    assert not m.confirm(frozenset({1}), 4)
    assert not m.confirm(frozenset({1}), 5)  # same epoch, other members: ignored
    assert (m.local, m.local_epoch) == ({1, 2}, 5)
    assert m.confirm(frozenset({1, 3}), 6)
    assert (m.local, m.local_epoch) == ({1, 3}, 6)


def test_stale_replica_info_does_not_end_an_in_flight_proposal() -> None:
    """Issue 22: a replica-info answer computed before the controller committed {1, 2} says
    ({1}, epoch 1); it must not release puts with only the master's copy."""
    m = manager({1}, epoch=1)
    assert expand(m, 2, 100) == {1, 2}
    assert not m.confirm(frozenset({1}), 1)  # the stale read
    assert m.synchronizing
    assert m.effective() == {1, 2}
    assert not m.acked_enough(2000, {2: 1500}, ALL_ACK)
    assert m.compute_confirm_offset(2000, {2: 1500}, {2}, 1000) == 1500  # not the max offset
    assert m.confirm(frozenset({1, 2}), 2)  # the answer
    assert not m.synchronizing


def test_expansion_sent_before_a_confirmation_keeps_waiting_for_its_member() -> None:
    """Issue 22: P1 = {1, 2} and P2 = {1, 2, 3} back to back after a failover. P1's answer must
    not forget P2: the controller may commit it (sent with the new epoch) before the master hears."""
    m = manager({1}, epoch=1)
    assert expand(m, 2, 100) == {1, 2}
    assert expand(m, 3, 100) == {1, 2, 3}
    assert m.pending == ({1, 2}, {1, 2, 3})
    # P1 committed at epoch 2. P2 was made at epoch 1: the controller can never commit it now.
    assert m.confirm(frozenset({1, 2}), 2)
    assert not m.synchronizing
    # Broker 3 acks again: proposed with epoch 2, it is waited for until the controller answers.
    assert expand(m, 3, 100) == {1, 2, 3}
    assert m.effective() == {1, 2, 3}
    assert not m.confirm(frozenset({1, 2}), 2)  # a read from before the commit settles nothing
    assert not m.acked_enough(2000, {2: 2000, 3: 1000}, ALL_ACK)
    assert m.compute_confirm_offset(2000, {2: 2000, 3: 1000}, {2, 3}, 500) == 1000
    assert m.confirm(frozenset({1, 2, 3}), 3)
    assert m.effective() == {1, 2, 3}


def test_a_refused_proposal_stops_counting() -> None:
    m = manager({1}, epoch=1)
    assert expand(m, 2, 100) == {1, 2}
    assert not m.refused(frozenset({1, 2}), 0)  # not the epoch it was sent with
    assert m.refused(frozenset({1, 2}), 1)
    assert not m.synchronizing
    assert m.effective() == {1}
    assert not m.refused(frozenset({1, 2}), 1)  # nothing left


def test_refusing_one_of_two_proposals_keeps_the_other() -> None:
    m = manager({1, 2, 3}, epoch=1)
    m.mark_synchronizing(frozenset({1, 2, 3, 4}))
    m.mark_synchronizing(frozenset({1, 2, 3, 4, 5}))
    assert m.refused(frozenset({1, 2, 3, 4, 5}), 1)
    assert m.latest_proposal == {1, 2, 3, 4}
    assert m.effective() == {1, 2, 3, 4}


def test_a_replaced_proposal_stays_in_the_union_until_the_controller_answers() -> None:
    m = manager({1, 2})
    m.mark_synchronizing(frozenset({1, 2, 3}))  # reply may be lost after the commit
    m.mark_synchronizing(frozenset({1}))
    assert m.latest_proposal == {1}
    assert m.effective() == {1, 2, 3}
    assert m.durable() == {1}
    assert m.in_sync_replicas_nums() == 2


def test_marking_the_local_set_is_not_a_proposal() -> None:
    m = manager({1, 2})
    m.mark_synchronizing(frozenset({1, 2}))
    assert not m.synchronizing


# ---- shrink ------------------------------------------------------------------------------------


def test_shrink_drops_a_member_behind_for_too_long_but_never_self() -> None:
    m = manager({1, 2, 3})
    m.update_caught_up(2, 100)
    m.update_caught_up(3, 100)
    assert m.maybe_shrink(100 + LAG, {2, 3}) is None
    m.update_caught_up(2, 500)
    assert m.maybe_shrink(101 + LAG, {2, 3}) == {1, 2}
    assert m.effective() == {1, 2, 3}
    assert m.latest_proposal == {1, 2}


def test_shrink_drops_a_member_whose_connection_closed_at_once() -> None:
    m = manager({1, 2, 3})
    m.update_caught_up(2, 10)
    m.update_caught_up(3, 10)
    assert m.maybe_shrink(11, {3}) == {1, 3}


def test_a_member_that_never_connected_gets_a_grace_period_from_the_term_start() -> None:
    m = manager({1, 2}, now=1000)
    assert m.maybe_shrink(1000 + LAG, set()) is None
    assert m.maybe_shrink(1001 + LAG, set()) == {1}


def test_a_connected_member_that_never_caught_up_is_dropped_after_the_grace() -> None:
    m = manager({1, 2}, now=0)
    assert m.maybe_shrink(LAG, {2}) is None
    assert m.maybe_shrink(LAG + 1, {2}) == {1}


def test_a_pending_proposal_is_returned_again_so_the_periodic_check_retries_it() -> None:
    m = manager({1, 2})
    m.update_caught_up(2, 0)
    assert m.maybe_shrink(1, set()) == {1}
    assert m.maybe_shrink(2, set()) == {1}


def test_caught_up_time_never_moves_back() -> None:
    m = manager({1, 2})
    m.update_caught_up(2, 500)
    m.update_caught_up(2, 100)
    assert m.caught_up_ms(2) == 500


def test_reset_forgets_proposals_and_catch_up_times() -> None:
    m = manager({1, 2})
    m.update_caught_up(2, 5)
    m.mark_synchronizing(frozenset({1}))
    m.reset(frozenset({1, 2}), 9, now_ms=50)
    assert not m.synchronizing
    assert m.caught_up_ms(2) is None
    assert m.local_epoch == 9


# ---- expand ------------------------------------------------------------------------------------


def expand(m: SyncStateSetManager, slave: int, offset: int, **kw: object) -> frozenset[int] | None:
    args: dict[str, object] = {"confirm_offset": 100, "last_epoch_start": 50, "is_learner": False} | kw
    return m.maybe_expand(slave, offset, **args)  # type: ignore[arg-type]


def test_expand_adds_a_caught_up_slave() -> None:
    m = manager({1})
    assert expand(m, 2, 100) == {1, 2}
    assert m.effective() == {1, 2}
    assert m.local == {1}


@pytest.mark.parametrize(
    ("offset", "kw"),
    [
        (99, {}),  # behind the confirm offset
        (120, {"last_epoch_start": 121}),  # has not reached the current epoch
        (100, {"is_learner": True}),
    ],
)
def test_expand_refuses(offset: int, kw: dict[str, object]) -> None:
    m = manager({1})
    assert expand(m, 2, offset, **kw) is None
    assert not m.synchronizing


def test_expand_does_not_propose_a_pending_or_confirmed_member_again() -> None:
    m = manager({1, 2})
    assert expand(m, 2, 100) is None
    assert expand(m, 3, 100) == {1, 2, 3}
    assert expand(m, 3, 200) is None


def test_shrink_and_expand_compose() -> None:
    m = manager({1, 2, 3})
    m.update_caught_up(2, 0)
    m.update_caught_up(3, 0)
    assert m.maybe_shrink(1, {2}) == {1, 2}
    assert expand(m, 4, 100) == {1, 2, 4}
    assert m.effective() == {1, 2, 3, 4}
    assert m.durable() == {1, 2}


def test_a_member_back_in_time_withdraws_its_pending_removal() -> None:
    m = manager({1, 2})
    m.update_caught_up(2, 0)
    assert m.maybe_shrink(1, set()) == {1}
    assert expand(m, 2, 100) is None  # {1, 2} is the confirmed set again
    assert m.latest_proposal == {1, 2}
    assert m.maybe_shrink(2, {2}) is None


# ---- confirm offset (reference §4.4) -----------------------------------------------------------


def test_confirm_offset_is_the_max_offset_for_a_single_member_set_7656() -> None:
    assert manager({1}).compute_confirm_offset(500, {}, set(), 10) == 500


def test_confirm_offset_is_the_max_offset_without_all_ack_7656() -> None:
    m = manager({1, 2}, all_ack=False)
    assert m.compute_confirm_offset(500, {2: 100}, {2}, 10) == 500


def test_confirm_offset_is_the_smallest_member_ack() -> None:
    m = manager({1, 2, 3})
    assert m.compute_confirm_offset(500, {2: 300, 3: 200, 9: 50}, {2, 3, 9}, 10) == 200
    assert m.compute_confirm_offset(150, {2: 300, 3: 200}, {2, 3}, 10) == 150


def test_confirm_offset_freezes_while_a_member_has_no_connection_6662() -> None:
    m = manager({1, 2, 3})
    assert m.compute_confirm_offset(500, {2: 300}, {2}, 120) == 120


@pytest.mark.parametrize("fresh_ack", [-1, 0])
def test_a_fresh_connection_never_makes_the_confirm_offset_negative_6728(fresh_ack: int) -> None:
    m = manager({1, 2, 3})
    assert m.compute_confirm_offset(500, {2: 300, 3: fresh_ack}, {2, 3}, 120) == 120
    assert m.compute_confirm_offset(500, {2: 300}, {2, 3}, 120) == 120


def test_confirm_offset_never_moves_back() -> None:
    m = manager({1, 2})
    assert m.compute_confirm_offset(500, {2: 100}, {2}, 300) == 300


def test_confirm_offset_waits_for_a_pending_member() -> None:
    m = manager({1, 2})
    m.mark_synchronizing(frozenset({1}))
    assert m.compute_confirm_offset(500, {}, set(), 40) == 40  # the removed member still counts


# ---- acks (reference §4.6) -----------------------------------------------------------------------


def test_all_ack_waits_for_every_member_of_the_union() -> None:
    m = manager({1, 2, 3})
    assert not m.acked_enough(100, {2: 100}, ALL_ACK)
    assert m.acked_enough(100, {2: 100, 3: 150}, ALL_ACK)
    assert manager({1}).acked_enough(100, {}, ALL_ACK)


@pytest.mark.parametrize("ack_nums", [0, 1])
def test_one_ack_is_the_master_alone(ack_nums: int) -> None:
    assert manager({1, 2}).acked_enough(100, {}, ack_nums)


def test_counted_acks_come_only_from_durable_members() -> None:
    m = manager({1, 2, 3})
    assert not m.acked_enough(100, {7: 100, 8: 100}, 2)  # learners / non-members
    assert m.acked_enough(100, {2: 100}, 2)
    assert not m.acked_enough(100, {2: 100}, 3)
    assert m.acked_enough(100, {2: 100, 3: 100}, 3)


def test_counted_acks_skip_a_member_whose_removal_is_pending() -> None:
    m = manager({1, 2, 3})
    m.mark_synchronizing(frozenset({1, 2}))
    assert not m.acked_enough(100, {3: 100}, 2)
    assert m.acked_enough(100, {2: 100}, 2)


@settings(max_examples=300, deadline=None)
@given(
    local=st.frozensets(st.integers(1, 5)),
    pending=st.lists(st.frozensets(st.integers(1, 5)), max_size=2),
    acks=st.dictionaries(st.integers(1, 6), st.integers(-1, 6)),
    ack_nums=st.integers(-1, 5),
    offset=st.integers(0, 7),
)
def test_acked_up_to_is_the_offsets_acked_enough_accepts(
    local: frozenset[int], pending: list[frozenset[int]], acks: dict[int, int], ack_nums: int, offset: int
) -> None:
    """The one offset the put waiters compare with (read once per ack) agrees with the per-put rule."""
    m = manager(set(local | {1}))
    for proposal in pending:
        m.mark_synchronizing(proposal)
    assert (offset <= m.acked_up_to(acks, ack_nums)) == m.acked_enough(offset, acks, ack_nums)


def test_duplicate_connections_of_one_slave_count_once() -> None:
    m = manager({1, 2, 3})
    acks = merge_acks([(2, 100), (2, 40), (2, 120)])
    assert acks == {2: 120}
    assert not m.acked_enough(100, acks, 3)
    assert m.acked_enough(100, merge_acks([(2, 100), (3, 100), (2, 90)]), 3)
