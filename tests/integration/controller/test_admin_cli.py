"""`brokergroup admin`: mqadmin's controller commands against a real group, as a user runs them."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

from brokergroup.local.controllers import ControllerGroup
from tests.integration.conftest import ADMIN_TOKEN
from tests.integration.controller.scenario import CLUSTER, elect_and_grow, register_replicas


async def admin(*args: str, token: str | None = ADMIN_TOKEN) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "BG_ADMIN_TOKEN"}
    if token:
        env["BG_ADMIN_TOKEN"] = token
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "brokergroup.cli", "admin", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


async def test_admin_commands(controller_group: ControllerGroup) -> None:
    group = controller_group
    leader = await group.leader()
    addrs = ";".join(group.api_addresses)
    async with group.client() as client:
        await register_replicas(client, "adm")
        await elect_and_grow(client, "adm")

    meta = await admin("get-controller-metadata", "-a", group.nodes[0].api, "--json")
    assert meta.returncode == 0, meta.stderr
    assert json.loads(meta.stdout)["controllerLeaderAddress"] == group.nodes[leader].api

    sss = await admin("get-sync-state-set", "-a", addrs, "-b", "adm", "--json")
    info = json.loads(sss.stdout)["replicasInfoTable"]["adm"]
    assert info["masterBrokerId"] == 1
    assert [r["brokerId"] for r in info["inSyncReplicas"]] == [1, 2, 3]
    table = await admin("get-sync-state-set", "-a", addrs, "-c", CLUSTER)
    assert table.returncode == 0 and "masterEpoch 1" in table.stdout

    elected = await admin("elect-master", "-a", addrs, "-b", "2", "-bn", "adm", "-c", CLUSTER, "--json")
    assert elected.returncode == 0, elected.stderr
    assert json.loads(elected.stdout)["masterBrokerId"] == 2
    again = await admin("elect-master", "-a", addrs, "-b", "2", "-bn", "adm", "-c", CLUSTER)
    assert again.returncode == 1
    assert "CONTROLLER_MASTER_STILL_EXIST (2011)" in again.stderr
    no_token = await admin("elect-master", "-a", addrs, "-b", "1", "-bn", "adm", "-c", CLUSTER, token=None)
    assert no_token.returncode == 1 and "NO_PERMISSION (16)" in no_token.stderr

    cfg = await admin("update-controller-config", "-a", addrs, "-k", "enableElectUncleanMaster", "-v", "true", "--json")
    assert cfg.returncode == 0, cfg.stderr
    assert all(c["enableElectUncleanMaster"] is True for c in json.loads(cfg.stdout).values())
    shown = await admin("get-controller-config", "-a", group.nodes[1].api, "--json")
    assert json.loads(shown.stdout)[group.nodes[1].api]["enableElectUncleanMaster"] is True
    black = await admin("update-controller-config", "-a", addrs, "-k", "configBlackList", "-v", "x")
    assert black.returncode == 1 and "Can not update config in black list." in black.stderr
    unknown = await admin("update-controller-config", "-a", addrs, "-k", "noSuchKey", "-v", "1")
    assert unknown.returncode == 1 and "noSuchKey" in unknown.stderr

    alive = await admin("clean-broker-metadata", "-a", addrs, "-bn", "adm", "-b", "3", "-c", CLUSTER)
    assert alive.returncode == 1 and "is still alive" in alive.stderr
    bad_ids = await admin("clean-broker-metadata", "-a", addrs, "-bn", "adm", "-b", "x;y", "-c", CLUSTER)
    assert bad_ids.returncode == 1 and "brokerControllerIdsToClean" in bad_ids.stderr
    wiped = await admin("clean-broker-metadata", "-a", addrs, "-bn", "adm", "-l")
    assert wiped.returncode == 0, wiped.stderr
    gone = await admin("get-sync-state-set", "-a", addrs, "-b", "adm", "--json")
    assert json.loads(gone.stdout)["replicasInfoTable"] == {}


async def test_admin_bad_flags(controller_group: ControllerGroup) -> None:
    missing = await admin("elect-master", "-a", controller_group.nodes[0].api, "-bn", "x", "-c", CLUSTER)
    assert missing.returncode == 2 and "-b/--broker-id" in missing.stderr
    not_int = await admin("elect-master", "-a", controller_group.nodes[0].api, "-b", "one", "-bn", "x", "-c", CLUSTER)
    assert not_int.returncode == 2 and "invalid int value" in not_int.stderr
    no_cluster = await admin("clean-broker-metadata", "-a", controller_group.nodes[0].api, "-bn", "x")
    assert no_cluster.returncode == 2 and "-c/--cluster-name is required" in no_cluster.stderr
    unreachable = await admin("get-controller-metadata", "-a", "127.0.0.1:1")
    assert unreachable.returncode == 1 and "no controller answered" in unreachable.stderr
    empty = await admin("get-controller-metadata", "-a", ";")
    assert empty.returncode == 2
