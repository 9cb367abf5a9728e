"""Replication test fakes: an in-memory `ReplicatedLog` (`MemoryLog` + `EpochCache`) and `Pipe`,
a master and a slave connection joined without sockets.

`FakeLog` behaves like `MessageStore` where replication can tell: the confirm offset is clamped to
[min, max] and only rises (except that `truncate` lowers it), append listeners run inline after
every append, `truncate` cuts the log and then the epochs. `truncations` records every cut.
`FakeLog(sync=True)` acknowledges only flushed bytes (SYNC flush); `flush()` stands in for the
flusher and runs the flush listeners.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterable

from brokergroup.broker.ha.master_conn import MasterConnection, SlaveEvent
from brokergroup.broker.ha.slave_conn import SlaveConnection
from brokergroup.broker.protocol.ha import MasterFrame, SlaveTransferAck, encode
from brokergroup.broker.store.epoch import EpochCache, EpochEntry
from brokergroup.broker.store.indexes import HeadState
from brokergroup.broker.store.record import encode_record
from brokergroup.broker.store.segments import MemoryLog

_tags = itertools.count()


def record(body_size: int = 10, *, topic: str = "t") -> bytes:
    """A distinct record of 58 + len(topic) - 1 + body_size bytes."""
    tag = next(_tags)
    body = bytes([65 + tag % 26]) * body_size
    return encode_record(topic=topic, queue_id=tag % 8, body=body, born_timestamp_ms=1, store_timestamp_ms=2)


class FakeLog:
    def __init__(self, *, segment_size: int = 4096, epochs: Iterable[EpochEntry] = (), sync: bool = False) -> None:
        self.log = MemoryLog(segment_size=segment_size)
        self._epochs = EpochCache(list(epochs))
        self._confirm = 0
        self._listeners: list[Callable[[int], None]] = []
        self._flush_listeners: list[Callable[[int], None]] = []
        self.sync = sync
        self.truncations: list[int] = []
        self.heads: dict[int, HeadState] = {}
        """Head states the master serves (`head_state_at`), by offset; `seed` records its own."""
        self.seeds: list[HeadState] = []

    # ---- ReplicatedLog
    @property
    def max_offset(self) -> int:
        return self.log.max_offset

    @property
    def min_offset(self) -> int:
        return self.log.min_offset

    @property
    def confirm_offset(self) -> int:
        return self._confirm

    @property
    def flushed_offset(self) -> int:
        return self.log.max_offset - self.log.unflushed_bytes

    @property
    def ackable_offset(self) -> int:
        return self.flushed_offset if self.sync else self.max_offset

    def set_confirm_offset(self, offset: int) -> None:
        self._confirm = max(self._confirm, min(max(offset, self.min_offset), self.max_offset))

    @property
    def epochs(self) -> EpochCache:
        return self._epochs

    def append_epoch(self, entry: EpochEntry) -> bool:
        return self._epochs.append_entry(entry)

    def read_raw(self, offset: int, max_bytes: int) -> bytes:
        return self.log.read(offset, max_bytes)

    def append_raw(self, offset: int, data: bytes) -> None:
        self.log.append_raw(offset, data)
        if data:
            self._appended()

    def truncate(self, offset: int) -> None:
        self.truncations.append(offset)
        self.log.truncate(offset)
        self._epochs.truncate_suffix_by_offset(offset)
        self._confirm = min(self._confirm, offset)

    def replica_start(self, *, from_last_segment: bool) -> int:
        starts = [s for s in self.log.segment_starts if s <= self._confirm]
        return starts[-1] if from_last_segment and starts else self.min_offset

    def head_state_at(self, offset: int) -> HeadState:
        return self.heads.get(offset) or HeadState.empty(offset)

    def seed(self, head: HeadState) -> None:
        assert self.max_offset == self.min_offset, "seed of a non-empty log"
        self.seeds.append(head)
        self.heads[head.min_offset] = head
        self.log.reset(head.min_offset)
        self._epochs.truncate_suffix_by_epoch(0)
        self._confirm = head.min_offset

    def add_append_listener(self, listener: Callable[[int], None]) -> None:
        self._listeners.append(listener)

    def add_flush_listener(self, listener: Callable[[int], None]) -> None:
        self._flush_listeners.append(listener)

    def remove_flush_listener(self, listener: Callable[[int], None]) -> None:
        if listener in self._flush_listeners:
            self._flush_listeners.remove(listener)

    def flush(self) -> None:
        """Everything appended is now durable; flush listeners run if that moved the offset."""
        before = self.flushed_offset
        self.log.flush()
        if self.flushed_offset > before:
            for listener in tuple(self._flush_listeners):
                listener(self.flushed_offset)

    # ---- test helpers
    def _appended(self) -> None:
        for listener in self._listeners:
            listener(self.max_offset)

    def put(self, *records: bytes) -> int:
        """A master's write; returns the offset just past it."""
        self.log.append(list(records))
        self._appended()
        return self.max_offset

    def put_n(self, count: int, body_size: int = 10) -> int:
        return self.put(*(record(body_size) for _ in range(count)))

    def new_epoch(self, epoch: int) -> None:
        assert self.append_epoch(EpochEntry(epoch, self.max_offset))

    def content(self) -> bytes:
        """Every byte from min to max offset."""
        chunks = []
        offset = self.min_offset
        while offset < self.max_offset:
            chunk = self.log.read(offset, 1 << 20)
            chunks.append(chunk)
            offset += len(chunk)
        return b"".join(chunks)

    def epoch_starts(self) -> list[tuple[int, int]]:
        return [(e.epoch, e.start_offset) for e in self._epochs.entries()]


