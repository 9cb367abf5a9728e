"""A replica copying from scratch a log whose head retention deleted (#18 item 3): the master's HEAD
frame (its head state where the copy starts) and how slave and store apply it.

The codec refuses every malformed HEAD naming the field; the slave takes it once, only before the
first TRANSFER; real `MessageStore`s joined by the two connections end with the master's queue
offsets, consumer offsets, producer sequences and epochs, from its min offset or (syncFromLastFile)
its last segment, also after a kill -9 at every step of the seeding.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest
from ha_fakes import FakeLog, Pipe

from brokergroup.broker.errors import ProtocolError, StoreError
from brokergroup.broker.ha.master_conn import MasterConnection
from brokergroup.broker.ha.slave_conn import SlaveConnection
from brokergroup.broker.protocol.ha import (
    HEAD_TAG,
    NEED_DATA,
    MasterFrameDecoder,
    MasterHead,
    MasterTransfer,
    encode,
)
from brokergroup.broker.settings import StoreSettings
from brokergroup.broker.store.epoch import EpochEntry
from brokergroup.broker.store.head import encode_head
from brokergroup.broker.store.indexes import HeadState
from brokergroup.broker.store.message_store import STEP_SEED_HEAD_WRITTEN, STEP_SEED_RESET, MessageStore
from tests.unit.broker.store_factories import FakeClock, msg

HEAD = HeadState(8192, {("orders", 0): 12, ("a b", 3): 0}, {("g", "orders", 0): 9}, {7: 41, 3: -1})
SEGMENT = 4096
SETTINGS = StoreSettings(segment_size=SEGMENT, max_message_size=1024, retention_bytes=3 * SEGMENT)


# -- the frame ----------------------------------------------------------------------------------------


def test_a_head_frame_round_trips_fed_byte_by_byte_between_other_frames() -> None:
    transfer = MasterTransfer(offset=8192, epoch=2, epoch_start_offset=0, confirm_offset=8192, body=b"")
    data = encode(MasterHead(HEAD)) + encode(transfer)
    assert struct.unpack(">iiq", data[:16]) == (HEAD_TAG, len(encode_head(HEAD)), 8192)
    decoder, seen = MasterFrameDecoder(), []
    for byte in data:
        decoder.feed(bytes([byte]))
        if (frame := decoder.next_frame()) is not NEED_DATA:
            seen.append(frame)
    assert seen == [MasterHead(HEAD), transfer]


def head_frame(body: bytes, min_offset: int = 8192, size: int | None = None) -> bytes:
    return struct.pack(">iiq", HEAD_TAG, len(body) if size is None else size, min_offset) + body


def document(json_line: bytes) -> bytes:
    """A head-state body with a right CRC around any JSON line."""
    import zlib

    line = json_line + b"\n"
    return b"%d\n" % zlib.crc32(line) + line


GOOD = b'{"minOffset":8192,"queues":[],"groups":[],"producers":[]}'


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (head_frame(b"", size=0), r"master HEAD: bodySize=0 is out of range \[1, 100\]"),
        (head_frame(b"", size=101), r"master HEAD: bodySize=101 is out of range \[1, 100\]"),
        (head_frame(b"", size=-5), r"master frame: bodySize=-5 is negative"),
        (head_frame(document(GOOD), min_offset=-1), r"master HEAD: minOffset=-1 is out of range"),
        (head_frame(document(GOOD), min_offset=4096), r"minOffset=4096 differs from the body's minOffset=8192"),
        (head_frame(document(GOOD).replace(b"8192", b"8193", 1)), r"master HEAD: body: crc32 mismatch"),
        (head_frame(b"12\n{}"), r"master HEAD: body: expected two lines"),
        (head_frame(document(b"{not json")), r"master HEAD: body: the JSON line does not parse"),
        (head_frame(document(b"[1]")), r"master HEAD: body: the JSON line is not an object"),
        (head_frame(document(GOOD.replace(b'"queues":[],', b""))), r"body: the JSON object has no 'queues'"),
        (
            head_frame(document(GOOD.replace(b'"queues":[]', b'"queues":[["t",0]]'))),
            r"body: queues\[0\] must be a list of 3 items, not \['t', 0\]",
        ),
        (
            head_frame(document(GOOD.replace(b'"queues":[]', b'"queues":[["t",0,-3]]'))),
            r"body: queue base must be an integer in \[0, .*\], not -3",
        ),
        (
            head_frame(document(GOOD.replace(b'"groups":[]', b'"groups":[["g",1,0,5]]'))),
            r"body: group topic must be a string, not 1",
        ),
        (
            head_frame(document(GOOD.replace(b'"producers":[]', b'"producers":[[true,1]]'))),
            r"body: producer id must be an integer in \[0, .*\], not True",
        ),
        (
            head_frame(document(GOOD.replace(b'"producers":[]', b'"producers":{}'))),
            r"body: 'producers' must be a list, not \{\}",
        ),
        (head_frame(document(GOOD.replace(b'"minOffset":8192,', b""))), r"body: the JSON object has no 'minOffset'"),
    ],
)
def test_a_malformed_head_frame_is_refused_naming_the_field_and_poisons_the_decoder(data: bytes, message: str) -> None:
    decoder = MasterFrameDecoder(max_transfer_body=100)
    decoder.feed(data)
    with pytest.raises(ProtocolError, match=message):
        decoder.next_frame()
    with pytest.raises(ProtocolError, match="decoder unusable"):
        decoder.next_frame()


def test_a_head_frame_with_a_negative_offset_cannot_be_built() -> None:
    with pytest.raises(ProtocolError, match=r"master HEAD: minOffset=-4096 is out of range"):
        MasterHead(HeadState.empty(-4096))


# -- the slave's connection (fakes) ----------------------------------------------------------------------


def retained_master(
    segments: int = 6, kept_from: int = 3, behind: FakeLog | None = None, epoch_2_in: int = 1
) -> FakeLog:
    """Epoch 1 from 0, epoch 2 from the middle of segment `epoch_2_in`; segments before `kept_from` deleted.
    `behind` gets a copy of the log's first records (a replica that stopped there)."""
    master = FakeLog(segment_size=256)
    master.new_epoch(1)
    master.put_n(3)
    while len(master.log.segment_starts) < epoch_2_in + 1:
        master.put_n(1)
    master.put_n(1)
    master.new_epoch(2)
    while len(master.log.segment_starts) < segments:
        master.put_n(1)
    master.set_confirm_offset(master.max_offset)
    if behind is not None:
        data = master.read_raw(0, 256)
        for entry in master.epochs.entries():
            if entry.start_offset < len(data):
                behind.append_epoch(entry)
        behind.append_raw(0, data)
    start = master.log.segment_starts[kept_from]
    master.log.delete_head(start)
    master.epochs.truncate_prefix_by_offset(start)
    master.heads[start] = HeadState(start, {("t", 0): 11}, {("g", "t", 0): 4}, {9: 30})
    return master


