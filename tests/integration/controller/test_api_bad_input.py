"""Bad input on every endpoint of a live controller group: a 4xx whose remark names the problem,
and nothing changes.

Each case is sent to the leader and to a follower (which forwards leader-only calls). Before and
after, every node must agree on the replicated state and its version, and on its node-local
config and broker liveness; after must equal before. The group holds a broker set `set-a` with
a master, and most bodies target it, so a request that slipped through would change something.
No broker heartbeats the group, so nothing changes on its own (no replica is ever alive).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from brokergroup.controller import protocol
from brokergroup.controller.codes import ResponseCode
from brokergroup.local.controllers import ControllerGroup, running_group
from tests.integration.conftest import ADMIN_TOKEN, eventually
from tests.integration.controller.scenario import CLUSTER, register_replicas

pytestmark = pytest.mark.integration

SET = "set-a"
TOKEN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
INVALID = ResponseCode.CONTROLLER_INVALID_REQUEST
NOT_SUPPORTED = ResponseCode.REQUEST_CODE_NOT_SUPPORTED
OVERSIZED = b'{"brokerName": "' + b"x" * (256 * 1024) + b'"}'
DEEP = b"[" * 100_000 + b"]" * 100_000


@dataclasses.dataclass(frozen=True)
class Bad:
    id: str
    method: str
    path: str
    body: bytes | None
    status: int
    code: ResponseCode
    names: tuple[str, ...]
    """Substrings the remark must contain: the offending field, parameter or problem."""
    headers: tuple[tuple[str, str], ...] = tuple(TOKEN.items())


def js(value: Any) -> bytes:
    return json.dumps(value).encode()


# ---- the cases -------------------------------------------------------------------------------

VALID: dict[str, dict[str, Any]] = {
    "/v1/broker/next-id": {"clusterName": CLUSTER, "brokerName": SET},
    "/v1/broker/apply-id": {
        "clusterName": CLUSTER,
        "brokerName": SET,
        "appliedBrokerId": 3,
        "registerCheckCode": "127.0.0.1:40003;1",
    },
    "/v1/broker/register": {
        "clusterName": CLUSTER,
        "brokerName": SET,
        "brokerId": 2,
        "brokerAddress": "127.0.0.1:40099",
    },
    "/v1/broker/heartbeat": {
        "clusterName": CLUSTER,
        "brokerName": SET,
        "brokerAddr": "127.0.0.1:40002",
        "brokerId": 2,
        "heartbeatTimeoutMills": 600_000,
    },
    "/v1/elect-master": {"clusterName": CLUSTER, "brokerName": SET, "brokerId": 2, "designateElect": True},
    "/v1/alter-sync-state-set": {
        "brokerName": SET,
        "masterBrokerId": 1,
        "masterEpoch": 1,
        "syncStateSet": [1, 2],
        "syncStateSetEpoch": 1,
    },
    "/v1/sync-state-data": {"brokerNames": [SET]},
    "/v1/clean-broker-data": {"clusterName": CLUSTER, "brokerName": SET, "brokerControllerIdsToClean": "2"},
}
"""A valid body per endpoint: each would be accepted as it stands (see test_valid_bodies_are_accepted)."""

# per endpoint: (field, wrong-type value), (field, out-of-range value), required field
MUTATIONS: dict[str, tuple[tuple[str, Any], tuple[str, Any], str]] = {
    "/v1/broker/next-id": (("brokerName", 5), ("brokerName", ""), "clusterName"),
    "/v1/broker/apply-id": (("appliedBrokerId", "3"), ("appliedBrokerId", -1), "registerCheckCode"),
    "/v1/broker/register": (("brokerId", "1"), ("brokerId", -1), "brokerAddress"),
    "/v1/broker/heartbeat": (("brokerId", "1"), ("brokerId", -2), "brokerAddr"),
    "/v1/elect-master": (("brokerId", "1"), ("brokerId", -2), "brokerName"),
    "/v1/alter-sync-state-set": (("syncStateSet", "1;2"), ("masterBrokerId", -1), "masterEpoch"),
    "/v1/sync-state-data": (("brokerNames", SET), ("brokerNames", []), "brokerNames"),
    "/v1/clean-broker-data": (("isCleanLivingBroker", "true"), ("brokerName", "-bad name"), "brokerName"),
}


def body_cases(path: str) -> list[Bad]:
    valid = VALID[path]
    (typed, wrong), (ranged, out_of_range), required = MUTATIONS[path]
    short = path.removeprefix("/v1/").replace("/", "-")

    def case(what: str, body: bytes, names: tuple[str, ...], status: int = 400) -> Bad:
        return Bad(f"{short}:{what}", "POST", path, body, status, INVALID, names)

    return [
        case("empty-body", b"", ("body is empty",)),
        case("not-json", b"{clusterName: it", ("Invalid JSON",)),
        case("not-utf8", b"\xff\xfe{}", ("Invalid JSON",)),
        case("json-array", js([valid]), ("body", "object")),
        case("json-string", js("hello"), ("body", "object")),
        case("json-null", b"null", ("body", "object")),
        case("unknown-field", js({**valid, "bogusField": 1}), ("bogusField", "Extra inputs")),
        case("snake-case-field", js({**valid, "broker_name": SET}), ("broker_name",)),
        case("wrong-type", js({**valid, typed: wrong}), (typed,)),
        case("out-of-range", js({**valid, ranged: out_of_range}), (ranged,)),
        case("missing-field", js({k: v for k, v in valid.items() if k != required}), (required, "Field required")),
        case("null-required", js({**valid, required: None}), (required,)),
        case("too-deep", DEEP, ("body",)),
        case("oversized", OVERSIZED, ("exceeds 262144 bytes",), status=413),
    ]


CONFIG_CASES = [
    Bad("config:empty-body", "POST", "/v1/config", b"", 400, INVALID, ("non-empty JSON object",)),
    Bad("config:not-json", "POST", "/v1/config", b"{scan: 1", 400, INVALID, ("not JSON",)),
    Bad("config:not-utf8", "POST", "/v1/config", b"\xff{}", 400, INVALID, ("not JSON",)),
    Bad(
        "config:json-array",
        "POST",
        "/v1/config",
        js([{"scanNotActiveBrokerInterval": 4000}]),
        400,
        INVALID,
        ("JSON object",),
    ),
    Bad("config:empty-object", "POST", "/v1/config", b"{}", 400, INVALID, ("non-empty JSON object",)),
    Bad("config:unknown-key", "POST", "/v1/config", js({"bogusKey": 1}), 400, INVALID, ("bogusKey",)),
    Bad(
        "config:snake-case-key",
        "POST",
        "/v1/config",
        js({"scan_not_active_broker_interval": 4000}),
        400,
        INVALID,
        ("scan_not_active_broker_interval",),
    ),
    Bad(
        "config:wrong-type",
        "POST",
        "/v1/config",
        js({"scanNotActiveBrokerInterval": "often"}),
        400,
        INVALID,
        ("scanNotActiveBrokerInterval",),
    ),
    Bad(
        "config:out-of-range",
        "POST",
        "/v1/config",
        js({"electMasterMaxRetryCount": 0}),
        400,
        INVALID,
        ("electMasterMaxRetryCount",),
    ),
    Bad(
        "config:one-bad-of-two",
        "POST",
        "/v1/config",
        js({"scanNotActiveBrokerInterval": 4000, "scanInactiveMasterInterval": -5}),
        400,
        INVALID,
        ("scanInactiveMasterInterval",),
    ),
    Bad(
        "config:black-listed",
        "POST",
        "/v1/config",
        js({"configBlackList": ""}),
        403,
        ResponseCode.NO_PERMISSION,
        ("black list",),
    ),
    Bad("config:too-deep", "POST", "/v1/config", DEEP, 400, INVALID, ("not JSON",)),
    Bad("config:oversized", "POST", "/v1/config", OVERSIZED, 413, INVALID, ("exceeds 262144 bytes",)),
]

QUERY_CASES = [
    Bad("replica-info:missing-brokerName", "GET", "/v1/replica-info", None, 400, INVALID, ("brokerName",)),
    Bad("replica-info:empty-brokerName", "GET", "/v1/replica-info?brokerName=", None, 400, INVALID, ("brokerName",)),
    Bad("replica-info:other-param", "GET", "/v1/replica-info?broker=set-a", None, 400, INVALID, ("brokerName",)),
    Bad("events:after-negative", "GET", "/v1/events?after=-1", None, 400, INVALID, ("after", "-1")),
    Bad("events:after-not-int", "GET", "/v1/events?after=abc", None, 400, INVALID, ("after", "abc")),
    Bad("events:after-float", "GET", "/v1/events?after=1.5", None, 400, INVALID, ("after", "1.5")),
    Bad("events:after-huge", "GET", f"/v1/events?after={2**70}", None, 400, INVALID, ("after",)),
    Bad("events:waitSeconds-not-int", "GET", "/v1/events?waitSeconds=abc", None, 400, INVALID, ("waitSeconds", "abc")),
    Bad("events:waitSeconds-too-long", "GET", "/v1/events?waitSeconds=61", None, 400, INVALID, ("waitSeconds", "61")),
    Bad("events:waitSeconds-negative", "GET", "/v1/events?waitSeconds=-1", None, 400, INVALID, ("waitSeconds", "-1")),
    Bad("events:waitSeconds-empty", "GET", "/v1/events?waitSeconds=", None, 400, INVALID, ("waitSeconds",)),
    Bad("heartbeat-stream:not-a-websocket", "GET", "/v1/broker/heartbeat-stream", None, 400, INVALID, ("WebSocket",)),
]

ROUTES: dict[str, tuple[str, ...]] = {
    "/v1/broker/next-id": ("POST",),
    "/v1/broker/apply-id": ("POST",),
    "/v1/broker/register": ("POST",),
    "/v1/broker/heartbeat": ("POST",),
    "/v1/broker/heartbeat-stream": ("GET",),
    "/v1/elect-master": ("POST",),
    "/v1/alter-sync-state-set": ("POST",),
    "/v1/replica-info": ("GET",),
    "/v1/sync-state-data": ("POST",),
    "/v1/metadata": ("GET",),
    "/v1/clean-broker-data": ("POST",),
    "/v1/config": ("GET", "POST"),
    "/v1/events": ("GET",),
    "/v1/status": ("GET",),
    "/v1/state": ("GET",),
    "/v1/openapi.json": ("GET",),
    "/healthz": ("GET",),
    "/readyz": ("GET",),
    "/metrics": ("GET",),
}


def method_cases() -> list[Bad]:
    cases = []
    for path, allowed in ROUTES.items():
        wrong = "GET" if "GET" not in allowed else "PUT" if "POST" in allowed else "POST"
        body = js(VALID[path]) if path in VALID else js({"scanNotActiveBrokerInterval": 4000})
        names = (f"{wrong} {path}", "Method Not Allowed", ",".join(allowed))
        cases.append(Bad(f"{path}:{wrong}", wrong, path, body, 405, NOT_SUPPORTED, names))
        cases.append(Bad(f"{path}:DELETE", "DELETE", path, None, 405, NOT_SUPPORTED, ("DELETE", "Method Not Allowed")))
    return cases


PATH_CASES = [
    Bad("unknown-path", "GET", "/v1/brokers", None, 404, NOT_SUPPORTED, ("/v1/brokers", "Not Found")),
    Bad(
        "unknown-version",
        "POST",
        "/v2/broker/next-id",
        js(VALID["/v1/broker/next-id"]),
        404,
        NOT_SUPPORTED,
        ("/v2/broker/next-id", "Not Found"),
    ),
    Bad("trailing-slash", "GET", "/v1/state/", None, 404, NOT_SUPPORTED, ("/v1/state/",)),
    Bad("root", "GET", "/", None, 404, NOT_SUPPORTED, ("Not Found",)),
]

CASES = [*(c for path in VALID for c in body_cases(path)), *CONFIG_CASES, *QUERY_CASES, *method_cases(), *PATH_CASES]

GUARDED = [
    ("elect-master", "/v1/elect-master", VALID["/v1/elect-master"]),
    ("clean-broker-data", "/v1/clean-broker-data", VALID["/v1/clean-broker-data"]),
    ("update-config", "/v1/config", {"scanNotActiveBrokerInterval": 4000}),
]
NO_TOKEN: dict[str, dict[str, str]] = {
    "missing": {},
    "wrong": {"Authorization": "Bearer not-the-token"},
    "prefix-of-token": {"Authorization": f"Bearer {ADMIN_TOKEN[:-1]}"},
    "empty-bearer": {"Authorization": "Bearer "},
    "no-scheme": {"Authorization": ADMIN_TOKEN},
    "basic-scheme": {"Authorization": f"Basic {ADMIN_TOKEN}"},
    "lowercase-scheme": {"Authorization": f"bearer {ADMIN_TOKEN}"},
}


# ---- the group ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerGroup]:
    with running_group(tmp_path_factory.mktemp("bad-input") / "controllers", admin_token=ADMIN_TOKEN) as group:
        asyncio.run(seed(group))
        yield group


async def seed(group: ControllerGroup) -> None:
    """`set-a`: brokers 1 and 2 registered, 1 elected master (first election: no liveness needed)."""
    async with group.client() as client:
        await register_replicas(client, SET, (1, 2), heartbeat=False)
        elected = await client.elect_master(
            protocol.ElectMasterRequest(cluster_name=CLUSTER, broker_name=SET, broker_id=1)
        )
        assert elected.master_broker_id == 1


async def leader_and_follower(group: ControllerGroup) -> list[str]:
    leader = await group.leader()
    return [group.nodes[leader].api, group.nodes[(leader + 1) % len(group.nodes)].api]


async def agreed_state(http: aiohttp.ClientSession, group: ControllerGroup) -> dict[str, Any]:
    """The replicated state and its version, once every node agrees on them, and each node's
    node-local config and count of live brokers."""
    seen: dict[str, Any] = {}

    async def agree() -> bool:
        replicated = []
        for node in group.nodes:
            async with http.get(f"http://{node.api}/v1/state") as r:
                state = await r.json()
            async with http.get(f"http://{node.api}/v1/config") as r:
                seen[f"{node.node_id} config"] = await r.json()
            async with http.get(f"http://{node.api}/v1/status") as r:
                seen[f"{node.node_id} activeBrokers"] = (await r.json())["activeBrokers"]
            replicated.append({"version": state["version"], "state": state["state"]})
        seen["replicated"] = replicated[0]
        return all(view == replicated[0] for view in replicated)

    await eventually("all controller nodes agree on the replicated state", agree)
    assert seen["replicated"]["state"]["syncStateInfo"][SET]["masterBrokerId"] == 1
    return seen


async def send(http: aiohttp.ClientSession, address: str, bad: Bad) -> tuple[int, dict[str, Any]]:
    async with http.request(bad.method, f"http://{address}{bad.path}", data=bad.body, headers=dict(bad.headers)) as r:
        assert r.content_type == "application/json", await r.text()
        return r.status, await r.json()


def assert_refused(status: int, body: dict[str, Any], bad: Bad) -> None:
    assert status == bad.status, body
    assert body["code"] == int(bad.code), body
    assert body["name"] == bad.code.name, body
    for name in bad.names:
        assert name in body["remark"], f"remark does not name {name!r}: {body['remark']!r}"


# ---- tests -------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", CASES, ids=[c.id for c in CASES])
async def test_bad_input_is_refused_and_changes_nothing(group: ControllerGroup, bad: Bad) -> None:
    async with aiohttp.ClientSession() as http:
        before = await agreed_state(http, group)
        for address in await leader_and_follower(group):
            status, body = await send(http, address, bad)
            assert_refused(status, body, bad)
        assert await agreed_state(http, group) == before


@pytest.mark.parametrize("header", NO_TOKEN.values(), ids=NO_TOKEN.keys())
@pytest.mark.parametrize(("path", "body"), [(p, b) for _, p, b in GUARDED], ids=[n for n, _, _ in GUARDED])
async def test_admin_calls_without_the_token_are_refused(
    group: ControllerGroup, path: str, body: dict[str, Any], header: dict[str, str]
) -> None:
    bad = Bad(
        "no-token", "POST", path, js(body), 401, ResponseCode.NO_PERMISSION, ("admin token",), tuple(header.items())
    )
    async with aiohttp.ClientSession() as http:
        before = await agreed_state(http, group)
        for address in await leader_and_follower(group):
            status, answer = await send(http, address, bad)
            assert_refused(status, answer, bad)
        assert await agreed_state(http, group) == before


async def test_elect_master_needs_the_token_only_when_designating(group: ControllerGroup) -> None:
    undesignated = {**VALID["/v1/elect-master"], "designateElect": False}
    async with aiohttp.ClientSession() as http:
        before = await agreed_state(http, group)
        for address in await leader_and_follower(group):
            async with http.post(f"http://{address}/v1/elect-master", data=js(undesignated)) as r:
                answer = await r.json()
            # broker 2 asks to become master while broker 1 is master: refused on the merits, not for the token
            assert (r.status, answer["name"]) == (409, "CONTROLLER_ELECT_MASTER_FAILED"), answer
        assert await agreed_state(http, group) == before


async def test_designated_election_needs_a_broker_id(group: ControllerGroup) -> None:
    """RocketMQ reads brokerId -1 as "controller-triggered": with designateElect it demoted the live master."""
    for broker_id in (None, -1, 0):
        body = {"brokerName": SET, "designateElect": True} | ({} if broker_id is None else {"brokerId": broker_id})
        bad = Bad("designate-without-id", "POST", "/v1/elect-master", js(body), 400, INVALID, ("brokerId",))
        async with aiohttp.ClientSession() as http:
            before = await agreed_state(http, group)
            for address in await leader_and_follower(group):
                status, answer = await send(http, address, bad)
                assert_refused(status, answer, bad)
            assert await agreed_state(http, group) == before


MODELS: dict[str, type[protocol.Message]] = {
    "/v1/broker/next-id": protocol.NextIdRequest,
    "/v1/broker/apply-id": protocol.ApplyIdRequest,
    "/v1/broker/register": protocol.RegisterRequest,
    "/v1/broker/heartbeat": protocol.HeartbeatRequest,
    "/v1/elect-master": protocol.ElectMasterRequest,
    "/v1/alter-sync-state-set": protocol.AlterSyncStateSetRequest,
    "/v1/sync-state-data": protocol.SyncStateDataRequest,
    "/v1/clean-broker-data": protocol.CleanBrokerDataRequest,
}


async def test_the_valid_bodies_are_valid(group: ControllerGroup) -> None:
    """The control for the cases above: each bad body is a valid one with one thing wrong."""
    for path, model in MODELS.items():
        wire = model.model_validate_json(js(VALID[path]), by_alias=True, by_name=False).wire()
        assert {key: wire[key] for key in VALID[path]} == VALID[path]
    answers = {  # sent for real where that changes nothing: past validation, refused on the merits if at all
        "/v1/broker/next-id": (200, None),
        "/v1/elect-master": (409, "CONTROLLER_ELECT_MASTER_FAILED"),  # broker 2 is not alive
        "/v1/alter-sync-state-set": (409, "CONTROLLER_BROKER_NOT_ALIVE"),  # replica 2 is not alive
        "/v1/sync-state-data": (200, None),
    }
    async with aiohttp.ClientSession() as http:
        before = await agreed_state(http, group)
        for address in await leader_and_follower(group):
            for path, (status, name) in answers.items():
                async with http.post(f"http://{address}{path}", data=js(VALID[path]), headers=TOKEN) as r:
                    answer = await r.json()
                assert (r.status, answer.get("name")) == (status, name), (path, answer)
        assert await agreed_state(http, group) == before
