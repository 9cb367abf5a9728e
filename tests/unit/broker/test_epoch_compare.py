"""`brokergroup admin compare-epochs`' core: shared epochs and the consistent point of two replicas,
checked against what the real slave handshake (`ha.slave_conn`) does with the same logs."""

from __future__ import annotations

import random
import zlib
from pathlib import Path

import pytest
from ha_fakes import FakeLog, record

from brokergroup.broker.epoch_compare import Outcome, Replica, compare, parse_entries, wire
from brokergroup.broker.epoch_compare_cmd import SourceError, commit_log_extent, load_files
from brokergroup.broker.ha import ReplicationError
from brokergroup.broker.ha.slave_conn import SlaveConnection
from brokergroup.broker.protocol.ha import EpochStart, MasterHandshake, SlaveTransferAck, encode
from brokergroup.broker.settings import StoreSettings
from brokergroup.broker.store.epoch import EpochEntry, encode_epoch_file
from brokergroup.broker.store.message_store import MessageStore
from brokergroup.broker.store.types import Message


def replica(source: str, *starts: tuple[int, int], max_offset: int | None, **kw: object) -> Replica:
    return Replica(source, tuple(EpochEntry(e, s) for e, s in starts), max_offset, **kw)  # type: ignore[arg-type]


# ---- the decision, case by case ----------------------------------------------------------------


def test_an_old_master_after_a_failover_truncates_its_unreplicated_tail() -> None:
    old = replica("old", (1, 0), max_offset=500, confirm_offset=300)
    new = replica("new", (1, 0), (2, 300), max_offset=450, role="master")
    c = compare(old, new)
    assert (c.master.source, c.slave.source) == ("new", "old")
    assert c.master_because == "it is the live master"
    assert c.outcome is Outcome.TRUNCATE and c.point == 300 and c.truncated_bytes == 200
    assert [(x.epoch, x.start_offset, x.end_master, x.end_slave) for x in c.shared] == [(1, 0, 300, 500)]
    assert c.first_difference == "only the master has epoch(s) 2 from 300"
    assert "the slave cuts 200 bytes [300, 500)" in c.reasons
    assert not any("confirm offset" in r for r in c.reasons)


def test_a_cut_below_the_slaves_confirm_offset_is_called_out() -> None:
    c = compare(
        replica("s", (1, 0), max_offset=500, confirm_offset=400), replica("m", (1, 0), (2, 300), max_offset=450)
    )
    assert c.point == 300
    assert any("below the slave's confirm offset 400" in r for r in c.reasons)


def test_a_slave_behind_in_the_same_epoch_keeps_everything() -> None:
    c = compare(replica("m", (1, 0), (2, 100), max_offset=300), replica("s", (1, 0), (2, 100), max_offset=250))
    assert (
        c.master.source == "m"
        and c.master_because == "same last epoch: a plays the master (give --master b for the other way)"
    )
    assert c.outcome is Outcome.KEEP and c.point == 250 and c.truncated_bytes == 0
    assert c.first_difference is None


def test_the_newer_last_epoch_plays_the_master_unless_named() -> None:
    a, b = replica("a", (1, 0), (3, 50), max_offset=60), replica("b", (1, 0), (2, 40), max_offset=90)
    assert compare(a, b).master.source == "a"
    named = compare(a, b, master="b")
    assert named.master.source == "b" and named.outcome is Outcome.STALE_MASTER and named.point is None
    assert "older than the slave's 3" in named.reasons[0]
    with pytest.raises(ValueError, match="'a' or 'b'"):
        compare(a, b, master="c")


def test_an_empty_slave_replicates_from_scratch() -> None:
    c = compare(replica("m", (1, 0), max_offset=90), replica("s", max_offset=0))
    assert c.outcome is Outcome.FROM_SCRATCH and c.point == 0
    empty_log = compare(replica("m", (2, 0), max_offset=90), replica("s", (1, 0), max_offset=0), master="a")
    assert empty_log.outcome is Outcome.FROM_SCRATCH


def test_no_shared_epoch_means_no_consistent_point() -> None:
    c = compare(replica("m", (1, 0), (2, 50), max_offset=90), replica("s", (1, 10), max_offset=30))
    assert c.outcome is Outcome.NO_CONSISTENT_POINT and c.point is None and c.shared == ()
    assert c.first_difference == "entry 1: the master has epoch 1 from 0, the slave epoch 1 from 10"