def test_an_empty_replica_is_seeded_then_copies_with_the_masters_epochs() -> None:
    master, slave = retained_master(), FakeLog(segment_size=256)
    pipe = Pipe(master, slave)
    pipe.pump()
    start = master.min_offset
    assert isinstance(pipe.frames[1], MasterHead) and slave.seeds == [master.heads[start]]
    assert (slave.min_offset, slave.content()) == (start, master.content())
    assert slave.epoch_starts() == master.epoch_starts() == [(2, master.epochs.entries()[0].start_offset)]
    assert [a.slave_max_phy_offset for a in pipe.acks][:2] == [0, start]


def test_a_replica_behind_the_masters_retention_cuts_its_log_and_is_seeded() -> None:
    slave = FakeLog(segment_size=256)
    master = retained_master(behind=slave, epoch_2_in=4)  # the master still knows the slave's epoch 1
    stopped = slave.max_offset
    assert 0 < stopped < master.min_offset
    pipe = Pipe(master, slave)
    pipe.pump()
    assert slave.truncations == [0] and slave.seeds == [master.heads[master.min_offset]]
    assert slave.content() == master.content() and slave.epoch_starts() == master.epoch_starts()
    assert pipe.acks[0].slave_max_phy_offset == stopped  # it asked to continue where it stopped


