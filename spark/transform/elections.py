"""Elections: per-set history, daily counts by result, unclean elections and epoch invariants.

Every raft record carries the broker set's state *after* the event, so the state before an
election is the previous raft record of the set (an as-of lookup with `lag`, no join).

Unclean, re-derived: a new master is unclean when the set had been elected before
(masterEpoch > 0 before the event) and the new master was not in the sync-state-set before
the event. The first election of a set is clean. When the log starts after the set's last
record before the election, the answer is unknown (null) and nothing is compared.

Epoch invariants, between consecutive raft records of a set (a set removed by
CLEAN_BROKER_DATA starts a new segment, epochs restart there):
- an election (new master or none) raises masterEpoch by exactly 1; any other record keeps it;
- more is an `epoch_gap` (elections missing from the log), less an `epoch_regression`;
- two different masters with one masterEpoch is `split_brain`, reported once per epoch (an
  election that repeats the epoch with another master is that, not also a regression).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from brokergroup.spark.transform import findings

ELECT = "ELECT_MASTER"


def utc_day(ts_ms: Column) -> Column:
    """The UTC date of a millisecond timestamp, whatever the session time zone."""
    return F.date_add(F.lit("1970-01-01").cast("date"), F.floor(ts_ms / 86_400_000).cast("int"))


def elections(timeline: DataFrame) -> DataFrame:
    """One row per ELECT_MASTER with the state before it and both unclean verdicts, from the
    sets' raft timeline (`prepare.raft_timeline`)."""
    before = timeline.where(F.col("type") == ELECT)
    new_master = F.col("electionResult") == "new_master_elected"
    derived = (
        F.when(~new_master, F.lit(False))
        .when(F.col("hasPrevious") & (F.coalesce(F.col("previousMasterEpoch"), F.lit(0)) == 0), F.lit(False))
        .when(
            F.col("hasPrevious"),
            ~F.array_contains(
                F.coalesce(F.col("previousSyncStateSet"), F.array().cast("array<bigint>")), F.col("masterBrokerId")
            ),
        )
        .when(F.col("masterEpoch") == 1, F.lit(False))
    )
    return before.select(
        "brokerName",
        "ts",
        "term",
        "index",
        "eventId",
        "electionResult",
        "reason",
        "masterEpoch",
        "masterBrokerId",
        "previousMasterBrokerId",
        "previousSyncStateSet",
        F.col("unclean").alias("controllerUnclean"),
        derived.alias("derivedUnclean"),
        (derived == F.col("unclean")).alias("agrees"),
    )


def elections_daily(elections_df: DataFrame) -> DataFrame:
    """Elections per set, UTC day and result, with how many of them were unclean."""
    unclean = F.col("controllerUnclean") | F.coalesce(F.col("derivedUnclean"), F.lit(False))
    return (
        elections_df.withColumn("day", utc_day(F.col("ts")))
        .groupBy("brokerName", "day", "electionResult")
        .agg(F.count(F.lit(1)).alias("elections"), F.count(F.when(unclean, 1)).alias("unclean"))
    )


def unclean_findings(elections_df: DataFrame) -> list[DataFrame]:
    derived = F.col("derivedUnclean")
    where = findings.at_record() | {"brokerId": F.col("masterBrokerId"), "value": F.col("masterEpoch")}
    verdicts = F.format_string(
        "controller says unclean=%s, re-derived unclean=%s",
        F.col("controllerUnclean"),
        F.coalesce(derived.cast("string"), F.lit("unknown")),
    )
    detail = F.format_string(
        "broker %d elected in masterEpoch %d; sync-state-set before: [%s]; %s",
        "masterBrokerId",
        "masterEpoch",
        F.array_join(F.col("previousSyncStateSet").cast("array<string>"), ", "),
        verdicts,
    )
    unclean = elections_df.where(F.col("controllerUnclean") | F.coalesce(derived, F.lit(False)))
    mismatch = elections_df.where(derived.isNotNull() & (derived != F.col("controllerUnclean")))
    return [
        findings.as_findings(unclean, "unclean_election", detail=detail, **where),
        findings.as_findings(mismatch, "unclean_flag_mismatch", detail=verdicts, **where),
    ]


def epoch_findings(timeline: DataFrame) -> list[DataFrame]:
    """epoch_gap and epoch_regression between consecutive records with a masterEpoch (in one
    segment), and split_brain per epoch, from the raft timeline (`prepare.raft_timeline`)."""
    steps = timeline.where(F.col("masterEpoch").isNotNull()).withColumnRenamed("previousEpochMaster", "previousMaster")
    d = F.col("masterEpoch") - F.col("previousEpoch")
    elect = (F.col("type") == ELECT) & (F.coalesce(F.col("electionResult"), F.lit("")) != "keep_current_master")
    other_master = F.coalesce(F.col("previousMaster") != F.col("masterBrokerId"), F.lit(False))
    gap = (elect & (d > 1)) | (~elect & (d > 0))
    regression = (elect & (d <= 0) & ~((d == 0) & other_master)) | (~elect & (d < 0))
    detail = F.format_string("masterEpoch %d after %d (%s)", "masterEpoch", "previousEpoch", "type")
    where = findings.at_record() | {"value": F.col("masterEpoch")}
    return [
        findings.as_findings(steps.where(gap), "epoch_gap", detail=detail, **where),
        findings.as_findings(steps.where(regression), "epoch_regression", detail=detail, **where),
        split_brain(steps),
    ]


def split_brain(segmented: DataFrame) -> DataFrame:
    """One finding per (set, segment, masterEpoch) with more than one master, at the first record
    that names a master other than the epoch's first one. One aggregation: the epoch's records
    with a master, as a list, searched with array functions."""
    record = F.struct("term", "index", "position", "eventId", "ts", "masterBrokerId")
    epochs = (
        segmented.where(F.col("masterBrokerId").isNotNull())
        .groupBy("brokerName", "segment", "masterEpoch")
        .agg(F.array_sort(F.collect_set("masterBrokerId")).alias("masters"), F.collect_list(record).alias("records"))
        .where(F.size("masters") > 1)
    )
    first_master = F.array_min("records")["masterBrokerId"]
    offending = F.array_min(F.filter("records", lambda r: r["masterBrokerId"] != first_master))
    masters = F.array_join(F.col("masters").cast("array<string>"), ", ")
    detail = F.format_string("masters [%s] in masterEpoch %d", masters, "masterEpoch")
    return findings.as_findings(
        epochs.withColumn("first", offending),
        "split_brain",
        detail=detail,
        brokerName=F.col("brokerName"),
        brokerId=F.col("first.masterBrokerId"),
        term=F.col("first.term"),
        index=F.col("first.index"),
        ts=F.col("first.ts"),
        value=F.col("masterEpoch"),
    )
