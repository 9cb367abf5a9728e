"""Raft snapshots written off pysyncobj's tick thread (`replicated.Snapshots`, `raft_fixes.BackgroundSerializer`).

The tick thread copies the state (`start`); a thread encodes, writes and fsyncs `<snapshot>.tmp`;
the tick thread renames it into place when it polls. These tests drive pysyncobj's own serializer
class and a real one-node `FixedSyncObj`, and compare bytes and state digests."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pysyncobj import SyncObjConf
from pysyncobj.config import SERIALIZER_STATE

from brokergroup.controller import model, raft_fixes
from brokergroup.controller.journal import DurableJournal, OsDisk
from brokergroup.controller.replicated import (
    SNAPSHOT_FORMAT,
    Batch,
    Captured,
    Snapshots,
    StateMachine,
)
from brokergroup.local.ports import free_ports

DATA = ((b"last", 12, 3), (b"prev", 11, 3), ["127.0.0.1:1", "127.0.0.1:2"])


def machine_with(sets: int, *, odd_names: bool = False) -> StateMachine:
    machine = StateMachine(lambda _applied: None)
    for i in range(sets):
        name = f'b"\\{i}é' if odd_names and i % 3 == 0 else f"broker-{i:05d}"
        machine._state.replica_info[name] = model.BrokerReplicaInfo(
            cluster_name="c1",
            broker_name=name,
            next_assign_broker_id=4 + i % 2,
            broker_id_info={b: (f"127.0.0.1:{20000 + b}", f"127.0.0.1:{20000 + b};{i}") for b in (3, 1, 2)},
        )
        machine._state.sync_state_info[name] = model.SyncStateInfo(
            "c1",
            name,
            master_epoch=i,
            sync_state_set_epoch=2 * i,
            sync_state_set={3, 1},
            master_broker_id=i % 4 or None,
        )
        machine._set_versions[name] = i
    machine._version = 7 * sets
    return machine


def old_body_text(machine: StateMachine) -> str:
    """What the snapshot's machine text was before it was written in pieces: one `json.dumps`."""
    body = {"state": machine._state.to_dict(), "version": machine._version, "setVersions": dict(machine._set_versions)}
    return json.dumps(body)


def old_snapshot_bytes(machine: StateMachine, data: tuple[Any, Any, Any]) -> bytes:
    last, prev, cluster = data
    body = {
        "format": SNAPSHOT_FORMAT,
        "last": [base64.b64encode(last[0]).decode(), last[1], last[2]],
        "prev": [base64.b64encode(prev[0]).decode(), prev[1], prev[2]],
        "cluster": sorted(cluster),
        "machine": {"json": old_body_text(machine)},
    }
    return json.dumps(body).encode()


class Journal:
    """The journal seam `Snapshots.deserialize` calls; records what it was asked to align with."""

    def __init__(self) -> None:
        self.aligned: list[tuple[Any, Any]] = []

    def align_with_snapshot(self, prev: Any, last: Any) -> None:
        self.aligned.append((prev, last))


def digest(machine: StateMachine) -> str:
    return machine.digest(lambda: 0)[1]


def poll_until_done(serializer: raft_fixes.BackgroundSerializer, *, deadline_s: float = 30.0) -> int:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        status, _ = serializer.checkSerializing()
        if status != SERIALIZER_STATE.SERIALIZING:
            return int(status)
        time.sleep(0.005)
    raise AssertionError("the background snapshot did not finish")


@pytest.mark.parametrize("sets", [0, 1, 63, 64, 65, 700])
def test_pieces_are_the_old_single_encoding(sets: int) -> None:
    machine = machine_with(sets, odd_names=True)
    assert "".join(machine.capture().pieces()) == old_body_text(machine)
    assert machine._serialize() == {"json": old_body_text(machine)}


