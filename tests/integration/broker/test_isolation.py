"""An old master cut off from the controllers stops acknowledging writes within its lease."""

from __future__ import annotations

import signal
import time

import aiohttp

from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import ControllerGroup
from tests.integration.conftest import eventually

BODY = {"topic": "t", "messages": [{"body": "eA=="}]}


async def put_status(session: aiohttp.ClientSession, address: str) -> str:
    async with session.post(f"http://{address}/v1/messages", json=BODY, timeout=aiohttp.ClientTimeout(total=5)) as r:
        return str((await r.json())["status"])


async def test_isolated_master_stops_acknowledging(controller_group: ControllerGroup, async_set: BrokerSet) -> None:
    master = await async_set.master()
    address = async_set.nodes[master].api
    async with aiohttp.ClientSession() as session:
        assert await put_status(session, address) == "PUT_OK"
        for i in range(3):
            controller_group.signal(i, signal.SIGSTOP)  # the controllers are unreachable (hung)
        isolated_at = time.monotonic()
        try:

            async def refused() -> bool:
                return await put_status(session, address) == "SERVICE_NOT_AVAILABLE"

            await eventually("the isolated master refuses writes", refused, timeout=10)
            took = time.monotonic() - isolated_at
            print(f"isolated master stopped acknowledging after {took * 1000:.0f} ms (lease 1500 ms)")
            assert took < 1.5 + 1.0, "the write lease must bound how long an isolated master acknowledges"
            st = await async_set.status(master, session)
            assert st is not None and st["writeLeaseRemainingMs"] == 0
        finally:
            for i in range(3):
                controller_group.signal(i, signal.SIGCONT)

        async def accepted_again() -> bool:
            return await put_status(session, async_set.nodes[await async_set.master()].api) == "PUT_OK"

        await eventually("writes are acknowledged again once the controllers are back", accepted_again, timeout=30)
