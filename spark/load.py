"""Load: the audit's outputs on disk.

- `<out>/tables/<name>/`: one Parquet table per `transform.TABLES` entry;
- `<out>/summary.json`: the headline numbers (`summarize`; fields in docs/audit.md);
- `<out>/report.html` with PNG charts (`report`).

Each table is kept as it is written (`checkpoint.keep`), so the derived tables, the summary and the
report use the rows just computed, as one-node plans, instead of reading the Parquet back or
computing them again. The summary is one query (`summary_parts`): one single-row aggregate per
table, as JSON, in one union.
"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import json
import threading
from collections.abc import Callable
from functools import reduce
from pathlib import Path
from typing import Any

from pyspark import inheritable_thread_target
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from brokergroup.spark import checkpoint, contract
from brokergroup.spark.params import AuditParams
from brokergroup.spark.transform import sync_state

SUMMARY_VERSION = 1


WRITERS = 2
"""Tables written at once. A small input runs each table's query as one task, which leaves the second
core of a `local[2]` driver idle while the first runs it and the driver plans the next; two writes at a
time keep both busy (docs/benchmarks.md, issue 20, twelfth session)."""


def write_tables(
    tables: dict[str, DataFrame],
    directory: Path,
    on_start: Callable[[str], None] | None = None,
    writers: int = WRITERS,
    *,
    small_input: bool = False,
) -> dict[str, DataFrame]:
    """Write every table as Parquet, `writers` at a time, and return them kept (the write fills the
    blocks; `checkpoint.keep`, `small_input` as there), in the order given; `on_start(name)` as each
    write starts. The caller releases them (`checkpoint.release`). If a write fails, no other write
    starts, those running are waited for, every table kept is released, and the failure of the first
    table (in the order given) that failed is raised.

    Each write runs in a thread of the pool with the caller's Spark local properties (its job group:
    `explain.tracked`), copied for each write, since a query sets its execution id in them."""
    kept: dict[str, DataFrame] = {}
    failed = threading.Event()

    def write(name: str, df: DataFrame) -> None:
        if failed.is_set():  # a write failed (or the caller was interrupted): start no other
            return
        try:
            if on_start is not None:
                on_start(name)
            kept[name] = checkpoint.keep(df, small_input=small_input)
            kept[name].write.mode("overwrite").parquet(str(directory / name))
        except BaseException:
            failed.set()
            raise

    futures: list[concurrent.futures.Future[None]] = []
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=writers, thread_name_prefix="audit-write") as pool:
            for name, df in tables.items():
                futures.append(pool.submit(inheritable_thread_target(df.sparkSession)(write), name, df))
    except BaseException:  # interrupted while waiting (a write's own failure stays in its future)
        failed.set()
        checkpoint.release(kept.values())
        raise
    failures = [e for f in futures if (e := f.exception()) is not None]
    if failures:
        checkpoint.release(kept.values())
        raise failures[0]
    return {name: kept[name] for name in tables}


def plain(row: Row) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, dt.date) else v for k, v in row.asDict().items()}


def first(df: DataFrame) -> dict[str, Any]:
    row = df.first()
    assert row is not None
    return plain(row)


def summary_values(tables: dict[str, DataFrame]) -> dict[str, Any]:
    """`summary_parts` collected: part name -> its values as plain Python (dates as ISO strings)."""
    return {row["part"]: json.loads(row["value"]) for row in summary_parts(tables).collect()}


def summarize(
    spark: SparkSession,
    row: dict[str, Any],
    *,
    stats: dict[str, Any],
    params: AuditParams,
    corrupt_files: list[tuple[str, int]],
) -> dict[str, Any]:
    """The JSON summary (docs/audit.md lists the fields) from `summary_values`."""
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
        "elections": elections_summary(row["elections"]),
        "incidents": incidents_summary(row["incidents"], row["mttr"]),
        "syncStateSet": row["syncStateSet"],
        "riskWindows": row["riskWindows"],
        "flapping": {"brokers": [{k: v for k, v in r.items() if k != "order"} for r in row["flapping"]["rows"]]},
        "controller": row["controller"],
        "completeness": {"indexGaps": row["indexGaps"], "nodeGaps": row["nodeGaps"]},
        "findings": findings_summary(row["findings"]),
    }


def summary_parts(tables: dict[str, DataFrame]) -> DataFrame:
    """One row per part of the summary, (`part`, `value`: its aggregates as a JSON object): every
    table's aggregates in one query and one Spark job. A union, not a join of one-row results: a
    cross join would broadcast each part (a job each)."""
    t = tables
    gap = F.col("leaderlessMs")
    flapping = F.struct((-F.col("maxInWindow")).alias("order"), "brokerName", "brokerId", "maxInWindow", "transitions")
    daily = t["elections_daily"].groupBy("day", "electionResult").agg(F.sum("elections").alias("n"))
    parts = {
        "elections": t["elections"].agg(
            *counts("electionResult", contract.ELECTION_RESULTS),
            F.count(F.when(F.col("electionResult").isNull(), 1)).alias("null"),
            F.count(F.when(F.col("controllerUnclean"), 1)).alias("controller"),
            F.count(F.when(F.col("derivedUnclean"), 1)).alias("derived"),
            F.count(F.when(F.col("derivedUnclean").isNull(), 1)).alias("unknown"),
            F.count(F.when(~F.col("agrees"), 1)).alias("mismatches"),
        ),
        "incidents": t["incidents"].agg(
            F.count(F.lit(1)).alias("total"),
            F.count(F.when(F.col("recovered"), 1)).alias("recovered"),
            F.count(F.when(~F.col("recovered"), 1)).alias("open"),
        ),
        "mttr": t["mttr"].agg(
            F.sort_array(
                F.collect_list(F.struct("scope", "key", "incidents", "open", "p50Ms", "p90Ms", "p99Ms", "maxMs"))
            ).alias("rows")
        ),
        "syncStateSet": t["sync_state_changes"].agg(
            F.count(F.when(F.col("change") == "shrink", 1)).alias("shrinks"),
            F.count(F.when(F.col("change") == "expand", 1)).alias("expands"),
        ),
        "riskWindows": t["risk_windows"].agg(
            F.count(F.lit(1)).alias("count"),
            F.coalesce(F.sum("durationMs"), F.lit(0)).alias("totalMs"),
            F.max("durationMs").alias("maxMs"),
            F.count(F.when(F.col("open"), 1)).alias("open"),
            F.count(F.when(F.col("long"), 1)).alias("long"),
        ),
        "flapping": t["flapping"]
        .where(F.col("flapping"))
        .agg(F.slice(F.sort_array(F.collect_list(flapping)), 1, 100).alias("rows")),
        "controller": t["controller_leaders"].agg(
            F.count(F.lit(1)).alias("leaders"),
            F.count("previousTerm").alias("leaderChanges"),
            F.coalesce(F.sum(F.when(gap > 0, gap)), F.lit(0)).alias("leaderlessMsTotal"),
            F.max(F.when(gap > 0, gap)).alias("leaderlessMsMax"),
            F.count(F.when(gap < 0, 1)).alias("overlaps"),
        ),
        "indexGaps": gaps(t["index_gaps"]),
        "nodeGaps": gaps(t["node_gaps"]),
        "findings": t["findings"].agg(*counts("kind", tuple(contract.FINDING_KINDS))),
        "electionsByDay": daily.agg(F.sort_array(F.collect_list(F.struct("day", "electionResult", "n"))).alias("rows")),
    }
    as_json = [
        df.select(F.lit(name).alias("part"), F.to_json(F.struct(*df.columns), JSON_OPTIONS).alias("value"))
        for name, df in parts.items()
    ]
    return reduce(DataFrame.unionAll, as_json)


JSON_OPTIONS = {"ignoreNullFields": "false"}
"""A null aggregate (no rows) stays in the JSON as null, as the summary's fields expect."""


