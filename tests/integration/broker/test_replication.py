"""Replication across real broker processes: catch-up, shrink and expand, minInSyncReplicas."""

from __future__ import annotations

import aiohttp

from brokergroup.broker.client import MasterFinder, Producer
from brokergroup.controller.client import ControllerClient
from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import ControllerGroup
from tests.integration.broker.conftest import same_log, sees_in_sync
from tests.integration.broker.history import check, read_queue, same_offsets
from tests.integration.conftest import eventually


async def test_slave_restart_catches_up_and_rejoins_the_sync_state_set(
    controller_group: ControllerGroup, sync_set: BrokerSet
) -> None:
    master = await sync_set.master()
    slaves = [i for i in range(3) if i != master]
    async with aiohttp.ClientSession() as session, ControllerClient(controller_group.api_addresses) as controller:
        producer = Producer(MasterFinder(broker_name="bs", controller=controller), session=session, deadline_s=20)

        async def full_set() -> bool:
            return len((await controller.replica_info("bs")).sync_state_set) == 3

        await eventually("all replicas in the sync-state-set", full_set)
        for i in range(50):
            await producer.send("t", [f"a{i}".encode()])

        sync_set.kill(slaves[0])

        async def shrunk() -> bool:
            return len((await controller.replica_info("bs")).sync_state_set) == 2

        await eventually("the master shrinks the set when a slave's connection closes", shrunk)
        for i in range(50, 100):
            await producer.send("t", [f"a{i}".encode()])
        sync_set.start(slaves[0])
        await eventually("the restarted slave rejoins the set", full_set, timeout=30)

        await eventually("every replica holds the same log", lambda: same_log(sync_set, session))
        replicas = [await read_queue(session, n.api, "t") for n in sync_set.nodes]
        assert [len(r) for r in replicas] == [100, 100, 100]
        assert same_offsets(replicas) == []
        verdict = check({(producer.producer_id, s) for s in range(100)}, replicas[master])
        assert verdict.ok, verdict


async def test_min_in_sync_replicas_refuses_and_writes_nothing(
    controller_group: ControllerGroup, sync_set: BrokerSet
) -> None:
    master = await sync_set.master()
    async with aiohttp.ClientSession() as session, ControllerClient(controller_group.api_addresses) as controller:

        async def full_set() -> bool:
            return len((await controller.replica_info("bs")).sync_state_set) == 3

        await eventually("all replicas in the sync-state-set", full_set)
        for i in range(3):
            if i != master:
                sync_set.kill(i)

        master_id = (await sync_set.status(master, session) or {})["brokerId"]

        async def alone() -> bool:
            return (await controller.replica_info("bs")).sync_state_set == [master_id]

        await eventually("the set shrinks to the master", alone)
        # The controller's answer to the shrink reaches the master a moment after the controller applied it.
        await eventually("the master adopts the shrunk set", lambda: sees_in_sync(sync_set, master, session, 1))
        before = (await sync_set.status(master, session) or {})["store"]["maxOffset"]  # type: ignore[index]
        body = {"topic": "t", "messages": [{"body": "eA=="}]}
        async with session.post(f"http://{sync_set.nodes[master].api}/v1/messages", json=body) as r:
            assert r.status == 503
            answer = await r.json()
        assert answer["status"] == "IN_SYNC_REPLICAS_NOT_ENOUGH"
        after = (await sync_set.status(master, session) or {})["store"]["maxOffset"]  # type: ignore[index]
        assert after == before
