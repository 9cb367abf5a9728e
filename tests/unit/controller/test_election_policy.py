"""The election policy alone (RocketMQ `DefaultElectPolicy`, reference §1.3.4)."""

from __future__ import annotations

from collections.abc import Collection

from controller_factories import NOBODY, PROPERTY_SETTINGS, SET_A, SET_B, alive, live_info, view_of
from hypothesis import given
from hypothesis import strategies as st

from brokergroup.controller.election import elect, rank_key
from brokergroup.controller.model import BrokerLiveInfo, LivenessView


def pick(
    live: LivenessView,
    sync: Collection[int] = (1, 2, 3),
    *,
    all_replicas: Collection[int] | None = None,
    old_master: int | None = None,
    prefer: int | None = None,
) -> int | None:
    return elect(
        broker_name=SET_A,
        sync_state_brokers=sync,
        all_replica_brokers=all_replicas,
        old_master=old_master,
        prefer_broker_id=prefer,
        live=live,
    )


# ---- filtering by liveness -------------------------------------------------------------------------


def test_nobody_alive_elects_nobody() -> None:
    assert pick(NOBODY) is None


def test_empty_sync_state_set_elects_nobody_even_with_alive_brokers() -> None:
    assert pick(alive(1, 2), sync=()) is None


def test_only_alive_members_are_candidates() -> None:
    live = alive(live_info(1, epoch=9, max_offset=900), live_info(3, epoch=1))
    assert pick(live, sync=(2, 3)) == 3


def test_liveness_is_per_broker_set() -> None:
    live = alive(1, 2, name=SET_B)
    assert pick(live, sync=(1, 2)) is None


# ---- old master ------------------------------------------------------------------------------------


def test_alive_old_master_is_kept_even_if_others_rank_higher() -> None:
    live = alive(live_info(1, epoch=1), live_info(2, epoch=5, max_offset=10**12))
    assert pick(live, old_master=1) == 1


def test_alive_old_master_is_kept_when_preferred() -> None:
    assert pick(alive(1, 2), old_master=1, prefer=1) == 1


def test_dead_old_master_is_replaced_by_best_alive_member() -> None:
    live = alive(live_info(2, max_offset=5), live_info(3, max_offset=7))
    assert pick(live, old_master=1) == 3


def test_old_master_outside_the_collection_is_not_kept() -> None:
    assert pick(alive(1, 2), sync=(2,), old_master=1) == 2


# ---- preferred (designated) broker ------------------------------------------------------------------


def test_preferred_alive_member_beats_alive_old_master() -> None:
    assert pick(alive(1, 2, 3), old_master=1, prefer=3) == 3


def test_preferred_member_wins_over_better_ranked_members() -> None:
    live = alive(live_info(2, epoch=9, max_offset=10**9), live_info(3, epoch=1))
    assert pick(live, prefer=3) == 3


def test_preferred_dead_broker_means_nobody_even_if_others_alive() -> None:
    assert pick(alive(1, 2), old_master=None, prefer=3) is None


def test_preferred_broker_outside_the_set_means_nobody_without_unclean() -> None:
    assert pick(alive(1, 4), sync=(1, 2), old_master=1, prefer=4) is None


def test_preferred_broker_outside_the_set_wins_with_unclean() -> None:
    assert pick(alive(1, 4), sync=(1, 2), all_replicas=(1, 2, 4), old_master=1, prefer=4) == 4


# ---- ranking ----------------------------------------------------------------------------------------


def test_higher_epoch_beats_higher_offset() -> None:
    live = alive(live_info(1, epoch=3, max_offset=10), live_info(2, epoch=2, max_offset=10**15))
    assert pick(live) == 1


def test_same_epoch_higher_offset_wins() -> None:
    live = alive(live_info(1, epoch=3, max_offset=10), live_info(2, epoch=3, max_offset=11))
    assert pick(live) == 2


def test_offsets_more_than_2_pow_31_apart_are_ranked_correctly() -> None:
    # RocketMQ #10578: `(int)(o2.maxOffset - o1.maxOffset)` made 0 rank above 2**31.
    live = alive(live_info(1, epoch=1, max_offset=0), live_info(2, epoch=1, max_offset=2**31))
    assert pick(live) == 2


