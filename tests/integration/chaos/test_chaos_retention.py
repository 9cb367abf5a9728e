"""Issue 18's "Must hold": the chaos suite with retention short enough to delete segments during the run.

Real processes: 3 controllers and one set of 3 replicas in sync mode, 4 KiB segments (~60 messages), each
replica deleting the segments last written more than 30 s ago (`store.retention_ms`, checked every 200 ms),
while 2 producers send and two consumers read: one polling continuously, one polling only every 40 s, so that
it falls below what retention keeps and is
told so (OFFSET_TOO_SMALL / the binary reply's min offset). Process faults (kill -9 and SIGSTOP of the master
and a slave) come one at a time. The checker must find 0 lost (of what is still retained), 0 duplicated and
0 inconsistent offsets, account for every acknowledged message retention deleted by the ranges the brokers
said were deleted, and call the run VALID; and the run must show that segments WERE deleted while it went on
(the harness starts the faults once every replica has deleted a segment, each replica's commit-log min offset
rose again by the end, and the lagging consumer was told of deleted offsets), or it would prove nothing.

Retention is by age, not size, and long enough for a killed or stopped master to come back and find its
last epoch still in the new master's log: a replica that missed a failover and returns after retention
deleted everything before the new epoch finds no consistent point and stays out until its data folder is
emptied (docs/broker.md, "Retention and a full disk"), which 30 s leaves room for even on a loaded machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from brokergroup.chaos.runner import RunOptions
from brokergroup.chaos.topology import ClusterSpec, Retention
from brokergroup.local import profiles
from tests.integration.chaos.runs import run_chaos

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

SEGMENT = 4096  # the smallest segment the broker takes: ~60 of the chaos messages (~67-byte records)
FAULTS = ("kill-master", "kill-slave", "stop-master", "stop-slave")
MUST_BE_ZERO = (
    "lost", "readThenLost", "duplicated", "duplicatedInLog", "unexpected", "bodyMismatch",
    "inconsistentOffsets", "nonMonotonicSends", "nonMonotonicPolls", "unreportedGaps",
)  # fmt: skip


@pytest.mark.parametrize("protocol", ["binary", "http"])  # the consumers learn the min offset from either reply
def test_chaos_with_retention_deleting_segments_is_valid(tmp_path: Path, protocol: str) -> None:
    retention = Retention(segment_size=SEGMENT, retention_bytes=None, retention_ms=30_000, check_interval_ms=200)
    options = RunOptions(
        out=tmp_path / "run",
        kinds=FAULTS,
        faults=4,
        seed=18,
        spec=ClusterSpec(sets=1, replicas=3, mode=profiles.SYNC, profile=profiles.FAST, retention=retention),
        producers_per_set=2,
        rate=20.0,
        protocol=protocol,
        lagging_every_s=40.0,
    )
    result, verdict, shown = run_chaos(options)

    assert result["liveness"] == [], result["liveness"]
    for anomaly in MUST_BE_ZERO:
        assert verdict["anomalies"][anomaly] == 0, shown
    assert (result["status"], verdict["incomplete"]) == ("VALID", []), shown

    # Segments were deleted during the run, not only at its end: every replica's commit-log min offset was
    # above 0 after some fault, and it moved on between the first sample that saw it and the last.
    samples = result["retentionSamples"]
    whens = ["before the faults", *(f"after fault {n}" for n in range(1, 5)), "before the final reads"]
    assert [s["when"] for s in samples] == whens, samples
    for replica in ("bs0-0", "bs0-1", "bs0-2"):
        seen = [s["minOffsets"][replica] for s in samples if replica in s["minOffsets"]]
        assert samples[0]["minOffsets"][replica] > 0, (replica, samples)  # the faults came after deletions
        assert seen[-1] > seen[0], (replica, samples)  # and retention went on deleting meanwhile

    stats = verdict["stats"]
    kept = stats["retention"]
    assert stats["sendsOk"] > 500, stats
    # The lagging consumer was told, and what retention took from every final read is accounted for.
    assert kept["offsetsToldDeleted"].get("bs0/chaos/0 c1", 0) > 0, kept
    assert kept["ackedDeletedBeforeConsumerRead"].get("c1", 0) > 0, kept
    assert kept["missingWithUnknownOffset"] == {}, kept
    finals = stats["finalReads"]["bs0/chaos/0"]
    for replica, count in finals.items():
        deleted = kept["ackedDeletedBeforeFinalRead"][f"final:{replica}"]
        told = kept["offsetsToldDeleted"][f"bs0/chaos/0 final:{replica}"]
        assert deleted > 0 and count > 0, (replica, kept)
        # Every acknowledged message is in the replica's final read, or in what it said retention deleted
        # (plus indeterminate sends that were stored: those are read, never counted as acknowledged).
        assert count + deleted >= stats["sendsOk"], (replica, count, deleted, stats)
        assert deleted <= told, (replica, kept)
    assert {f["kind"] for f in result["faults"]} == set(FAULTS)
    assert result["run"]["retention"] == {
        "segmentSize": SEGMENT,
        "retentionBytes": None,
        "retentionMs": 30_000,
        "checkIntervalMs": 200,
    }
