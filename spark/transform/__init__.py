"""The audit's transforms: pure DataFrame -> DataFrame functions, one module per audit family.

Two stages, so that a job can write the first and build the second from what it wrote
instead of computing the first again:
- `base_tables(events, timeline, params)`: the tables computed from the deduplicated events
  (`prepare.events_of`) and the sets' raft timeline (`prepare.raft_timeline`: one sort per set
  with every lag and running column the raft-order tables need);
- `derived_tables(events, timeline, base, params)`: daily counts, MTTR percentiles and the
  findings, computed from the base tables (and, for the epoch and log checks, the timeline
  and the events).
`audit` is both at once. Nothing here reads or writes files or triggers a Spark action.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from brokergroup.spark.params import AuditParams
from brokergroup.spark.transform import (
    completeness,
    controller,
    elections,
    findings,
    incidents,
    liveness,
    prepare,
    sync_state,
)

BASE_TABLES = (
    "elections",
    "incidents",
    "sync_state_changes",
    "risk_windows",
    "flapping",
    "controller_leaders",
    "index_gaps",
    "node_gaps",
)
DERIVED_TABLES = ("elections_daily", "mttr", "findings")
TABLES = BASE_TABLES + DERIVED_TABLES
"""Output tables, in the order the job writes them."""

__all__ = ["BASE_TABLES", "DERIVED_TABLES", "TABLES", "AuditParams", "audit", "base_tables", "derived_tables"]


def base_tables(
    events: DataFrame, timeline: DataFrame, params: AuditParams, positions: DataFrame | None = None
) -> dict[str, DataFrame]:
    """`timeline`: `prepare.raft_timeline(events)`; `positions`: `completeness.positions(events)`, computed
    here when not given (the job keeps both: `checkpoint.keep`; the two gap tables read the positions)."""
    positions = completeness.positions(events) if positions is None else positions
    tables = {
        "elections": elections.elections(timeline),
        "incidents": incidents.incidents(events),
        "sync_state_changes": sync_state.changes(timeline),
        "risk_windows": sync_state.risk_windows(
            timeline,
            prepare.horizon(events),
            min_in_sync_replicas=params.min_in_sync_replicas,
            long_ms=params.long_risk_window_ms,
        ),
        "flapping": liveness.flapping(events, window_ms=params.flap_window_ms, threshold=params.flap_threshold),
        "controller_leaders": controller.leaders(events),
        "index_gaps": completeness.index_gaps(positions),
        "node_gaps": completeness.node_gaps(positions),
    }
    assert tuple(tables) == BASE_TABLES
    return tables


def derived_tables(
    events: DataFrame, timeline: DataFrame, base: dict[str, DataFrame], params: AuditParams
) -> dict[str, DataFrame]:
    found = findings.union(
        [
            *elections.unclean_findings(base["elections"]),
            *elections.epoch_findings(timeline),
            completeness.conflict_findings(events),
            controller.term_conflicts(events),
            *completeness.gap_findings(base["index_gaps"], base["node_gaps"]),
            sync_state.long_window_findings(base["risk_windows"], long_ms=params.long_risk_window_ms),
            liveness.flapping_findings(base["flapping"], window_ms=params.flap_window_ms),
        ]
    )
    return {
        "elections_daily": elections.elections_daily(base["elections"]),
        "mttr": incidents.mttr(base["incidents"]),
        "findings": found,
    }


def audit(events: DataFrame, params: AuditParams) -> dict[str, DataFrame]:
    """Every output table (see `TABLES`) from the deduplicated events."""
    timeline = prepare.raft_timeline(events)
    base = base_tables(events, timeline, params)
    return {**base, **derived_tables(events, timeline, base, params)}
