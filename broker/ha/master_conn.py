"""One HA connection on the master's side, sans-I/O (RocketMQ `AutoSwitchHAConnection`).

The shell feeds the slave's bytes to `receive()`, which returns events (handshake, ack), and asks
`next_transfer(store, now_ms)` for the next frame to send, until it returns None; then it waits
for an append, an ack, or `next_wakeup_ms()`.

States follow the slave's frames (reference §4.3): READY until the slave's HANDSHAKE; HANDSHAKE
until its first ack (the master answers each slave handshake with its epoch entries once);
TRANSFER from the first ack, whose offset is where transfer starts.

A first ack of 0 means the slave starts from scratch: transfer starts at `store.replica_start`,
the master's min offset or, if the slave's handshake set isSyncFromLastFile, the start of its
last (dispatched) segment. A first ack below the master's min offset (a slave that fell behind
retention) starts from scratch too. When that start is after 0, a HEAD frame (the master's head
state there: queue bases, group offsets, producer sequences) goes first, so the slave numbers
queues as the master does; RocketMQ's syncFromLastFile slave numbers them from its own log.

Invariants:

- a TRANSFER frame never crosses an epoch boundary and is labelled with the epoch that wrote its
  bytes. The epoch is looked up in the store's *current* epoch cache for every frame, never
  cached, so a new epoch appended while a connection streams the previous last epoch (the master
  re-elected in place, #9689) starts a new frame at its start offset;
- frames are contiguous: each data frame starts where the previous one ended; an empty frame
  (heartbeat) carries the next offset, sent after `heartbeat_interval_ms` without a frame, or
  `confirm_delay_ms` after the sender first saw the confirm offset move past what the slave was
  sent, if no frame went out meanwhile (so a caught-up slave learns it within that delay). Every
  frame carries the confirm offset of its time: under load the next data frame carries it and no
  frame is sent for it alone (issue 17: such frames were 40 % of all under load). Once such a
  delay runs, `confirm_wake_wanted` is False: further moves need not wake the sender;
- a body holds at most `batch_size` bytes of whole records (one larger record goes alone);
- an ack beyond what was sent is a protocol error (a peer cannot fake acks, #3015);
- caught-up time (for the shrink rule): `now` when the ack reaches the master's max offset, else
  the time of the latest data frame whose send found the master's max offset at or below the
  ack (the slave had everything the master had then). RocketMQ looks at the last data frame only,
  and counts "nothing to send" as caught up, which counted slaves that had not acked. Looking
  further back matters since acks wait for the slave's fsync (SYNC flush): under steady load the
  next frame is usually sent before the ack of the previous one arrives, and a slave that is never
  more than an fsync behind must not be shrunk out of the sync-state-set for it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Final

from brokergroup.broker.errors import ProtocolError
from brokergroup.broker.ha import ReplicationError
from brokergroup.broker.protocol.ha import (
    DEFAULT_MAX_HANDSHAKE_ENTRIES,
    NEED_DATA,
    EpochStart,
    HAState,
    MasterFrame,
    MasterHandshake,
    MasterHead,
    MasterTransfer,
    SlaveFrameDecoder,
    SlaveHandshake,
    SlaveTransferAck,
)
from brokergroup.broker.store.epoch import EpochEntry
from brokergroup.broker.store.types import ReplicatedLog

MAX_FRAMES_REMEMBERED: Final = 1024
"""Data frames whose (master max offset, time) are kept for the caught-up rule, newest last."""


@dataclass(frozen=True, slots=True)
class Handshaked:
    """The slave introduced itself (first or repeated handshake)."""

    slave_id: int
    is_learner: bool


@dataclass(frozen=True, slots=True)
class Acked:
    """The slave has the log up to `offset`."""

    offset: int
    first: bool
    """The first ack after a handshake: the offset the slave asked to start from."""
    caught_up_ms: int | None
    """When the slave last had everything the master had, if this ack shows it."""


SlaveEvent = Handshaked | Acked


class MasterConnection:
    """See the module docstring. `now_ms` values come from one monotonic clock."""

    def __init__(
        self,
        *,
        batch_size: int,
        heartbeat_interval_ms: int,
        now_ms: int,
        max_handshake_entries: int = DEFAULT_MAX_HANDSHAKE_ENTRIES,
        confirm_delay_ms: int = 0,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size} must be positive")
        if confirm_delay_ms < 0:
            raise ValueError(f"confirm_delay_ms={confirm_delay_ms} must not be negative")
        self._confirm_delay_ms = confirm_delay_ms
        self._confirm_due: int | None = None
        """When a confirm offset held back for a data frame is sent alone (None: nothing armed)."""
        self._batch = batch_size
        self._heartbeat_ms = heartbeat_interval_ms
        self._max_entries = max_handshake_entries
        self._decoder = SlaveFrameDecoder()
        self.state = HAState.READY
        self.slave_id: int | None = None
        self.is_learner = False
        self.from_last_file = False
        """The slave asked to start from the last segment (isSyncFromLastFile) if it starts from scratch."""
        self._head: MasterHead | None = None
        """The HEAD frame to send before the first TRANSFER (a slave starting from scratch)."""
        self.ack_offset = -1
        """The slave's last acked offset; -1 until its first ack."""
        self._handshake_due = False
        self._next: int | None = None
        self._last_write_ms = now_ms
        self._sent: deque[tuple[int, int]] = deque(maxlen=MAX_FRAMES_REMEMBERED)
        """(the master's max offset, time) at each data frame not yet covered by an ack."""
        self._sent_confirm = -1

    @property
    def next_offset(self) -> int | None:
        """Where the next frame starts, once the slave's first ack set it."""
        return self._next

    # ---- slave -> master ----------------------------------------------------------------------
    def receive(self, data: bytes, store: ReplicatedLog, now_ms: int) -> list[SlaveEvent]:
        """Feed received bytes; the events of every complete frame. Raises `ProtocolError` or
        `ReplicationError`: drop the connection."""
        self._decoder.feed(data)
        events: list[SlaveEvent] = []
        while (frame := self._decoder.next_frame()) is not NEED_DATA:
            if isinstance(frame, SlaveHandshake):
                events.append(self._on_handshake(frame))
            else:
                events.append(self._on_ack(frame, store, now_ms))
        return events

    def _on_handshake(self, frame: SlaveHandshake) -> Handshaked:
        if self.slave_id is not None and frame.slave_broker_id != self.slave_id:
            raise ProtocolError(
                f"slave HANDSHAKE: slaveBrokerId changed from {self.slave_id} to {frame.slave_broker_id}"
            )
        self.slave_id = frame.slave_broker_id
        self.is_learner = frame.is_async_learner
        self.from_last_file = frame.is_sync_from_last_file
        self._head = None
        self.state = HAState.HANDSHAKE
        self._handshake_due = True
        self._confirm_due = None
        self._next = None
        self._sent.clear()
        self.ack_offset = -1
        return Handshaked(frame.slave_broker_id, frame.is_async_learner)

    def _on_ack(self, frame: SlaveTransferAck, store: ReplicatedLog, now_ms: int) -> Acked:
        offset = frame.slave_max_phy_offset
        first = self.state is HAState.HANDSHAKE
        if self.state is HAState.READY or (first and self._handshake_due):
            raise ProtocolError(f"slave TRANSFER ack of offset={offset} before the handshake completed")
        if first:
            self._next = self._start_offset(offset, store)
            self.state = HAState.TRANSFER
        elif self._next is not None and offset > self._next:
            raise ProtocolError(f"slave {self.slave_id} acked offset={offset} beyond what was sent ({self._next})")
        self.ack_offset = offset
        return Acked(offset, first, self._caught_up_time(offset, store.max_offset, now_ms))

    def _start_offset(self, requested: int, store: ReplicatedLog) -> int:
        if requested > store.max_offset:
            raise ReplicationError(
                f"slave {self.slave_id} asks for offset={requested}, beyond the master's max offset={store.max_offset}"
            )
        if requested != 0 and requested >= store.min_offset:
            return requested
        start = store.replica_start(from_last_segment=self.from_last_file)
        if start > 0:
            self._head = MasterHead(store.head_state_at(start))
        return start

    def _caught_up_time(self, offset: int, max_offset: int, now_ms: int) -> int | None:
        sent, caught_up = self._sent, None
        while sent and sent[0][0] <= offset:
            caught_up = sent.popleft()[1]
        return now_ms if offset >= max_offset else caught_up

    # ---- master -> slave ----------------------------------------------------------------------
    def next_transfer(self, store: ReplicatedLog, now_ms: int) -> MasterFrame | None:
        """The next frame to send now, or None (wait for an append, an ack or the wake-up time)."""
        if self._handshake_due:
            self._handshake_due = False
            self._last_write_ms = now_ms
            return self._handshake(store)
        if self.state is not HAState.TRANSFER or self._next is None:
            return None
        if self._head is not None:
            head, self._head = self._head, None
            self._last_write_ms = now_ms
            return head
        position = self._next
        entry = store.epochs.find_epoch_entry_by_offset(position)
        if entry is None and position == store.max_offset:
            entry = store.epochs.last_entry()
        if entry is None:
            raise ReplicationError(f"no epoch entry covers offset={position}; cannot label a frame")
        if position < store.max_offset:
            return self._data_frame(store, entry, position, now_ms)
        confirm = max(store.confirm_offset, 0)
        if confirm > self._sent_confirm and self._confirm_due is None:
            self._confirm_due = now_ms + self._confirm_delay_ms  # a data frame may carry it before then
        confirm_due = self._confirm_due is not None and now_ms >= self._confirm_due
        if confirm_due or now_ms - self._last_write_ms >= self._heartbeat_ms:
            return self._frame(entry, position, confirm, b"", now_ms)
        return None

    @property
    def confirm_wake_wanted(self) -> bool:
        """Whether a moved confirm offset should wake the sender (no delay runs for an earlier move)."""
        return self.state is HAState.TRANSFER and self._confirm_due is None

    def next_wakeup_ms(self) -> int | None:
        """When a heartbeat frame, or a confirm offset held back for a data frame, falls due (None
        until transfer starts)."""
        if self.state is not HAState.TRANSFER:
            return None
        heartbeat = self._last_write_ms + self._heartbeat_ms
        return heartbeat if self._confirm_due is None else min(heartbeat, self._confirm_due)

    def _handshake(self, store: ReplicatedLog) -> MasterHandshake:
        entries = store.epochs.entries()[-self._max_entries :] if self._max_entries else ()
        return MasterHandshake(
            master_max_phy_offset=store.max_offset,
            master_last_epoch=entries[-1].epoch if entries else 0,
            entries=tuple(EpochStart(e.epoch, e.start_offset) for e in entries),
        )

    def _data_frame(self, store: ReplicatedLog, entry: EpochEntry, position: int, now_ms: int) -> MasterTransfer:
        limit = min(store.max_offset, entry.end_offset)
        body = store.read_raw(position, min(limit - position, self._batch))
        if not body or position + len(body) > limit:
            raise ReplicationError(
                f"read_raw at offset={position} returned {len(body)} bytes; epoch {entry.epoch} ends at {limit}"
            )
        self._sent.append((store.max_offset, now_ms))
        self._next = position + len(body)
        return self._frame(entry, position, max(store.confirm_offset, 0), body, now_ms)

    def _frame(self, entry: EpochEntry, position: int, confirm: int, body: bytes, now_ms: int) -> MasterTransfer:
        self._last_write_ms = now_ms
        self._sent_confirm = confirm
        self._confirm_due = None
        return MasterTransfer(
            offset=position,
            epoch=entry.epoch,
            epoch_start_offset=entry.start_offset,
            confirm_offset=confirm,
            body=body,
        )
