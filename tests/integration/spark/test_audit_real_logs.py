"""The audit on the event logs of a real controller group: three controller processes, three
broker processes holding heartbeat streams, a kill -9 of the controller leader, then a kill -9 of
the master broker and the election that follows. The audit must find no violation and no gap,
and it must report exactly that election and that incident. Stopping the group at the end closes the
brokers' heartbeat streams; a stopping controller does not count those as lost brokers (it once logged them
and could elect a set's master away: test_leader_stop.py), and the incidents are still told apart by time."""

from __future__ import annotations

import json
import time
from pathlib import Path

from pyspark.sql import SparkSession

from brokergroup import cli
from brokergroup.local.controllers import ControllerGroup
from tests.integration.conftest import eventually
from tests.integration.controller.scenario import logged as logged_records
from tests.integration.controller.test_heartbeat_stream import Brokers, setup_set

SET = "set-audit"


async def test_audit_sees_the_controller_failover_and_the_broker_failover(
    controller_group: ControllerGroup, brokers: Brokers, spark: SparkSession, tmp_path: Path
) -> None:
    group = controller_group
    old_leader = await group.leader()
    await setup_set(group, brokers, SET, timeout_ms=60_000)
    group.kill(old_leader)
    new_leader = await group.leader(exclude={old_leader}, timeout=60)
    async with group.client() as client:
        killed_at = time.monotonic()
        brokers.kill(1)

        async def replaced() -> bool:
            return (await client.replica_info(SET)).master_broker_id == 3

        await eventually("broker 3 elected after the master's process died", replaced)
    survivors = [i for i in range(3) if i != old_leader]

    async def logged() -> bool:
        return all(len(logged_records(group, i, "ELECT_MASTER")) == 2 for i in survivors)

    await eventually("both survivors logged the election", logged)
    shutdown_ms = time.time() * 1000  # anything logged after this is the shutdown's
    group.stop_all()
    brokers.stop()

    out = tmp_path / "audit"
    assert cli.main(["audit", str(group.base_dir), "--out", str(out), "--fail-on-violations"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["findings"] == {"violations": 0, "warnings": 0, "byKind": {}}
    assert summary["crossCheck"]["status"] == "agree"
    assert summary["input"]["duplicates"] > 0 and summary["input"]["corrupt"] == 0

    def table(name: str) -> list[dict[str, object]]:
        return [
            r.asDict()
            for r in spark.read.parquet(str(out / "tables" / name))
            .orderBy("ts" if name != "incidents" else "startMs")
            .collect()
        ]

    elections = [
        {k: e[k] for k in ("masterEpoch", "masterBrokerId", "reason", "controllerUnclean", "derivedUnclean")}
        for e in table("elections")
    ]
    assert elections == [
        {
            "masterEpoch": 1,
            "masterBrokerId": 1,
            "reason": "broker",
            "controllerUnclean": False,
            "derivedUnclean": False,
        },
        {
            "masterEpoch": 2,
            "masterBrokerId": 3,
            "reason": "channel_closed",
            "controllerUnclean": False,
            "derivedUnclean": False,
        },
    ]
    incidents = table("incidents")
    (incident,) = [i for i in incidents if i["startMs"] < shutdown_ms]
    assert {k: incident[k] for k in ("brokerName", "cause", "firstSignal", "lostMaster", "newMaster", "recovery")} == {
        "brokerName": SET,
        "cause": "channel_closed",
        "firstSignal": "CHANNEL_CLOSED",
        "lostMaster": 1,
        "newMaster": 3,
        "recovery": "new_master_elected",
    }
    assert 0 <= incident["durationMs"] < (time.monotonic() - killed_at) * 1000
    leaders = table("controller_leaders")
    assert [(r["node"], r["previousNode"]) for r in leaders[-1:]] == [
        (group.nodes[new_leader].node_id, group.nodes[old_leader].node_id)
    ]
    assert leaders[-1]["leaderlessMs"] > 0
