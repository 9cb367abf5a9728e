"""Master <-> slave replication frames (RocketMQ AutoSwitch HA), sans-I/O.

The four frames of RocketMQ's `AutoSwitchHAClient` / `AutoSwitchHAConnection` (reference §4.3),
byte for byte, plus one of brokergroup's own (HEAD). All integers are big-endian and signed (Java
`ByteBuffer`); `state` is the `HAConnectionState` ordinal of the sender (HANDSHAKE=1, TRANSFER=2),
or HEAD=10 (no ordinal: RocketMQ has no such frame).

Grammar (sizes in bytes)::

    slave -> master
      SlaveHandshake  := state:i32=1  isSyncFromLastFile:i16 (0|1)  isAsyncLearner:i16 (0|1)
                         slaveBrokerId:i64 (>=1)                                          # 16
      SlaveTransferAck:= state:i32=2  slaveMaxPhyOffset:i64 (>=0)                         # 12

    master -> slave
      MasterHandshake := state:i32=1  bodySize:i32 (=12*n, n<=max_handshake_entries)
                         masterMaxPhyOffset:i64 (>=0)  masterLastEpoch:i32 (>=0)          # 20
                         EpochStart{n}
      EpochStart      := epoch:i32 (>=0)  startOffset:i64 (>=0)                           # 12
      MasterTransfer  := state:i32=2  bodySize:i32 (0..max_transfer_body)
                         offset:i64 (>=0)  epoch:i32 (>=0)  epochStartOffset:i64 (>=0)
                         confirmOffset:i64 (>=0)                                          # 36
                         body:u8{bodySize}   (raw commit-log bytes starting at `offset`)
      MasterHead      := state:i32=10  bodySize:i32 (1..max_transfer_body)  minOffset:i64 (>=0)  # 16
                         body:u8{bodySize}   (a head-state file, store/head.py: crc32 line, JSON line,
                                              whose minOffset equals the header's)

HEAD seeds a replica that starts from scratch (an empty or rebuilt one, or one behind the
master's retention) where the master's log no longer starts at 0: the state the records before
`minOffset` left behind (queue bases, group offsets, producer sequences), so the replica numbers
queues as the master does. It is sent once, after the slave's first ack and before the first
TRANSFER, whose offset is `minOffset`.

Semantic rules checked on both encode (frame construction) and decode: handshake epochs strictly
increase, so do their start offsets, the last one is `masterLastEpoch` and starts at or before
`masterMaxPhyOffset`; a transfer's `epochStartOffset` is at or before the end of its body (the
frame that ends exactly at an epoch boundary may already announce the next epoch, §4.3).

Decoders differ from RocketMQ on purpose: they wait for a *complete* frame (RocketMQ's master
parses a 16-byte handshake once 12 bytes are buffered), and any invalid value raises
`ProtocolError` naming the field and value. After an error a decoder is poisoned: every further
call raises, so the connection must be dropped. Which frame is legal in which connection state
(READY/HANDSHAKE/TRANSFER) is the connection's business, not the codec's.
"""

from __future__ import annotations

import enum
import itertools
import struct
from dataclasses import dataclass
from typing import Final

from brokergroup.broker.errors import ProtocolError
from brokergroup.broker.store.head import decode_head, encode_head
from brokergroup.broker.store.indexes import HeadState

INT32_MAX: Final = 2**31 - 1
INT64_MAX: Final = 2**63 - 1
DEFAULT_MAX_TRANSFER_BODY: Final = 32 * 1024 * 1024
DEFAULT_MAX_HANDSHAKE_ENTRIES: Final = 1000


class HAState(enum.IntEnum):
    """RocketMQ `HAConnectionState` ordinals; only HANDSHAKE and TRANSFER appear in frames."""

    READY = 0
    HANDSHAKE = 1
    TRANSFER = 2
    SUSPEND = 3
    SHUTDOWN = 4


