"""operator/roles.py: mapping the controller's view onto pods, and the scale-down guard."""

from __future__ import annotations

import pytest

from brokergroup.controller.protocol import ReplicaIdentity, ReplicasInfo
from brokergroup.operator import follow, roles
from brokergroup.operator.roles import Blocked, ElectAway, Member, Proceed, SetView

STS = "bg-broker-1"
NS = "mq"


def addr(ordinal: int, sts: str = STS, namespace: str = NS, port: int = 10911) -> str:
    return f"{sts}-{ordinal}.{sts}.{namespace}.svc:{port}"


def replica(ordinal: int, *, alive: bool = True, sts: str = STS, broker_id: int | None = None) -> ReplicaIdentity:
    return ReplicaIdentity(
        broker_name=sts,
        broker_id=broker_id if broker_id is not None else ordinal + 1,
        broker_address=addr(ordinal, sts),
        alive=alive,
    )


def info(
    master: int | None,
    in_sync: list[ReplicaIdentity],
    not_in_sync: list[ReplicaIdentity] | None = None,
    *,
    master_address: str | None = None,
) -> ReplicasInfo:
    return ReplicasInfo(
        master_broker_id=None if master is None else master + 1,
        master_address=master_address if master_address is not None else (None if master is None else addr(master)),
        master_epoch=4,
        sync_state_set_epoch=7,
        in_sync_replicas=in_sync,
        not_in_sync_replicas=not_in_sync or [],
    )


def view(members: list[Member], master: int | None) -> SetView:
    return SetView(
        name=STS,
        master_pod=None if master is None else f"{STS}-{master}",
        master_broker_id=None if master is None else master + 1,
        master_epoch=1,
        sync_state_set_epoch=1,
        members=tuple(members),
    )


def member(ordinal: int, *, alive: bool = True, in_sync: bool = True) -> Member:
    return Member(pod=f"{STS}-{ordinal}", broker_id=ordinal + 1, alive=alive, in_sync=in_sync)


# ---- pod_of_address ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        (addr(2), "bg-broker-1-2"),
        (addr(0, port=10912), "bg-broker-1-0"),
        ("bg-broker-1-2.bg-broker-1.mq.svc", "bg-broker-1-2"),  # no port
        ("bg-broker-1-2.bg-broker-1.mq.svc.cluster.local:10911", "bg-broker-1-2"),
        (addr(2, sts="bg-broker-0"), None),  # another set
        (addr(0, sts="bg-broker-10"), None),  # pod of bg-broker-10: same prefix, other set
        ("bg-broker-10-0.bg-broker-1.mq.svc:10911", None),  # pod name of another set, our service
        ("bg-broker-1-0.bg-broker-10.mq.svc:10911", None),  # our pod name, another set's service
        ("bg-broker-1-2:10911", None),  # bare pod name
        ("bg-broker-1-2.bg-broker-1:10911", None),  # no namespace
        ("bg-broker-1-02.bg-broker-1.mq.svc:10911", None),  # leading zero
        ("bg-broker-1.bg-broker-1.mq.svc:10911", None),  # the set, not a pod
        ("10.1.2.3:10911", None),
        ("", None),
        (None, None),
    ],
)
def test_pod_of_address(address: str | None, expected: str | None) -> None:
    assert roles.pod_of_address(STS, address) == expected


# ---- set_view ----------------------------------------------------------------------------------


def test_set_view_maps_members_and_master_sorted_by_ordinal() -> None:
    replicas = info(
        master=2,
        in_sync=[replica(2), replica(0)],
        not_in_sync=[replica(1, alive=False)],
    )
    got = roles.set_view(STS, replicas)
    assert got == SetView(
        name=STS,
        master_pod="bg-broker-1-2",
        master_broker_id=3,
        master_epoch=4,
        sync_state_set_epoch=7,
        members=(
            Member("bg-broker-1-0", 1, alive=True, in_sync=True),
            Member("bg-broker-1-1", 2, alive=False, in_sync=False),
            Member("bg-broker-1-2", 3, alive=True, in_sync=True),
        ),
    )
    assert got.member("bg-broker-1-1") == Member("bg-broker-1-1", 2, alive=False, in_sync=False)
    assert got.member("bg-broker-1-9") is None


def test_set_view_orders_double_digit_ordinals_numerically() -> None:
    got = roles.set_view(STS, info(master=None, in_sync=[replica(10), replica(2), replica(0)]))
    assert [m.pod for m in got.members] == ["bg-broker-1-0", "bg-broker-1-2", "bg-broker-1-10"]


def test_a_pod_that_came_back_empty_under_a_new_broker_id_is_one_member() -> None:
    # Volumes lost: the old ids (1, 2) stay in the controller, dead; the pods registered again as 3 and 4.
    old = [replica(0, alive=False, broker_id=1), replica(1, alive=False, broker_id=2)]
    new = [replica(0, broker_id=3), replica(1, broker_id=4)]
    no_master = roles.set_view(STS, info(master=None, in_sync=[old[0]], not_in_sync=[old[1], *new]))
    assert no_master.members == (
        Member("bg-broker-1-0", 3, alive=True, in_sync=False),
        Member("bg-broker-1-1", 4, alive=True, in_sync=False),
    )
    # Once one is elected, the pod is the id the controller made master, even were an older id alive.
    elected = ReplicasInfo(
        master_broker_id=3,
        master_address=addr(0),
        master_epoch=5,
        sync_state_set_epoch=8,
        in_sync_replicas=[new[0]],
        not_in_sync_replicas=[replica(0, broker_id=1), new[1], old[1]],
    )
    got = roles.set_view(STS, elected)
    assert [(m.pod, m.broker_id, m.in_sync) for m in got.members] == [
        ("bg-broker-1-0", 3, True),
        ("bg-broker-1-1", 4, False),
    ]
    assert follow.set_status(got)["replicas"] == [
        {"pod": "bg-broker-1-0", "brokerId": 3, "role": "master", "inSync": True, "alive": True},
        {"pod": "bg-broker-1-1", "brokerId": 4, "role": "slave", "inSync": False, "alive": True},
    ]


