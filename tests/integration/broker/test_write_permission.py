"""`PUT /v1/admin/write-permission` and `GET /v1/consumer-lag` on real broker processes: how a broker set is
drained before it is removed (RocketMQ wipeWritePerm, then consumerProgress until every lag is 0).

A read-only replica refuses every produce (HTTP JSON, HTTP batch, binary) with NO_PERMISSION and writes
nothing, while consumes, consumer-offset commits and readiness go on; the permission is kept across kill -9
and restart; a wiped slave refuses produces once elected master; restoring it lets produces through. Bad
calls change nothing."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from brokergroup.broker import wire
from brokergroup.broker.api import TOKEN_HEADER
from brokergroup.broker.binary_client import BinaryConnection
from brokergroup.broker.client import Consumer, MasterFinder, ProduceError, Producer
from brokergroup.broker.permission import NO_PERMISSION, PERMISSION_FILE, READ_ONLY_REMARK
from brokergroup.broker.protocol import client_frames as cf
from brokergroup.controller.client import ControllerClient
from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import ControllerGroup
from tests.integration.broker.conftest import SYNC, full_set, get, running_set
from tests.integration.conftest import eventually

TOKEN = "broker-token"
PUT = {"topic": "t", "messages": [{"body": "eA=="}]}


@pytest.fixture
def token_set(controller_group: ControllerGroup, tmp_path: Path) -> Iterator[BrokerSet]:
    with running_set(tmp_path, controller_group, [*SYNC, "--set", f"controller.broker_token={TOKEN}"]) as brokers:
        yield brokers


async def set_writable(
    session: aiohttp.ClientSession,
    brokers: BrokerSet,
    index: int,
    body: Any,
    token: str | None = TOKEN,
) -> tuple[int, dict[str, Any]]:
    """PUT the write permission; `body` is JSON-encoded unless it is bytes (sent as they are)."""
    headers = {TOKEN_HEADER: token} if token is not None else {}
    url = f"http://{brokers.nodes[index].api}/v1/admin/write-permission"
    if isinstance(body, bytes):
        request = session.put(url, data=body, headers={**headers, "Content-Type": "application/json"})
    else:
        request = session.put(url, json=body, headers=headers)
    async with request as r:
        return r.status, await r.json()


async def status(brokers: BrokerSet, index: int, session: aiohttp.ClientSession) -> dict[str, Any]:
    answer = await brokers.status(index, session)
    assert answer is not None, f"broker {index} does not answer"
    return answer


async def writable_gauge(session: aiohttp.ClientSession, api: str) -> float:
    async with session.get(f"http://{api}/metrics") as r:
        found = re.search(r"^brokergroup_broker_writable ([0-9.e+]+)$", await r.text(), re.M)
    assert found is not None, "no brokergroup_broker_writable gauge"
    return float(found.group(1))


async def http_produce(session: aiohttp.ClientSession, api: str) -> tuple[int, dict[str, Any]]:
    async with session.post(f"http://{api}/v1/messages", json=PUT) as r:
        return r.status, await r.json()


async def http_batch_produce(session: aiohttp.ClientSession, api: str) -> tuple[int, dict[str, Any]]:
    batch = wire.encode_batch(topic="t", queue_id=0, producer_id=-1, messages=[(-1, 0, {}, b"x")])
    headers = {"Content-Type": wire.BATCH_CONTENT_TYPE}
    async with session.post(f"http://{api}/v1/messages", data=batch, headers=headers) as r:
        return r.status, await r.json()


async def binary_produce(brokers: BrokerSet, index: int, session: aiohttp.ClientSession) -> cf.Reply:
    address = (await status(brokers, index, session))["binaryAddress"]
    assert address, "the binary port is off"
    conn = await BinaryConnection.open(address)
    try:
        batch = wire.encode_batch(topic="t", queue_id=0, producer_id=-1, messages=[(-1, 0, {}, b"x")])
        return await conn.request(cf.Produce(batch), timeout=10)
    finally:
        conn.close()


async def lag_is(session: aiohttp.ClientSession, brokers: BrokerSet, index: int, expected: dict[str, Any]) -> None:
    """Wait until replica `index` reports exactly `expected` (commits and messages are visible once confirmed)."""
    seen: list[Any] = []

    async def matches() -> bool:
        async with session.get(f"http://{brokers.nodes[index].api}/v1/consumer-lag") as r:
            seen.append((r.status, await r.json()))
        return seen[-1] == (200, expected)

    try:
        await eventually(f"broker {index} reports the lag {expected}", matches, timeout=30)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last answer {seen[-1] if seen else None}") from exc


async def assert_read_only_master(brokers: BrokerSet, index: int, session: aiohttp.ClientSession) -> None:
    """Every produce path is refused with NO_PERMISSION and nothing reaches the commit log."""
    api = brokers.nodes[index].api
    before = (await status(brokers, index, session))["store"]["maxOffset"]
    for send in (http_produce, http_batch_produce):
        code, answer = await send(session, api)
        assert (code, answer) == (503, {"status": NO_PERMISSION, "remark": READ_ONLY_REMARK}), send.__name__
    reply = await binary_produce(brokers, index, session)
    assert isinstance(reply, cf.PutResult), reply
    assert (reply.status, reply.remark, reply.appended, reply.master_address) == (
        NO_PERMISSION,
        READ_ONLY_REMARK,
        (),
        None,
    )
    after = await status(brokers, index, session)
    assert after["store"]["maxOffset"] == before, "a refused produce reached the commit log"
    assert after["role"] == "master" and after["writable"] is False
    async with session.get(f"http://{api}/readyz") as r:
        assert r.status == 200, "a read-only master must stay Ready for its consumers"
    assert await writable_gauge(session, api) == 0
    async with session.get(f"http://{api}/metrics") as r:
        assert f'brokergroup_broker_put_total{{status="{NO_PERMISSION}"}} 3.0' in await r.text()


async def test_wipe_drain_and_restore(controller_group: ControllerGroup, token_set: BrokerSet) -> None:
    brokers = token_set
    master = await brokers.master()
    others = [i for i in range(3) if i != master]
    async with aiohttp.ClientSession() as session, ControllerClient(controller_group.api_addresses) as controller:
        await eventually("all replicas in the sync-state-set", lambda: full_set(controller))
        finder = MasterFinder(broker_name="bs", controller=controller)
        producer = Producer(finder, session=session, deadline_s=20)
        for i in range(5):
            await producer.send("t", [f"m{i}".encode()])
        assert (await status(brokers, master, session))["writable"] is True
        assert await writable_gauge(session, brokers.nodes[master].api) == 1

        # Bad calls are refused, naming what was wrong, and change nothing.
        bad: list[tuple[Any, str | None, int, str]] = [
            ({"writable": False}, None, 401, f"send it in the {TOKEN_HEADER} header"),
            ({"writable": False}, "wrong", 403, "wrong broker token"),
            ({"writable": "no"}, TOKEN, 400, "writable: Input should be a valid boolean"),
            ({"writable": 0}, TOKEN, 400, "writable: Input should be a valid boolean"),
            ({}, TOKEN, 400, "writable: Field required"),
            ({"writable": False, "force": True}, TOKEN, 400, "force: Extra inputs are not permitted"),
            (b"not json", TOKEN, 400, "Invalid JSON"),
            (b"", TOKEN, 400, "request body is empty"),
        ]
        for body, token, code, remark in bad:
            got, answer = await set_writable(session, brokers, master, body, token=token)
            assert got == code and remark in answer["remark"], (body, token, got, answer)
        assert (await status(brokers, master, session))["writable"] is True
        assert not (brokers.nodes[master].data_dir / PERMISSION_FILE).exists()
        await producer.send("t", [b"still writable"])  # 6 messages on t/0

        # Wipe every replica, as a set about to be removed; the answer is the role view (as the fence's).
        for index in [master, *others]:
            code, view = await set_writable(session, brokers, index, {"writable": False})
            assert code == 200 and view["writable"] is False and view["adminFenced"] is False, view
            assert view["role"] == ("master" if index == master else "slave")
            assert (brokers.nodes[index].data_dir / PERMISSION_FILE).exists()
        code, view = await set_writable(session, brokers, master, {"writable": False})  # again: no change
        assert code == 200 and view["writable"] is False

        await assert_read_only_master(brokers, master, session)
        refused = Producer(finder, session=session, deadline_s=2)
        with pytest.raises(ProduceError) as caught:
            await refused.send("t", [b"refused"])
        assert caught.value.status == NO_PERMISSION and READ_ONLY_REMARK in str(caught.value)

        # Consumers drain it: reads and offset commits go on; the lag reaches 0.
        consumer = Consumer(finder, group="drain", session=session)
        bodies = [r.body for r in await consumer.poll("t", max_count=100)]
        assert bodies == [*(f"m{i}".encode() for i in range(5)), b"still writable"]
        lag = await get(session, brokers.nodes[master].api, "/v1/consumer-lag")
        assert lag == {"totalLag": 0, "groups": 0, "queues": []}
        await consumer.commit("t", offset=2)
        row = {"group": "drain", "topic": "t", "queueId": 0, "consumerOffset": 2, "maxOffset": 6, "lag": 4}
        await lag_is(session, brokers, master, {"totalLag": 4, "groups": 1, "queues": [row]})
        await consumer.commit("t")
        drained = {"totalLag": 0, "groups": 1, "queues": [{**row, "consumerOffset": 6, "lag": 0}]}
        await lag_is(session, brokers, master, drained)
        assert await consumer.committed("t") == 6

        # kill -9 of the master: a wiped slave is elected and refuses produces too; the killed replica comes
        # back still read-only.
        brokers.kill(master)
        new = await brokers.master(exclude={master}, timeout=60)
        await assert_read_only_master(brokers, new, session)
        await lag_is(session, brokers, new, drained)
        brokers.start(master)

        async def back_read_only() -> bool:
            s = await brokers.status(master, session)
            return s is not None and s["role"] == "slave" and s["writable"] is False

        await eventually("the restarted replica is still read-only", back_read_only, timeout=60)
        assert (brokers.nodes[master].data_dir / PERMISSION_FILE).exists()

        # Restoring the permission lets produces through again.
        for index in range(3):
            code, view = await set_writable(session, brokers, index, {"writable": True})
            assert code == 200 and view["writable"] is True, view
            assert not (brokers.nodes[index].data_dir / PERMISSION_FILE).exists()
        sent = await Producer(finder, session=session, deadline_s=20).send("t", [b"after"])
        assert sent.status == "PUT_OK" and sent.master == brokers.nodes[new].api
        assert await writable_gauge(session, brokers.nodes[new].api) == 1
        after = {"totalLag": 1, "groups": 1, "queues": [{**row, "consumerOffset": 6, "maxOffset": 7, "lag": 1}]}
        await lag_is(session, brokers, new, after)


async def test_consumer_lag_per_group_and_queue(controller_group: ControllerGroup, async_set: BrokerSet) -> None:
    brokers = async_set
    master = await brokers.master()
    api = brokers.nodes[master].api
    async with aiohttp.ClientSession() as session:
        finder = MasterFinder(broker_name="bs", controller=None, master_address=api)
        producer = Producer(finder, session=session, deadline_s=20)
        for topic, queue_id, count in (("t", 0, 10), ("t", 1, 4), ("u", 0, 3)):
            await producer.send(topic, [f"{topic}{queue_id}-{i}".encode() for i in range(count)], queue_id=queue_id)
        assert await get(session, api, "/v1/consumer-lag") == {"totalLag": 0, "groups": 0, "queues": []}

        a = Consumer(finder, group="a", session=session)
        b = Consumer(finder, group="b", session=session)
        ahead = Consumer(finder, group="ahead", session=session)
        await a.commit("t", 0, offset=10)
        await a.commit("t", 1, offset=1)
        await b.commit("t", 0, offset=3)
        await b.commit("u", 0, offset=0)
        await ahead.commit("t", 0, offset=50)  # beyond the queue's end: the lag is 0, never negative

        def row(group: str, topic: str, queue_id: int, offset: int, high: int) -> dict[str, Any]:
            return {
                "group": group,
                "topic": topic,
                "queueId": queue_id,
                "consumerOffset": offset,
                "maxOffset": high,
                "lag": max(0, high - offset),
            }

        expected = {
            "totalLag": 0 + 3 + 0 + 7 + 3,
            "groups": 3,
            "queues": [
                row("a", "t", 0, 10, 10),
                row("a", "t", 1, 1, 4),
                row("ahead", "t", 0, 50, 10),
                row("b", "t", 0, 3, 10),
                row("b", "u", 0, 0, 3),
            ],
        }
        for index in [master, *(i for i in range(3) if i != master)]:  # the slaves replicate the commits
            await lag_is(session, brokers, index, expected)
        assert await get(session, api, "/v1/consumer-lag", group="a", verbose=1) == expected  # unknown: ignored

        # Consuming everything and committing brings every row to 0.
        for consumer, queues in ((a, (("t", 0), ("t", 1))), (b, (("t", 0), ("u", 0)))):
            for topic, queue_id in queues:  # from the committed offset on
                while await consumer.poll(topic, queue_id, max_count=3):
                    pass
                await consumer.commit(topic, queue_id)
        consumed = [
            row("a", "t", 0, 10, 10),
            row("a", "t", 1, 4, 4),
            row("ahead", "t", 0, 50, 10),
            row("b", "t", 0, 10, 10),
            row("b", "u", 0, 3, 3),
        ]
        await lag_is(session, brokers, master, {"totalLag": 0, "groups": 3, "queues": consumed})
