"""One HA connection on the slave's side, sans-I/O (RocketMQ `AutoSwitchHAClient`).

The shell sends `handshake()`, feeds the master's bytes to `receive(data, store, now_ms)` and
sends the acks it returns; `flushed(store, now_ms)` returns an ack when the store's flushed
offset moved (call it from the store's flush listener); `tick(now_ms)` returns a heartbeat ack
when one is due. Any
exception (`ProtocolError`, `ReplicationError`, a `StoreError`) means: drop the connection and
reconnect later; the store is left consistent (every store call is all-or-nothing).

On the master's HANDSHAKE (its epoch entries and max offset) the slave decides where its log
stops agreeing with the master's (reference §4.3 `doTruncate`):

- a new replica keeps nothing: it asks for offset 0, i.e. the master's min offset, and accepts
  the first frame wherever the master's log starts. That is a replica with no epoch entry (a log
  with bytes but no epoch entry cannot be checked, so it is cut back to its start first), or one
  whose log is empty: its entries claim no bytes, and the new master may have replaced that
  same empty epoch with its own (`EpochCache.append_entry`, #9942), so none would match. Its
  entries are dropped;
- otherwise `find_consistent_point` gives the offset `p` up to which both logs were written by
  the same epochs; -1 means none: `ReplicationError`, retried later (a human may have to rebuild
  this replica). The log and the epochs are cut at `p` (crash-safe: the store's `truncate`), and
  the slave asks to continue from `p`;
- a master whose last epoch is older than the epoch the controller announced, or than the
  slave's own last epoch, is stale: `ReplicationError`, nothing is truncated. RocketMQ lets such a
  master cut a slave's newer data.

A HEAD frame (the master's head state at the offset its transfer starts from) may come once,
after the first ack and before the first TRANSFER, when the slave starts from scratch (it asked
for 0, or for an offset the master's retention deleted) and the master's log starts after 0:
the slave cuts whatever it holds (all of it is before that offset) and seeds its store with it
(`store.seed`: crash-safe, the head file first), so its queue offsets, consumer offsets and
producer sequences continue as the master's. Its epoch entries then come with the frames: the
first one is the master's entry covering the start offset, with its original start (RocketMQ's
truncatePrefixByOffset of the master's entries), so consistent points are found as before.
With `sync_from_last_file` the handshake asks a master to start such a copy at its last segment.

On each TRANSFER frame: its offset must be the slave's max offset (else the streams disagree:
drop, re-handshake); a newer epoch is recorded with `append_epoch(epoch, epochStartOffset)`, the
same epoch must have the same start offset, an older one is an error; the body is appended with
`append_raw`; the confirm offset becomes min(frame's confirm offset, own max offset).

Acks report `min(appended, store.ackable_offset)`: under SYNC flush only what is fsynced on this
replica (the master counts acks toward PUT_OK and the confirm offset, so an acknowledged put
survives a power loss of this machine); under ASYNC flush what is appended. An ack goes out when
that offset grows (after a frame under ASYNC, after the flush covering it under SYNC: the flush
of one fsync covers every frame received meanwhile) and every `heartbeat_interval_ms` while
idle, repeating the last one. The first ack after the handshake names the offset to start from
(the master streams from there), so it waits until the log is durable up to that offset (a
previous session's unflushed tail). An ack never claims more than this connection has seen:
before the first append it repeats the requested offset.
"""

from __future__ import annotations

import logging

from brokergroup.broker.errors import ProtocolError
from brokergroup.broker.ha import ReplicationError
from brokergroup.broker.protocol.ha import (
    DEFAULT_MAX_TRANSFER_BODY,
    INT32_MAX,
    NEED_DATA,
    HAState,
    MasterFrameDecoder,
    MasterHandshake,
    MasterHead,
    MasterTransfer,
    SlaveHandshake,
    SlaveTransferAck,
)
from brokergroup.broker.store.epoch import EpochEntry, find_consistent_point
from brokergroup.broker.store.types import ReplicatedLog

logger = logging.getLogger(__name__)


