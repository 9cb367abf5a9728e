"""Bad input on every endpoint of a live broker set: a 4xx JSON `{status, remark}` whose remark
names the problem, and nothing changes.

One module-scoped set (3 controllers, a sync broker set of 3 replicas). Each case goes to the
master, and to a slave unless the refusal comes from the master's store. Before and after, the
replicas must agree on the log; the master's store maxOffset and every replica's topics must be
the same after as before. The set holds a topic `seed`, and the bad bodies target it, so a
request that slipped through would change something. Also: a put on a slave is refused with the
master's address, and an idempotent producer's retry is answered as a duplicate and stored once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import secrets
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from brokergroup.broker import wire
from brokergroup.local import profiles
from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import ControllerGroup, running_group
from tests.integration.broker.conftest import SYNC, running_set, sees_in_sync
from tests.integration.conftest import ADMIN_TOKEN, eventually

pytestmark = pytest.mark.integration

JSON = "application/json"
BATCH = wire.BATCH_CONTENT_TYPE
TOPIC = "seed"
MAX_BODY = 8 * 1024 * 1024
OVERSIZED = b'{"topic": "seed", "messages": [{"body": "' + b"A" * MAX_BODY + b'"}]}'
DEEP = b"[" * 100_000 + b"]" * 100_000


@dataclasses.dataclass(frozen=True)
class Bad:
    id: str
    method: str
    path: str
    body: bytes | None
    status: int
    names: tuple[str, ...]
    """Substrings the remark must contain: the offending field, parameter or problem."""
    content_type: str = JSON
    master_only: bool = False
    """Refused by the master's store (a slave refuses every put with 503 before looking)."""


def js(value: Any) -> bytes:
    return json.dumps(value).encode()


# ---- the cases -------------------------------------------------------------------------------

VALID_PRODUCE: dict[str, Any] = {"topic": TOPIC, "queueId": 1, "messages": [{"body": "aGk=", "properties": {"k": "v"}}]}
VALID_COMMIT: dict[str, Any] = {"group": "g", "topic": TOPIC, "queueId": 1, "offset": 1}


def produce_json(what: str, body: bytes, names: tuple[str, ...], status: int = 400, **kw: Any) -> Bad:
    return Bad(f"produce-json:{what}", "POST", "/v1/messages", body, status, names, **kw)


def with_messages(*messages: dict[str, Any], **fields: Any) -> bytes:
    return js({**VALID_PRODUCE, "messages": list(messages), **fields})


