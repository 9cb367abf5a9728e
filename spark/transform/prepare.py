"""From the lines of every node's log to one row per event.

Every node logs every replicated event with the same `eventId`, and a node that restarts may
write its tail again, so lines are grouped by `eventId`. One sort does all of it: the lines are
partitioned by `eventId` and sorted by node within it, and one Window over that order (no
aggregation buffers, which would hold every column of every line) keeps the first line and
computes the group's columns:

- a line is *valid* when it parsed (no `_corrupt_record`), has schemaVersion 1, every
  required field, a known `source`/`type` pair and an `index` exactly when it is a raft event;
  invalid and corrupt lines are grouped by their content instead (key null) and only counted;
- the copy kept is the one of the smallest node id (then the smallest content), so the choice
  is deterministic;
- `copies` counts the lines, `nodes` lists the nodes that hold one, and `conflicting` is true
  when the copies differ in anything but `node` (a raft log that diverged).

The result is flat (the format's columns, not a nested struct), so the job keeps it cheaply.

Raft events are ordered by (term, index, position, eventId): one Raft entry may carry batches of
several broker sets (group commit), and `position` is the event's place in its entry. Lines
written before group commit have no position (null, first): an entry held one batch then, and
eventId breaks the tie as it did. Local events are ordered by (ts, eventId).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F

from brokergroup.spark import contract, schema

KEY = "_key"


def is_valid() -> Column:
    present = [F.col(c).isNotNull() for c in contract.REQUIRED_COLUMNS]
    raft = (F.col("source") == "raft") & F.col("type").isin(*contract.RAFT_TYPES) & F.col("index").isNotNull()
    local = (F.col("source") == "local") & F.col("type").isin(*contract.LOCAL_TYPES) & F.col("index").isNull()
    result = F.col("electionResult").isNull() | F.col("electionResult").isin(*contract.ELECTION_RESULTS)
    ok = F.col(schema.CORRUPT_COLUMN).isNull() & (F.col("schemaVersion") == contract.SCHEMA_VERSION)
    for check in (*present, raft | local, result):
        ok = ok & check
    return F.coalesce(ok, F.lit(False))


def group_lines(raw: DataFrame) -> DataFrame:
    """One row per eventId (plus one row, key null, per distinct invalid or corrupt line): `_key`, the
    format's columns of the kept copy, `copies`, `corrupt`, `conflicting` and `nodes`."""
    content = [F.col(c) for c in contract.CONTENT_COLUMNS]
    valid = is_valid()
    line = F.xxhash64(*content, F.col("node"), F.col(schema.CORRUPT_COLUMN), F.col(schema.FILE_COLUMN))
    keyed = raw.select(
        valid.alias("_valid"),
        F.when(~valid, line).alias("_line"),  # invalid lines: one group per distinct line
        F.xxhash64(*content).alias("_hash"),
        *[F.col(c) for c in contract.EVENT_COLUMNS],
        F.col(schema.CORRUPT_COLUMN),
    )
    w = Window.partitionBy("eventId", "_valid", "_line").orderBy("node", *content)
    whole = w.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    return (
        keyed.select(
            F.when(F.col("_valid"), F.col("eventId")).alias(KEY),
            *contract.EVENT_COLUMNS,
            F.row_number().over(w).alias("_n"),
            F.count(F.lit(1)).over(whole).alias("copies"),
            F.count(schema.CORRUPT_COLUMN).over(whole).alias("corrupt"),
            (F.max("_hash").over(whole) != F.min("_hash").over(whole)).alias("conflicting"),
            F.array_sort(F.collect_set("node").over(whole)).alias("nodes"),
        )
        .where(F.col("_n") == 1)
        .drop("_n")
    )


def events_of(grouped: DataFrame) -> DataFrame:
    """The valid events: the format's columns plus `copies`, `conflicting` and `nodes`."""
    return grouped.where(F.col(KEY).isNotNull()).select(*contract.EVENT_COLUMNS, "copies", "conflicting", "nodes")


