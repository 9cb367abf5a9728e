"""The broker store under power loss, step by step, on the power-loss file system.

One write sequence (create, appends that roll segments, an epoch, flushes, a checkpoint, a
truncation with each of its internal steps, an append after it) runs on a fresh disk of the
power-loss file system up to step k; then the disk loses power: every write and directory change
not fsynced is gone. The store must open again and agree with what it had claimed durable at that
moment: every record below its flushed offset (what SYNC acknowledges) with the same bytes, a
confirm offset no lower than the last checkpoint it persisted, the epochs it appended, and none of
the records a truncation cut once its marker was written. Repeated for every k.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from brokergroup.broker.settings import StoreSettings
from brokergroup.broker.store.checkpoint import ConfirmCheckpoint
from brokergroup.broker.store.epoch import EpochCache, EpochEntry
from brokergroup.broker.store.message_store import (
    COMMITLOG_DIR,
    CONFIRM_FILE,
    EPOCH_FILE,
    MessageStore,
    decode_all,
)
from brokergroup.broker.store.segments import STEP_MARKER_WRITTEN, CommitLog
from brokergroup.broker.store.types import Message
from brokergroup.chaos.powerfs import MountedPowerFs
from tests.integration.chaos.powerfs_fixture import mounted

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
__all__ = ["mounted"]

SETTINGS = StoreSettings(segment_size=4096, max_message_size=1024)
BODY = 300  # 13 records fill a 4 KiB segment: the appends below roll segments


class Crash(Exception):
    """The power goes here."""


@dataclasses.dataclass
class Claims:
    """What the store had said was durable when the power went."""

    durable: dict[int, bytes] = dataclasses.field(default_factory=dict)
    """commit offset -> body of every record below the flushed offset."""
    checkpoint: int = 0
    epochs: tuple[EpochEntry, ...] = ()
    cut_at: int | None = None
    cut_away: set[bytes] = dataclasses.field(default_factory=set)


def message(i: int) -> Message:
    body = b"m%03d-" % i + bytes([65 + i % 26]) * (BODY - 5)
    return Message(topic="t", queue_id=0, body=body, born_timestamp_ms=1, properties={})


def records(store: MessageStore) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    offset = store.min_offset
    while offset < store.max_offset:
        chunk = store.read_raw(offset, 1 << 20)
        out.update((r.offset, r.body) for r in decode_all(chunk, base=offset, max_body=SETTINGS.max_message_size))
        offset += len(chunk)
    return out


def open_store(root: Path, step_hook: Callable[[str], None] | None = None) -> MessageStore:
    log = CommitLog(root / COMMITLOG_DIR, segment_size=SETTINGS.segment_size, max_body=SETTINGS.max_message_size,
                    step_hook=step_hook)  # fmt: skip
    return MessageStore(
        log=log,
        epochs=EpochCache.open(root / EPOCH_FILE),
        checkpoint=ConfirmCheckpoint(root / CONFIRM_FILE),
        settings=SETTINGS,
    )


class Walk:
    """The write sequence; `step()` is called after every step and raises `Crash` at the chosen one."""

    def __init__(self, root: Path, crash_at: int, *, sync_parent: bool) -> None:
        self.root, self.crash_at, self.steps = root, crash_at, 0
        self.sync_parent = sync_parent
        self.claims = Claims()
        self.store: MessageStore | None = None
        self.names: list[str] = []
        self.cut = 0

    def step(self, name: str) -> None:
        self.names.append(name)
        if name == STEP_MARKER_WRITTEN:
            self.claims.cut_at = self.cut
        if self.store is not None:
            self.claims.durable = {o: b for o, b in records(self.store).items() if o < self.store.flushed_offset}
        if self.steps == self.crash_at:
            raise Crash(name)
        self.steps += 1

    def run(self) -> None:
        self.store = store = open_store(self.root, step_hook=self.step)
        if self.sync_parent:  # as the broker's identity file write does after the store opened
            fd = os.open(self.root.parent, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
        self.step("open")
        store.put_messages([message(0)], now_ms=1)
        self.step("append m0")
        store.flush()
        self.step("flush")
        for i in range(1, 20):  # rolls a segment (sealed with an fsync) at m13
            store.put_messages([message(i)], now_ms=1)
        self.step("append m1..m19 (segment roll)")
        self.claims.epochs = (EpochEntry(1, 0),) if store.append_epoch(EpochEntry(1, 0)) else ()
        self.step("append epoch 1")
        store.flush()
        self.step("flush")
        store.set_confirm_offset(store.max_offset)
        store.flush_checkpoint()
        self.claims.checkpoint = store.confirm_offset
        self.step("checkpoint")
        offsets = sorted(records(store))
        cut = offsets[6]  # keep m0..m5
        self.claims.cut_away = {message(i).body for i in range(6, 20)}
        self.cut = cut
        store.truncate(cut)
        self.claims.cut_at = cut
        self.claims.checkpoint = min(self.claims.checkpoint, cut)
        self.step("truncate returned")
        store.put_messages([message(20)], now_ms=1)
        store.flush()
        self.step("append m20 + flush")
        store.close()
        self.store = None  # closed: its claims are those of the last step (everything was flushed)
        self.step("close")


def run_until(root: Path, crash_at: int, *, sync_parent: bool) -> tuple[Walk, str | None]:
    walk = Walk(root, crash_at, sync_parent=sync_parent)
    try:
        walk.run()
    except Crash as crash:
        return walk, str(crash)
    return walk, None


def check_after_power_loss(root: Path, claims: Claims, where: str) -> None:
    store = open_store(root)
    try:
        found = records(store)
        # once the truncation marker is durable, the records it cuts are no longer promised
        kept = {o: b for o, b in claims.durable.items() if claims.cut_at is None or b not in claims.cut_away}
        lost = {o: b[:5] for o, b in kept.items() if found.get(o) != b}
        assert not lost, f"power loss after {where!r}: durable records lost or changed at {sorted(lost)[:5]}"
        assert store.confirm_offset <= store.max_offset
        floor = min(claims.checkpoint, store.max_offset)
        assert store.confirm_offset >= floor, f"after {where!r}: confirm {store.confirm_offset} < persisted {floor}"
        for entry in claims.epochs:
            assert entry.epoch in {e.epoch for e in store.epochs.entries()}, f"after {where!r}: epoch {entry} lost"
        if claims.cut_at is not None:
            back = [o for o, b in found.items() if o >= claims.cut_at and b in claims.cut_away]
            assert not back, f"after {where!r}: truncated records came back at {back[:5]}"
    finally:
        store.close()


@pytest.mark.parametrize(
    "sync_parent",
    [
        pytest.param(True, id="data-dir-fsynced-after-open"),
        # The store alone: its own folders are fsynced into their parents when it makes them
        # (common.durable.durable_mkdir); before that a power loss took a fresh store whole.
        pytest.param(False, id="store-alone"),
    ],
)
def test_the_store_keeps_what_it_claimed_durable_at_every_step(mounted: MountedPowerFs, sync_parent: bool) -> None:
    probe, finished = run_until(mounted.mount / "m1" / "store", crash_at=10**6, sync_parent=sync_parent)
    assert finished is None
    total = probe.steps
    assert total >= 12, probe.names  # the truncation's own steps are in the walk
    walked = []
    for k in range(total):
        disk = f"walk{k}"
        (mounted.mount / disk).mkdir()
        walk, where = run_until(mounted.mount / disk / "store", crash_at=k, sync_parent=sync_parent)
        assert where is not None
        report = mounted.client.drop([disk])
        if walk.store is not None:
            with contextlib.suppress(OSError):  # its handles died with the power
                walk.store.close()
        print(f"power loss after {where!r}: {report}")
        check_after_power_loss(mounted.mount / disk / "store", walk.claims, where)
        walked.append(where)
    assert "truncate:marker-written" in walked and "checkpoint" in walked and "flush" in walked
