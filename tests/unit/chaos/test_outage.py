"""Write outages of a fault window: refused puts, master changes, the longest time without an ack."""

from __future__ import annotations

import pytest

from brokergroup.chaos.outage import longest_gap, measure, summarize


def test_longest_gap_counts_the_window_edges() -> None:
    assert longest_gap([1.0, 2.0, 2.5, 9.0], 0.0, 10.0) == pytest.approx(6.5)
    assert longest_gap([1.0, 2.0], 1.5, 1.8) == pytest.approx(0.3)  # no ack inside: the whole window
    assert longest_gap([], 3.0, 7.0) == pytest.approx(4.0)
    assert longest_gap([5.0], 6.0, 6.0) == 0.0


def test_measure_counts_refusals_epoch_moves_and_the_worst_producer() -> None:
    window = measure(
        refused_before=4,
        refused_after=10,
        epochs_before={"bs0": 3, "bs1": 7, "bs2": None},
        epochs_after={"bs0": 5, "bs1": 7, "bs2": 9},  # bs2 unknown before: not counted
        ack_times=[[0.5, 1.0, 1.5, 2.0], [0.2, 4.0]],
        start=0.0,
        end=4.0,
    )
    assert window.describe() == {"refusedPuts": 6, "masterChanges": 2, "longestAckGapS": 3.8}
    assert window.any


def test_a_quiet_window_is_no_outage_and_totals_add_up() -> None:
    calm = measure(
        refused_before=2,
        refused_after=2,
        epochs_before={"bs0": 3},
        epochs_after={"bs0": 3},
        ack_times=[[0.1 * i for i in range(41)]],
        start=0.0,
        end=4.0,
    )
    assert not calm.any
    assert calm.longest_ack_gap_s == pytest.approx(0.1)
    bad = measure(refused_before=0, refused_after=3, epochs_before={}, epochs_after={}, ack_times=[[]], start=0, end=2)
    assert summarize([calm, bad]) == {"faults": 2, "refusedPuts": 3, "masterChanges": 0, "longestAckGapS": 2.0}