def test_a_point_before_the_slaves_log_start_is_refused() -> None:
    c = compare(replica("m", (1, 0), (2, 50), max_offset=90), replica("s", (1, 0), max_offset=400, min_offset=256))
    assert c.outcome is Outcome.BEFORE_LOG_START and c.point is None


def test_unknown_max_offsets_from_files_without_a_commit_log() -> None:
    both = compare(replica("m", (1, 0), max_offset=None), replica("s", (1, 0), max_offset=None))
    assert both.outcome is Outcome.KEEP and both.point is None
    assert "neither max offset is known" in both.reasons[0]
    slave_unknown = compare(replica("m", (1, 0), (2, 70), max_offset=None), replica("s", (1, 0), max_offset=None))
    assert slave_unknown.outcome is Outcome.TRUNCATE and slave_unknown.point == 70
    assert slave_unknown.truncated_bytes is None


def test_bad_replicas_are_refused_with_their_source() -> None:
    with pytest.raises(ValueError, match="x: epoch entries must strictly increase: 2-10 then 2-20"):
        replica("x", (2, 10), (2, 20), max_offset=30)
    with pytest.raises(ValueError, match="x: need 0 <= min offset 50 <= max offset 40"):
        replica("x", (1, 0), max_offset=40, min_offset=50)
    with pytest.raises(ValueError, match="u: an epoch entry must be an object with integer epoch"):
        parse_entries("u", [{"epoch": "1", "startOffset": 0}])
    with pytest.raises(ValueError, match="u: an epoch entry must be an object"):
        parse_entries("u", [7])


def test_json_names_every_part() -> None:
    out = wire(compare(replica("s", (1, 0), max_offset=500), replica("m", (1, 0), (2, 300), max_offset=450)))
    assert out["outcome"] == "TRUNCATE" and out["consistentPoint"] == 300 and out["truncatedBytes"] == 200
    assert out["sharedEpochs"] == [{"epoch": 1, "startOffset": 0, "endOnMaster": 300, "endOnSlave": 500}]


# ---- the same answer as the real slave handshake --------------------------------------------------


def _replica_of(name: str, log: FakeLog) -> Replica:
    return Replica(name, log.epochs.entries(), log.max_offset, log.min_offset)


def _handshake(master: FakeLog, slave: FakeLog) -> tuple[str, int | None]:
    """What `SlaveConnection` does: ("refused", None), ("cut", offset) or ("kept", start offset)."""
    entries = master.epochs.entries()
    frame = MasterHandshake(
        master_max_phy_offset=master.max_offset,
        master_last_epoch=entries[-1].epoch if entries else -1,
        entries=tuple(EpochStart(e.epoch, e.start_offset) for e in entries),
    )
    conn = SlaveConnection(broker_id=2, is_learner=False, expected_epoch=0, heartbeat_interval_ms=1000, now_ms=0)
    conn.handshake(0)
    try:
        acks = conn.receive(encode(frame), slave, 0)
    except ReplicationError:
        return "refused", None
    assert len(acks) == 1 and isinstance(acks[0], SlaveTransferAck)
    if slave.truncations:
        return "cut", slave.truncations[-1]
    return "kept", acks[0].slave_max_phy_offset


def _random_pair(rng: random.Random) -> tuple[FakeLog, FakeLog]:
    """Two replicas sharing a history, then each written on by its own masters (epochs apart)."""
    a, b = FakeLog(segment_size=1 << 20), FakeLog(segment_size=1 << 20)
    epoch = 0
    for _ in range(rng.randint(0, 3)):
        epoch += rng.randint(1, 2)
        a.new_epoch(epoch)
        b.new_epoch(epoch)
        records = [record(rng.randint(0, 20)) for _ in range(rng.randint(0, 4))]
        if records:
            a.put(*records)
            b.put(*records)
    a_epoch, b_epoch = epoch, epoch
    for log, parity in ((a, 0), (b, 1)):
        if rng.random() < 0.5 and log.epochs.entries():  # more of the last shared epoch, on this side only
            log.put_n(rng.randint(1, 3))
        for _ in range(rng.randint(0, 2)):
            nxt = max(a_epoch, b_epoch) + 1
            nxt += (nxt + parity) % 2  # a's own epochs are even, b's odd: never the same epoch on both
            if parity:
                b_epoch = nxt
            else:
                a_epoch = nxt
            log.new_epoch(nxt)
            log.put_n(rng.randint(0, 3))
    return a, b


