"""Broker integration tier: 3 controllers plus one broker set of 3 replicas, all real processes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from brokergroup.broker.client import MasterFinder, Producer
from brokergroup.controller.client import ControllerClient
from brokergroup.local import profiles
from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import ControllerGroup
from tests.integration.conftest import eventually

# The `fast` timing profile and the `sync` replication mode (brokergroup.local.profiles).
FAST = [*profiles.FAST.broker_args(), "--log-level", "INFO"]
SYNC = profiles.SYNC.broker_args()


def make_set(tmp: Path, controllers: ControllerGroup, extra: list[str], name: str = "bs") -> BrokerSet:
    return BrokerSet(
        tmp / "brokers",
        controllers=controllers.api_addresses,
        broker_name=name,
        cluster_name="it",
        extra_args=FAST + extra,
    )


@contextlib.contextmanager
def running_set(tmp: Path, controllers: ControllerGroup, extra: list[str]) -> Iterator[BrokerSet]:
    """`make_set`, started, with a master elected; stopped on exit."""
    brokers = make_set(tmp, controllers, extra)
    brokers.start_all()
    try:
        asyncio.run(brokers.master())
        yield brokers
    finally:
        brokers.stop_all()


@pytest.fixture
def sync_set(controller_group: ControllerGroup, tmp_path: Path) -> Iterator[BrokerSet]:
    with running_set(tmp_path, controller_group, SYNC) as brokers:
        yield brokers


@pytest.fixture
def async_set(controller_group: ControllerGroup, tmp_path: Path) -> Iterator[BrokerSet]:
    with running_set(tmp_path, controller_group, []) as brokers:
        yield brokers


async def sees_in_sync(brokers: BrokerSet, index: int, session: aiohttp.ClientSession, count: int) -> bool:
    """True once replica `index` (the master) answers and counts `count` replicas in its sync-state-set."""
    status = await brokers.status(index, session)
    return status is not None and status["replication"]["inSyncReplicasNums"] == count


async def same_log(brokers: BrokerSet, session: aiohttp.ClientSession) -> bool:
    """True once every replica answers and all hold the same store maxOffset."""
    statuses = [await brokers.status(i, session) for i in range(len(brokers.nodes))]
    return all(statuses) and len({s["store"]["maxOffset"] for s in statuses if s}) == 1


async def full_set(controller: ControllerClient) -> bool:
    """True once all 3 replicas of set `bs` are in its sync-state-set."""
    return len((await controller.replica_info("bs")).sync_state_set) == 3


async def unclean_allowed_with_common_prefix(
    controller: ControllerClient, session: aiohttp.ClientSession, count: int = 20
) -> Producer:
    """The divergence tests' start: a full sync-state-set, unclean elections allowed on every controller
    node, and `count` messages `common<i>` on topic `t`; returns the producer."""
    await eventually("all replicas in the sync-state-set", lambda: full_set(controller))
    for address in controller.addresses:
        await controller.update_config({"enableElectUncleanMaster": True}, address=address)
    producer = Producer(MasterFinder(broker_name="bs", controller=controller), session=session, deadline_s=10)
    for i in range(count):
        await producer.send("t", [f"common{i}".encode()])
    return producer


async def get(session: aiohttp.ClientSession, api: str, path: str, **params: Any) -> dict[str, Any]:
    """GET a broker API path with query parameters; it must answer 200."""
    async with session.get(f"http://{api}{path}", params={k: str(v) for k, v in params.items()}) as r:
        assert r.status == 200, await r.text()
        answer: dict[str, Any] = await r.json()
        return answer