HEAD_TAG: Final = 10
"""The `state` field of a HEAD frame (a brokergroup extension; not a `HAConnectionState`)."""


_STATE = struct.Struct(">i")  # state: HAState ordinal of the sender
_SLAVE_HANDSHAKE = struct.Struct(
    ">i"  # state = 1
    "h"  # isSyncFromLastFile: 1 = start from the master's last segment, 0 = from its min offset
    "h"  # isAsyncLearner: 1 = replicate but never join the sync-state-set
    "q"  # slaveBrokerId: the slave's controller broker id
)
_SLAVE_ACK = struct.Struct(
    ">i"  # state = 2
    "q"  # slaveMaxPhyOffset: end of the slave's commit log (everything below is stored)
)
_MASTER_PREFIX = struct.Struct(">ii")  # state, bodySize: enough to size any master frame
_MASTER_HANDSHAKE = struct.Struct(
    ">i"  # state = 1
    "i"  # bodySize = 12 * number of epoch entries
    "q"  # masterMaxPhyOffset: end of the master's commit log
    "i"  # masterLastEpoch: the master's newest epoch
)
_EPOCH_START = struct.Struct(
    ">i"  # epoch
    "q"  # startOffset: commit-log offset of the first byte written in this epoch
)
_MASTER_TRANSFER = struct.Struct(
    ">i"  # state = 2
    "i"  # bodySize: number of commit-log bytes after this header (0 = heartbeat)
    "q"  # offset: commit-log offset of the first body byte
    "i"  # epoch: the epoch that wrote the body (or the next one, at an epoch boundary)
    "q"  # epochStartOffset: start offset of `epoch`
    "q"  # confirmOffset: the master's commit point; the slave applies min(it, own max offset)
)
_MASTER_HEAD = struct.Struct(
    ">i"  # state = HEAD_TAG
    "i"  # bodySize: bytes of the head-state document after this header
    "q"  # minOffset: where the replica's log starts (the first TRANSFER's offset)
)
MASTER_HEAD_HEADER_SIZE: Final = _MASTER_HEAD.size  # 16
SLAVE_HANDSHAKE_SIZE: Final = _SLAVE_HANDSHAKE.size  # 16
SLAVE_ACK_SIZE: Final = _SLAVE_ACK.size  # 12
MASTER_HANDSHAKE_HEADER_SIZE: Final = _MASTER_HANDSHAKE.size  # 20
MASTER_TRANSFER_HEADER_SIZE: Final = _MASTER_TRANSFER.size  # 36
EPOCH_START_SIZE: Final = _EPOCH_START.size  # 12