class SlaveConnection:
    """See the module docstring. `now_ms` values come from one monotonic clock."""

    def __init__(
        self,
        *,
        broker_id: int,
        is_learner: bool,
        expected_epoch: int,
        heartbeat_interval_ms: int,
        now_ms: int,
        max_transfer_body: int = DEFAULT_MAX_TRANSFER_BODY,
        sync_from_last_file: bool = False,
    ) -> None:
        self._broker_id = broker_id
        self._from_last_file = sync_from_last_file
        self._is_learner = is_learner
        self._expected_epoch = expected_epoch
        self._heartbeat_ms = heartbeat_interval_ms
        self._decoder = MasterFrameDecoder(max_transfer_body=min(max_transfer_body, INT32_MAX))
        self.state = HAState.READY
        self._new_replica = False
        self._first_frame = False
        """In TRANSFER and no frame with data or a head state has arrived yet (a HEAD may come)."""
        self._position = -1
        """Offset this connection has the log up to (appended); -1 before the handshake."""
        self._reported = -1
        """The offset of the last ack sent; -1 before the first."""
        self._last_sent_ms = now_ms

    @property
    def position(self) -> int:
        return self._position

    @property
    def acked_offset(self) -> int:
        """What the last ack reported (-1 before the first)."""
        return self._reported

    def handshake(self, now_ms: int) -> SlaveHandshake:
        """The first frame to send."""
        self.state = HAState.HANDSHAKE
        self._last_sent_ms = now_ms
        return SlaveHandshake(
            slave_broker_id=self._broker_id,
            is_async_learner=self._is_learner,
            is_sync_from_last_file=self._from_last_file,
        )

    def receive(self, data: bytes, store: ReplicatedLog, now_ms: int) -> list[SlaveTransferAck]:
        """Feed the master's bytes, apply every complete frame to `store`; the acks to send."""
        self._decoder.feed(data)
        while (frame := self._decoder.next_frame()) is not NEED_DATA:
            if isinstance(frame, MasterHandshake):
                self._on_handshake(frame, store)
            elif isinstance(frame, MasterHead):
                self._on_head(frame, store)
            else:
                self._on_transfer(frame, store)
        return self.flushed(store, now_ms)

    def flushed(self, store: ReplicatedLog, now_ms: int) -> list[SlaveTransferAck]:
        """The ack due now that more of the log may be acknowledged (`store.ackable_offset`)."""
        if self.state is not HAState.TRANSFER:
            return []
        if self._reported < 0:  # the start offset, once the log is durable up to it
            return [self._ack(self._position, now_ms)] if store.ackable_offset >= self._position else []
        ackable = min(self._position, store.ackable_offset)
        return [self._ack(ackable, now_ms)] if ackable > self._reported else []

    def tick(self, now_ms: int) -> list[SlaveTransferAck]:
        """A heartbeat ack (the last one again) if nothing was sent for `heartbeat_interval_ms`."""
        if self._started and now_ms - self._last_sent_ms >= self._heartbeat_ms:
            return [self._ack(self._reported, now_ms)]
        return []

    def next_wakeup_ms(self) -> int | None:
        return self._last_sent_ms + self._heartbeat_ms if self._started else None

    @property
    def _started(self) -> bool:
        """In TRANSFER and the start offset was acked."""
        return self.state is HAState.TRANSFER and self._reported >= 0

    def _ack(self, offset: int, now_ms: int) -> SlaveTransferAck:
        self._reported = offset
        self._last_sent_ms = now_ms
        return SlaveTransferAck(offset)

    # ---- the master's handshake: where to truncate ------------------------------------------------
    def _on_handshake(self, frame: MasterHandshake, store: ReplicatedLog) -> None:
        if self.state is not HAState.HANDSHAKE:
            raise ProtocolError(f"master HANDSHAKE in state {self.state.name}")
        local = store.epochs.entries()
        newest_known = max(self._expected_epoch, local[-1].epoch if local else -1)
        if frame.master_last_epoch < newest_known or (not frame.entries and newest_known >= 0):
            raise ReplicationError(
                f"master's last epoch {frame.master_last_epoch} is older than epoch {newest_known} "
                "known here: a stale master, nothing truncated"
            )
        if not local or store.max_offset == store.min_offset:
            if store.max_offset > store.min_offset:
                logger.warning(
                    "log holds [%d, %d) but no epoch entry; cutting it to replicate from scratch",
                    store.min_offset,
                    store.max_offset,
                )
            elif local:
                logger.info("empty log with epochs %s: replicating from scratch", _show(local))
            self._from_scratch(store)
            return
        master = [EpochEntry(e.epoch, e.start_offset) for e in frame.entries]
        point = find_consistent_point(local, store.max_offset, master, frame.master_max_phy_offset)
        if point < 0:
            raise ReplicationError(
                f"no consistent point between local epochs {_show(local)} and the master's {_show(master)}"
            )
        if point < store.min_offset:
            raise ReplicationError(f"consistent point {point} is before this log's start {store.min_offset}")
        starts = {e.epoch: e.start_offset for e in master}
        stale_epochs = any(e.start_offset >= point and starts.get(e.epoch) != e.start_offset for e in local)
        if point < store.max_offset or stale_epochs:
            logger.info("truncating log from %d to the consistent point %d", store.max_offset, point)
            store.truncate(point)
        self._start(point)

    def _from_scratch(self, store: ReplicatedLog) -> None:
        """Keep nothing: cut the log to its start, drop the epochs, and ask for offset 0 (the master
        answers with its head state first if its log starts after 0)."""
        if store.epochs.entries() or store.max_offset > store.min_offset:
            store.truncate(store.min_offset)
        store.epochs.truncate_suffix_by_epoch(0)
        self._new_replica = True
        self._start(0)

    def _start(self, offset: int) -> None:
        self.state = HAState.TRANSFER
        self._position = offset
        self._first_frame = True

    # ---- the master's head state: a copy from scratch -----------------------------------------------
    def _on_head(self, frame: MasterHead, store: ReplicatedLog) -> None:
        if self.state is not HAState.TRANSFER or not self._first_frame:
            raise ProtocolError(f"master HEAD in state {self.state.name}, not before the first TRANSFER")
        start = frame.head.min_offset
        if store.max_offset > store.min_offset:
            if start < store.max_offset:
                raise ReplicationError(
                    f"master HEAD at offset={start}, inside this log [{store.min_offset}, {store.max_offset})"
                )
            logger.warning(
                "the master's log starts at %d, after this log's end %d (its retention deleted what this replica "
                "needs next): copying from scratch",
                start,
                store.max_offset,
            )
            store.truncate(store.min_offset)
        store.seed(frame.head)
        self._first_frame = False
        self._new_replica = False
        self._position = store.max_offset
        logger.info("seeded with the master's head state at offset %d", start)

    # ---- the master's data -------------------------------------------------------------------------
    def _on_transfer(self, frame: MasterTransfer, store: ReplicatedLog) -> None:
        if self.state is not HAState.TRANSFER:
            raise ProtocolError(f"master TRANSFER in state {self.state.name}")
        self._first_frame = False
        empty = store.max_offset == store.min_offset
        if frame.offset != store.max_offset and not (self._new_replica and empty):
            raise ReplicationError(f"master sent offset={frame.offset}, this log ends at {store.max_offset}")
        last = store.epochs.last_entry()
        if last is None or frame.epoch > last.epoch:
            if not store.append_epoch(EpochEntry(frame.epoch, frame.epoch_start_offset)):
                raise ReplicationError(f"epoch {frame.epoch} at {frame.epoch_start_offset} refused after {last}")
        elif frame.epoch < last.epoch or frame.epoch_start_offset != last.start_offset:
            raise ReplicationError(
                f"frame of epoch {frame.epoch} starting at {frame.epoch_start_offset} disagrees with the "
                f"last local epoch {last.epoch} starting at {last.start_offset}"
            )
        if frame.body:
            store.append_raw(frame.offset, frame.body)
            self._position = store.max_offset
        store.set_confirm_offset(min(frame.confirm_offset, store.max_offset))


def _show(entries: list[EpochEntry] | tuple[EpochEntry, ...]) -> str:
    return ", ".join(f"{e.epoch}@{e.start_offset}" for e in entries) or "none"