def test_offsets_2_pow_32_apart_are_not_a_tie() -> None:
    # The truncated int difference of these two offsets is 0, which RocketMQ took for a tie.
    live = alive(
        live_info(1, epoch=1, max_offset=10, priority=0),
        live_info(2, epoch=1, max_offset=2**32 + 10, priority=5),
    )
    assert pick(live) == 2


def test_huge_offsets_near_long_max_are_ranked_correctly() -> None:
    live = alive(live_info(1, max_offset=2**63 - 1), live_info(2, max_offset=-1), live_info(3, max_offset=2**62))
    assert pick(live) == 1


def test_same_offset_lower_priority_wins() -> None:
    live = alive(
        live_info(1, epoch=2, max_offset=50, priority=3),
        live_info(2, epoch=2, max_offset=50, priority=1),
        live_info(3, epoch=2, max_offset=50),
    )
    assert pick(live) == 2


def test_full_tie_goes_to_lowest_broker_id() -> None:
    live = alive(*(live_info(bid, epoch=4, max_offset=100, priority=7) for bid in (9, 3, 5)))
    assert pick(live, sync=(9, 5, 3)) == 3


def test_rank_key_orders_epoch_offset_priority_id() -> None:
    infos = [
        live_info(4, epoch=1, max_offset=5, priority=0),
        live_info(3, epoch=2, max_offset=1, priority=9),
        live_info(2, epoch=2, max_offset=7, priority=9),
        live_info(1, epoch=2, max_offset=7, priority=2),
        live_info(5, epoch=2, max_offset=7, priority=2),
    ]
    assert [i.broker_id for i in sorted(infos, key=rank_key)] == [1, 5, 2, 3, 4]


# ---- unclean fallback -------------------------------------------------------------------------------


def test_unclean_fallback_used_only_when_set_yields_nobody() -> None:
    live = alive(live_info(2, max_offset=1), live_info(4, max_offset=10**6))
    assert pick(live, sync=(1, 2), all_replicas=(1, 2, 4)) == 2


def test_unclean_fallback_elects_best_alive_replica() -> None:
    live = alive(live_info(3, max_offset=1), live_info(4, max_offset=2))
    assert pick(live, sync=(1, 2), all_replicas=(1, 2, 3, 4)) == 4


def test_no_fallback_without_all_replicas() -> None:
    assert pick(alive(3, 4), sync=(1, 2), all_replicas=None) is None


def test_fallback_keeps_alive_old_master_outside_the_set() -> None:
    assert pick(alive(1, 3), sync=(2,), all_replicas=(1, 2, 3), old_master=1) == 1


# ---- properties --------------------------------------------------------------------------------------

candidate = st.builds(
    live_info,
    st.integers(1, 8),
    epoch=st.integers(-1, 5),
    max_offset=st.sampled_from([-1, 0, 1, 2**31 - 1, 2**31, 2**32, 2**40, 2**63 - 1]),
    priority=st.integers(0, 3),
)


@PROPERTY_SETTINGS
@given(
    infos=st.lists(candidate, max_size=8, unique_by=lambda i: i.broker_id),
    sync=st.sets(st.integers(1, 8)),
    unclean=st.booleans(),
)
def test_winner_is_an_alive_candidate_that_nobody_outranks(
    infos: list[BrokerLiveInfo], sync: set[int], unclean: bool
) -> None:
    live = view_of(infos)
    all_replicas = set(range(1, 9)) if unclean else None
    winner = pick(live, sync=sync, all_replicas=all_replicas)
    alive_in_set = [i for i in infos if i.broker_id in sync]
    pool = alive_in_set or (infos if unclean else [])
    if not pool:
        assert winner is None
        return
    assert winner is not None
    winner_info = live.info(SET_A, winner)
    assert winner_info is not None
    assert all(rank_key(winner_info) <= rank_key(other) for other in pool)
    assert winner in sync or (unclean and not alive_in_set)