PRODUCE_JSON = [
    produce_json("empty-body", b"", ("body is empty",)),
    produce_json("not-json", b"{topic: seed", ("Invalid JSON",)),
    produce_json("not-utf8", b'{"topic": "\xff"}', ("Invalid JSON",)),
    produce_json("json-array", js([VALID_PRODUCE]), ("body", "object")),
    produce_json("json-string", js("seed"), ("body", "object")),
    produce_json("json-null", b"null", ("body", "object")),
    produce_json("unknown-field", js({**VALID_PRODUCE, "bogusField": 1}), ("bogusField", "Extra inputs")),
    produce_json("snake-case-field", js({**VALID_PRODUCE, "queue_id": 1}), ("queue_id", "Extra inputs")),
    produce_json("missing-topic", js({"messages": VALID_PRODUCE["messages"]}), ("topic", "Field required")),
    produce_json("missing-messages", js({"topic": TOPIC}), ("messages", "Field required")),
    produce_json("no-messages", with_messages(), ("messages", "at least 1")),
    produce_json("too-many-messages", with_messages(*[{"body": ""}] * 1025), ("messages", "at most 1024")),
    produce_json("message-not-object", js({**VALID_PRODUCE, "messages": ["aGk="]}), ("messages.0",)),
    produce_json("missing-body", with_messages({"seq": 0}), ("messages.0.body", "Field required")),
    produce_json("topic-wrong-type", js({**VALID_PRODUCE, "topic": 5}), ("topic", "string")),
    produce_json("queue-id-string", js({**VALID_PRODUCE, "queueId": "1"}), ("queueId", "integer")),
    produce_json("queue-id-float", js({**VALID_PRODUCE, "queueId": 1.5}), ("queueId",)),
    produce_json("queue-id-bool", js({**VALID_PRODUCE, "queueId": True}), ("queueId",)),
    produce_json("body-wrong-type", with_messages({"body": 5}), ("messages.0.body", "string")),
    produce_json("properties-not-strings", with_messages({"body": "", "properties": {"k": 1}}), ("properties.k",)),
    produce_json("properties-not-object", with_messages({"body": "", "properties": ["k"]}), ("properties",)),
    produce_json("null-topic", js({**VALID_PRODUCE, "topic": None}), ("topic",)),
    produce_json("base64-garbage", with_messages({"body": "not base64!"}), ("messages[0].body", "base64")),
    produce_json("base64-no-padding", with_messages({"body": "aGk"}), ("messages[0].body", "base64")),
    produce_json(
        "second-body-garbage", with_messages({"body": "aGk="}, {"body": "%%%"}), ("messages[1].body", "base64")
    ),
    produce_json("topic-bad-chars", js({**VALID_PRODUCE, "topic": "bad topic!"}), ("topic", "pattern")),
    produce_json("topic-slash", js({**VALID_PRODUCE, "topic": "a/b"}), ("topic", "pattern")),
    produce_json("topic-empty", js({**VALID_PRODUCE, "topic": ""}), ("topic",)),
    produce_json("topic-too-long", js({**VALID_PRODUCE, "topic": "t" * 128}), ("topic", "127")),
    produce_json("queue-id-1024", js({**VALID_PRODUCE, "queueId": 1024}), ("queueId", "1023")),
    produce_json("queue-id-negative", js({**VALID_PRODUCE, "queueId": -1}), ("queueId", "0")),
    produce_json("producer-id-minus-2", js({**VALID_PRODUCE, "producerId": -2}), ("producerId", "-1")),
    produce_json("producer-id-2^63", js({**VALID_PRODUCE, "producerId": 2**63}), ("producerId",)),
    produce_json("seq-minus-2", with_messages({"body": "", "seq": -2}), ("messages.0.seq",)),
    produce_json("born-negative", with_messages({"body": "", "bornTimestamp": -1}), ("messages.0.bornTimestamp",)),
    produce_json(
        "seq-missing-with-producer-id",
        with_messages({"body": "aGk="}, producerId=7),
        ("messages[0].seq", "required", "producerId"),
    ),
    produce_json("too-deep", DEEP, ("body", "recursion")),
    produce_json("oversized", OVERSIZED, (f"exceeds {MAX_BODY} bytes",), status=413),
    produce_json(
        "body-larger-than-a-segment",
        with_messages({"body": "aGk="}, {"body": "A" * (2 * 1024 * 1024)}),
        ("messages[1]", "segment_size"),
        master_only=True,
    ),
    produce_json(
        "seq-beyond-int64",
        with_messages({"body": "aGk=", "seq": 2**63}, producerId=7),
        ("messages[0]", "producer_seq"),
        master_only=True,
    ),
    produce_json(
        "born-beyond-int64",
        with_messages({"body": "aGk=", "bornTimestamp": 2**63}),
        ("messages[0].born_timestamp_ms", "out of range"),
        master_only=True,
    ),
]


def header(
    *, version: int = 1, topic: bytes = TOPIC.encode(), queue_id: int = 1, producer_id: int = -1, count: int = 1
) -> bytes:
    return struct.pack(">BH", version, len(topic)) + topic + struct.pack(">iqI", queue_id, producer_id, count)


def message(*, seq: int = -1, born: int = 1, props: bytes = b"", body: bytes = b"x") -> bytes:
    return struct.pack(">qqI", seq, born, len(props)) + props + struct.pack(">I", len(body)) + body


GOOD_BATCH = header() + message()


def produce_batch(what: str, body: bytes, names: tuple[str, ...], status: int = 400) -> Bad:
    return Bad(f"produce-batch:{what}", "POST", "/v1/messages", body, status, names, content_type=BATCH)


