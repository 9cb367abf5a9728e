"""SYNC flush across real broker processes: a put is acknowledged only once every slave in the
sync-state-set has fsynced it (issue 21). The slaves' fsynced offsets are read from their status
(`store.flushedOffset`) and their /metrics (`brokergroup_broker_flushed_offset`)."""

from __future__ import annotations

from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from brokergroup.broker.client import MasterFinder, Producer
from brokergroup.controller.client import ControllerClient
from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import ControllerGroup
from tests.integration.conftest import eventually


async def metric_values(session: aiohttp.ClientSession, api: str) -> dict[str, float]:
    async with session.get(f"http://{api}/metrics") as r:
        text = await r.text()
    return {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples}


async def status(brokers: BrokerSet, index: int, session: aiohttp.ClientSession) -> dict[str, Any]:
    found = await brokers.status(index, session)
    assert found is not None, f"replica {index} does not answer"
    return found


async def test_a_sync_put_is_acknowledged_only_after_every_in_sync_slave_fsynced_it(
    controller_group: ControllerGroup, sync_set: BrokerSet
) -> None:
    master = await sync_set.master()
    slaves = [i for i in range(3) if i != master]
    async with aiohttp.ClientSession() as session, ControllerClient(controller_group.api_addresses) as controller:
        producer = Producer(MasterFinder(broker_name="bs", controller=controller), session=session, deadline_s=20)

        async def full_set() -> bool:
            return len((await status(sync_set, master, session))["replication"]["syncStateSet"]) == 3

        await eventually("all replicas in the master's sync-state-set", full_set, timeout=30)
        ids = {i: (await status(sync_set, i, session))["brokerId"] for i in slaves}
        checked = 0
        for n in range(20):
            await producer.send("durable", [b"message %d" % n])
            after = await status(sync_set, master, session)
            end = after["store"]["maxOffset"]  # one producer, one put at a time: this put's end
            in_sync = set(after["replication"]["syncStateSet"])
            for i in slaves:
                if ids[i] not in in_sync:
                    continue  # shrunk out meanwhile (a slow machine): the put did not wait for it
                flushed = (await status(sync_set, i, session))["store"]["flushedOffset"]
                assert flushed >= end, f"slave {ids[i]} acknowledged up to {end} but has fsynced only {flushed}"
                checked += 1
        assert checked >= 20  # at least one slave was checked for every put

        for i in slaves:
            values = await metric_values(session, sync_set.nodes[i].api)
            assert values["brokergroup_broker_flushed_offset"] >= end
            assert values["brokergroup_broker_flushes_total"] >= 1
