"""Controller addresses as a DNS name (`controller.dns_lookup`, RocketMQ fetchControllerAddrByDnsLookup),
with real controllers and brokers: the name's answer changes while the brokers run, and they follow it.

Nothing is mocked: each broker runs in its own mount namespace where a test-owned file is bind-mounted
over /etc/hosts, so the broker's ordinary system resolver (getaddrinfo, "hosts: files dns") answers from
it; rewriting the file in place changes the answer, as a DNS record change would. The controllers listen
on three loopback addresses with the same port, like the pods behind a headless Service."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from brokergroup.broker.client import MasterFinder, Producer
from brokergroup.controller.client import ControllerClient
from brokergroup.local import profiles
from brokergroup.local.brokers import BrokerProcess, BrokerSet
from brokergroup.local.controllers import API_PORT, ControllerGroup, settled
from tests.integration.broker.conftest import FAST
from tests.integration.conftest import ADMIN_TOKEN, eventually
from tests.needs import missing

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

NAME = "controllers.dns-test.invalid"
IPS = ["127.23.0.11", "127.23.0.12", "127.23.0.13"]


class HostsFileBrokers(BrokerSet):
    """Brokers that resolve names from `hosts` (bind-mounted over /etc/hosts in a private mount namespace)."""

    def __init__(self, hosts: Path, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hosts = hosts

    def command(self, node: BrokerProcess) -> list[str]:
        mount = 'mount --bind "$0" /etc/hosts && exec "$@"'
        return [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            mount,
            str(self.hosts),
            *super().command(node),
        ]


def answer(hosts: Path, *ips: str) -> None:
    """The name now resolves to `ips` (none: it does not resolve). Written in place: the mount pins the inode."""
    with hosts.open("w", encoding="utf-8") as f:
        f.write("127.0.0.1 localhost\n" + "".join(f"{ip} {NAME}\n" for ip in ips))


async def active(group: ControllerGroup, client: ControllerClient) -> list[int | None]:
    """Each controller node's count of brokers it hears heartbeats from (None: the node is down)."""
    return [int((await client.status(address=n.api))["activeBrokers"]) if n.running else None for n in group.nodes]


async def test_brokers_follow_the_controller_name_as_its_answer_changes(tmp_path: Path) -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("mount") is None:
        missing("root with unshare and mount is needed to give a broker its own /etc/hosts")
    hosts = tmp_path / "hosts"
    answer(hosts, IPS[0], IPS[1])
    group = ControllerGroup(
        tmp_path / "controllers",
        admin_token=ADMIN_TOKEN,
        hosts=IPS,
        extra_args=["--log-level", "INFO", *profiles.FAST.controller_args()],
    )
    brokers = HostsFileBrokers(
        hosts,
        tmp_path / "brokers",
        controllers=[f"{NAME}:{API_PORT}"],
        broker_name="bs",
        cluster_name="it",
        replicas=2,
        extra_args=[*FAST, "--set", "controller.dns_lookup=true", "--set", "controller.dns_lookup_interval_ms=300"],
    )
    group.start(0)  # node 2 starts later, as a pod whose address the name does not list yet
    group.start(1)
    try:
        await settled(group)
        brokers.start_all()
        await brokers.master(timeout=60)
        async with group.client(timeout=5.0) as client, aiohttp.ClientSession() as session:

            async def hears(expected: list[int | None]) -> bool:
                return await active(group, client) == expected

            await eventually("nodes 0 and 1 hear both brokers", lambda: hears([2, 2, None]), timeout=30)
            group.start(2)
            await settled(group)
            await eventually("node 2 runs and hears no broker: the name leaves it out", lambda: hears([2, 2, 0]))

            answer(hosts, *IPS)
            await eventually("node 2 hears both brokers once the name includes it", lambda: hears([2, 2, 2]))

            # Node 0 goes away (its pod deleted) and leaves the name: the others elect and hear both brokers.
            group.kill(0)
            answer(hosts, IPS[1], IPS[2])
            await eventually(
                "the brokers drop node 0",
                lambda: _logged(brokers, f"controller addresses now {IPS[1]}:{API_PORT};{IPS[2]}:{API_PORT}"),
            )
            await eventually("nodes 1 and 2 hear both brokers", lambda: hears([None, 2, 2]))

            answer(hosts)  # the name stops resolving: the brokers keep the last answer
            await eventually(
                "every broker warns that the name does not resolve",
                lambda: _logged(brokers, f"controller name {NAME} does not resolve"),
            )
            assert await active(group, client) == [None, 2, 2]

            # The group still works through the nodes the name gave: a write, then a failover.
            async with ControllerClient([n.api for n in group.nodes[1:]]) as controller:
                producer = Producer(MasterFinder(broker_name="bs", controller=controller), session=session)
                sent = await producer.send("t", [b"after the answer changed"])
                assert sent.status == "PUT_OK"

                async def both_in_sync() -> bool:
                    return len((await controller.replica_info("bs")).sync_state_set) == 2

                await eventually("both replicas in the sync-state-set", both_in_sync)
                old = await brokers.master()
                brokers.kill(old)
                new = await brokers.master(exclude={old}, timeout=60)
                assert new != old
    finally:
        brokers.stop_all()
        group.stop_all()


async def _logged(brokers: BrokerSet, text: str) -> bool:
    return all(text in n.log_path.read_text(encoding="utf-8", errors="replace") for n in brokers.nodes)
