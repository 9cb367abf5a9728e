"""kill -9 of the controller leader: a new leader serves, with the state intact."""

from __future__ import annotations

import time

from brokergroup.controller import protocol
from brokergroup.local.controllers import ControllerGroup
from tests.integration.conftest import eventually
from tests.integration.controller.scenario import elect_and_grow, register_replicas


async def states(group: ControllerGroup, indexes: list[int]) -> list[dict[str, object]]:
    async with group.client() as client:
        return [await client.state(address=group.nodes[i].api) for i in indexes]


async def test_kill_leader_new_leader_serves_same_state(controller_group: ControllerGroup) -> None:
    group = controller_group
    leader = await group.leader()
    async with group.client() as client:
        for name in ("set-a", "set-b"):
            await register_replicas(client, name)
            await elect_and_grow(client, name)
        before = {name: (await client.replica_info(name)).wire() for name in ("set-a", "set-b")}
        expected = (await states(group, [leader]))[0]

        killed_at = time.monotonic()
        group.kill(leader)
        new_leader = await group.leader(exclude={leader}, timeout=60)
        print(f"controller leader failover: {time.monotonic() - killed_at:.3f} s")
        assert new_leader != leader

        after = {name: (await client.replica_info(name)).wire() for name in ("set-a", "set-b")}
        assert after == before
        survivors = [i for i in range(3) if i != leader]
        for state in await states(group, survivors):
            assert state["state"] == expected["state"]
            assert state["version"] == expected["version"]

        # the new leader accepts writes, and they reach the other survivor
        info = await client.replica_info("set-a")
        shrunk = await client.alter_sync_state_set(
            protocol.AlterSyncStateSetRequest(
                broker_name="set-a",
                master_broker_id=1,
                master_epoch=info.master_epoch,
                sync_state_set=[1, 2],
                sync_state_set_epoch=info.sync_state_set_epoch,
            )
        )
        assert shrunk.sync_state_set == [1, 2]
        assert shrunk.sync_state_set_epoch == info.sync_state_set_epoch + 1

        async def converged() -> bool:
            a, b = await states(group, survivors)
            return a["state"] == b["state"] and a["version"] == b["version"] == expected["version"] + 1  # type: ignore[operator]

        await eventually("survivors converge on the new write", converged)

        # the killed node comes back as a follower and catches up
        group.start(leader)

        async def caught_up() -> bool:
            everyone = await states(group, [0, 1, 2])
            return all(s["state"] == everyone[0]["state"] and s["version"] == everyone[0]["version"] for s in everyone)

        await eventually("restarted node catches up", caught_up, timeout=30)