def _check(frame: str, name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ProtocolError(f"{frame}: {name}={value} is out of range [{low}, {high}]")


@dataclass(frozen=True, slots=True, kw_only=True)
class SlaveHandshake:
    slave_broker_id: int
    is_sync_from_last_file: bool = False
    is_async_learner: bool = False

    def __post_init__(self) -> None:
        _check("slave HANDSHAKE", "slaveBrokerId", self.slave_broker_id, 1, INT64_MAX)


@dataclass(frozen=True, slots=True)
class SlaveTransferAck:
    slave_max_phy_offset: int

    def __post_init__(self) -> None:
        _check("slave TRANSFER", "slaveMaxPhyOffset", self.slave_max_phy_offset, 0, INT64_MAX)


@dataclass(frozen=True, slots=True)
class EpochStart:
    """One entry of the master's handshake: an epoch and the offset where it starts."""

    epoch: int
    start_offset: int

    def __post_init__(self) -> None:
        _check("epoch entry", "epoch", self.epoch, 0, INT32_MAX)
        _check("epoch entry", "startOffset", self.start_offset, 0, INT64_MAX)


@dataclass(frozen=True, slots=True, kw_only=True)
class MasterHandshake:
    master_max_phy_offset: int
    master_last_epoch: int
    entries: tuple[EpochStart, ...] = ()

    def __post_init__(self) -> None:
        where = "master HANDSHAKE"
        _check(where, "masterMaxPhyOffset", self.master_max_phy_offset, 0, INT64_MAX)
        _check(where, "masterLastEpoch", self.master_last_epoch, 0, INT32_MAX)
        _check(where, "bodySize", len(self.entries) * EPOCH_START_SIZE, 0, INT32_MAX)
        for before, after in itertools.pairwise(self.entries):
            if after.epoch <= before.epoch or after.start_offset <= before.start_offset:
                raise ProtocolError(
                    f"{where}: epoch entries must strictly increase, got {before.epoch}-"
                    f"{before.start_offset} then {after.epoch}-{after.start_offset}"
                )
        if self.entries:
            last = self.entries[-1]
            if last.epoch != self.master_last_epoch:
                raise ProtocolError(
                    f"{where}: masterLastEpoch={self.master_last_epoch} differs from the last "
                    f"entry's epoch={last.epoch}"
                )
            if last.start_offset > self.master_max_phy_offset:
                raise ProtocolError(
                    f"{where}: last entry startOffset={last.start_offset} is beyond "
                    f"masterMaxPhyOffset={self.master_max_phy_offset}"
                )


@dataclass(frozen=True, slots=True, kw_only=True)
class MasterTransfer:
    offset: int
    epoch: int
    epoch_start_offset: int
    confirm_offset: int
    body: bytes = b""

    def __post_init__(self) -> None:
        where = "master TRANSFER"
        _check(where, "offset", self.offset, 0, INT64_MAX)
        _check(where, "epoch", self.epoch, 0, INT32_MAX)
        _check(where, "epochStartOffset", self.epoch_start_offset, 0, INT64_MAX)
        _check(where, "confirmOffset", self.confirm_offset, 0, INT64_MAX)
        _check(where, "bodySize", len(self.body), 0, INT32_MAX)
        _check(where, "offset + bodySize", self.offset + len(self.body), 0, INT64_MAX)
        if self.epoch_start_offset > self.end_offset:
            raise ProtocolError(
                f"{where}: epochStartOffset={self.epoch_start_offset} is beyond the frame's end "
                f"offset={self.end_offset}"
            )

    @property
    def end_offset(self) -> int:
        """Commit-log offset just past the body."""
        return self.offset + len(self.body)


@dataclass(frozen=True, slots=True)
class MasterHead:
    """The master's head state at `head.min_offset`, where the replica's copy starts."""

    head: HeadState

    def __post_init__(self) -> None:
        _check("master HEAD", "minOffset", self.head.min_offset, 0, INT64_MAX)

    def body(self) -> bytes:
        return encode_head(self.head)


SlaveFrame = SlaveHandshake | SlaveTransferAck
MasterFrame = MasterHandshake | MasterTransfer | MasterHead
Frame = SlaveFrame | MasterFrame


class NeedData(enum.Enum):
    """`next_frame()` needs more bytes before it can return a frame."""

    NEED_DATA = "need data"


NEED_DATA: Final = NeedData.NEED_DATA


def encode(frame: Frame) -> bytes:
    """The bytes of one frame. Frames validate themselves on construction, so this cannot fail."""
    if isinstance(frame, SlaveHandshake):
        return _SLAVE_HANDSHAKE.pack(
            HAState.HANDSHAKE,
            int(frame.is_sync_from_last_file),
            int(frame.is_async_learner),
            frame.slave_broker_id,
        )
    if isinstance(frame, SlaveTransferAck):
        return _SLAVE_ACK.pack(HAState.TRANSFER, frame.slave_max_phy_offset)
    if isinstance(frame, MasterHandshake):
        header = _MASTER_HANDSHAKE.pack(
            HAState.HANDSHAKE,
            len(frame.entries) * EPOCH_START_SIZE,
            frame.master_max_phy_offset,
            frame.master_last_epoch,
        )
        return header + b"".join(_EPOCH_START.pack(e.epoch, e.start_offset) for e in frame.entries)
    if isinstance(frame, MasterHead):
        body = frame.body()
        return _MASTER_HEAD.pack(HEAD_TAG, len(body), frame.head.min_offset) + body
    header = _MASTER_TRANSFER.pack(
        HAState.TRANSFER,
        len(frame.body),
        frame.offset,
        frame.epoch,
        frame.epoch_start_offset,
        frame.confirm_offset,
    )
    return header + frame.body


class _Decoder:
    """Buffering and poisoning shared by both decoders; subclasses parse one frame."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._error: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame (non-zero at EOF = a cut-off frame)."""
        return len(self._buf)

    def feed(self, data: bytes) -> None:
        """Add received bytes. Cheap: parsing happens in `next_frame()`."""
        self._raise_if_poisoned()
        self._buf += data

    def _raise_if_poisoned(self) -> None:
        if self._error is not None:
            raise ProtocolError(f"decoder unusable after an earlier error: {self._error}") from self._error

    def _take(self, size: int) -> bytes:
        frame = bytes(self._buf[:size])
        del self._buf[:size]  # CPython moves the start of a bytearray, no copy of the rest
        return frame

    def _poison(self, error: ProtocolError) -> ProtocolError:
        self._error = error
        self._buf.clear()
        return error


class SlaveFrameDecoder(_Decoder):
    """Decodes what a master receives from a slave: HANDSHAKE (16 bytes) and TRANSFER acks (12)."""

    def next_frame(self) -> SlaveFrame | NeedData:
        self._raise_if_poisoned()
        try:
            return self._parse()
        except ProtocolError as error:
            raise self._poison(error) from None

    def _parse(self) -> SlaveFrame | NeedData:
        if len(self._buf) < _STATE.size:
            return NEED_DATA
        (state,) = _STATE.unpack_from(self._buf)
        if state == HAState.HANDSHAKE:
            if len(self._buf) < SLAVE_HANDSHAKE_SIZE:
                return NEED_DATA
            _, from_last, learner, broker_id = _SLAVE_HANDSHAKE.unpack(self._take(SLAVE_HANDSHAKE_SIZE))
            return SlaveHandshake(
                slave_broker_id=broker_id,
                is_sync_from_last_file=_flag("isSyncFromLastFile", from_last),
                is_async_learner=_flag("isAsyncLearner", learner),
            )
        if state == HAState.TRANSFER:
            if len(self._buf) < SLAVE_ACK_SIZE:
                return NEED_DATA
            _, max_offset = _SLAVE_ACK.unpack(self._take(SLAVE_ACK_SIZE))
            return SlaveTransferAck(max_offset)
        raise ProtocolError(f"slave frame: unknown state={state} (expected 1=HANDSHAKE or 2=TRANSFER)")


def _flag(name: str, value: int) -> bool:
    if value not in (0, 1):
        raise ProtocolError(f"slave HANDSHAKE: {name}={value} must be 0 or 1")
    return value == 1


class MasterFrameDecoder(_Decoder):
    """Decodes what a slave receives from its master: HANDSHAKE (epoch entries), TRANSFER and HEAD."""

    def __init__(
        self,
        *,
        max_transfer_body: int = DEFAULT_MAX_TRANSFER_BODY,
        max_handshake_entries: int = DEFAULT_MAX_HANDSHAKE_ENTRIES,
    ) -> None:
        super().__init__()
        if not 0 <= max_transfer_body <= INT32_MAX:
            raise ValueError(f"max_transfer_body={max_transfer_body} must be in [0, {INT32_MAX}]")
        if not 0 <= max_handshake_entries * EPOCH_START_SIZE <= INT32_MAX:
            raise ValueError(f"max_handshake_entries={max_handshake_entries} is out of range")
        self._max_transfer_body = max_transfer_body
        self._max_handshake_entries = max_handshake_entries

    def next_frame(self) -> MasterFrame | NeedData:
        self._raise_if_poisoned()
        try:
            return self._parse()
        except ProtocolError as error:
            raise self._poison(error) from None

    def _parse(self) -> MasterFrame | NeedData:
        if len(self._buf) < _STATE.size:
            return NEED_DATA
        (state,) = _STATE.unpack_from(self._buf)
        if state not in (HAState.HANDSHAKE, HAState.TRANSFER, HEAD_TAG):
            raise ProtocolError(
                f"master frame: unknown state={state} (expected 1=HANDSHAKE, 2=TRANSFER or {HEAD_TAG}=HEAD)"
            )
        if len(self._buf) < _MASTER_PREFIX.size:
            return NEED_DATA
        _, body_size = _MASTER_PREFIX.unpack_from(self._buf)
        if body_size < 0:
            raise ProtocolError(f"master frame: bodySize={body_size} is negative")
        if state == HAState.HANDSHAKE:
            return self._handshake(body_size)
        if state == HEAD_TAG:
            return self._head(body_size)
        return self._transfer(body_size)

    def _head(self, body_size: int) -> MasterHead | NeedData:
        if not 0 < body_size <= self._max_transfer_body:
            raise ProtocolError(f"master HEAD: bodySize={body_size} is out of range [1, {self._max_transfer_body}]")
        if len(self._buf) < MASTER_HEAD_HEADER_SIZE + body_size:
            return NEED_DATA
        frame = self._take(MASTER_HEAD_HEADER_SIZE + body_size)
        _, _, min_offset = _MASTER_HEAD.unpack_from(frame)
        _check("master HEAD", "minOffset", min_offset, 0, INT64_MAX)
        try:
            head = decode_head(frame[MASTER_HEAD_HEADER_SIZE:])
        except (ValueError, TypeError) as error:
            raise ProtocolError(f"master HEAD: body: {error}") from None
        if head.min_offset != min_offset:
            raise ProtocolError(
                f"master HEAD: minOffset={min_offset} differs from the body's minOffset={head.min_offset}"
            )
        return MasterHead(head)

    def _handshake(self, body_size: int) -> MasterHandshake | NeedData:
        if body_size % EPOCH_START_SIZE:
            raise ProtocolError(f"master HANDSHAKE: bodySize={body_size} is not a multiple of 12")
        if body_size // EPOCH_START_SIZE > self._max_handshake_entries:
            raise ProtocolError(
                f"master HANDSHAKE: bodySize={body_size} holds more than {self._max_handshake_entries} epoch entries"
            )
        if len(self._buf) < MASTER_HANDSHAKE_HEADER_SIZE + body_size:
            return NEED_DATA
        frame = self._take(MASTER_HANDSHAKE_HEADER_SIZE + body_size)
        _, _, max_offset, last_epoch = _MASTER_HANDSHAKE.unpack_from(frame)
        entries = tuple(
            EpochStart(epoch, start) for epoch, start in _EPOCH_START.iter_unpack(frame[MASTER_HANDSHAKE_HEADER_SIZE:])
        )
        return MasterHandshake(master_max_phy_offset=max_offset, master_last_epoch=last_epoch, entries=entries)

    def _transfer(self, body_size: int) -> MasterTransfer | NeedData:
        if body_size > self._max_transfer_body:
            raise ProtocolError(f"master TRANSFER: bodySize={body_size} exceeds the limit of {self._max_transfer_body}")
        if len(self._buf) < MASTER_TRANSFER_HEADER_SIZE + body_size:
            return NEED_DATA
        frame = self._take(MASTER_TRANSFER_HEADER_SIZE + body_size)
        _, _, offset, epoch, epoch_start, confirm = _MASTER_TRANSFER.unpack_from(frame)
        return MasterTransfer(
            offset=offset,
            epoch=epoch,
            epoch_start_offset=epoch_start,
            confirm_offset=confirm,
            body=frame[MASTER_TRANSFER_HEADER_SIZE:],
        )
