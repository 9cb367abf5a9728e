"""The power-loss fault in nemesis specifications and fault durations."""

from __future__ import annotations

import random

from brokergroup.chaos.cmd import DEFAULT_NEMESIS
from brokergroup.chaos.nemesis import FAMILIES, KINDS, POWER_LOSS, expand
from brokergroup.chaos.runner import hold_seconds


def test_power_family_is_the_power_loss_fault_and_in_the_default_mix() -> None:
    assert POWER_LOSS in KINDS
    assert FAMILIES["power"] == (POWER_LOSS,)
    assert expand("power,kill-master", partitions_available=False) == [POWER_LOSS, "kill-master"]
    assert POWER_LOSS in expand(DEFAULT_NEMESIS, partitions_available=True)


def test_a_power_loss_keeps_its_machines_down_briefly() -> None:
    rng = random.Random(3)
    for _ in range(200):
        assert 0.5 <= hold_seconds(POWER_LOSS, rng, 5.0) <= 3.0