PRODUCE_BATCH = [
    produce_batch("empty-body", b"", ("truncated", "version")),
    produce_batch("json-body", js(VALID_PRODUCE), ("version", "unsupported batch version 123")),
    produce_batch("version-2", header(version=2) + message(), ("version", "2")),
    produce_batch("truncated-topic", GOOD_BATCH[:5], ("truncated", "topic")),
    produce_batch("truncated-header", GOOD_BATCH[:12], ("truncated", "queue id, producer id, count")),
    produce_batch("truncated-message", GOOD_BATCH[:-3], ("truncated", "message 0")),
    produce_batch("topic-bad-chars", header(topic=b"bad topic!") + message(), ("topic", "pattern")),
    produce_batch("topic-not-utf8", header(topic=b"\xff\xfe") + message(), ("topic", "utf-8")),
    produce_batch("topic-too-long", header(topic=b"t" * 128) + message(), ("topic", "127")),
    produce_batch("queue-id-1024", header(queue_id=1024) + message(), ("queueId", "1023")),
    produce_batch("queue-id-negative", header(queue_id=-1) + message(), ("queueId",)),
    produce_batch("producer-id-minus-2", header(producer_id=-2) + message(), ("producerId", "-1")),
    produce_batch("count-0", header(count=0), ("count", "0 messages")),
    produce_batch("count-1025", header(count=1025) + message() * 1025, ("count", "1025")),
    produce_batch("props-not-json", header() + message(props=b"{k: v"), ("messages[0].properties", "not JSON")),
    produce_batch("props-too-deep", header() + message(props=b"[" * 100_000), ("messages[0].properties", "not JSON")),
    produce_batch("props-not-map", header() + message(props=b'{"k": 1}'), ("messages[0].properties", "strings")),
    produce_batch("props-array", header() + message(props=b'["k"]'), ("messages[0].properties", "object")),
    produce_batch("trailing-bytes", GOOD_BATCH + b"\x00\x00", ("2 trailing bytes",)),
    produce_batch(
        "seq-missing-with-producer-id", header(producer_id=7) + message(seq=-1), ("messages[0].seq", "producerId")
    ),
    produce_batch(
        "second-seq-missing",
        header(producer_id=7, count=2) + message(seq=0) + message(seq=-1),
        ("messages[1].seq",),
    ),
    produce_batch("born-negative", header() + message(born=-1), ("bornTimestamp", "negative")),
    produce_batch("oversized", header() + message(body=b"x" * MAX_BODY), (f"exceeds {MAX_BODY} bytes",), status=413),
]


def commit(what: str, body: bytes, names: tuple[str, ...], status: int = 400, **kw: Any) -> Bad:
    return Bad(f"commit:{what}", "POST", "/v1/consumer-offsets", body, status, names, **kw)


COMMIT = [
    commit("empty-body", b"", ("body is empty",)),
    commit("not-json", b"{group", ("Invalid JSON",)),
    commit("json-array", js([VALID_COMMIT]), ("body", "object")),
    commit("unknown-field", js({**VALID_COMMIT, "bogusField": 1}), ("bogusField", "Extra inputs")),
    commit(
        "missing-offset", js({k: v for k, v in VALID_COMMIT.items() if k != "offset"}), ("offset", "Field required")
    ),
    commit("missing-queue-id", js({k: v for k, v in VALID_COMMIT.items() if k != "queueId"}), ("queueId", "required")),
    commit("offset-string", js({**VALID_COMMIT, "offset": "1"}), ("offset", "integer")),
    commit("offset-negative", js({**VALID_COMMIT, "offset": -1}), ("offset", "0")),
    commit("group-bad-chars", js({**VALID_COMMIT, "group": "my group"}), ("group", "pattern")),
    commit("group-too-long", js({**VALID_COMMIT, "group": "g" * 256}), ("group", "255")),
    commit("topic-bad-chars", js({**VALID_COMMIT, "topic": "t?"}), ("topic", "pattern")),
    commit("queue-id-1024", js({**VALID_COMMIT, "queueId": 1024}), ("queueId", "1023")),
    commit("batch-content-type", GOOD_BATCH, ("Invalid JSON",), content_type=BATCH),
    commit("oversized", OVERSIZED, (f"exceeds {MAX_BODY} bytes",), status=413),
    commit(
        "offset-beyond-int64",
        js({**VALID_COMMIT, "offset": 2**64}),
        ("offset", "0..2^63-1"),
        master_only=True,
    ),
]


def get(what: str, path: str, names: tuple[str, ...]) -> Bad:
    return Bad(what, "GET", path, None, 400, names)


