"""The node-local heartbeat table (RocketMQ `DefaultBrokerHeartbeatManager`, reference §1.3.2)."""

from __future__ import annotations

import pytest
from controller_factories import CLUSTER, PROPERTY_SETTINGS, SET_A, SET_B, addr
from hypothesis import given
from hypothesis import strategies as st

from brokergroup.controller.codes import ControllerError, ResponseCode
from brokergroup.controller.heartbeat import (
    DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS,
    DEFAULT_ELECTION_PRIORITY,
    HeartbeatTable,
    validate_heartbeat,
)
from brokergroup.controller.protocol import HeartbeatRequest


def beat(
    broker_id: int | None = 1,
    *,
    name: str = SET_A,
    address: str | None = None,
    epoch: int = -1,
    max_offset: int = -1,
    confirm_offset: int = -1,
    timeout: int | None = None,
    priority: int | None = None,
) -> HeartbeatRequest:
    # The wire model requires brokerId; a request without one is built unvalidated to test the
    # table's own guard (RocketMQ's "Heart beat with empty brokerId").
    make = HeartbeatRequest if broker_id is not None else HeartbeatRequest.model_construct
    return make(
        cluster_name=CLUSTER,
        broker_name=name,
        broker_addr=address or addr(broker_id or 0),
        broker_id=broker_id,
        epoch=epoch,
        max_offset=max_offset,
        confirm_offset=confirm_offset,
        heartbeat_timeout_mills=timeout,
        election_priority=priority,
    )


# ---- validation --------------------------------------------------------------------------------------


def test_heartbeat_without_broker_id_is_invalid() -> None:
    with pytest.raises(ControllerError) as caught:
        validate_heartbeat(beat(None))
    assert caught.value.code == ResponseCode.CONTROLLER_INVALID_REQUEST
    assert caught.value.remark == "Heart beat with empty brokerId"


def test_table_refuses_heartbeat_without_broker_id_and_stays_empty() -> None:
    table = HeartbeatTable()
    with pytest.raises(ControllerError):
        table.on_heartbeat(beat(None), now_ms=0)
    assert len(table) == 0


def test_heartbeat_with_broker_id_is_valid_and_accepted() -> None:
    validate_heartbeat(beat(1))  # does not raise
    assert HeartbeatTable().on_heartbeat(beat(1), now_ms=0) is True


# ---- insertion and defaults ---------------------------------------------------------------------------


def test_first_heartbeat_creates_entry_with_defaults() -> None:
    table = HeartbeatTable()
    assert table.on_heartbeat(beat(1), now_ms=1_000) is True
    info = table.get(SET_A, 1)
    assert info is not None
    assert (info.cluster_name, info.broker_name, info.broker_id, info.broker_addr) == (
        CLUSTER,
        SET_A,
        1,
        addr(1),
    )
    assert (info.epoch, info.max_offset, info.confirm_offset) == (-1, -1, -1)
    assert info.heartbeat_timeout_ms == DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS == 10_000
    assert info.election_priority == DEFAULT_ELECTION_PRIORITY == 2**31 - 1
    assert info.last_update_ms == 1_000


def test_second_heartbeat_is_not_new() -> None:
    table = HeartbeatTable()
    table.on_heartbeat(beat(1), now_ms=0)
    assert table.on_heartbeat(beat(1), now_ms=5) is False
    assert len(table) == 1


def test_explicit_fields_are_stored_including_zero_priority() -> None:
    table = HeartbeatTable()
    table.on_heartbeat(beat(2, epoch=3, max_offset=400, confirm_offset=300, timeout=3_000, priority=0), now_ms=7)
    info = table.get(SET_A, 2)
    assert info is not None
    assert (info.epoch, info.max_offset, info.confirm_offset) == (3, 400, 300)
    assert (info.heartbeat_timeout_ms, info.election_priority) == (3_000, 0)


def test_entries_are_keyed_by_broker_name_and_id() -> None:
    table = HeartbeatTable()
    assert table.on_heartbeat(beat(1, name=SET_A), now_ms=0)
    assert table.on_heartbeat(beat(1, name=SET_B), now_ms=0)
    assert table.on_heartbeat(beat(2, name=SET_A), now_ms=0)
    assert list(table.entries()) == [(SET_A, 1), (SET_A, 2), (SET_B, 1)]


# ---- the monotone update rule -------------------------------------------------------------------------


def _progress(table: HeartbeatTable, broker_id: int = 1) -> tuple[int, int, int]:
    info = table.get(SET_A, broker_id)
    assert info is not None
    return info.epoch, info.max_offset, info.confirm_offset


