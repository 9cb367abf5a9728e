"""Async replication, a slave's divergent tail, and a kill -9 in the middle of its truncation."""

from __future__ import annotations

import asyncio
import random
import signal

import aiohttp

from brokergroup.broker.client import MasterFinder, Producer
from brokergroup.controller.client import ControllerClient
from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import ControllerGroup
from tests.integration.broker.conftest import full_set, same_log, unclean_allowed_with_common_prefix
from tests.integration.broker.history import read_queue, same_offsets
from tests.integration.conftest import ADMIN_TOKEN, eventually


async def test_async_mode_acknowledges_without_slaves_and_they_catch_up(
    controller_group: ControllerGroup, async_set: BrokerSet
) -> None:
    master = await async_set.master()
    slaves = [i for i in range(3) if i != master]
    async with aiohttp.ClientSession() as session, ControllerClient(controller_group.api_addresses) as controller:
        await eventually("all replicas in the sync-state-set", lambda: full_set(controller))
        for i in slaves:
            async_set.signal(i, signal.SIGSTOP)
        producer = Producer(MasterFinder(broker_name="bs", controller=controller), session=session, deadline_s=5)
        for i in range(30):
            sent = await producer.send("t", [f"x{i}".encode()])
            assert sent.status == "PUT_OK"
        for i in slaves:
            async_set.signal(i, signal.SIGCONT)

        async def replicated() -> bool:
            counts = [len(await read_queue(session, async_set.nodes[i].api, "t")) for i in slaves]
            return counts == [30, 30]

        await eventually("stopped slaves catch up after SIGCONT", replicated, timeout=30)


async def test_divergent_tail_is_truncated_even_when_killed_midway(
    controller_group: ControllerGroup, async_set: BrokerSet
) -> None:
    """The old master keeps a tail its slaves never received (async mode, slaves stopped until
    the master dropped their connections), dies, a slave is elected (unclean election), and the
    old master comes back as a slave: it must cut that tail, even if killed while cutting."""
    old = await async_set.master()
    slaves = [i for i in range(3) if i != old]
    async with (
        aiohttp.ClientSession() as session,
        ControllerClient(controller_group.api_addresses, token=ADMIN_TOKEN) as controller,
    ):
        producer = await unclean_allowed_with_common_prefix(controller, session)

        async def replicated() -> bool:
            counts = [len(await read_queue(session, async_set.nodes[i].api, "t")) for i in slaves]
            return counts == [20, 20]

        await eventually("common prefix on every replica", replicated)
        for i in slaves:
            async_set.signal(i, signal.SIGSTOP)

        async def dropped() -> bool:
            st = await async_set.status(old, session)
            return bool(st) and st["replication"]["connections"] == []  # type: ignore[index]

        await eventually("the master drops the stopped slaves' connections", dropped, timeout=20)
        for i in range(200):  # acknowledged by the old master alone
            await producer.send("t", [f"tail{i}".encode() * 50])
        async_set.kill(old)
        for i in slaves:
            async_set.signal(i, signal.SIGCONT)
        new = await async_set.master(exclude={old}, timeout=30)
        for i in range(10):
            await producer.send("t", [f"after{i}".encode()])

        rng = random.Random(7)
        for _attempt in range(3):  # kill -9 the old master at random moments of its rejoin and truncation
            async_set.start(old)
            await asyncio.sleep(rng.uniform(0.05, 0.6))
            async_set.kill(old)
        async_set.start(old)

        async def rejoined() -> bool:
            st = await async_set.status(old, session)
            nst = await async_set.status(new, session)
            return bool(
                st and nst and st.get("role") == "slave" and st["store"]["maxOffset"] == nst["store"]["maxOffset"]
            )

        await eventually("the old master truncated its tail and follows", rejoined, timeout=40)
        # Async mode acknowledges without the slaves: the other slave may still be reaching the new master.
        await eventually("every replica holds the new master's log", lambda: same_log(async_set, session))
        replicas = [await read_queue(session, n.api, "t") for n in async_set.nodes]
        assert same_offsets(replicas) == []
        bodies = [m["body"] for m in replicas[old]]
        assert len(bodies) == 30
        epochs = []
        for n in async_set.nodes:
            async with session.get(f"http://{n.api}/v1/epochs") as r:
                epochs.append((await r.json())["epochs"])
        assert epochs[0] == epochs[1] == epochs[2]
