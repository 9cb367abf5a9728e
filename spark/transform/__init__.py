"""The audit's transforms: pure DataFrame -> DataFrame functions, one module per audit family.

`audit(events, params)` builds every output table from the deduplicated events
(`prepare.events_of`). Nothing here reads or writes files or triggers a Spark action; the
job decides what to cache and when to compute.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from brokergroup.spark.params import AuditParams
from brokergroup.spark.transform import completeness, controller, elections, findings, incidents, liveness, sync_state

TABLES = (
    "elections",
    "elections_daily",
    "incidents",
    "mttr",
    "sync_state_changes",
    "risk_windows",
    "flapping",
    "controller_leaders",
    "index_gaps",
    "node_gaps",
    "findings",
)
"""Output tables, in the order the job writes them."""

__all__ = ["TABLES", "AuditParams", "audit"]


def audit(events: DataFrame, params: AuditParams) -> dict[str, DataFrame]:
    """Every output table (see `TABLES`) from the deduplicated events."""
    elections_df = elections.elections(events)
    risk = sync_state.risk_windows(
        events, min_in_sync_replicas=params.min_in_sync_replicas, long_ms=params.long_risk_window_ms
    )
    flaps = liveness.flapping(events, window_ms=params.flap_window_ms, threshold=params.flap_threshold)
    positions = completeness.positions(events)
    index_gaps = completeness.index_gaps(positions)
    node_gaps = completeness.node_gaps(positions)
    incidents_df = incidents.incidents(events)
    found = findings.union(
        [
            *elections.unclean_findings(elections_df),
            *elections.epoch_findings(events),
            completeness.conflict_findings(events),
            controller.term_conflicts(events),
            *completeness.gap_findings(index_gaps, node_gaps),
            sync_state.long_window_findings(risk, long_ms=params.long_risk_window_ms),
            liveness.flapping_findings(flaps, window_ms=params.flap_window_ms),
        ]
    )
    tables = {
        "elections": elections_df,
        "elections_daily": elections.elections_daily(elections_df),
        "incidents": incidents_df,
        "mttr": incidents.mttr(incidents_df),
        "sync_state_changes": sync_state.changes(events),
        "risk_windows": risk,
        "flapping": flaps,
        "controller_leaders": controller.leaders(events),
        "index_gaps": index_gaps,
        "node_gaps": node_gaps,
        "findings": found,
    }
    assert tuple(tables) == TABLES
    return tables
