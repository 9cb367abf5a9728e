"""Sync-state-set churn and single-replica risk windows.

Shrinks and expands compare each raft record's sync-state-set with the set's previous one
(`array_except` both ways) and name every replica that left or joined. An election shrinks the
set to the new master on purpose; its rows carry `type` ELECT_MASTER so they can be told apart.

A *risk window* is a stretch of the set's raft history with a master whose sync-state-set is
smaller than `max(2, minInSyncReplicas)`: an acknowledged message then lives on fewer replicas
than promised, and losing the master loses it (Kafka's "last replica standing", KIP-966). Gaps
and islands: an island starts at the record that enters the risk state and ends at the first
record that leaves it; a window still open when the log ends is measured to the log's last
timestamp and marked `open`. Windows of at least `long_ms` are `long_risk_window` warnings.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from brokergroup.spark.transform import findings, prepare


def risk_threshold(min_in_sync_replicas: int) -> int:
    """A sync-state-set smaller than this is a risk: one replica, or fewer than minInSyncReplicas."""
    return max(2, min_in_sync_replicas)


def changes(timeline: DataFrame) -> DataFrame:
    """One row per replica that left (shrink) or joined (expand) a set's sync-state-set, from the
    sets' raft timeline (`prepare.raft_timeline`)."""
    steps = timeline.where(F.col("syncStateSet").isNotNull() & F.col("syncStateSetBefore").isNotNull()).withColumn(
        "before", F.col("syncStateSetBefore")
    )
    moved = F.concat(
        tagged("shrink", F.array_except("before", "syncStateSet")),
        tagged("expand", F.array_except("syncStateSet", "before")),
    )
    return steps.withColumn("m", F.explode(moved)).select(
        "brokerName",
        "ts",
        "term",
        "index",
        "type",
        "reason",
        F.col("m.c").alias("change"),
        F.col("m.r").alias("replica"),
        F.size("before").alias("sizeBefore"),
        F.size("syncStateSet").alias("sizeAfter"),
        "masterEpoch",
        "syncStateSetEpoch",
    )


def tagged(change: str, replicas: Column) -> Column:
    return F.transform(replicas, lambda r: F.struct(F.lit(change).alias("c"), r.alias("r")))


def at_risk(threshold: int, master: str = "masterBrokerId", sss: str = "syncStateSet") -> Column:
    """A record at risk: it has a master and a sync-state-set smaller than `threshold`."""
    s = F.col(sss)
    return F.coalesce(F.col(master).isNotNull() & s.isNotNull() & (F.size(s) < threshold), F.lit(False))


def risk_windows(timeline: DataFrame, horizon: DataFrame, *, min_in_sync_replicas: int, long_ms: int) -> DataFrame:
    """One row per risk window: start, end, duration, open, smallest set size, master at start. From
    the sets' raft timeline (`prepare.raft_timeline`); open windows end at `horizon` (`prepare.horizon`)."""
    w = prepare.raft_order("brokerName")
    threshold = risk_threshold(min_in_sync_replicas)
    flagged = (
        timeline.withColumn("risk", at_risk(threshold))
        .withColumn("wasRisk", at_risk(threshold, "previousMasterBrokerId", "previousSyncStateSet"))
        .withColumn("starts", F.col("risk") & ~F.col("wasRisk"))
        .withColumn("island", F.sum(F.col("starts").cast("int")).over(w.rowsBetween(Window.unboundedPreceding, 0)))
    )
    start = F.struct("ts", "term", "index", "position", "masterBrokerId")
    islands = (
        flagged.where(F.col("risk") | F.col("wasRisk"))
        .groupBy("brokerName", "island")
        .agg(
            F.max(F.when(F.col("starts"), start)).alias("s"),
            F.max(F.when(~F.col("risk"), F.col("ts"))).alias("closedTs"),
            F.min(F.when(F.col("risk"), F.size("syncStateSet"))).alias("minSize"),
        )
        .crossJoin(horizon)
    )
    end = F.coalesce(F.col("closedTs"), F.col("horizonTs"))
    duration = end - F.col("s.ts")
    return islands.select(
        "brokerName",
        F.col("s.ts").alias("startMs"),
        end.alias("endMs"),
        duration.alias("durationMs"),
        F.col("closedTs").isNull().alias("open"),
        "minSize",
        F.col("s.masterBrokerId").alias("masterBrokerId"),
        F.col("s.term").alias("term"),
        F.col("s.index").alias("index"),
        (duration >= long_ms).alias("long"),
    )


def long_window_findings(windows: DataFrame, *, long_ms: int) -> DataFrame:
    long = windows.where(F.col("long"))
    detail = F.format_string(
        f"sync-state-set below the risk threshold for %.1f s (limit {long_ms / 1000:g} s)%s",
        F.col("durationMs") / 1000,
        F.when(F.col("open"), F.lit(", still open when the log ends")).otherwise(F.lit("")),
    )
    return findings.as_findings(
        long,
        "long_risk_window",
        detail=detail,
        brokerName=F.col("brokerName"),
        brokerId=F.col("masterBrokerId"),
        term=F.col("term"),
        index=F.col("index"),
        ts=F.col("startMs"),
        value=F.col("durationMs"),
    )
