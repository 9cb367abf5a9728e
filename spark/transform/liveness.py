"""Flapping brokers: liveness that keeps changing, from the leader's local observations.

HEARTBEAT_LOST and CHANNEL_CLOSED put a broker in state `lost`, BROKER_ACTIVE in `active`. A
broker starts active; a *transition* is a record whose state differs from the broker's
previous one, so the same loss seen twice (by the old and the new controller leader, or as a
closed channel and then a timeout) counts once. A broker flaps when at least `threshold`
transitions fall within `window_ms` (both ends included). Flapping brokers cause false
failovers, and suggest a heartbeat timeout that is too short.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from brokergroup.spark import contract
from brokergroup.spark.transform import findings, prepare


def transitions(events: DataFrame) -> DataFrame:
    observed = prepare.local(events).where(
        F.col("brokerName").isNotNull()
        & F.col("brokerId").isNotNull()
        & F.col("type").isin(*contract.LOSS_TYPES, "BROKER_ACTIVE")
    )
    state = F.when(F.col("type") == "BROKER_ACTIVE", F.lit("active")).otherwise(F.lit("lost"))
    w = prepare.local_order("brokerName", "brokerId")
    return (
        observed.withColumn("state", state)
        .withColumn("previous", F.coalesce(F.lag("state").over(w), F.lit("active")))
        .where(F.col("state") != F.col("previous"))
        .select("brokerName", "brokerId", "ts", "eventId", "type", "state")
    )


def flapping(events: DataFrame, *, window_ms: int, threshold: int) -> DataFrame:
    """Per broker with any transition: how many, the most within one window, and whether it flaps."""
    recent = Window.partitionBy("brokerName", "brokerId").orderBy("ts").rangeBetween(-window_ms, Window.currentRow)
    counted = transitions(events).withColumn("inWindow", F.count(F.lit(1)).over(recent))
    return (
        counted.groupBy("brokerName", "brokerId")
        .agg(
            F.count(F.lit(1)).alias("transitions"),
            F.max("inWindow").alias("maxInWindow"),
            F.min("ts").alias("firstMs"),
            F.max("ts").alias("lastMs"),
            F.min(F.when(F.col("inWindow") >= threshold, F.col("ts"))).alias("flappingSinceMs"),
        )
        .withColumn("flapping", F.col("maxInWindow") >= threshold)
    )


def flapping_findings(flapping_df: DataFrame, *, window_ms: int) -> DataFrame:
    detail = F.format_string(
        f"broker %d: %d lost/active transitions within {window_ms / 1000:g} s (%d in all)",
        "brokerId",
        "maxInWindow",
        "transitions",
    )
    return findings.as_findings(
        flapping_df.where(F.col("flapping")),
        "flapping_broker",
        detail=detail,
        brokerName=F.col("brokerName"),
        brokerId=F.col("brokerId"),
        ts=F.col("flappingSinceMs"),
        value=F.col("maxInWindow"),
    )
