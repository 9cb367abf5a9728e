"""Issue 17: a chaos run through the binary port recorded a consumer polling offset 1650 after 1651.

The suspects, each against a real broker set:
- a reply that arrives after its request timed out on the client must not answer the next request
  on the connection (a broker held stopped while the client gives up, then let go);
- the chaos consumer (`ConsumerClient`) polled twice at once when the run's drain began while its
  polling loop still ran: both polls started at one position and read the same messages, which the
  history recorded as an earlier offset after a later one. That is the cause: it was in the harness,
  for either protocol; the client now does one poll at a time and the run stops the loop first.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import aiohttp
import pytest

from brokergroup.broker.binary_client import BinaryConnection, BinaryConsumer, BinaryLinks, BinaryProducer
from brokergroup.broker.client import Consumer, MasterFinder
from brokergroup.broker.protocol import client_frames as cf
from brokergroup.chaos.checker import check
from brokergroup.chaos.history import ConsumerClient, HistoryWriter, read_history
from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import ControllerGroup
from tests.integration.broker.test_binary_port import binary_address
from tests.integration.conftest import eventually

pytestmark = pytest.mark.integration


async def test_a_reply_after_its_request_timed_out_does_not_answer_the_next_one(
    controller_group: ControllerGroup, async_set: BrokerSet
) -> None:
    master = await async_set.master()
    slave = next(i for i in range(len(async_set.nodes)) if i != master)
    async with aiohttp.ClientSession() as session:
        links = BinaryLinks(session)
        finder = MasterFinder(broker_name="bs", controller=None, master_address=async_set.nodes[master].api)
        sent = await BinaryProducer(finder, links=links).send("race", [b"zero", b"one", b"two"])
        assert sent.queue_offsets == (0, 1, 2)
        conn = await BinaryConnection.open(":".join(map(str, await binary_address(async_set, slave, session))))

        async def replicated() -> bool:
            reply = await conn.request(cf.Consume(topic="race", offset=0, max_count=8), timeout=10)
            return isinstance(reply, cf.Messages) and len(reply.messages) == 3

        await eventually("the slave serves the three messages", replicated, timeout=60)

        async_set.signal(slave, signal.SIGSTOP)  # the broker holds every request from here
        try:
            with pytest.raises(TimeoutError):
                await conn.request(cf.Consume(topic="race", offset=0, max_count=8), timeout=0.3)
            later = asyncio.create_task(conn.request(cf.Consume(topic="race", offset=2, max_count=8), timeout=60))
            await asyncio.sleep(0)  # written behind the timed-out request, on the same connection
        finally:
            async_set.signal(slave, signal.SIGCONT)
        reply = await later  # the broker now answers both: the late reply first, to nobody

        assert isinstance(reply, cf.Messages), reply
        assert [(m.queue_offset, m.body) for m in reply.messages] == [(2, b"two")]
        assert reply.next_offset == 3 and not conn.closed and conn.link.pending == {}
        conn.close()
        links.close()


@pytest.mark.parametrize("protocol", ["binary", "http"])
async def test_a_drain_beside_the_polling_loop_does_not_read_offsets_twice(
    controller_group: ControllerGroup, async_set: BrokerSet, tmp_path: Path, protocol: str
) -> None:
    master = await async_set.master()
    async with aiohttp.ClientSession() as session:
        links = BinaryLinks(session)
        finder = MasterFinder(broker_name="bs", controller=None, master_address=async_set.nodes[master].api)
        await BinaryProducer(finder, links=links).send("chaos", [b"a", b"b"])
        consumer: Consumer | BinaryConsumer = (
            BinaryConsumer(finder, group="g", links=links)
            if protocol == "binary"
            else Consumer(finder, group="g", session=session)
        )
        with HistoryWriter(tmp_path / "history.jsonl") as history:
            client = ConsumerClient("c0", consumer, history, broker_set="bs", topic="chaos")
            # What the run did: its drain polled while the polling loop's poll was open.
            read = await asyncio.gather(client.poll_one(), client.poll_one())
        links.close()

    assert sorted(read) == [0, 2], read  # one poll read both messages, the other started after them
    ops = list(read_history(tmp_path / "history.jsonl"))
    assert [(op["type"], op["value"].get("offset")) for op in ops] == [
        ("invoke", 0),
        ("ok", 0),
        ("invoke", 2),
        ("ok", 2),
    ]  # fmt: skip  (an ok repeats where its poll started: the checker's unreportedGaps check)
    verdict = check(ops)
    assert verdict["anomalies"]["nonMonotonicPolls"] == 0, verdict
    assert not [why for why in verdict["incomplete"] if "previous one was open" in why], verdict["incomplete"]