def test_set_view_skips_addresses_that_are_not_pods_of_the_set() -> None:
    foreign = ReplicaIdentity(broker_name=STS, broker_id=9, broker_address="10.0.0.1:10911", alive=True)
    other_set = replica(0, sts="bg-broker-10", broker_id=8)
    no_address = ReplicaIdentity(broker_name=STS, broker_id=7, broker_address=None, alive=True)
    got = roles.set_view(STS, info(master=0, in_sync=[replica(0), foreign, other_set], not_in_sync=[no_address]))
    assert [m.pod for m in got.members] == ["bg-broker-1-0"]


def test_set_view_without_master() -> None:
    got = roles.set_view(STS, info(master=None, in_sync=[], not_in_sync=[replica(0), replica(1)]))
    assert got.master_pod is None and got.master_broker_id is None
    assert all(not m.in_sync for m in got.members)


def test_set_view_master_address_outside_the_set() -> None:
    got = roles.set_view(STS, info(master=0, in_sync=[replica(0)], master_address=addr(0, sts="bg-broker-10")))
    assert got.master_pod is None
    assert got.master_broker_id == 1


# ---- guard_scale_down --------------------------------------------------------------------------


@pytest.mark.parametrize(("live", "desired"), [(3, 3), (1, 3), (0, 1)])
def test_not_shrinking_proceeds_even_blind(live: int, desired: int) -> None:
    assert isinstance(roles.guard_scale_down(STS, live, desired, None), Proceed)


def test_no_view_blocks() -> None:
    decision = roles.guard_scale_down(STS, 3, 2, None)
    assert isinstance(decision, Blocked)
    assert STS in decision.reason


def test_no_master_proceeds() -> None:
    decision = roles.guard_scale_down(STS, 3, 1, view([member(0), member(1)], master=None))
    assert isinstance(decision, Proceed)


@pytest.mark.parametrize(("master", "desired"), [(0, 1), (0, 2), (1, 2)])
def test_master_kept_proceeds(master: int, desired: int) -> None:
    decision = roles.guard_scale_down(STS, 3, desired, view([member(0), member(1), member(2)], master=master))
    assert decision == Proceed(f"master {STS}-{master} stays")


def test_master_removed_elects_lowest_ordinal_alive_in_sync_kept_member() -> None:
    members = [member(0, alive=False), member(1), member(2), member(3), member(4)]
    decision = roles.guard_scale_down(STS, 5, 3, view(members, master=4))
    assert decision == ElectAway(master_pod=f"{STS}-4", target_pod=f"{STS}-1", target_broker_id=2)


def test_master_removed_elects_from_a_view_built_by_set_view() -> None:
    got = roles.set_view(STS, info(master=2, in_sync=[replica(2), replica(1), replica(0)]))
    decision = roles.guard_scale_down(STS, 3, 2, got)
    assert decision == ElectAway(master_pod=f"{STS}-2", target_pod=f"{STS}-0", target_broker_id=1)


def test_master_removed_never_elects_a_removed_member() -> None:
    # 5 -> 3 with the master at 4: member 3 is alive and in sync, but it goes too.
    members = [member(0, in_sync=False), member(1, alive=False), member(3), member(4)]
    assert isinstance(roles.guard_scale_down(STS, 5, 3, view(members, master=4)), Blocked)


@pytest.mark.parametrize(
    "members",
    [
        [member(0, in_sync=False), member(1, in_sync=False)],  # only not-in-sync kept
        [member(0, alive=False), member(1, alive=False)],  # only dead kept
        [member(0, alive=False), member(1, in_sync=False)],
        [],  # the controller knows of no replica
    ],
)
def test_master_removed_without_candidate_blocks(members: list[Member]) -> None:
    decision = roles.guard_scale_down(STS, 3, 2, view([*members, member(2)], master=2))
    assert isinstance(decision, Blocked)
    assert f"{STS}-2" in decision.reason


def test_scale_3_to_1_with_master_at_2_and_only_member_1_in_sync_blocks() -> None:
    members = [member(0, in_sync=False), member(1), member(2)]
    decision = roles.guard_scale_down(STS, 3, 1, view(members, master=2))
    assert isinstance(decision, Blocked), decision


def test_scale_3_to_1_with_master_at_2_and_member_0_in_sync_elects_0() -> None:
    members = [member(0), member(1), member(2)]
    decision = roles.guard_scale_down(STS, 3, 1, view(members, master=2))
    assert decision == ElectAway(master_pod=f"{STS}-2", target_pod=f"{STS}-0", target_broker_id=1)
