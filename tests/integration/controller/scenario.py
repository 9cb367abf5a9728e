"""Scenario builders for controller integration tests: register replicas, elect, grow the set."""

from __future__ import annotations

import json

from brokergroup.controller import protocol
from brokergroup.controller.client import ControllerClient
from brokergroup.local.controllers import ControllerGroup

CLUSTER = "it"
LONG_MS = 600_000


async def register_replicas(
    client: ControllerClient,
    name: str,
    ids: tuple[int, ...] = (1, 2, 3),
    *,
    base_port: int = 40000,
    heartbeat: bool = True,
) -> None:
    for broker_id in ids:
        address = f"127.0.0.1:{base_port + broker_id}"
        await client.apply_id(
            protocol.ApplyIdRequest(
                cluster_name=CLUSTER, broker_name=name, applied_broker_id=broker_id, register_check_code=f"{address};1"
            )
        )
        await client.register(
            protocol.RegisterRequest(
                cluster_name=CLUSTER, broker_name=name, broker_id=broker_id, broker_address=address
            )
        )
        if heartbeat:
            await heartbeat_all(client, name, (broker_id,), base_port=base_port)


async def heartbeat_all(
    client: ControllerClient, name: str, ids: tuple[int, ...] = (1, 2, 3), *, base_port: int = 40000
) -> None:
    """One heartbeat from each replica to every controller node (tables are node-local)."""
    for broker_id in ids:
        address = f"127.0.0.1:{base_port + broker_id}"
        for node in client.addresses:
            await client.heartbeat(
                protocol.HeartbeatRequest(
                    cluster_name=CLUSTER,
                    broker_name=name,
                    broker_addr=address,
                    broker_id=broker_id,
                    max_offset=10 * broker_id,
                    heartbeat_timeout_mills=LONG_MS,
                ),
                address=node,
            )


async def elect_and_grow(
    client: ControllerClient, name: str, master: int = 1, members: tuple[int, ...] = (1, 2, 3)
) -> protocol.AlterSyncStateSetResponse:
    elected = await client.elect_master(
        protocol.ElectMasterRequest(cluster_name=CLUSTER, broker_name=name, broker_id=master)
    )
    assert elected.master_broker_id == master
    return await client.alter_sync_state_set(
        protocol.AlterSyncStateSetRequest(
            broker_name=name,
            master_broker_id=master,
            master_epoch=elected.master_epoch or 0,
            sync_state_set=list(members),
            sync_state_set_epoch=elected.sync_state_set_epoch or 0,
        )
    )


def logged(group: ControllerGroup, node: int, kind: str) -> list[dict[str, object]]:
    """The records of `kind` in a node's event log, in file order."""
    records = []
    for path in sorted((group.nodes[node].data_dir / "events").glob("*.jsonl")):
        records += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in records if r["type"] == kind]