def test_higher_epoch_replaces_progress_even_with_lower_offset() -> None:
    table = HeartbeatTable()
    table.on_heartbeat(beat(1, epoch=1, max_offset=900, confirm_offset=800), now_ms=0)
    table.on_heartbeat(beat(1, epoch=2, max_offset=10, confirm_offset=5), now_ms=1)
    assert _progress(table) == (2, 10, 5)


def test_same_epoch_higher_offset_replaces_progress() -> None:
    table = HeartbeatTable()
    table.on_heartbeat(beat(1, epoch=2, max_offset=10, confirm_offset=5), now_ms=0)
    table.on_heartbeat(beat(1, epoch=2, max_offset=11, confirm_offset=2), now_ms=1)
    assert _progress(table) == (2, 11, 2)


def test_same_epoch_same_or_lower_offset_keeps_progress() -> None:
    table = HeartbeatTable()
    table.on_heartbeat(beat(1, epoch=2, max_offset=10, confirm_offset=5), now_ms=0)
    table.on_heartbeat(beat(1, epoch=2, max_offset=10, confirm_offset=9), now_ms=1)
    table.on_heartbeat(beat(1, epoch=2, max_offset=3, confirm_offset=9), now_ms=2)
    assert _progress(table) == (2, 10, 5)


def test_lower_epoch_keeps_progress_after_truncation() -> None:
    # RocketMQ quirk, kept: a truncated broker is ranked by its old offset until its entry goes.
    table = HeartbeatTable()
    table.on_heartbeat(beat(1, epoch=3, max_offset=500), now_ms=0)
    table.on_heartbeat(beat(1, epoch=2, max_offset=10**9), now_ms=1)
    assert _progress(table)[:2] == (3, 500)


def test_timestamp_timeout_and_priority_always_update() -> None:
    table = HeartbeatTable()
    table.on_heartbeat(beat(1, epoch=5, max_offset=50, timeout=2_000, priority=1), now_ms=100)
    table.on_heartbeat(beat(1, epoch=4, max_offset=0, timeout=9_000, priority=8), now_ms=250)
    info = table.get(SET_A, 1)
    assert info is not None
    assert (info.last_update_ms, info.heartbeat_timeout_ms, info.election_priority) == (250, 9_000, 8)
    assert (info.epoch, info.max_offset) == (5, 50)


def test_absent_timeout_and_priority_fall_back_to_defaults_on_update() -> None:
    table = HeartbeatTable()
    table.on_heartbeat(beat(1, timeout=2_000, priority=1), now_ms=0)
    table.on_heartbeat(beat(1), now_ms=1)
    info = table.get(SET_A, 1)
    assert info is not None
    assert (info.heartbeat_timeout_ms, info.election_priority) == (10_000, 2**31 - 1)


@PROPERTY_SETTINGS
@given(
    beats=st.lists(st.tuples(st.integers(-1, 3), st.integers(-1, 2**40), st.integers(-1, 10)), min_size=1, max_size=20)
)
def test_progress_is_the_lexicographic_maximum_seen(beats: list[tuple[int, int, int]]) -> None:
    table = HeartbeatTable()
    for now, (epoch, offset, confirm) in enumerate(beats):
        table.on_heartbeat(beat(1, epoch=epoch, max_offset=offset, confirm_offset=confirm), now_ms=now)
    best = max(beats, key=lambda b: (b[0], b[1]))
    first_best = next(b for b in beats if (b[0], b[1]) == (best[0], best[1]))
    assert _progress(table) == first_best
    info = table.get(SET_A, 1)
    assert info is not None
    assert info.last_update_ms == len(beats) - 1


# ---- expiry -------------------------------------------------------------------------------------------


def test_entry_is_active_up_to_and_including_last_plus_timeout() -> None:
    table = HeartbeatTable()
    table.on_heartbeat(beat(1, timeout=3_000), now_ms=1_000)
    assert table.is_active(SET_A, 1, 4_000) is True
    assert table.is_active(SET_A, 1, 4_001) is False


def test_unknown_broker_is_not_active() -> None:
    assert HeartbeatTable().is_active(SET_A, 1, 0) is False


def test_scan_keeps_entry_at_the_boundary_and_drops_it_one_ms_later() -> None:
    table = HeartbeatTable()
    table.on_heartbeat(beat(1, timeout=3_000), now_ms=1_000)
    table.on_heartbeat(beat(2, timeout=3_000), now_ms=1_500)
    assert table.scan_expired(4_000) == []
    expired = table.scan_expired(4_001)
    assert [i.broker_id for i in expired] == [1]
    assert table.get(SET_A, 1) is None
    assert table.get(SET_A, 2) is not None