class Pipe:
    """A master and a slave connection joined without sockets, on a fake clock (`now`).

    `pump()` delivers the slave's bytes to the master, lets the master send what it wants
    (each frame is delivered to the slave at once), and repeats until neither has anything
    to say; `frames` keeps every frame the master sent."""

    def __init__(
        self,
        master: FakeLog,
        slave: FakeLog,
        *,
        batch_size: int = 64 * 1024,
        heartbeat_ms: int = 1000,
        slave_id: int = 2,
        expected_epoch: int = 0,
        learner: bool = False,
        confirm_delay_ms: int = 0,
    ) -> None:
        self.master, self.slave = master, slave
        self.now = 0
        self.mc = MasterConnection(
            batch_size=batch_size, heartbeat_interval_ms=heartbeat_ms, now_ms=0, confirm_delay_ms=confirm_delay_ms
        )
        self.sc = SlaveConnection(
            broker_id=slave_id,
            is_learner=learner,
            expected_epoch=expected_epoch,
            heartbeat_interval_ms=heartbeat_ms,
            now_ms=0,
        )
        self.frames: list[MasterFrame] = []
        self.events: list[SlaveEvent] = []
        self.acks: list[SlaveTransferAck] = []
        self._to_master = encode(self.sc.handshake(0))

    def pump(self, limit: int | None = None) -> list[MasterFrame]:
        """Run until quiet, or until the master sent `limit` frames; the frames sent."""
        sent: list[MasterFrame] = []
        while True:
            if self._to_master:
                data, self._to_master = self._to_master, b""
                self.events += self.mc.receive(data, self.master, self.now)
            if limit is not None and len(sent) >= limit:
                return sent
            frame = self.mc.next_transfer(self.master, self.now)
            if frame is None:
                if not self._to_master:
                    return sent
                continue
            sent.append(frame)
            self.frames.append(frame)
            self.deliver(frame)

    def deliver(self, frame: MasterFrame) -> None:
        acks = self.sc.receive(encode(frame), self.slave, self.now)
        self.acks += acks
        self._to_master += b"".join(encode(a) for a in acks)

    def tick(self) -> None:
        self._send(self.sc.tick(self.now))

    def flush_slave(self) -> None:
        """The slave's log becomes durable; the ack that makes due goes to the master (at the next pump)."""
        self.slave.flush()
        self._send(self.sc.flushed(self.slave, self.now))

    def _send(self, acks: list[SlaveTransferAck]) -> None:
        self.acks += acks
        self._to_master += b"".join(encode(a) for a in acks)


async def until(predicate: Callable[[], bool], what: str, timeout_s: float = 5.0) -> None:
    """Poll `predicate` on the running loop until it holds; fail naming `what` after `timeout_s`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)
