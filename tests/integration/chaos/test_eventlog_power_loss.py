"""The controller event log across a power loss, on the power-loss file system (real FUSE).

The log is not fsynced per applied batch: records of Raft entries after the last snapshot are
written again when the journal is re-applied at start. What must never be lost is a record of an
entry a snapshot covers, since the journal forgets those entries: `EventLogWriter.sync` runs before
every snapshot (`Snapshots.serialize`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from brokergroup.chaos.powerfs import MountedPowerFs
from brokergroup.controller.eventlog import EventLogWriter
from tests.integration.chaos.powerfs_fixture import mounted

pytestmark = pytest.mark.integration
__all__ = ["mounted"]


def raft_record(index: int) -> dict[str, Any]:
    return {"source": "raft", "index": index, "eventId": f"e{index}", "type": "ElectMaster"}


def indexes_on_disk(folder: Path) -> list[int]:
    found = []
    for path in sorted(folder.glob("events-*.jsonl")):
        found += [json.loads(line)["index"] for line in path.read_text().splitlines()]
    return found


def test_synced_records_survive_a_power_loss_and_later_ones_are_written_again(mounted: MountedPowerFs) -> None:
    folder = mounted.mount / "m1" / "events"
    log = EventLogWriter(folder, node_id="n0", max_bytes=1 << 20)
    log.append([raft_record(1), raft_record(2)])
    log.sync()  # what a snapshot does first
    log.append([raft_record(3)])

    report = mounted.client.drop(["m1"])

    assert indexes_on_disk(folder) == [1, 2], report
    reopened = EventLogWriter(folder, node_id="n0", max_bytes=1 << 20)
    assert reopened.last_index == 2
    reopened.append([raft_record(2), raft_record(3)])  # the journal re-applied after the snapshot
    assert indexes_on_disk(folder) == [1, 2, 3]


def test_without_a_sync_a_new_log_file_is_lost_whole(mounted: MountedPowerFs) -> None:
    """The fault is real: what `sync` guards against happens without it (file and folder entry)."""
    folder = mounted.mount / "m1" / "events"
    log = EventLogWriter(folder, node_id="n0", max_bytes=1 << 20)
    log.append([raft_record(1)])

    mounted.client.drop(["m1"])

    assert folder.is_dir(), "the folder is made durably when the writer starts"
    assert indexes_on_disk(folder) == []


def test_a_rolled_file_survives_once_synced(mounted: MountedPowerFs) -> None:
    folder = mounted.mount / "m1" / "events"
    log = EventLogWriter(folder, node_id="n0", max_bytes=200)
    for index in range(1, 8):
        log.append([raft_record(index)])
    assert len(log.files()) > 1
    log.sync()

    mounted.client.drop(["m1"])

    assert indexes_on_disk(folder) == list(range(1, 8))


def test_a_snapshot_syncs_the_event_log_before_it_is_written(mounted: MountedPowerFs) -> None:
    """The controller wires `before_snapshot=event_log.sync` (controller/node.py): a snapshot taken
    after appends leaves every record it covers durable."""
    from brokergroup.controller.replicated import Snapshots, StateMachine

    folder = mounted.mount / "m1" / "events"
    log = EventLogWriter(folder, node_id="n0", max_bytes=1 << 20)
    log.append([raft_record(1), raft_record(2)])
    order: list[str] = []

    def before() -> None:
        order.append("sync")
        log.sync()

    snapshots = Snapshots(StateMachine(lambda _applied: None), journal=None, before=before)  # type: ignore[arg-type]
    target = mounted.mount / "m1" / "snapshot.tmp"
    snapshots.serialize(str(target), ((b"", 2, 1), (b"", 1, 1), []))
    order.append("written" if target.exists() else "missing")

    mounted.client.drop(["m1"])

    assert order == ["sync", "written"]
    assert indexes_on_disk(folder) == [1, 2]