QUERIES = [
    get("consume:missing-topic", "/v1/messages", ("query parameter topic is required",)),
    get("consume:empty-topic", "/v1/messages?topic=", ("query parameter topic is required",)),
    get("consume:other-param", "/v1/messages?topics=seed", ("topic",)),
    get("consume:queue-id-1024", "/v1/messages?topic=seed&queueId=1024", ("queueId", "[0, 1023]", "1024")),
    get("consume:queue-id-negative", "/v1/messages?topic=seed&queueId=-1", ("queueId", "-1")),
    get("consume:queue-id-not-int", "/v1/messages?topic=seed&queueId=abc", ("queueId", "integer", "'abc'")),
    get("consume:queue-id-empty", "/v1/messages?topic=seed&queueId=", ("queueId", "integer")),
    get("consume:offset-negative", "/v1/messages?topic=seed&offset=-1", ("offset", "-1")),
    get("consume:offset-float", "/v1/messages?topic=seed&offset=1.5", ("offset", "'1.5'")),
    get("consume:offset-huge", f"/v1/messages?topic=seed&offset={2**70}", ("offset",)),
    get("consume:max-count-0", "/v1/messages?topic=seed&maxCount=0", ("maxCount", "[1, 1024]")),
    get("consume:max-count-1025", "/v1/messages?topic=seed&maxCount=1025", ("maxCount", "1025")),
    get("consume:max-bytes-0", "/v1/messages?topic=seed&maxBytes=0", ("maxBytes", "0")),
    get("consume:max-bytes-not-int", "/v1/messages?topic=seed&maxBytes=lots", ("maxBytes", "'lots'")),
    get("consume:max-bytes-huge", f"/v1/messages?topic=seed&maxBytes={2**40}", ("maxBytes",)),
    get("offsets:missing-group", "/v1/consumer-offsets?topic=seed", ("query parameter group is required",)),
    get("offsets:missing-topic", "/v1/consumer-offsets?group=g", ("query parameter topic is required",)),
    get("offsets:queue-id-5000", "/v1/consumer-offsets?group=g&topic=seed&queueId=5000", ("queueId", "5000")),
    get("offsets:queue-id-not-int", "/v1/consumer-offsets?group=g&topic=seed&queueId=x", ("queueId", "'x'")),
]

ROUTES: dict[str, tuple[str, ...]] = {
    "/v1/messages": ("GET", "POST"),
    "/v1/consumer-offsets": ("GET", "POST"),
    "/v1/topics": ("GET",),
    "/v1/status": ("GET",),
    "/v1/epochs": ("GET",),
    "/v1/role-change": ("POST",),
    "/v1/openapi.json": ("GET",),
    "/healthz": ("GET",),
    "/readyz": ("GET",),
    "/metrics": ("GET",),
}


def method_cases() -> list[Bad]:
    cases = []
    for path, allowed in ROUTES.items():
        for wrong in ("GET", "POST", "PUT", "DELETE", "PATCH"):
            if wrong in allowed:
                continue
            body = js(VALID_PRODUCE) if wrong != "GET" else None
            names = (f"{wrong} {path}", "Method Not Allowed")
            cases.append(Bad(f"method:{wrong}-{path}", wrong, path, body, 405, names))
    return cases


PATHS = [
    Bad("path:unknown", "GET", "/v1/brokers", None, 404, ("GET /v1/brokers", "Not Found")),
    Bad("path:unknown-post", "POST", "/v1/message", js(VALID_PRODUCE), 404, ("POST /v1/message", "Not Found")),
    Bad("path:other-version", "POST", "/v2/messages", js(VALID_PRODUCE), 404, ("/v2/messages", "Not Found")),
    Bad("path:trailing-slash", "POST", "/v1/messages/", js(VALID_PRODUCE), 404, ("/v1/messages/", "Not Found")),
    Bad("path:root", "GET", "/", None, 404, ("Not Found",)),
    Bad("path:role-change-oversized", "POST", "/v1/role-change", OVERSIZED, 413, (f"exceeds {MAX_BODY} bytes",)),
]

CASES = [*PRODUCE_JSON, *PRODUCE_BATCH, *COMMIT, *QUERIES, *method_cases(), *PATHS]