def test_the_snapshot_file_is_byte_identical_to_the_old_one(tmp_path: Path) -> None:
    machine = machine_with(300, odd_names=True)
    snapshots = Snapshots(machine, Journal())  # type: ignore[arg-type]
    snapshots.serialize(str(tmp_path / "sync"), DATA)
    assert (tmp_path / "sync").read_bytes() == old_snapshot_bytes(machine, DATA)


def test_a_background_snapshot_is_the_state_at_start_and_restores_byte_identical(tmp_path: Path) -> None:
    machine = machine_with(500, odd_names=True)
    before_calls: list[float] = []
    snapshots = Snapshots(machine, Journal(), lambda: before_calls.append(time.monotonic()))  # type: ignore[arg-type]
    path = tmp_path / "snapshot"
    serializer = raft_fixes.BackgroundSerializer(str(path), 1000, snapshots, snapshots.deserialize)
    expected = old_snapshot_bytes(machine, DATA)
    expected_digest = digest(machine)

    serializer.serialize((None, *DATA), 11)
    # the state changes on the tick thread right after the copy: the snapshot must not see it
    with machine.lock:
        machine._state.sync_state_info["broker-00001"].master_epoch += 100
        machine._version += 1
    assert poll_until_done(serializer) == SERIALIZER_STATE.SUCCESS
    assert serializer.checkSerializing() == (SERIALIZER_STATE.NOT_SERIALIZING, None)
    assert path.read_bytes() == expected
    assert not Path(str(path) + ".tmp").exists()
    assert len(before_calls) == 1, "the event log is synced before the snapshot is reported written"

    restored = StateMachine(lambda _applied: None)
    journal = Journal()
    last, prev, cluster = Snapshots(restored, journal).deserialize(str(path))  # type: ignore[arg-type]
    assert (last, prev, cluster) == (DATA[0], DATA[1], sorted(DATA[2]))
    assert journal.aligned == [(DATA[1], DATA[0])]
    assert digest(restored) == expected_digest
    assert restored._applied_index == 12


