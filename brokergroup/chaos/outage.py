"""Write outages during a fault: what the producers and the controller saw while it lasted.

A fault of one controller follower leaves the leader and a quorum healthy, so it must not stop
writes (issue 22: "no write outage from a minority controller fault"). For such a fault the run
records, from injection until the cluster has recovered after the heal:

- refusedPuts: put attempts that did not end in PUT_OK (retries inside one send, and sends that
  failed or gave up), summed over the producers;
- masterChanges: how far each set's master epoch moved (an election, with or without a master);
- longestAckGapS: the longest time any producer went without an acknowledgement inside the
  window (its edges count as acknowledgements, so a producer silent throughout shows the whole
  window).

Pure: counters and monotonic timestamps in, numbers out.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

FAILS_RUN = True
"""Whether a refused put or a master change during a minority-controller fault fails the run. On
since brokers heartbeat every controller concurrently with a timeout (issue 22, item 3); before
that fix a stopped follower could silence every broker (docs/chaos.md has the numbers)."""


@dataclasses.dataclass(frozen=True)
class WriteOutage:
    refused_puts: int
    master_changes: int
    longest_ack_gap_s: float

    @property
    def any(self) -> bool:
        return self.refused_puts > 0 or self.master_changes > 0

    def describe(self) -> dict[str, Any]:
        return {
            "refusedPuts": self.refused_puts,
            "masterChanges": self.master_changes,
            "longestAckGapS": round(self.longest_ack_gap_s, 2),
        }


def longest_gap(ack_times: Sequence[float], start: float, end: float) -> float:
    """The longest stretch of [start, end] without an acknowledgement; `ack_times` sorted ascending."""
    if end <= start:
        return 0.0
    low, high = bisect.bisect_left(ack_times, start), bisect.bisect_right(ack_times, end)
    points = [start, *ack_times[low:high], end]
    return max(b - a for a, b in itertools.pairwise(points))


def measure(
    *,
    refused_before: int,
    refused_after: int,
    epochs_before: Mapping[str, int | None],
    epochs_after: Mapping[str, int | None],
    ack_times: Sequence[Sequence[float]],
    start: float,
    end: float,
) -> WriteOutage:
    """The outage of one fault window: counters before and after, each producer's acknowledgement times."""
    changes = 0
    for name, before in epochs_before.items():
        after = epochs_after.get(name)
        if before is not None and after is not None:
            changes += max(0, after - before)
    gap = max((longest_gap(times, start, end) for times in ack_times), default=0.0)
    return WriteOutage(refused_after - refused_before, changes, gap)


def summarize(outages: Sequence[WriteOutage]) -> dict[str, Any]:
    """Totals over every minority-controller fault of a run."""
    return {
        "faults": len(outages),
        "refusedPuts": sum(o.refused_puts for o in outages),
        "masterChanges": sum(o.master_changes for o in outages),
        "longestAckGapS": round(max((o.longest_ack_gap_s for o in outages), default=0.0), 2),
    }