# ---- the broker set ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Cluster:
    controllers: ControllerGroup
    brokers: BrokerSet


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base: Path = tmp_path_factory.mktemp("broker-bad-input")
    extra = profiles.FAST.controller_args()
    with (
        running_group(base / "controllers", admin_token=ADMIN_TOKEN, extra_args=extra) as controllers,
        running_set(base, controllers, SYNC) as brokers,
    ):
        asyncio.run(seed(brokers))
        yield Cluster(controllers, brokers)


async def seed(brokers: BrokerSet) -> None:
    """A master, every replica following it in sync, and one message on `seed`/1 everywhere."""
    master = await brokers.master()
    async with aiohttp.ClientSession() as http:
        every = len(brokers.nodes)
        await eventually(
            "every replica in the sync-state-set", lambda: sees_in_sync(brokers, master, http, every), timeout=30
        )
        async with http.post(f"http://{brokers.nodes[master].api}/v1/messages", data=js(VALID_PRODUCE)) as r:
            assert (r.status, (await r.json())["status"]) == (200, "PUT_OK")
        await snapshot(http, brokers)


async def master_and_slave(brokers: BrokerSet) -> tuple[str, str]:
    master = await brokers.master()
    return brokers.nodes[master].api, brokers.nodes[(master + 1) % len(brokers.nodes)].api


async def snapshot(http: aiohttp.ClientSession, brokers: BrokerSet) -> dict[str, Any]:
    """The master's store maxOffset and every replica's topics, once every replica holds the same log."""
    seen: dict[str, Any] = {}

    async def agree() -> bool:
        master = await brokers.master()
        offsets = []
        for i, node in enumerate(brokers.nodes):
            status = await brokers.status(i, http)
            assert status is not None, f"{node.name} does not answer /v1/status"
            offsets.append(status["store"]["maxOffset"])
            if i == master:
                seen["master"] = node.name
                seen["master maxOffset"] = status["store"]["maxOffset"]
            async with http.get(f"http://{node.api}/v1/topics") as r:
                assert r.status == 200, await r.text()
                seen[f"{node.name} topics"] = (await r.json())["topics"]
        topics = [seen[f"{node.name} topics"] for node in brokers.nodes]
        return len(set(offsets)) == 1 and all(t == topics[0] for t in topics)

    await eventually("every replica holds the master's log", agree)
    assert seen[f"{seen['master']} topics"][TOPIC], seen
    return seen


async def send(http: aiohttp.ClientSession, address: str, bad: Bad) -> tuple[int, dict[str, Any]]:
    headers = {"Content-Type": bad.content_type} if bad.body is not None else {}
    data = io.BytesIO(bad.body) if bad.body is not None and len(bad.body) > 1024 * 1024 else bad.body
    async with http.request(bad.method, f"http://{address}{bad.path}", data=data, headers=headers) as r:
        assert r.content_type == JSON, f"{r.status} {r.content_type}: {await r.text()}"
        return r.status, await r.json()


def assert_refused(status: int, body: dict[str, Any], bad: Bad) -> None:
    assert status == bad.status, body
    assert set(body) == {"status", "remark"}, body
    assert body["status"] == "BAD_REQUEST", body
    for name in bad.names:
        assert name in body["remark"], f"remark does not name {name!r}: {body['remark']!r}"


# ---- tests -------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", CASES, ids=[c.id for c in CASES])
async def test_bad_input_is_refused_and_changes_nothing(cluster: Cluster, bad: Bad) -> None:
    master, slave = await master_and_slave(cluster.brokers)
    async with aiohttp.ClientSession() as http:
        before = await snapshot(http, cluster.brokers)
        for address in [master] if bad.master_only else [master, slave]:
            status, body = await send(http, address, bad)
            assert_refused(status, body, bad)
        assert await snapshot(http, cluster.brokers) == before


