"""Broker integration tier: 3 controllers plus one broker set of 3 replicas, all real processes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import ControllerGroup

FAST = [
    "--set", "controller.heartbeat_interval_ms=200",
    "--set", "controller.heartbeat_timeout_ms=5000",
    "--set", "controller.write_lease_ms=1500",
    "--set", "controller.sync_broker_metadata_period_ms=500",
    "--set", "controller.check_sync_state_set_period_ms=300",
    "--set", "ha.max_time_slave_not_catchup_ms=2000",
    "--set", "ha.send_heartbeat_interval_ms=300",
    "--set", "ha.housekeeping_interval_ms=3000",
    "--set", "ha.slave_timeout_ms=2000",
    "--set", "store.segment_size=1048576",
    "--log-level", "INFO",
]  # fmt: skip
SYNC = ["--all-ack", "--min-in-sync-replicas", "2"]


def make_set(tmp: Path, controllers: ControllerGroup, extra: list[str], name: str = "bs") -> BrokerSet:
    return BrokerSet(
        tmp / "brokers",
        controllers=controllers.api_addresses,
        broker_name=name,
        cluster_name="it",
        extra_args=FAST + extra,
    )


@pytest.fixture
def sync_set(controller_group: ControllerGroup, tmp_path: Path) -> Iterator[BrokerSet]:
    brokers = make_set(tmp_path, controller_group, SYNC)
    brokers.start_all()
    try:
        asyncio.run(brokers.master())
        yield brokers
    finally:
        brokers.stop_all()


@pytest.fixture
def async_set(controller_group: ControllerGroup, tmp_path: Path) -> Iterator[BrokerSet]:
    brokers = make_set(tmp_path, controller_group, [])
    brokers.start_all()
    try:
        asyncio.run(brokers.master())
        yield brokers
    finally:
        brokers.stop_all()