def test_scan_returns_expired_entries_sorted_and_removes_them() -> None:
    table = HeartbeatTable()
    for name, bid in [(SET_B, 1), (SET_A, 3), (SET_A, 1)]:
        table.on_heartbeat(beat(bid, name=name, timeout=10), now_ms=0)
    expired = table.scan_expired(11)
    assert [(i.broker_name, i.broker_id) for i in expired] == [(SET_A, 1), (SET_A, 3), (SET_B, 1)]
    assert len(table) == 0


def test_heartbeat_after_expiry_but_before_scan_refreshes_existing_entry() -> None:
    table = HeartbeatTable()
    table.on_heartbeat(beat(1, timeout=10), now_ms=0)
    assert table.is_active(SET_A, 1, 50) is False
    assert table.on_heartbeat(beat(1, timeout=10), now_ms=50) is False
    assert table.is_active(SET_A, 1, 55) is True


def test_view_holds_only_active_entries() -> None:
    table = HeartbeatTable()
    table.on_heartbeat(beat(1, timeout=100), now_ms=0)
    table.on_heartbeat(beat(2, timeout=100), now_ms=50)
    view = table.view(120)
    assert view.is_active(SET_A, 2) is True
    assert view.is_active(SET_A, 1) is False
    assert view.info(SET_A, 1) is None
    assert list(view.active()) == [(SET_A, 2)]
    assert len(table.entries()) == 2
    assert table.active_count(120) == 1


def test_view_is_taken_at_its_time() -> None:
    table = HeartbeatTable()
    table.on_heartbeat(beat(1, timeout=100), now_ms=0)
    view = table.view(100)
    assert view.is_active(SET_A, 1) is True
    assert table.view(101).is_active(SET_A, 1) is False
    assert view.is_active(SET_A, 1) is True


def test_a_heartbeat_with_a_shorter_timeout_expires_at_the_shorter_deadline() -> None:
    table = HeartbeatTable()
    table.on_heartbeat(beat(1, timeout=1000), now_ms=0)
    table.on_heartbeat(beat(1, timeout=10), now_ms=5)
    assert table.active_count(15) == 1
    assert [i.broker_id for i in table.scan_expired(16)] == [1]
    assert len(table) == 0


def test_refreshed_entries_survive_many_scans() -> None:
    table = HeartbeatTable()
    for now in range(0, 10_000, 7):
        table.on_heartbeat(beat(1, timeout=20), now_ms=now)
        table.on_heartbeat(beat(2, timeout=20), now_ms=now)
        assert table.scan_expired(now + 3) == []
    assert table.active_count(10_000) == 2


class _Reference:
    """The table's rules written the obvious way: every query scans every entry."""

    def __init__(self) -> None:
        self.entries: dict[tuple[str, int], tuple[int, int, object]] = {}

    def beat(self, key: tuple[str, int], timeout: int, now: int, channel: object) -> bool:
        old = self.entries.get(key)
        keep = old[2] if old is not None and channel is None else channel
        self.entries[key] = (now, timeout, keep)
        return old is None

    def active(self, now: int) -> list[tuple[str, int]]:
        return sorted(k for k, (last, timeout, _) in self.entries.items() if last + timeout >= now)

    def drop(self, keys: list[tuple[str, int]]) -> list[tuple[str, int]]:
        for key in keys:
            del self.entries[key]
        return sorted(keys)

    def scan(self, now: int) -> list[tuple[str, int]]:
        return self.drop([k for k, (last, timeout, _) in self.entries.items() if last + timeout < now])

    def close(self, channel: object) -> list[tuple[str, int]]:
        return self.drop([k for k, (_, _, ch) in self.entries.items() if ch == channel])

    def remove(self, name: str) -> list[tuple[str, int]]:
        return self.drop([k for k in self.entries if k[0] == name])


OPS = st.lists(
    st.tuples(
        st.sampled_from(["beat", "beat", "beat", "scan", "close", "remove", "count"]),
        st.integers(0, 30),  # time step
        st.sampled_from([SET_A, SET_B]),
        st.integers(1, 4),  # broker id
        st.integers(1, 50),  # timeout
        st.sampled_from([None, "ch-1", "ch-2"]),
    ),
    max_size=80,
)


