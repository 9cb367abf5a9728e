"""Load: the audit's outputs on disk.

- `<out>/tables/<name>/`: one Parquet table per `transform.TABLES` entry;
- `<out>/summary.json`: the headline numbers (`summarize`; fields in docs/audit.md);
- `<out>/report.html` with PNG charts (`report`).

The summary is computed from the tables read back from Parquet, so nothing is computed twice.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from brokergroup.spark import contract
from brokergroup.spark.params import AuditParams
from brokergroup.spark.transform import sync_state

SUMMARY_VERSION = 1


def write_tables(
    tables: dict[str, DataFrame], directory: Path, on_start: Callable[[str], None] | None = None
) -> dict[str, DataFrame]:
    """Write every table as Parquet and return them read back; `on_start(name)` before each."""
    back = {}
    for name, df in tables.items():
        if on_start is not None:
            on_start(name)
        path = str(directory / name)
        df.write.mode("overwrite").parquet(path)
        back[name] = df.sparkSession.read.parquet(path)
    return back


def plain(row: Row) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, dt.date) else v for k, v in row.asDict().items()}


def first(df: DataFrame) -> dict[str, Any]:
    row = df.first()
    assert row is not None
    return plain(row)


def summarize(
    spark: SparkSession,
    tables: dict[str, DataFrame],
    *,
    stats: dict[str, Any],
    params: AuditParams,
    corrupt_files: list[tuple[str, int]],
) -> dict[str, Any]:
    """The JSON summary (docs/audit.md lists the fields)."""
    return {
        "summaryVersion": SUMMARY_VERSION,
        "sparkVersion": spark.version,
        "input": {
            **{k: stats[k] for k in ("lines", "events", "duplicates", "corrupt", "invalid", "conflicting", "sets")},
            "corruptFiles": [{"path": p, "lines": n} for p, n in corrupt_files],
            "from": contract.iso(stats["firstTs"]),
            "to": contract.iso(stats["lastTs"]),
        },
        "params": {
            "minInSyncReplicas": params.min_in_sync_replicas,
            "riskBelowSize": sync_state.risk_threshold(params.min_in_sync_replicas),
            "longRiskWindowS": params.long_risk_window_s,
            "flapWindowS": params.flap_window_s,
            "flapThreshold": params.flap_threshold,
        },
        "elections": elections_summary(tables["elections"]),
        "incidents": incidents_summary(tables["incidents"], tables["mttr"]),
        "syncStateSet": sync_state_summary(tables["sync_state_changes"]),
        "riskWindows": first(
            tables["risk_windows"].agg(
                F.count(F.lit(1)).alias("count"),
                F.coalesce(F.sum("durationMs"), F.lit(0)).alias("totalMs"),
                F.max("durationMs").alias("maxMs"),
                F.count(F.when(F.col("open"), 1)).alias("open"),
                F.count(F.when(F.col("long"), 1)).alias("long"),
            )
        ),
        "flapping": {
            "brokers": [
                plain(r)
                for r in tables["flapping"]
                .where(F.col("flapping"))
                .select("brokerName", "brokerId", "maxInWindow", "transitions")
                .orderBy(F.desc("maxInWindow"), "brokerName", "brokerId")
                .limit(100)
                .collect()
            ],
        },
        "controller": controller_summary(tables["controller_leaders"]),
        "completeness": {
            "indexGaps": gaps(tables["index_gaps"]),
            "nodeGaps": gaps(tables["node_gaps"]),
        },
        "findings": findings_summary(tables["findings"]),
    }


def sync_state_summary(changes: DataFrame) -> dict[str, int]:
    counted = {r["change"] + "s": int(r["count"]) for r in changes.groupBy("change").count().collect()}
    return {"shrinks": 0, "expands": 0} | counted


def gaps(table: DataFrame) -> dict[str, Any]:
    return first(table.agg(F.count(F.lit(1)).alias("gaps"), F.coalesce(F.sum("missing"), F.lit(0)).alias("missing")))


def elections_summary(elections: DataFrame) -> dict[str, Any]:
    by_result = {r["electionResult"]: r["count"] for r in elections.groupBy("electionResult").count().collect()}
    unclean = first(
        elections.agg(
            F.count(F.when(F.col("controllerUnclean"), 1)).alias("controller"),
            F.count(F.when(F.col("derivedUnclean"), 1)).alias("derived"),
            F.count(F.when(F.col("derivedUnclean").isNull(), 1)).alias("unknown"),
            F.count(F.when(~F.col("agrees"), 1)).alias("mismatches"),
        )
    )
    return {"total": sum(by_result.values()), "byResult": by_result, "unclean": unclean}


def incidents_summary(incidents: DataFrame, mttr: DataFrame) -> dict[str, Any]:
    counts = first(
        incidents.agg(
            F.count(F.lit(1)).alias("total"),
            F.count(F.when(F.col("recovered"), 1)).alias("recovered"),
            F.count(F.when(~F.col("recovered"), 1)).alias("open"),
        )
    )
    rows = [plain(r) for r in mttr.orderBy("scope", "key").collect()]
    overall = next((r for r in rows if r["scope"] == "all"), None)
    keep = ("incidents", "open", "p50Ms", "p90Ms", "p99Ms", "maxMs")

    def per(scope: str) -> dict[str, Any]:
        return {r["key"]: {k: r[k] for k in keep} for r in rows if r["scope"] == scope}

    mttr_all = {k: overall[k] for k in ("p50Ms", "p90Ms", "p99Ms", "maxMs")} if overall else None
    return {**counts, "mttrMs": mttr_all, "perSet": per("set"), "perCause": per("cause")}


def controller_summary(leaders: DataFrame) -> dict[str, Any]:
    gap = F.col("leaderlessMs")
    return first(
        leaders.agg(
            F.count(F.lit(1)).alias("leaders"),
            F.count("previousTerm").alias("leaderChanges"),
            F.coalesce(F.sum(F.when(gap > 0, gap)), F.lit(0)).alias("leaderlessMsTotal"),
            F.max(F.when(gap > 0, gap)).alias("leaderlessMsMax"),
            F.count(F.when(gap < 0, 1)).alias("overlaps"),
        )
    )


def findings_summary(findings: DataFrame) -> dict[str, Any]:
    by_kind = {r["kind"]: r["count"] for r in findings.groupBy("kind").count().collect()}
    severity = contract.FINDING_KINDS
    return {
        "violations": sum(n for k, n in by_kind.items() if severity[k] == contract.VIOLATION),
        "warnings": sum(n for k, n in by_kind.items() if severity[k] == contract.WARNING),
        "byKind": dict(sorted(by_kind.items())),
    }


def write_summary(path: Path, summary: dict[str, Any]) -> None:
    path.write_text(json.dumps(summary, indent=2, sort_keys=False) + "\n", encoding="utf-8")