async def test_the_valid_requests_are_accepted(cluster: Cluster) -> None:
    """The control for the cases above: each bad request is a valid one with one thing wrong."""
    master, _ = await master_and_slave(cluster.brokers)
    async with aiohttp.ClientSession() as http:
        before = await snapshot(http, cluster.brokers)
        for path, body, content_type in [
            ("/v1/messages", js(VALID_PRODUCE), JSON),
            ("/v1/messages", GOOD_BATCH, BATCH),
            ("/v1/consumer-offsets", js(VALID_COMMIT), JSON),
        ]:
            async with http.post(f"http://{master}{path}", data=body, headers={"Content-Type": content_type}) as r:
                answer = await r.json()
            assert (r.status, answer["status"]) == (200, "PUT_OK"), answer
        for path in ("/v1/messages?topic=seed&queueId=1", "/v1/consumer-offsets?group=g&topic=seed&queueId=1"):
            async with http.get(f"http://{master}{path}") as r:
                assert r.status == 200, await r.text()
        after = await snapshot(http, cluster.brokers)
    assert after["master maxOffset"] > before["master maxOffset"]
    [queue_before] = before[f"{before['master']} topics"][TOPIC]
    [queue_after] = after[f"{after['master']} topics"][TOPIC]
    assert queue_after == {**queue_before, "maxOffset": queue_before["maxOffset"] + 2}


async def test_a_put_on_a_slave_names_the_master(cluster: Cluster) -> None:
    master, slave = await master_and_slave(cluster.brokers)
    valid = [
        ("/v1/messages", js(VALID_PRODUCE), JSON),
        ("/v1/messages", GOOD_BATCH, BATCH),
        ("/v1/consumer-offsets", js(VALID_COMMIT), JSON),
    ]
    async with aiohttp.ClientSession() as http:
        before = await snapshot(http, cluster.brokers)
        for path, body, content_type in valid:
            async with http.post(f"http://{slave}{path}", data=body, headers={"Content-Type": content_type}) as r:
                answer = await r.json()
            assert r.status == 503, answer
            assert answer["status"] == "SERVICE_NOT_AVAILABLE", answer
            assert answer["masterAddress"] == master, answer
            assert "not the master" in answer["remark"], answer
            assert "messages" not in answer, answer
        assert await snapshot(http, cluster.brokers) == before


async def read_all(http: aiohttp.ClientSession, address: str, topic: str) -> list[dict[str, Any]]:
    async with http.get(f"http://{address}/v1/messages", params={"topic": topic, "maxCount": "1024"}) as r:
        assert r.status == 200, await r.text()
        messages: list[dict[str, Any]] = (await r.json())["messages"]
        return messages


async def test_an_idempotent_retry_is_a_duplicate_stored_once(cluster: Cluster) -> None:
    master, _ = await master_and_slave(cluster.brokers)
    producer_id = secrets.randbits(62)
    topic = f"idempotent-{producer_id}"
    first = js({"topic": topic, "producerId": producer_id, "messages": [{"body": "b25jZQ==", "seq": 0}]})
    async with aiohttp.ClientSession() as http:

        async def put(body: bytes, content_type: str = JSON) -> dict[str, Any]:
            async with http.post(
                f"http://{master}/v1/messages", data=body, headers={"Content-Type": content_type}
            ) as r:
                answer: dict[str, Any] = await r.json()
                assert (r.status, answer["status"]) == (200, "PUT_OK"), answer
                return answer

        original = await put(first)
        [stored] = original["messages"]
        assert stored["duplicate"] is False
        after_first = await snapshot(http, cluster.brokers)

        retry = await put(first)
        assert retry["messages"] == [{**stored, "duplicate": True}]
        as_batch = wire.encode_batch(topic=topic, queue_id=0, producer_id=producer_id, messages=[(0, 1, {}, b"once")])
        batch_retry = await put(as_batch, BATCH)
        assert batch_retry["messages"] == [{**stored, "duplicate": True}]
        assert await snapshot(http, cluster.brokers) == after_first, "a duplicate wrote something"

        mixed = await put(
            js(
                {
                    "topic": topic,
                    "producerId": producer_id,
                    "messages": [{"body": "", "seq": 0}, {"body": "", "seq": 1}],
                }
            )
        )
        assert [m["duplicate"] for m in mixed["messages"]] == [True, False]
        assert mixed["messages"][0]["commitOffset"] == stored["commitOffset"]
        assert mixed["messages"][1]["commitOffset"] > stored["commitOffset"]
        await snapshot(http, cluster.brokers)
        for node in cluster.brokers.nodes:
            held = await read_all(http, node.api, topic)
            assert [(m["producerId"], m["seq"], m["body"]) for m in held] == [
                (producer_id, 0, "b25jZQ=="),
                (producer_id, 1, ""),
            ], node.name
            assert held[0]["commitOffset"] == stored["commitOffset"]
