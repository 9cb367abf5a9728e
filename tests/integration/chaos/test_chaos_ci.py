"""The CI-sized fault run: 10 faults in sync mode against 3 controllers and one set of 3 replicas.

kill -9 and SIGSTOP of the master, a slave and the controller leader, and a partition of the
master from the controllers (in network namespaces), one at a time with recovery between them;
then the checker over the clients' history and the controllers' event logs must find nothing.
Under CI=true a machine that cannot build namespaces fails this test instead of skipping the
partition.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from brokergroup.chaos import netns
from brokergroup.chaos.runner import ChaosRun, RunOptions
from brokergroup.chaos.topology import ClusterSpec
from brokergroup.local import profiles
from tests.needs import under_ci

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

PROCESS_FAULTS = ("kill-master", "kill-slave", "kill-leader", "stop-master", "stop-slave", "stop-leader")
PARTITION = "partition-master-controllers"


def partitions_possible() -> bool:
    lacking = netns.missing_capabilities()
    if lacking and under_ci():
        pytest.fail(f"CI=true but network namespaces are unavailable: {'; '.join(lacking)}")
    return not lacking


def test_ten_faults_in_sync_mode_lose_duplicate_and_split_nothing(tmp_path: Path) -> None:
    use_netns = partitions_possible()
    kinds = PROCESS_FAULTS + ((PARTITION,) if use_netns else ())
    options = RunOptions(
        out=tmp_path / "run",
        kinds=kinds,
        faults=10,
        seed=4,
        spec=ClusterSpec(sets=1, replicas=3, mode=profiles.SYNC, profile=profiles.FAST, netns=use_netns),
        producers_per_set=2,
        rate=20.0,
    )
    lines: list[str] = []
    result = asyncio.run(ChaosRun(options, lines.append).run())
    print("\n".join(lines))
    verdict = result["verdict"]
    shown = json.dumps({k: verdict[k] for k in ("anomalies", "examples", "failing")}, indent=1)

    assert result["liveness"] == [], result["liveness"]
    for anomaly in ("lost", "duplicated", "duplicatedInLog", "unexpected", "inconsistentOffsets", "splitBrain"):
        assert verdict["anomalies"][anomaly] == 0, shown
    assert verdict["valid"], shown

    injected = [f["kind"] for f in result["faults"]]
    assert len(injected) == 10
    assert set(injected) == set(kinds), injected
    stats = verdict["stats"]
    assert stats["faults"] == {k: injected.count(k) for k in set(injected)}  # as the history recorded them
    assert stats["sendsOk"] > 200, stats
    for replica, count in stats["finalReads"]["bs0/chaos/0"].items():
        assert count >= stats["sendsOk"], f"{replica} holds {count} of {stats['sendsOk']} acknowledged"
    assert stats["elections"].get("new_master_elected", 0) >= 3, stats  # the faults forced failovers
    if use_netns:
        cut = next(f for f in result["faults"] if f["kind"] == PARTITION)
        assert cut["cuts"][cut["target"]] == ["n0", "n1", "n2"], cut
        assert cut["masterEpochAfter"] > cut["masterEpochBefore"], cut  # the isolated master was replaced
    assert not [n for n in netns_left() if n.startswith(netns.NAME_PREFIX + str(os.getpid()))]


def netns_left() -> list[str]:
    if netns.missing_capabilities():
        return []
    return netns.namespaces()
