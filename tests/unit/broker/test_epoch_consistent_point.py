"""find_consistent_point (reference §4.1 / §4.3 doTruncate)."""

from __future__ import annotations

import pytest

from brokergroup.broker.store.epoch import EpochEntry, find_consistent_point


def entries(*pairs: tuple[int, int]) -> list[EpochEntry]:
    return [EpochEntry(epoch, start) for epoch, start in pairs]


def test_same_epochs_same_length() -> None:
    log = entries((1, 0), (2, 100))
    assert find_consistent_point(log, 300, log, 300) == 300


def test_slave_behind_in_the_same_epoch_keeps_everything() -> None:
    assert find_consistent_point(entries((1, 0), (2, 100)), 150, entries((1, 0), (2, 100)), 300) == 150


def test_slave_ahead_in_the_same_epoch_is_cut_to_the_master() -> None:
    assert find_consistent_point(entries((1, 0), (2, 100)), 350, entries((1, 0), (2, 100)), 300) == 300


def test_diverged_tail_is_cut_where_the_common_epoch_ends() -> None:
    # The slave was master in epoch 2 and wrote 100..150 that the new master (epoch 3) never got.
    local = entries((1, 0), (2, 100))
    master = entries((1, 0), (3, 100))
    assert find_consistent_point(local, 150, master, 400) == 100


def test_same_epoch_with_a_different_start_is_not_consistent() -> None:
    # Re-mastering at the same epoch moves its start (reference §7); fall back to epoch 1.
    local = entries((1, 0), (2, 100))
    master = entries((1, 0), (2, 120))
    assert find_consistent_point(local, 200, master, 300) == 100


def test_master_has_newer_epochs() -> None:
    assert find_consistent_point(entries((1, 0)), 80, entries((1, 0), (2, 100), (3, 200)), 250) == 80
    assert find_consistent_point(entries((1, 0)), 130, entries((1, 0), (2, 100), (3, 200)), 250) == 100


def test_no_common_epoch_gives_minus_one() -> None:
    assert find_consistent_point(entries((5, 0)), 10, entries((1, 0), (2, 50)), 90) == -1
    assert find_consistent_point(entries((1, 10)), 30, entries((1, 0)), 90) == -1


def test_empty_sides_give_minus_one() -> None:
    assert find_consistent_point([], 0, entries((1, 0)), 90) == -1
    assert find_consistent_point(entries((1, 0)), 50, [], 0) == -1


def test_end_offsets_of_the_inputs_are_ignored() -> None:
    local = [EpochEntry(1, 0, 5), EpochEntry(2, 100, 120)]
    assert find_consistent_point(local, 150, entries((1, 0), (2, 100)), 300) == 150


def test_an_entry_the_log_no_longer_covers_is_clamped_to_the_max_offset() -> None:
    # Crash between truncating the log (to 150) and the epoch file: epoch 3 still claims 200..
    local = entries((1, 0), (2, 100), (3, 200))
    master = entries((1, 0), (2, 100), (4, 180))
    assert find_consistent_point(local, 150, master, 300) == 150


def test_empty_epoch_dropped_by_9942_does_not_hide_the_consistent_point() -> None:
    # Master went 2 -> 3 with no writes, so its cache has no epoch 2; the slave kept epoch 2.
    local = entries((1, 0), (2, 100))
    master = entries((1, 0), (3, 100))
    assert find_consistent_point(local, 100, master, 250) == 100


def test_unordered_input_is_refused() -> None:
    with pytest.raises(ValueError, match="strictly increase"):
        find_consistent_point(entries((2, 0)) + entries((1, 5)), 10, entries((1, 0)), 10)
