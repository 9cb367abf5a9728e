"""Put outcomes the settings promise: the after-append in-sync check (issue 22 item 2) and the
refusal of counted acks without all-ack (item 5)."""

from __future__ import annotations

import asyncio
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from ha_fakes import FakeLog
from pydantic import ValidationError

from brokergroup.broker.ha.service import HAService
from brokergroup.broker.settings import BrokerSettings, HASettings
from brokergroup.broker.store.types import PutStatus

SYNC = HASettings(port=0, slave_timeout_ms=30_000, all_ack_in_sync_state_set=True, min_in_sync_replicas=2)


async def test_a_put_whose_set_shrinks_below_min_in_sync_while_waiting_is_not_put_ok() -> None:
    """Admitted with {9, 10} in sync (min 2); the controller then commits the shrink to {9}: the
    put is acked by the master alone, so it must not answer PUT_OK (Kafka: NOT_ENOUGH_REPLICAS_AFTER_APPEND)."""
    log = FakeLog()
    ha = HAService(log, broker_id=9, settings=SYNC, on_sync_state_set_change=lambda _: None)
    try:
        await ha.start()
        await ha.become_master(epoch=1, sync_state_set=frozenset({9, 10}), sync_state_set_epoch=2)
        assert ha.check_put() is None  # admitted: 2 in sync
        put = asyncio.create_task(ha.wait_replicated(log.put_n(1)))
        await asyncio.sleep(0)  # a scheduling point, not a timing wait: the put starts waiting for 10
        assert not put.done()
        ha.set_sync_state_set(frozenset({9}), 3)
        assert await asyncio.wait_for(put, 10) is PutStatus.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        assert ha.check_put() is PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH  # and the next put is refused before writing
    finally:
        await ha.stop()


async def test_a_put_acked_by_enough_replicas_is_put_ok() -> None:
    log = FakeLog()
    ha = HAService(log, broker_id=9, settings=SYNC, on_sync_state_set_change=lambda _: None)
    try:
        await ha.start()
        await ha.become_master(epoch=1, sync_state_set=frozenset({9, 10}), sync_state_set_epoch=2)
        put = asyncio.create_task(ha.wait_replicated(log.put_n(1)))
        await asyncio.sleep(0)
        ha.set_sync_state_set(frozenset({9, 11}), 3)  # a swap: still 2 in sync
        ha.set_sync_state_set(frozenset({9}), 2)  # an older epoch: ignored
        assert not put.done()
        put.cancel()
    finally:
        await ha.stop()


COUNTED_WITHOUT_ALL_ACK = "ha.in_sync_replicas (2) needs ha.all_ack_in_sync_state_set"


@pytest.mark.parametrize("in_sync", [2, 3])
def test_counted_acks_without_all_ack_are_refused(in_sync: int) -> None:
    with pytest.raises(ValidationError, match=r"ha.in_sync_replicas \(\d\) needs ha.all_ack_in_sync_state_set"):
        BrokerSettings(ha=HASettings(in_sync_replicas=in_sync, min_in_sync_replicas=2))


def test_the_modes_the_operator_produces_are_accepted() -> None:
    sync = BrokerSettings(ha=HASettings(all_ack_in_sync_state_set=True, min_in_sync_replicas=2))
    assert sync.ha.all_ack_in_sync_state_set
    assert BrokerSettings(ha=HASettings(all_ack_in_sync_state_set=True, in_sync_replicas=2)).ha.in_sync_replicas == 2
    assert BrokerSettings(ha=HASettings(in_sync_replicas=1, min_in_sync_replicas=1)).ha.in_sync_replicas == 1


def test_the_broker_command_refuses_counted_acks_without_all_ack() -> None:
    """The command docs/broker.md shows, run as written, answers as it says."""
    docs = (Path(__file__).parents[3] / "docs" / "broker.md").read_text(encoding="utf-8")
    command = next(line for line in docs.splitlines() if line.startswith("$ brokergroup broker --in-sync-replicas"))
    argv = shlex.split(command.removeprefix("$ "))
    assert argv[:2] == ["brokergroup", "broker"]
    done = subprocess.run(
        [sys.executable, "-m", "brokergroup.cli", *argv[1:]], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2, done.stderr
    assert COUNTED_WITHOUT_ALL_ACK in done.stderr
    assert "--all-ack" in done.stderr
    shown = docs[docs.index(command) :].splitlines()[2]
    assert shown.removesuffix("(...)").strip() in done.stderr
