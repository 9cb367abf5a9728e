"""kill -9 of the master in sync mode: a new master comes from the sync-state-set, and every
acknowledged message is present exactly once (idempotent retries across the failover)."""

from __future__ import annotations

import asyncio
import time

import aiohttp

from brokergroup.broker.client import MasterFinder, ProduceError, Producer
from brokergroup.controller.client import ControllerClient
from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import ControllerGroup
from tests.integration.broker.history import check, read_queue, same_offsets
from tests.integration.conftest import eventually


async def test_kill_master_in_sync_mode_loses_and_duplicates_nothing(
    controller_group: ControllerGroup, sync_set: BrokerSet
) -> None:
    old = await sync_set.master()
    async with aiohttp.ClientSession() as session, ControllerClient(controller_group.api_addresses) as controller:

        async def full_set() -> bool:
            return len((await controller.replica_info("bs")).sync_state_set) == 3

        await eventually("all replicas in the sync-state-set", full_set)
        before = await controller.replica_info("bs")
        producer = Producer(MasterFinder(broker_name="bs", controller=controller), session=session, deadline_s=30)
        acked: set[tuple[int, int]] = set()
        gap: dict[str, float] = {}
        stop = asyncio.Event()

        async def produce() -> None:
            i = 0
            while not stop.is_set():
                seq = producer.next_seq
                try:
                    await producer.send("t", [f"m{i}".encode()])
                except ProduceError:
                    continue
                acked.add((producer.producer_id, seq))
                now = time.monotonic()
                if "killed" in gap and "first_after" not in gap:
                    gap["first_after"] = now
                gap["last"] = now
                i += 1

        task = asyncio.create_task(produce())
        await eventually("some messages acknowledged", lambda: _at_least(acked, 100))
        last_before = gap["last"]
        gap["killed"] = time.monotonic()
        sync_set.kill(old)
        await eventually("writes acknowledged again after the failover", lambda: _has(gap, "first_after"), timeout=30)
        target = len(acked) + 100
        await eventually("more messages after the failover", lambda: _at_least(acked, target))
        stop.set()
        await task
        print(
            f"client-visible failover: {(gap['first_after'] - last_before) * 1000:.0f} ms "
            f"(last ack before the kill -> first ack after), {len(acked)} acknowledged"
        )

        new = await sync_set.master(exclude={old})
        info = await controller.replica_info("bs")
        assert info.master_broker_id in before.sync_state_set
        assert info.master_epoch > before.master_epoch
        messages = await read_queue(session, sync_set.nodes[new].api, "t")
        verdict = check(acked, messages)
        assert verdict.ok, f"lost {verdict.lost[:10]}, duplicated {verdict.duplicated[:10]}"

        sync_set.start(old)

        async def old_master_caught_up() -> bool:
            st = await sync_set.status(old, session)
            nst = await sync_set.status(new, session)
            return bool(
                st and nst and st.get("role") == "slave" and st["store"]["maxOffset"] == nst["store"]["maxOffset"]
            )

        await eventually("the old master follows the new one", old_master_caught_up, timeout=30)
        replicas = [await read_queue(session, n.api, "t") for n in sync_set.nodes]
        assert same_offsets(replicas) == []
        assert len({len(r) for r in replicas}) == 1


async def _at_least(items: set[tuple[int, int]], n: int) -> bool:
    return len(items) >= n


async def _has(d: dict[str, float], key: str) -> bool:
    return key in d
