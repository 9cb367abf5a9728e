"""Nemesis specifications, fault plans and fault durations."""

from __future__ import annotations

import random

import pytest

from brokergroup.chaos.nemesis import KINDS, NETNS_KINDS, NemesisError, expand
from brokergroup.chaos.runner import hold_seconds, plan_faults


def test_families_expand_to_their_kinds_once() -> None:
    kinds = expand("kill,stop-master,kill-master", partitions_available=False)
    assert kinds == ["kill-master", "kill-slave", "kill-leader", "kill-random", "failover-catchup", "stop-master"]


def test_stop_family_has_the_controller_follower_and_forge_is_its_own() -> None:
    stops = expand("stop", partitions_available=False)
    assert stops == ["stop-master", "stop-slave", "stop-leader", "stop-random", "stop-follower"]
    assert expand("forge", partitions_available=False) == ["forge-requests"]


def test_partition_family_needs_namespaces() -> None:
    assert expand("partition", partitions_available=True) == list(NETNS_KINDS)
    assert "blackhole-follower" in NETNS_KINDS
    with pytest.raises(NemesisError, match="network namespaces"):
        expand("kill,partition-master-controllers", partitions_available=False)
    with pytest.raises(NemesisError, match="blackholes need network namespaces"):
        expand("blackhole-follower", partitions_available=False)


@pytest.mark.parametrize("spec", ["", "kill,explode", "Kill"])
def test_unknown_or_empty_nemesis_is_refused(spec: str) -> None:
    with pytest.raises(NemesisError):
        expand(spec, partitions_available=True)


def test_plan_uses_every_kind_before_repeating_and_is_reproducible() -> None:
    plan = plan_faults(KINDS, 2 * len(KINDS) + 3, random.Random(7))
    assert sorted(plan[: len(KINDS)]) == sorted(KINDS)
    assert sorted(plan[len(KINDS) : 2 * len(KINDS)]) == sorted(KINDS)
    assert len(plan) == 2 * len(KINDS) + 3
    assert plan == plan_faults(KINDS, 2 * len(KINDS) + 3, random.Random(7))


def test_master_partitions_outlast_the_heartbeat_timeout_and_kills_are_short() -> None:
    rng = random.Random(1)
    for _ in range(200):
        assert 6.0 <= hold_seconds("partition-master-controllers", rng, 5.0) <= 10.0
        assert 0.5 <= hold_seconds("kill-master", rng, 5.0) <= 3.0
        assert 0.5 <= hold_seconds("partition-master-slaves-kill", rng, 5.0) <= 3.0
        assert 1.0 <= hold_seconds("stop-master", rng, 5.0) <= 8.0
        assert 10.0 <= hold_seconds("stop-follower", rng, 5.0) <= 25.0
        assert 10.0 <= hold_seconds("blackhole-follower", rng, 5.0) <= 25.0
        assert 0.5 <= hold_seconds("failover-catchup", rng, 5.0) <= 3.0
        assert 0.5 <= hold_seconds("forge-requests", rng, 5.0) <= 3.0
