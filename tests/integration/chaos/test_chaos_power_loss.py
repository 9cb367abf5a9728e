"""Power losses in a chaos run: every replica of the set and 2 or 3 controllers lose what they had
not fsynced, three times; nothing acknowledged may be lost and the controllers' states must agree.

Data directories live on the power-loss file system (FUSE); under CI=true a machine without it
fails this test instead of skipping it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from brokergroup.chaos import netns, powerfs
from brokergroup.chaos.nemesis import POWER_LOSS
from brokergroup.chaos.runner import RunOptions
from brokergroup.chaos.topology import ClusterSpec
from brokergroup.local import profiles
from tests.integration.chaos.runs import run_chaos
from tests.needs import missing

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def test_three_power_losses_in_sync_mode_lose_nothing_acknowledged(tmp_path: Path) -> None:
    lacking = powerfs.missing_capabilities()
    if lacking:
        missing("; ".join(lacking))
    options = RunOptions(
        out=tmp_path / "run",
        kinds=(POWER_LOSS,),
        faults=3,
        seed=11,
        spec=ClusterSpec(mode=profiles.SYNC, profile=profiles.FAST, netns=not netns.missing_capabilities(),
                         power_fs=True),
        rate=20.0,
    )  # fmt: skip
    result, verdict, shown = run_chaos(options)

    assert result["liveness"] == [], result["liveness"]
    assert verdict["anomalies"]["lost"] == 0, shown
    assert result["status"] == "VALID", shown
    assert result["raftStates"]["agreed"], result["raftStates"]
    faults = result["faults"]
    assert [f["kind"] for f in faults] == [POWER_LOSS] * 3
    assert all(len(f["controllers"]) >= 2 and len(f["brokers"]) == 3 for f in faults), faults
    dropped = sum(f["dropped"]["bytes_lost"] + f["dropped"]["entries_reverted"] for f in faults)
    assert dropped > 0, faults  # the power losses took something away
    assert faults[-1]["masterEpochAfter"] > faults[0]["masterEpochBefore"], faults
    stats = verdict["stats"]
    for replica, count in stats["finalReads"]["bs0/chaos/0"].items():
        assert count >= stats["sendsOk"], f"{replica} holds {count} of {stats['sendsOk']} acknowledged"
    disks = tmp_path / "run" / "cluster" / "disks"
    assert not os.path.ismount(disks) and (disks / "n0" / "events").is_dir()  # unmounted, tree kept
