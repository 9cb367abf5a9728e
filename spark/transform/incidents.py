"""Incidents: a set without a working master, from the loss to the recovery, and MTTR.

The set's raft and local events are merged on one timeline (`prepare.timeline_order`). Rows
that take the master *down*:
- HEARTBEAT_LOST or CHANNEL_CLOSED of the broker that is the set's master in that record;
- ELECT_MASTER with no_master_elected (the master was cleared).
Rows that bring a master *up*:
- ELECT_MASTER with new_master_elected (recovery `new_master_elected`);
- BROKER_ACTIVE of the broker that is still the master in that record (`master_returned`).

Gaps and islands: `ups` counts the up rows so far; the down rows after the n-th up row form
incident n, which the (n+1)-th up row ends. The incident starts at its first down row, and its
cause is that row's reason. Several down rows (the old and the new controller leader both
saw the loss, or a failed election came first) stay one incident. An incident with no up row
after it is open (`endMs` null). Time to recover is control-plane time: from the first logged
loss to the election, not from the crash, which the log cannot see.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from brokergroup.spark import contract
from brokergroup.spark.transform import prepare

PERCENTILES = (0.5, 0.9, 0.99)


def incidents(events: DataFrame) -> DataFrame:
    is_master = F.coalesce(F.col("brokerId") == F.col("masterBrokerId"), F.lit(False))
    elect = F.col("type") == "ELECT_MASTER"
    result = F.coalesce(F.col("electionResult"), F.lit(""))
    down = (F.col("type").isin(*contract.LOSS_TYPES) & is_master) | (elect & (result == "no_master_elected"))
    up = (elect & (result == "new_master_elected")) | ((F.col("type") == "BROKER_ACTIVE") & is_master)
    w = prepare.timeline_order("brokerName")
    timeline = (
        events.where(F.col("brokerName").isNotNull() & (down | up))
        .withColumn("down", down)
        .withColumn("ups", F.sum(F.when(up, 1).otherwise(0)).over(w.rowsBetween(Window.unboundedPreceding, 0)))
        .withColumn("position", F.row_number().over(w))
    )
    first_down = F.struct(
        "position",
        "ts",
        F.coalesce(F.col("reason"), F.lower(F.col("type"))).alias("cause"),
        F.when(F.col("type") != "ELECT_MASTER", F.col("brokerId")).alias("lostMaster"),
        "type",
    )
    opened = (
        timeline.where(F.col("down"))
        .groupBy("brokerName", "ups")
        .agg(F.min(first_down).alias("d"), F.count(F.lit(1)).alias("downEvents"))
    )
    closing = timeline.where(~F.col("down")).select(
        "brokerName",
        (F.col("ups") - 1).alias("ups"),
        F.col("ts").alias("endMs"),
        F.when(F.col("type") == "ELECT_MASTER", F.lit("new_master_elected"))
        .otherwise(F.lit("master_returned"))
        .alias("recovery"),
        F.col("masterBrokerId").alias("newMaster"),
        F.col("reason").alias("electionReason"),
    )
    joined = opened.join(closing, ["brokerName", "ups"], "left")
    return joined.select(
        "brokerName",
        F.col("d.ts").alias("startMs"),
        "endMs",
        (F.col("endMs") - F.col("d.ts")).alias("durationMs"),
        F.col("endMs").isNotNull().alias("recovered"),
        F.col("d.cause").alias("cause"),
        F.col("d.type").alias("firstSignal"),
        F.col("d.lostMaster").alias("lostMaster"),
        "newMaster",
        "recovery",
        "electionReason",
        "downEvents",
    )


def mttr(incidents_df: DataFrame) -> DataFrame:
    """Time to recover of recovered incidents: p50/p90/p99/max in ms, overall, per set, per cause.

    `scope` is "all", "set" or "cause" and `key` the set name or cause. `open` counts incidents of
    that key that never recovered.
    """
    parts = [
        incidents_df.withColumn("scope", F.lit("all")).withColumn("key", F.lit("all")),
        incidents_df.withColumn("scope", F.lit("set")).withColumn("key", F.col("brokerName")),
        incidents_df.withColumn("scope", F.lit("cause")).withColumn("key", F.col("cause")),
    ]
    stacked = parts[0].unionByName(parts[1]).unionByName(parts[2])
    recovered = F.when(F.col("recovered"), F.col("durationMs"))
    pct = F.percentile_approx(recovered, list(PERCENTILES), 100_000)
    return (
        stacked.groupBy("scope", "key")
        .agg(
            F.count(recovered).alias("incidents"),
            F.count(F.when(~F.col("recovered"), 1)).alias("open"),
            pct.alias("p"),
            F.max(recovered).alias("maxMs"),
        )
        .select(
            "scope",
            "key",
            "incidents",
            "open",
            F.col("p")[0].alias("p50Ms"),
            F.col("p")[1].alias("p90Ms"),
            F.col("p")[2].alias("p99Ms"),
            "maxMs",
        )
    )
