"""The controller event log (DESIGN §2.3) on a real 3-node group, across a leader kill -9 and restart."""

from __future__ import annotations

import json
from collections import Counter
from importlib import resources
from typing import Any

import jsonschema

from brokergroup.controller import protocol
from brokergroup.local.controllers import ControllerGroup
from tests.integration.conftest import eventually
from tests.integration.controller.scenario import elect_and_grow, register_replicas

SET = "set-a"
Record = dict[str, Any]


def validator() -> jsonschema.Draft202012Validator:
    text = resources.files("brokergroup.controller").joinpath("event.schema.json").read_text(encoding="utf-8")
    schema = json.loads(text)
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def read_log(group: ControllerGroup, i: int) -> list[Record]:
    """Every line of node i's event-log files, in file order; fails on a line that is not JSON."""
    node = group.nodes[i]
    files = sorted((node.data_dir / "events").glob("events-*.jsonl"))
    out = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(keepends=True), 1):
            assert line.endswith("\n"), f"{path.name}:{number}: unterminated line {line!r}"
            out.append(json.loads(line))
    return out


def raft_of(records: list[Record]) -> list[Record]:
    return [r for r in records if r["source"] == "raft"]


def without_node(record: Record) -> Record:
    return {k: v for k, v in record.items() if k != "node"}


async def test_event_logs_agree_on_every_node_across_a_leader_restart(controller_group: ControllerGroup) -> None:
    group = controller_group
    leader = await group.leader()
    async with group.client() as client:
        await register_replicas(client, SET)
        await elect_and_grow(client, SET)
        before_kill = max(r["index"] for r in raft_of(read_log(group, leader)))

        group.kill(leader)
        new_leader = await group.leader(exclude={leader}, timeout=60)
        info = await client.replica_info(SET)
        shrunk = await client.alter_sync_state_set(
            protocol.AlterSyncStateSetRequest(
                broker_name=SET,
                master_broker_id=1,
                master_epoch=info.master_epoch,
                sync_state_set=[1, 2],
                sync_state_set_epoch=info.sync_state_set_epoch,
            )
        )
        assert shrunk.sync_state_set == [1, 2]
        group.start(leader)  # re-applies its journal, then catches up on the shrink

        async def same_raft_events_everywhere() -> bool:
            ids = [{r["eventId"] for r in raft_of(read_log(group, i))} for i in range(3)]
            return ids[0] == ids[1] == ids[2] and len(ids[0]) > 0

        await eventually("every node logged the same raft events", same_raft_events_everywhere, timeout=30)

        logs = [read_log(group, i) for i in range(3)]
        schema = validator()
        for i, records in enumerate(logs):
            node_id = group.nodes[i].node_id
            # (a) every line validates against the committed schema, and names the node that wrote it
            for record in records:
                problems = [e.message for e in schema.iter_errors(record)]
                assert problems == [], (node_id, record)
                assert record["node"] == node_id
            # (c) no raft event twice in one node's files, the restarted node included
            counts = Counter(r["eventId"] for r in raft_of(records))
            assert [event for event, n in counts.items() if n > 1] == [], node_id
            # (e) raft records appear in (term, index) order
            order = [(r["term"], r["index"]) for r in raft_of(records)]
            assert order == sorted(order), node_id

        # (b) the same raft records on every node, field for field apart from `node`
        by_node = [{r["eventId"]: without_node(r) for r in raft_of(records)} for records in logs]
        assert by_node[0] == by_node[1] == by_node[2]
        raft = sorted(by_node[0].values(), key=lambda r: r["index"])
        types = [r["type"] for r in raft]
        assert types == ["APPLY_BROKER_ID"] * 3 + ["ELECT_MASTER", "ALTER_SYNC_STATE_SET", "ALTER_SYNC_STATE_SET"]
        assert (raft[-1]["syncStateSet"], raft[-2]["syncStateSet"], raft[3]["masterBrokerId"]) == ([1, 2], [1, 2, 3], 1)
        assert raft[-1]["index"] > before_kill
        assert raft[-1]["term"] > raft[-2]["term"]  # written by the new leader

        # (d) both leaders logged taking over, as local records of their own
        for i in (leader, new_leader):
            changes = [r for r in logs[i] if r["type"] == "CONTROLLER_LEADER_CHANGED"]
            assert changes, group.nodes[i].node_id
            assert all(r["source"] == "local" and r["index"] is None for r in changes)
            assert any(r["reason"].startswith(f"{group.nodes[i].node_id} leads term") for r in changes)

        # GET /v1/events?after=N: exactly the logged raft records past N, on every node
        elect_index = raft[3]["index"]
        for i in range(3):
            page = await client.events(after=elect_index, address=group.nodes[i].api)
            assert page["events"], group.nodes[i].node_id
            assert all(r["index"] > elect_index for r in page["events"])
            expected = {eid: r for eid, r in by_node[i].items() if r["index"] > elect_index}
            assert {r["eventId"]: without_node(r) for r in page["events"]} == expected
            assert page["lastIndex"] >= raft[-1]["index"] and page["truncated"] is False
            everything = await client.events(after=0, address=group.nodes[i].api)
            assert {r["eventId"] for r in everything["events"]} == set(by_node[i])