@pytest.mark.parametrize("seed", range(300))
def test_the_prediction_is_what_the_slave_handshake_does(seed: int) -> None:
    rng = random.Random(seed)
    a, b = _random_pair(rng)
    c = compare(_replica_of("a", a), _replica_of("b", b), master=rng.choice([None, None, "a", "b"]))
    master, slave = (a, b) if c.master.source == "a" else (b, a)
    if not master.epochs.entries():
        return  # a master always has an epoch
    done, offset = _handshake(master, slave)
    if c.outcome in (Outcome.STALE_MASTER, Outcome.NO_CONSISTENT_POINT, Outcome.BEFORE_LOG_START):
        assert done == "refused", c
    elif c.outcome is Outcome.FROM_SCRATCH:
        assert done in ("cut", "kept") and (offset == 0 if done == "kept" else offset == c.point), c
    elif c.outcome is Outcome.TRUNCATE:
        assert (done, offset) == ("cut", c.point), c
    else:
        assert (done, offset) == ("kept", c.point), c


# ---- a store directory read from its files -----------------------------------------------------


def _store(tmp_path: Path) -> MessageStore:
    return MessageStore.open(tmp_path / "data" / "store", StoreSettings(segment_size=4096))


def test_files_of_a_real_store_read_like_its_status(tmp_path: Path) -> None:
    store = _store(tmp_path)
    try:
        store.append_epoch(EpochEntry(1, 0))
        for i in range(100):  # several segments
            store.put_messages([Message("t", 0, b"x" * 100 + bytes([i]), 1)], now_ms=2)
        store.append_epoch(EpochEntry(3, store.max_offset))
        store.put_messages([Message("t", 0, b"y", 1)], now_ms=2)
        store.set_confirm_offset(store.max_offset)
        store.flush_checkpoint()
        expected = (store.min_offset, store.max_offset, store.confirm_offset, store.epochs.entries())
    finally:
        store.close()
    for source in (tmp_path / "data", tmp_path / "data" / "store", tmp_path / "data" / "store" / "epochFileCheckpoint"):
        r = load_files(str(source))
        assert (r.min_offset, r.max_offset, r.confirm_offset) == expected[:3]
        assert [(e.epoch, e.start_offset) for e in r.entries] == [(e.epoch, e.start_offset) for e in expected[3]]


def test_copied_epoch_file_alone_reads_with_an_unknown_log(tmp_path: Path) -> None:
    (tmp_path / "epochFileCheckpoint").write_bytes(encode_epoch_file([EpochEntry(1, 0), EpochEntry(2, 90)]))
    r = load_files(str(tmp_path))
    assert r.max_offset is None and r.confirm_offset is None and [e.epoch for e in r.entries] == [1, 2]


def test_a_pending_truncation_marker_caps_the_log(tmp_path: Path) -> None:
    log = tmp_path / "commitlog"
    log.mkdir()
    (log / f"{0:020d}").write_bytes(b"\0" * 4096)
    (log / f"{4096:020d}").write_bytes(b"x" * 100 + b"\0" * 300)  # torn bytes count, zeros written ahead do not
    assert commit_log_extent(log) == (0, 4196)
    (log / "truncate.marker").write_bytes(b"4000\n%d\n" % zlib.crc32(b"4000\n"))
    assert commit_log_extent(log) == (0, 4000)
    (log / "truncate.marker").write_bytes(b"garbage")
    with pytest.raises(SourceError, match=r"truncate\.marker is damaged"):
        commit_log_extent(log)


def test_bad_directories_are_named(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="nowhere: no such file or directory"):
        load_files(str(tmp_path / "nowhere"))
    with pytest.raises(SourceError, match="holds no epochFileCheckpoint"):
        load_files(str(tmp_path))
    (tmp_path / "epochFileCheckpoint").write_bytes(b"3\n1\n1-0\n")
    with pytest.raises(SourceError, match=r"epochFileCheckpoint: cannot read .*crc32 mismatch"):
        load_files(str(tmp_path))
    (tmp_path / "epochFileCheckpoint").unlink()
    (tmp_path / "epochFileCheckpoint").mkdir()
    with pytest.raises(SourceError, match="cannot read"):
        load_files(str(tmp_path))