def test_a_failed_write_leaves_the_previous_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    machine = machine_with(200)
    snapshots = Snapshots(machine, Journal())  # type: ignore[arg-type]
    path = tmp_path / "snapshot"
    serializer = raft_fixes.BackgroundSerializer(str(path), 1000, snapshots, snapshots.deserialize)
    serializer.serialize((None, *DATA), 11)
    assert poll_until_done(serializer) == SERIALIZER_STATE.SUCCESS
    first, first_digest = path.read_bytes(), digest(machine)

    real_pieces = Captured.pieces

    def torn(self: Captured) -> Iterator[str]:  # the disk fills up half way through
        for n, piece in enumerate(real_pieces(self)):
            if n == 5:
                raise OSError(28, "No space left on device")
            yield piece

    monkeypatch.setattr(Captured, "pieces", torn)
    with machine.lock:
        machine._version += 1
    serializer.serialize((None, (b"x", 40, 4), (b"y", 39, 4), []), 39)
    assert poll_until_done(serializer) == SERIALIZER_STATE.FAILED
    assert path.read_bytes() == first
    assert not Path(str(path) + ".tmp").exists()
    monkeypatch.undo()

    # a crash mid-write (the process gone before the rename) leaves a torn .tmp beside it: ignored
    Path(str(path) + ".tmp").write_bytes(first[: len(first) // 2])
    restored = StateMachine(lambda _applied: None)
    Snapshots(restored, Journal()).deserialize(str(path))  # type: ignore[arg-type]
    assert digest(restored) == first_digest
    # and the next snapshot writes over the torn file
    serializer.serialize((None, (b"x", 40, 4), (b"y", 39, 4), []), 39)
    assert poll_until_done(serializer) == SERIALIZER_STATE.SUCCESS
    assert json.loads(path.read_bytes())["last"][1] == 40


def test_a_snapshot_loaded_meanwhile_is_never_overwritten_by_ours(tmp_path: Path) -> None:
    machine = machine_with(2000)
    snapshots = Snapshots(machine, Journal())  # type: ignore[arg-type]
    path = tmp_path / "snapshot"
    serializer = raft_fixes.BackgroundSerializer(str(path), 1000, snapshots, snapshots.deserialize)
    leaders = machine_with(3)
    Snapshots(leaders, Journal()).serialize(str(path), ((b"l", 90, 5), (b"k", 89, 5), []))  # type: ignore[arg-type]
    leaders_bytes = path.read_bytes()

    serializer.serialize((None, *DATA), 11)  # ours, at index 12, still being written...
    snapshots.deserialize(str(path))  # ...when the leader's (index 90) is installed and loaded
    assert poll_until_done(serializer) == SERIALIZER_STATE.NOT_SERIALIZING
    assert path.read_bytes() == leaders_bytes
    assert not Path(str(path) + ".tmp").exists()
    assert digest(machine) == digest(leaders)


def apply(node: raft_fixes.FixedSyncObj, machine: StateMachine, batch: Batch) -> None:
    done: list[Any] = []
    machine._apply_batch(batch.to_json(), callback=lambda result, error: done.append((result, error)))
    deadline = time.monotonic() + 30
    while not done and time.monotonic() < deadline:
        node.doTick(0.01)
    assert done and done[0][1] == 0, done


def one_node(tmp_path: Path, port: int, machine: StateMachine) -> tuple[raft_fixes.FixedSyncObj, Snapshots]:
    journal = DurableJournal(OsDisk(tmp_path / "raft"))
    snapshots = Snapshots(machine, journal)
    conf = SyncObjConf(
        journalFile=journal,
        fullDumpFile=str(tmp_path / "raft" / "snapshot"),
        serializer=snapshots.serialize,
        deserializer=snapshots.deserialize,
        useFork=False,
        autoTick=False,
        logCompactionMinEntries=10**6,
        logCompactionMinTime=10**6,
    )
    return raft_fixes.FixedSyncObj(f"127.0.0.1:{port}", [], conf, consumers=[machine]), snapshots


def test_a_node_restarts_from_a_background_snapshot_with_identical_state(tmp_path: Path) -> None:
    (tmp_path / "raft").mkdir()
    port = free_ports(1)[0]
    machine = StateMachine(lambda _applied: None)
    node, _ = one_node(tmp_path, port, machine)
    try:
        assert isinstance(node._SyncObj__serializer, raft_fixes.BackgroundSerializer)
        deadline = time.monotonic() + 30
        while not node._isLeader() and time.monotonic() < deadline:
            node.doTick(0.01)
        for i in range(40):
            name = f"broker-{i % 7}"
            events: tuple[model.Event, ...] = (
                model.ApplyBrokerIdEvent(name, "c1", f"127.0.0.1:{30000 + i}", i // 7 + 1, f"code-{i}"),
            )
            apply(node, machine, Batch(f"{i + 1:032x}", 1, i, "me", None, events, broker_name=name))
        node.forceLogCompaction()
        deadline = time.monotonic() + 30
        while node._SyncObj__lastSerializedEntry is None and time.monotonic() < deadline:
            node.doTick(0.01)
        snapshot_index = node._SyncObj__lastSerializedEntry
        assert snapshot_index is not None and snapshot_index >= 40
        written = json.loads((tmp_path / "raft" / "snapshot").read_bytes())
        assert written["last"][1] == snapshot_index + 1 == node.raftLastApplied
        expected = digest(machine)
    finally:
        node.destroy()

    again = StateMachine(lambda _applied: None)
    node, _ = one_node(tmp_path, port, again)
    try:
        deadline = time.monotonic() + 30
        while again._applied_index < snapshot_index + 1 and time.monotonic() < deadline:
            node.doTick(0.01)
        assert digest(again) == expected
        assert again._state.to_dict() == machine._state.to_dict()
    finally:
        node.destroy()
