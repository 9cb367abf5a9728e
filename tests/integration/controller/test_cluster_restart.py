"""Whole-group restarts keep the state (pysyncobj #201 says committed data can be lost there)."""

from __future__ import annotations

import signal

from brokergroup.controller import protocol
from brokergroup.local.controllers import ControllerGroup
from tests.integration.conftest import eventually
from tests.integration.controller.scenario import elect_and_grow, heartbeat_all, register_replicas


async def all_states(group: ControllerGroup) -> list[dict[str, object]]:
    async with group.client() as client:
        return [await client.state(address=n.api) for n in group.nodes]


async def test_whole_group_restarts_keep_state(controller_group: ControllerGroup) -> None:
    group = controller_group
    await group.leader()
    async with group.client() as client:
        await register_replicas(client, "set-r")
        await elect_and_grow(client, "set-r")

    for cycle, how in enumerate((signal.SIGKILL, signal.SIGTERM, signal.SIGKILL, signal.SIGKILL)):
        await group.leader()

        async def converged() -> bool:
            states = await all_states(group)
            return all(s["state"] == states[0]["state"] and s["version"] == states[0]["version"] for s in states)

        await eventually("all nodes applied the same state", converged)
        before = (await all_states(group))[0]
        for i in range(3):
            group.signal(i, how)
        group.start_all()
        leader = await group.leader(timeout=30)
        async with group.client() as client:
            served = await client.state(address=group.nodes[leader].api)
        # a serving leader has applied every committed entry (its barrier is behind them)
        assert served["state"] == before["state"], f"cycle {cycle} ({how.name}): leader lost state on restart"
        assert served["version"] == before["version"]

        async def all_restored(expected: object = before["state"]) -> bool:
            return all(s["state"] == expected for s in await all_states(group))

        await eventually(f"cycle {cycle}: every node restores the state", all_restored)
        # keep writing between restarts so every cycle has new committed data to lose
        async with group.client() as client:
            await heartbeat_all(client, "set-r")
            info = await client.replica_info("set-r")
            target = [1, 2] if len(info.sync_state_set) == 3 else [1, 2, 3]
            await client.alter_sync_state_set(
                protocol.AlterSyncStateSetRequest(
                    broker_name="set-r",
                    master_broker_id=1,
                    master_epoch=info.master_epoch,
                    sync_state_set=target,
                    sync_state_set_epoch=info.sync_state_set_epoch,
                )
            )
