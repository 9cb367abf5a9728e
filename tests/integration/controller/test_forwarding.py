"""Any node accepts any request: followers forward leader-only calls to the leader."""

from __future__ import annotations

import time

import aiohttp

from brokergroup.controller import protocol
from brokergroup.controller.codes import ControllerError, ResponseCode
from brokergroup.local.controllers import ControllerGroup
from tests.integration.conftest import eventually
from tests.integration.controller.scenario import CLUSTER


async def test_follower_forwards_to_leader(controller_group: ControllerGroup) -> None:
    group = controller_group
    leader = await group.leader()
    follower = group.nodes[(leader + 1) % 3]
    async with group.client() as leader_client:
        meta = await leader_client.metadata(address=follower.api)
        assert meta.is_leader is False
        assert meta.controller_leader_address == group.nodes[leader].api
    async with aiohttp.ClientSession() as http:
        body = {"clusterName": CLUSTER, "brokerName": "fwd", "appliedBrokerId": 1, "registerCheckCode": "127.0.0.1:1;1"}
        async with http.post(f"http://{follower.api}/v1/broker/apply-id", json=body) as r:
            assert r.status == 200, await r.text()
            assert await r.json() == {"clusterName": CLUSTER, "brokerName": "fwd"}
        async with http.post(
            f"http://{follower.api}/v1/broker/next-id", json={"clusterName": CLUSTER, "brokerName": "fwd"}
        ) as r:
            assert (await r.json())["nextBrokerId"] == 2
        # a request that was already forwarded once is not forwarded again
        async with http.post(
            f"http://{follower.api}/v1/broker/next-id",
            headers={"X-Brokergroup-Forwarded": "x"},
            json={"clusterName": CLUSTER, "brokerName": "fwd"},
        ) as r:
            assert r.status == 503
            assert (await r.json())["code"] == int(ResponseCode.CONTROLLER_NOT_LEADER)


async def test_not_leader_only_when_no_leader_known(controller_group: ControllerGroup) -> None:
    group = controller_group
    leader = await group.leader()
    survivor = (leader + 1) % 3
    for i in range(3):
        if i != survivor:
            group.kill(i)
    async with group.client() as client:

        async def refused() -> bool:
            try:
                await client.call(
                    "POST",
                    "/v1/broker/next-id",
                    body={"clusterName": CLUSTER, "brokerName": "x"},
                    address=group.nodes[survivor].api,
                )
            except ControllerError as err:
                return err.code == ResponseCode.CONTROLLER_NOT_LEADER
            return False

        await eventually("a lone node answers CONTROLLER_NOT_LEADER", refused)
        # node-local requests still work without a leader
        meta = await client.metadata(address=group.nodes[survivor].api)
        assert meta.is_leader is False
        await client.heartbeat(
            protocol.HeartbeatRequest(cluster_name=CLUSTER, broker_name="x", broker_addr="127.0.0.1:1", broker_id=1),
            address=group.nodes[survivor].api,
        )


async def test_follower_waits_out_an_election(controller_group: ControllerGroup) -> None:
    """A leader-only request sent to a follower right after the leader died is answered by the next
    leader (the follower waits up to api.leader_wait), not refused with CONTROLLER_NOT_LEADER."""
    group = controller_group
    leader = await group.leader()
    follower = group.nodes[(leader + 1) % 3]
    group.kill(leader)
    async with aiohttp.ClientSession() as http:
        started = time.monotonic()
        body = {"clusterName": CLUSTER, "brokerName": "after-kill"}
        async with http.post(f"http://{follower.api}/v1/broker/next-id", json=body) as r:
            assert r.status == 200, await r.text()
            assert (await r.json())["nextBrokerId"] == 1
        waited = time.monotonic() - started
    assert waited < 6.0, f"answered after {waited:.2f} s"
    async with group.client() as client:  # the follower knows the next leader, not the dead one
        meta = await client.metadata(address=follower.api)
    assert meta.controller_leader_address not in (None, group.nodes[leader].api), meta