def counts(column: str, values: tuple[str, ...]) -> list[Column]:
    """One count per known value of `column`, named after the value."""
    return [F.count(F.when(F.col(column) == v, 1)).alias(v) for v in values]


def nonzero(counted: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in counted.items() if v}


def gaps(table: DataFrame) -> DataFrame:
    return table.agg(F.count(F.lit(1)).alias("gaps"), F.coalesce(F.sum("missing"), F.lit(0)).alias("missing"))


def elections_summary(counted: dict[str, Any]) -> dict[str, Any]:
    by_result: dict[str | None, int] = {r: counted[r] for r in contract.ELECTION_RESULTS if counted[r]}
    if counted["null"]:
        by_result[None] = counted["null"]
    unclean = {k: counted[k] for k in ("controller", "derived", "unknown", "mismatches")}
    return {"total": sum(by_result.values()), "byResult": by_result, "unclean": unclean}


def incidents_summary(counts: dict[str, Any], mttr: dict[str, Any]) -> dict[str, Any]:
    rows = mttr["rows"]
    overall = next((r for r in rows if r["scope"] == "all"), None)
    keep = ("incidents", "open", "p50Ms", "p90Ms", "p99Ms", "maxMs")

    def per(scope: str) -> dict[str, Any]:
        return {r["key"]: {k: r[k] for k in keep} for r in rows if r["scope"] == scope}

    mttr_all = {k: overall[k] for k in ("p50Ms", "p90Ms", "p99Ms", "maxMs")} if overall else None
    return {**counts, "mttrMs": mttr_all, "perSet": per("set"), "perCause": per("cause")}


def findings_summary(by_kind: dict[str, int]) -> dict[str, Any]:
    found = nonzero(by_kind)
    severity = contract.FINDING_KINDS
    return {
        "violations": sum(n for k, n in found.items() if severity[k] == contract.VIOLATION),
        "warnings": sum(n for k, n in found.items() if severity[k] == contract.WARNING),
        "byKind": dict(sorted(found.items())),
    }


def write_summary(path: Path, summary: dict[str, Any]) -> None:
    path.write_text(json.dumps(summary, indent=2, sort_keys=False) + "\n", encoding="utf-8")
