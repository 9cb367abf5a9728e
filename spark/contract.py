"""The event-log contract and the findings vocabulary, as plain Python: no Spark here.

`FIELDS` is the one table of the controller's event-log line (DESIGN §2.3,
`controller/event.schema.json`, schemaVersion 1): every key in the order the controller writes
them, its kind and whether it may be null. `position` (an event's place in its Raft entry, since
group commit) is missing from lines written before it: a missing key reads as null, and raft
order falls back to eventId within an index, as it was then. `schema` turns it into Spark's StructType and
`invariants` checks records against it; a unit test compares it with the JSON Schema.
"""

from __future__ import annotations

import datetime as dt

SCHEMA_VERSION = 1

FIELDS: dict[str, tuple[str, bool]] = {
    "schemaVersion": ("int", False),
    "eventId": ("string", False),
    "ts": ("long", False),
    "node": ("string", False),
    "term": ("long", False),
    "index": ("long", True),
    "position": ("int", True),
    "source": ("string", False),
    "clusterName": ("string", True),
    "brokerName": ("string", True),
    "type": ("string", False),
    "brokerId": ("long", True),
    "masterBrokerId": ("long", True),
    "masterAddress": ("string", True),
    "masterEpoch": ("long", True),
    "syncStateSet": ("long[]", True),
    "syncStateSetEpoch": ("long", True),
    "electionResult": ("string", True),
    "unclean": ("boolean", False),
    "reason": ("string", True),
}
"""name -> (kind, nullable). Kinds: int, long, string, boolean, long[] (an array of longs)."""

EVENT_COLUMNS = tuple(FIELDS)
REQUIRED_COLUMNS = tuple(name for name, (_, nullable) in FIELDS.items() if not nullable)
CONTENT_COLUMNS = tuple(c for c in EVENT_COLUMNS if c != "node")
"""What must be identical in every node's copy of a replicated event."""

RAFT_TYPES = (
    "APPLY_BROKER_ID",
    "REGISTER",
    "UPDATE_BROKER_ADDRESS",
    "ELECT_MASTER",
    "ALTER_SYNC_STATE_SET",
    "CLEAN_BROKER_DATA",
)
LOCAL_TYPES = (
    "HEARTBEAT_LOST",
    "BROKER_ACTIVE",
    "CHANNEL_CLOSED",
    "CONTROLLER_LEADER_CHANGED",
    "ROLE_CHANGE_NOTIFIED",
)
ELECTION_RESULTS = ("new_master_elected", "keep_current_master", "no_master_elected")
LOSS_TYPES = ("HEARTBEAT_LOST", "CHANNEL_CLOSED")
"""Local observations that a broker went away."""

FINDING_FIELDS: dict[str, tuple[str, bool]] = {
    "kind": ("string", False),
    "severity": ("string", False),
    "brokerName": ("string", True),
    "brokerId": ("long", True),
    "node": ("string", True),
    "term": ("long", True),
    "index": ("long", True),
    "ts": ("long", True),
    "value": ("long", True),
    "detail": ("string", True),
}
"""One row of the `findings` table, like `FIELDS`: what broke, where, and a number (see docs/audit.md)."""
FINDING_COLUMNS = tuple(FINDING_FIELDS)
FINDING_KEY = ("kind", "brokerName", "brokerId", "node", "term", "index", "ts", "value")
"""The columns that identify a finding; `detail` is prose and `severity` follows from `kind`."""

VIOLATION = "violation"
WARNING = "warning"
FINDING_KINDS: dict[str, str] = {
    "split_brain": VIOLATION,
    "epoch_gap": VIOLATION,
    "epoch_regression": VIOLATION,
    "unclean_election": VIOLATION,
    "unclean_flag_mismatch": VIOLATION,
    "conflicting_record": VIOLATION,
    "controller_term_conflict": VIOLATION,
    "index_gap": WARNING,
    "node_gap": WARNING,
    "long_risk_window": WARNING,
    "flapping_broker": WARNING,
}
"""Every finding kind and its severity. Violations break an invariant and fail the job under
`--fail-on-violations`; warnings are reported only (a gap after a controller failover is a
warning: the log is incomplete, not the system wrong)."""


def iso(ts_ms: int | None) -> str | None:
    """An event's `ts` (epoch milliseconds) as ISO-8601 UTC with milliseconds, for summaries and messages."""
    if ts_ms is None:
        return None
    return dt.datetime.fromtimestamp(ts_ms / 1000, tz=dt.UTC).isoformat(timespec="milliseconds")
