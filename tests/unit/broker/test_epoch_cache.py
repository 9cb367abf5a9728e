"""EpochCache in memory: appends (incl. #9942), lookups and truncations."""

from __future__ import annotations

import pytest

from brokergroup.broker.store.epoch import OPEN, EpochCache, EpochEntry


def cache(*pairs: tuple[int, int]) -> EpochCache:
    return EpochCache([EpochEntry(epoch, start) for epoch, start in pairs])


def table(c: EpochCache) -> list[tuple[int, int, int]]:
    return [(e.epoch, e.start_offset, e.end_offset) for e in c.entries()]


def test_empty_cache() -> None:
    c = EpochCache()
    assert c.last_epoch() == -1
    assert c.last_entry() is None
    assert c.entries() == ()
    assert c.find_epoch_entry_by_offset(0) is None


def test_append_closes_the_previous_entry_at_the_new_start() -> None:
    c = EpochCache()
    assert c.append_entry(EpochEntry(1, 0))
    assert c.append_entry(EpochEntry(2, 100))
    assert table(c) == [(1, 0, 100), (2, 100, OPEN)]
    assert c.last_epoch() == 2
    assert c.last_entry() == EpochEntry(2, 100, OPEN)


def test_append_ignores_the_given_end_offset() -> None:
    c = EpochCache()
    assert c.append_entry(EpochEntry(1, 0, 50))
    assert table(c) == [(1, 0, OPEN)]


@pytest.mark.parametrize(("epoch", "start"), [(2, 150), (1, 150), (3, 99)])
def test_append_refuses_an_older_epoch_or_an_earlier_start(epoch: int, start: int) -> None:
    c = cache((1, 0), (2, 100))
    before = table(c)
    assert not c.append_entry(EpochEntry(epoch, start))
    assert table(c) == before


def test_new_epoch_at_the_same_offset_replaces_the_empty_one_9942() -> None:
    # Two promotions with no write between them: RocketMQ refuses epoch 3 and keeps 2 as last.
    c = cache((1, 0), (2, 100))
    assert c.append_entry(EpochEntry(3, 100))
    assert table(c) == [(1, 0, 100), (3, 100, OPEN)]
    assert c.last_epoch() == 3
    assert c.get_entry(2) is None


def test_repeated_switches_without_writes_keep_only_the_newest_epoch_9942() -> None:
    c = cache((1, 0), (2, 100))
    for epoch in (3, 4, 5):
        assert c.append_entry(EpochEntry(epoch, 100))
    assert c.append_entry(EpochEntry(6, 180))
    assert table(c) == [(1, 0, 100), (5, 100, 180), (6, 180, OPEN)]


def test_a_single_empty_entry_is_replaced_too() -> None:
    c = cache((1, 0))
    assert c.append_entry(EpochEntry(2, 0))
    assert table(c) == [(2, 0, OPEN)]


def test_find_epoch_entry_by_offset_uses_half_open_ranges() -> None:
    c = cache((1, 0), (2, 100), (4, 250))
    assert c.find_epoch_entry_by_offset(0) == EpochEntry(1, 0, 100)
    assert c.find_epoch_entry_by_offset(99) == EpochEntry(1, 0, 100)
    assert c.find_epoch_entry_by_offset(100) == EpochEntry(2, 100, 250)
    assert c.find_epoch_entry_by_offset(10**12) == EpochEntry(4, 250, OPEN)
    assert cache((3, 50)).find_epoch_entry_by_offset(49) is None


def test_next_entry_and_get_entry() -> None:
    c = cache((1, 0), (2, 100), (4, 250))
    assert c.next_entry(1) == EpochEntry(2, 100, 250)
    assert c.next_entry(2) == EpochEntry(4, 250, OPEN)
    assert c.next_entry(3) == EpochEntry(4, 250, OPEN)
    assert c.next_entry(4) is None
    assert c.get_entry(2) == EpochEntry(2, 100, 250)
    assert c.get_entry(3) is None


def test_truncate_suffix_by_epoch_reopens_the_new_last_entry() -> None:
    c = cache((1, 0), (2, 100), (4, 250))
    c.truncate_suffix_by_epoch(2)
    assert table(c) == [(1, 0, OPEN)]
    # RocketMQ left the end at 100 (set on a copy); offsets past it must find the last entry.
    assert c.find_epoch_entry_by_offset(150) == EpochEntry(1, 0, OPEN)


def test_truncate_suffix_by_offset() -> None:
    c = cache((1, 0), (2, 100), (4, 250))
    c.truncate_suffix_by_offset(250)
    assert table(c) == [(1, 0, 100), (2, 100, OPEN)]
    c.truncate_suffix_by_offset(101)
    assert table(c) == [(1, 0, 100), (2, 100, OPEN)]
    c.truncate_suffix_by_offset(0)
    assert table(c) == []


def test_truncate_prefix_by_offset_drops_entries_that_end_before() -> None:
    c = cache((1, 0), (2, 100), (4, 250))
    c.truncate_prefix_by_offset(99)
    assert c.last_epoch() == 4 and len(c.entries()) == 3
    c.truncate_prefix_by_offset(100)
    assert table(c) == [(2, 100, 250), (4, 250, OPEN)]
    c.truncate_prefix_by_offset(10**15)
    assert table(c) == [(4, 250, OPEN)]


def test_set_last_entry_end_offset() -> None:
    c = cache((1, 0), (2, 100))
    assert not c.set_last_entry_end_offset(99)
    assert c.set_last_entry_end_offset(180)
    assert table(c) == [(1, 0, 100), (2, 100, 180)]
    assert c.find_epoch_entry_by_offset(180) is None
    c.truncate_prefix_by_offset(180)  # a closed last entry can be dropped like any other
    assert table(c) == []
    assert not EpochCache().set_last_entry_end_offset(0)


def test_append_after_closing_the_last_entry_chains_again() -> None:
    c = cache((1, 0))
    c.set_last_entry_end_offset(70)
    assert c.append_entry(EpochEntry(2, 90))
    assert table(c) == [(1, 0, 90), (2, 90, OPEN)]


@pytest.mark.parametrize("pairs", [[(2, 0), (1, 10)], [(1, 0), (1, 10)], [(1, 10), (2, 10)], [(1, 10), (2, 5)]])
def test_cache_refuses_entries_out_of_order(pairs: list[tuple[int, int]]) -> None:
    with pytest.raises(ValueError, match="strictly increase"):
        cache(*pairs)


@pytest.mark.parametrize(("epoch", "start", "end"), [(-1, 0, OPEN), (1, -1, OPEN), (1, 10, 5), (2**31, 0, OPEN)])
def test_entry_refuses_invalid_values(epoch: int, start: int, end: int) -> None:
    with pytest.raises(ValueError, match=r"must be|need"):
        EpochEntry(epoch, start, end)
