"""The controller's credentials in `X-Brokergroup-Token` (issue 16 item 2): the Kubernetes API server's service
proxy takes `Authorization` as the caller's own credential and drops it, so an operator outside the cluster sends
the admin token in this header. Real controller processes: the header alone is accepted for broker calls and for
a designated election (also through a follower, which forwards it to the leader); `Authorization: Bearer` keeps
working; the header is never weaker: when present it is the credential, so a wrong one is refused even next to a
right bearer token, and a broker token is no admin token in either place. Nothing refused changes anything."""

from __future__ import annotations

from typing import Any

import aiohttp

from brokergroup.controller import protocol
from brokergroup.controller.client import ControllerClient
from brokergroup.local.controllers import ControllerGroup
from tests.integration.conftest import ADMIN_TOKEN
from tests.integration.controller.conftest import BROKER_TOKEN
from tests.integration.controller.scenario import CLUSTER, LONG_MS, elect_and_grow, register_replicas

SET = "hdr"
HEADER = protocol.TOKEN_HEADER


async def post(
    session: aiohttp.ClientSession, address: str, path: str, body: Any, headers: dict[str, str]
) -> tuple[int, dict[str, Any]]:
    async with session.post(f"http://{address}{path}", json=body, headers=headers) as r:
        return r.status, await r.json()


async def master_of(group: ControllerGroup) -> tuple[int | None, int]:
    async with ControllerClient(group.api_addresses) as client:
        info = await client.replica_info(SET)
    return info.master_broker_id, info.master_epoch


async def follower(group: ControllerGroup) -> str:
    async with ControllerClient(group.api_addresses) as client:
        leader = await client.find_leader()
    return next(a for a in group.api_addresses if a != leader)


async def test_token_header_alone_is_accepted_and_never_weaker_than_bearer(guarded_group: ControllerGroup) -> None:
    group = guarded_group
    # Broker calls (register, elect, alter-sync-state-set) with the broker token in the header only.
    async with ControllerClient(group.api_addresses, token=BROKER_TOKEN, bearer=False) as broker:
        assert broker._headers == {HEADER: BROKER_TOKEN}  # no Authorization at all
        await register_replicas(broker, SET, (1, 2, 3))
        await elect_and_grow(broker, SET, members=(1, 2, 3))
    assert (await master_of(group))[0] == 1
    before = await master_of(group)

    elect_2 = protocol.ElectMasterRequest(broker_name=SET, broker_id=2, designate_elect=True).wire()
    elect_2["clusterName"] = CLUSTER
    other = await follower(group)
    refusals = [
        ({HEADER: "not-the-token", "Authorization": f"Bearer {ADMIN_TOKEN}"}, 401),  # the header wins
        ({HEADER: "", "Authorization": f"Bearer {ADMIN_TOKEN}"}, 401),  # an empty header is no fallback
        ({HEADER: BROKER_TOKEN}, 401),  # a broker token is not the admin token
        ({"Authorization": f"Bearer {BROKER_TOKEN}"}, 401),
        ({}, 401),
    ]
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        for headers, status in refusals:
            for node in (group.api_addresses[0], other):
                got, body = await post(session, node, "/v1/elect-master", elect_2, headers)
                assert (got, body["name"]) == (status, "NO_PERMISSION"), (headers, body)
                assert HEADER in body["remark"] and "Authorization: Bearer" in body["remark"], body
        # Broker calls: a wrong header next to a right bearer token is refused too (403: a wrong token).
        heartbeat = protocol.HeartbeatRequest(
            cluster_name=CLUSTER,
            broker_name=SET,
            broker_addr="127.0.0.1:40003",
            broker_id=3,
            epoch=before[1],
            max_offset=2**62,
            heartbeat_timeout_mills=LONG_MS,
        ).wire()
        got, body = await post(
            session,
            group.api_addresses[0],
            "/v1/broker/heartbeat",
            heartbeat,
            {HEADER: "not-the-token", "Authorization": f"Bearer {BROKER_TOKEN}"},
        )
        assert (got, body["name"]) == (403, "NO_PERMISSION"), body
        assert await master_of(group) == before, "a refused request changed the controllers' state"

    # The admin token in the header only, sent to a follower: forwarded to the leader with the header, elected.
    # (A proxy's own credential in Authorization, as the API server's would be, changes nothing.)
    async with ControllerClient(
        [other], token=ADMIN_TOKEN, headers={"Authorization": "Bearer a-kubernetes-token"}, bearer=False
    ) as admin:
        answer = await admin.elect_master(
            protocol.ElectMasterRequest(broker_name=SET, broker_id=2, designate_elect=True)
        )
    assert answer.master_broker_id == 2
    assert await master_of(group) == (2, before[1] + 1)

    # `Authorization: Bearer` alone still works (callers from before the header): the request is answered on its
    # merits (1 left the sync-state-set with the election of 2, so it cannot be elected), not refused.
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        elect_1 = {**elect_2, "brokerId": 1}
        got, body = await post(session, other, "/v1/elect-master", elect_1, {"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert (got, body["name"]) == (409, "CONTROLLER_ELECT_MASTER_FAILED"), body
