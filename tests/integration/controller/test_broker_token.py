"""Requests that feed elections carry the group's broker token (issue 22, item 4).

Without it anyone who reaches a controller could forge a heartbeat (an inflated max offset wins
the election ranking) or an alter-sync-state-set (the epochs to forge it with are public on
replica-info) and make a lagging replica electable. Here real controller processes refuse both,
without a token (401) and with a wrong one (403), and nothing changes.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from brokergroup.controller import protocol
from brokergroup.controller.client import ControllerClient
from brokergroup.local.controllers import ControllerGroup
from tests.integration.controller.conftest import BROKER_TOKEN
from tests.integration.controller.scenario import CLUSTER, LONG_MS, elect_and_grow, register_replicas

SET = "tok"


async def post(
    session: aiohttp.ClientSession, address: str, path: str, body: Any, token: str | None
) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with session.post(f"http://{address}{path}", json=body, headers=headers) as r:
        return r.status, await r.json()


async def view(group: ControllerGroup) -> tuple[Any, Any]:
    """Replica-info and every replica's liveness, as the leader sees them (read-only, no token)."""
    async with ControllerClient(group.api_addresses) as client:
        info = (await client.replica_info(SET)).wire()
        data = (await client.sync_state_data([SET])).wire()["replicasInfoTable"][SET]
    alive = {r["brokerId"]: r["alive"] for r in data["inSyncReplicas"] + data["notInSyncReplicas"]}
    return info, alive


async def test_forged_heartbeat_and_alter_sync_state_set_are_refused(guarded_group: ControllerGroup) -> None:
    group = guarded_group
    async with ControllerClient(group.api_addresses, token=BROKER_TOKEN) as broker:
        await register_replicas(broker, SET, (1, 2))
        await register_replicas(broker, SET, (3,), heartbeat=False)  # 3 registered, silent: not electable
        await elect_and_grow(broker, SET, members=(1, 2))
    before = await view(group)
    info, alive = before
    assert (info["masterBrokerId"], sorted(info["syncStateSet"]), alive[3]) == (1, [1, 2], False)

    forged_heartbeat = protocol.HeartbeatRequest(
        cluster_name=CLUSTER,
        broker_name=SET,
        broker_addr="127.0.0.1:40003",
        broker_id=3,
        epoch=info["masterEpoch"],
        max_offset=2**62,  # would win any ranking
        heartbeat_timeout_mills=LONG_MS,
    ).wire()
    forged_expansion = protocol.AlterSyncStateSetRequest(
        broker_name=SET,
        master_broker_id=1,
        master_epoch=info["masterEpoch"],
        sync_state_set=[1, 2, 3],
        sync_state_set_epoch=info["syncStateSetEpoch"],
    ).wire()
    forged_election = {"clusterName": CLUSTER, "brokerName": SET, "brokerId": 3}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        for token, status in ((None, 401), ("not-the-token", 403)):
            for node in group.api_addresses:
                got, body = await post(session, node, "/v1/broker/heartbeat", forged_heartbeat, token)
                assert (got, body["name"]) == (status, "NO_PERMISSION"), body
                assert "broker token" in body["remark"]
            got, body = await post(session, group.api_addresses[0], "/v1/alter-sync-state-set", forged_expansion, token)
            assert (got, body["name"]) == (status, "NO_PERMISSION"), body
            got, body = await post(session, group.api_addresses[1], "/v1/elect-master", forged_election, token)
            assert (got, body["name"]) == (status, "NO_PERMISSION"), body
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await session.ws_connect(f"http://{group.api_addresses[2]}/v1/broker/heartbeat-stream", headers=headers)
            assert refused.value.status == status
        assert await view(group) == before, "a refused request changed the controllers' state"

        # The same route with the broker token works (the refusals above were the token's doing):
        shrink = {**forged_expansion, "syncStateSet": [1]}
        got, body = await post(session, group.api_addresses[0], "/v1/alter-sync-state-set", shrink, BROKER_TOKEN)
        assert got == 200, body
        assert body["syncStateSet"] == [1]