@PROPERTY_SETTINGS
@given(OPS)
def test_the_table_answers_as_a_full_scan_would(ops: list[tuple[str, int, str, int, int, str | None]]) -> None:
    table, reference, now = HeartbeatTable(), _Reference(), 0
    for op, step, name, broker_id, timeout, channel in ops:
        now += step
        if op == "beat":
            new = table.on_heartbeat(beat(broker_id, name=name, timeout=timeout), now_ms=now, channel=channel)
            assert new == reference.beat((name, broker_id), timeout, now, channel)
        elif op == "scan":
            got = [(i.broker_name, i.broker_id) for i in table.scan_expired(now)]
            assert got == reference.scan(now)
        elif op == "close" and channel is not None:
            got = [(i.broker_name, i.broker_id) for i in table.on_channel_close(channel)]
            assert got == reference.close(channel)
        elif op == "remove":
            got = [(i.broker_name, i.broker_id) for i in table.remove(name)]
            assert got == reference.remove(name)
        assert table.active_count(now) == len(reference.active(now))
        assert list(table.view(now).active()) == reference.active(now)
        assert sorted(table.entries()) == sorted(reference.entries)


# ---- channels -----------------------------------------------------------------------------------------


def test_channel_close_removes_the_entries_of_that_channel() -> None:
    table = HeartbeatTable()
    table.on_heartbeat(beat(1), now_ms=0, channel="ch-1")
    table.on_heartbeat(beat(2), now_ms=0, channel="ch-2")
    table.on_heartbeat(beat(3), now_ms=0)
    closed = table.on_channel_close("ch-1")
    assert [i.broker_id for i in closed] == [1]
    assert sorted(k[1] for k in table.entries()) == [2, 3]


def test_closing_an_unknown_channel_removes_nothing() -> None:
    table = HeartbeatTable()
    table.on_heartbeat(beat(1), now_ms=0, channel="ch-1")
    assert table.on_channel_close("ch-x") == []
    assert len(table) == 1


def test_latest_stream_wins_so_a_late_close_of_the_old_stream_keeps_the_entry() -> None:
    table = HeartbeatTable()
    table.on_heartbeat(beat(1), now_ms=0, channel="old")
    table.on_heartbeat(beat(1), now_ms=10, channel="new")
    assert table.on_channel_close("old") == []
    assert table.get(SET_A, 1) is not None
    assert [i.broker_id for i in table.on_channel_close("new")] == [1]
    assert table.get(SET_A, 1) is None


def test_heartbeat_with_channel_updates_the_address() -> None:
    table = HeartbeatTable()
    table.on_heartbeat(beat(1, address="10.0.0.1:10911"), now_ms=0, channel="old")
    table.on_heartbeat(beat(1, address="10.9.9.9:10911"), now_ms=1, channel="new")
    info = table.get(SET_A, 1)
    assert info is not None
    assert info.broker_addr == "10.9.9.9:10911"


def test_heartbeat_without_channel_keeps_channel_and_address() -> None:
    table = HeartbeatTable()
    table.on_heartbeat(beat(1, address="10.0.0.1:10911"), now_ms=0, channel="ch")
    table.on_heartbeat(beat(1, address="10.9.9.9:10911"), now_ms=1)
    info = table.get(SET_A, 1)
    assert info is not None
    assert info.broker_addr == "10.0.0.1:10911"
    assert [i.broker_id for i in table.on_channel_close("ch")] == [1]


def test_one_channel_may_carry_several_brokers() -> None:
    table = HeartbeatTable()
    table.on_heartbeat(beat(1), now_ms=0, channel="shared")
    table.on_heartbeat(beat(1, name=SET_B), now_ms=0, channel="shared")
    closed = table.on_channel_close("shared")
    assert [(i.broker_name, i.broker_id) for i in closed] == [(SET_A, 1), (SET_B, 1)]


# ---- remove and read access -----------------------------------------------------------------------------


def test_remove_named_ids_of_a_set() -> None:
    table = HeartbeatTable()
    for bid in (1, 2, 3):
        table.on_heartbeat(beat(bid), now_ms=0)
    table.on_heartbeat(beat(2, name=SET_B), now_ms=0)
    removed = table.remove(SET_A, [2, 3, 9])
    assert [i.broker_id for i in removed] == [2, 3]
    assert list(table.entries()) == [(SET_A, 1), (SET_B, 2)]


def test_remove_whole_set() -> None:
    table = HeartbeatTable()
    for bid in (1, 2):
        table.on_heartbeat(beat(bid), now_ms=0)
    table.on_heartbeat(beat(1, name=SET_B), now_ms=0)
    assert len(table.remove(SET_A, None)) == 2
    assert list(table.entries()) == [(SET_B, 1)]


def test_entries_is_a_copy() -> None:
    table = HeartbeatTable()
    table.on_heartbeat(beat(1), now_ms=0)
    entries = table.entries()
    table.remove(SET_A)
    assert list(entries) == [(SET_A, 1)]
    assert len(table.entries()) == 0