@pytest.mark.parametrize("when", ["before the first ack", "after a TRANSFER", "twice"])
def test_a_head_frame_out_of_place_is_a_protocol_error(when: str) -> None:
    slave = FakeLog(segment_size=256)
    conn = SlaveConnection(broker_id=2, is_learner=False, expected_epoch=0, heartbeat_interval_ms=1000, now_ms=0)
    conn.handshake(0)
    head = encode(MasterHead(HeadState.empty(512)))
    if when != "before the first ack":
        master = retained_master()
        frames = Pipe(master, FakeLog(segment_size=256)).pump()
        conn.receive(encode(frames[0]), slave, 0)  # the handshake
        conn.receive(encode(frames[2] if when == "after a TRANSFER" else frames[1]), slave, 0)
    with pytest.raises(ProtocolError, match="master HEAD in state"):
        conn.receive(head, slave, 0)


# -- real stores -------------------------------------------------------------------------------------


def open_store(directory: Path, **kwargs: object) -> MessageStore:
    return MessageStore.open(directory, SETTINGS, clock=FakeClock(), **kwargs)  # type: ignore[arg-type]


def fill(store: MessageStore, count: int, *, start: int = 0) -> None:
    """`count` messages of ~300 bytes over two queues (producer 7), a group commit every 20, confirmed."""
    if store.epochs.last_entry() is None:
        store.append_epoch(EpochEntry(1, 0))
    for i in range(start, start + count):
        store.put_messages([msg(b"x" * 240 + b"%06d" % i, queue_id=i % 2, pid=7, seq=i)], now_ms=1)
        if i % 20 == 19:
            store.put_consumer_offset(group="g", topic="orders", queue_id=0, offset=i // 2 - 3, now_ms=1)
    store.set_confirm_offset(store.max_offset)
    store.flush()


def replicate(master: MessageStore, slave: MessageStore, *, from_last_file: bool = False) -> None:
    """Join the two stores with a master and a slave connection until the slave has everything
    (the slave fsyncs after each frame: its acks under SYNC flush wait for that)."""
    mc = MasterConnection(batch_size=2000, heartbeat_interval_ms=1000, now_ms=0)
    sc = SlaveConnection(
        broker_id=2,
        is_learner=False,
        expected_epoch=0,
        heartbeat_interval_ms=1000,
        now_ms=0,
        sync_from_last_file=from_last_file,
    )
    to_master = encode(sc.handshake(0))
    while True:
        if to_master:
            mc.receive(to_master, master, 0)
            to_master = b""
        frame = mc.next_transfer(master, 0)
        if frame is None:
            return
        acks = sc.receive(encode(frame), slave, 0)
        slave.flush()
        to_master = b"".join(encode(ack) for ack in [*acks, *sc.flushed(slave, 0)])


def view(store: MessageStore, low: int = 0) -> dict[str, object]:
    """Consumers' view of both queues from queue offset `low` (or each queue's min), and more."""
    queues = {}
    for queue_id in (0, 1):
        first = max(low, store.queue_min_offset("orders", queue_id))
        got = store.get_messages("orders", queue_id, first, max_count=10_000, max_bytes=10**8)
        queues[queue_id] = (store.queue_max_offset("orders", queue_id), [(m.queue_offset, m.body) for m in got])
    return {
        "max": store.max_offset,
        "queues": queues,
        "group": store.consumer_offset("g", "orders", 0),
        "pid7": store._indexes.producers.last_seq(7),
    }


@pytest.mark.parametrize("from_last_file", [False, True], ids=["min-offset", "last-segment"])
def test_a_seeded_store_numbers_queues_groups_and_producers_as_its_master(tmp_path: Path, from_last_file: bool) -> None:
    with closing(open_store(tmp_path / "m")) as master, closing(open_store(tmp_path / "s")) as slave:
        fill(master, 60)
        for epoch, start_at in ((2, 60), (3, 110)):  # master elections: epochs 2 and 3
            assert master.append_epoch(EpochEntry(epoch, master.max_offset))
            fill(master, 50 if epoch == 2 else 10, start=start_at)
        assert master.apply_retention() > 0 and master.min_offset > 0
        replicate(master, slave, from_last_file=from_last_file)
        start = master._log.segment_starts[-1] if from_last_file else master.min_offset
        assert (slave.min_offset, slave.max_offset) == (start, master.max_offset)
        # the master's epochs cut at the start (truncatePrefixByOffset), original start offsets kept
        assert slave.epochs.entries() == tuple(e for e in master.epochs.entries() if e.end_offset > start)
        assert [e.epoch for e in slave.epochs.entries()] == ([3] if from_last_file else [2, 3])
        fill(master, 30, start=120)  # more, across a new group commit, then caught up again
        replicate(master, slave)
        low = max(slave.queue_min_offset("orders", 0), slave.queue_min_offset("orders", 1))
        assert view(slave, low) == view(master, low)
        assert slave.queue_min_offset("orders", 0) == master.head_state_at(start).queue_bases[("orders", 0)]
    with closing(open_store(tmp_path / "s")) as reopened, closing(open_store(tmp_path / "m")) as master:
        assert view(reopened, low) == view(master, low)
        # the seeded replica can take over: its puts continue the master's numbering
        expected = master.put_messages([msg(b"next", pid=7, seq=150)], now_ms=1).appended[0].queue_offset
        assert reopened.put_messages([msg(b"next", pid=7, seq=150)], now_ms=1).appended[0].queue_offset == expected
        assert reopened.put_messages([msg(b"again", pid=7, seq=149)], now_ms=1).appended[0].duplicate


def crash_at(step: str) -> Callable[[str], None]:
    def hook(name: str) -> None:
        if name == step:
            raise Crash(step)

    return hook


class Crash(Exception):
    """Stands for kill -9 at this step."""


@pytest.mark.parametrize("step", [STEP_SEED_HEAD_WRITTEN, STEP_SEED_RESET])
def test_a_kill_9_at_each_step_of_seeding_leaves_a_store_that_is_seeded_again(tmp_path: Path, step: str) -> None:
    with closing(open_store(tmp_path / "m")) as master:
        fill(master, 120)
        master.apply_retention()
        crashing = open_store(tmp_path / "s", step_hook=crash_at(step))
        with pytest.raises(Crash):
            replicate(master, crashing)
        crashing._log.close()  # the process died: nothing more is written
        with closing(open_store(tmp_path / "s")) as slave:
            assert slave.max_offset == slave.min_offset  # an empty log, at the head or where it was
            replicate(master, slave)
            assert slave.min_offset == master.min_offset and slave.epochs.entries() == master.epochs.entries()
            assert view(slave) == view(master)


def test_seeding_refuses_a_log_with_data_or_another_segment_size(tmp_path: Path) -> None:
    with closing(open_store(tmp_path / "a")) as store:
        fill(store, 3)
        with pytest.raises(StoreError, match=r"cannot seed a log holding \[0, "):
            store.seed(HeadState.empty(8192))
    other = StoreSettings(segment_size=3 * SEGMENT, max_message_size=1024)
    with (
        closing(MessageStore.open(tmp_path / "b", other, clock=FakeClock())) as store,
        pytest.raises(StoreError, match=r"offset=4096, not a multiple of .*segment_size=12288"),
    ):
        store.seed(HeadState.empty(SEGMENT))


def test_head_states_exist_at_segment_starts_only(tmp_path: Path) -> None:
    with closing(open_store(tmp_path)) as store:
        fill(store, 60)
        starts = store._log.segment_starts
        assert store.replica_start(from_last_segment=False) == 0
        assert store.replica_start(from_last_segment=True) == starts[-1]
        assert store.head_state_at(0) == HeadState.empty(0)
        assert store.head_state_at(starts[1]).queue_bases[("orders", 0)] > 0
        with pytest.raises(ValueError, match="not a segment start"):
            store.head_state_at(starts[1] + 1)