def line_stats(grouped: DataFrame) -> DataFrame:
    """One row: lines, events, duplicates, corrupt, invalid and conflicting counts."""
    valid = F.col(KEY).isNotNull()
    return grouped.agg(
        F.coalesce(F.sum("copies"), F.lit(0)).alias("lines"),
        F.count(F.when(valid, 1)).alias("events"),
        F.coalesce(F.sum(F.when(valid, F.col("copies") - 1)), F.lit(0)).alias("duplicates"),
        F.coalesce(F.sum("corrupt"), F.lit(0)).alias("corrupt"),
        F.coalesce(F.sum(F.when(~valid, F.col("copies") - F.col("corrupt"))), F.lit(0)).alias("invalid"),
        F.count(F.when(valid & F.col("conflicting"), 1)).alias("conflicting"),
        F.min(F.when(valid, F.col("ts"))).alias("firstTs"),
        F.max(F.when(valid, F.col("ts"))).alias("lastTs"),
        F.countDistinct(F.when(valid, F.col("brokerName"))).alias("sets"),
    )


def raft(events: DataFrame) -> DataFrame:
    return events.where(F.col("source") == "raft")


def local(events: DataFrame) -> DataFrame:
    return events.where(F.col("source") == "local")


def set_raft(events: DataFrame) -> DataFrame:
    """Raft events about a broker set (brokerName given)."""
    return raft(events).where(F.col("brokerName").isNotNull())


def raft_order(*partition: str) -> WindowSpec:
    return Window.partitionBy(*partition).orderBy("term", "index", F.col("position").asc_nulls_first(), "eventId")


def local_order(*partition: str) -> WindowSpec:
    return Window.partitionBy(*partition).orderBy("ts", "eventId")


def timeline_order(*partition: str) -> WindowSpec:
    """Raft and local events of a set together: by wall-clock time, a local observation before
    a raft event of the same millisecond (the leader logs a loss before the election it causes)."""
    return Window.partitionBy(*partition).orderBy(
        "ts", "term", F.col("index").asc_nulls_first(), F.col("position").asc_nulls_first(), F.col("eventId")
    )


def raft_timeline(events: DataFrame) -> DataFrame:
    """The raft events of the sets in raft order, each with what the raft-order tables and findings
    need to know about the records before it, from one sort per set (one Window spec):

    - `hasPrevious`, `previousMasterEpoch`, `previousMasterBrokerId`, `previousSyncStateSet`: the
      set's previous raft record;
    - `syncStateSetBefore`: the last sync-state-set logged before this record;
    - `segment`: grows by one after each CLEAN_BROKER_DATA that removed the whole set, since a
      re-registered set starts its epochs again from 0;
    - `previousEpoch`, `previousEpochMaster`: masterEpoch and master of the set's previous record
      with a masterEpoch in the same segment.

    The job keeps it: elections, sync-state changes, risk windows and the epoch findings all read it.
    """
    w = raft_order("brokerName")
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    reset = ((F.col("type") == "CLEAN_BROKER_DATA") & F.col("masterEpoch").isNull()).cast("int")
    lagged = set_raft(events).select(
        "*",
        F.lag("eventId").over(w).isNotNull().alias("hasPrevious"),
        F.lag("masterEpoch").over(w).alias("previousMasterEpoch"),
        F.lag("masterBrokerId").over(w).alias("previousMasterBrokerId"),
        F.lag("syncStateSet").over(w).alias("previousSyncStateSet"),
        F.last("syncStateSet", ignorenulls=True).over(before).alias("syncStateSetBefore"),
        F.coalesce(F.sum(reset).over(before), F.lit(0)).alias("segment"),
    )
    with_epoch = F.when(F.col("masterEpoch").isNotNull(), F.struct("segment", "masterEpoch", "masterBrokerId"))
    previous = F.last(with_epoch, ignorenulls=True).over(before)
    same_segment = F.col("_epoch.segment") == F.col("segment")
    return (
        lagged.withColumn("_epoch", previous)
        .withColumn("previousEpoch", F.when(same_segment, F.col("_epoch.masterEpoch")))
        .withColumn("previousEpochMaster", F.when(same_segment, F.col("_epoch.masterBrokerId")))
        .drop("_epoch")
    )


def horizon(events: DataFrame) -> DataFrame:
    """One row, `horizonTs`: the last timestamp in the log; open intervals end there."""
    return events.agg(F.max("ts").alias("horizonTs"))
