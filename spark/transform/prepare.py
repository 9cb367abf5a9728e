"""From the lines of every node's log to one row per event.

Every node logs every replicated event with the same `eventId`, and a node that restarts may
write its tail again, so lines are grouped by `eventId`. One grouping does all of it:

- a line is *valid* when it parsed (no `_corrupt_record`), has schemaVersion 1, every
  required field, a known `source`/`type` pair and an `index` exactly when it is a raft event;
  invalid and corrupt lines fall into one group with a null key and are only counted;
- the copy kept is the one of the smallest node id (the smallest struct with `node` first), so
  the choice is deterministic;
- `copies` counts the lines, `nodes` lists the nodes that hold one, and `conflicting` is true
  when the copies differ in anything but `node` (a raft log that diverged).

Raft events are ordered by (term, index, eventId); a batch carries one event, so eventId only
breaks ties that should not exist. Local events are ordered by (ts, eventId).
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
    """One row per eventId (plus one row, key null, for all invalid and corrupt lines)."""
    content = F.xxhash64(*[F.col(c) for c in contract.CONTENT_COLUMNS])
    keyed = raw.withColumn(KEY, F.when(is_valid(), F.col("eventId"))).withColumn("_hash", content)
    return keyed.groupBy(KEY).agg(
        F.min(F.struct("node", *[F.col(c) for c in contract.CONTENT_COLUMNS])).alias("event"),
        F.count(F.lit(1)).alias("copies"),
        F.count(schema.CORRUPT_COLUMN).alias("corrupt"),
        (F.max("_hash") != F.min("_hash")).alias("conflicting"),
        F.array_sort(F.collect_set("node")).alias("nodes"),
    )


def events_of(grouped: DataFrame) -> DataFrame:
    """The valid events: the format's columns plus `copies`, `conflicting` and `nodes`."""
    event = [F.col(f"event.{c}").alias(c) for c in contract.EVENT_COLUMNS]
    return grouped.where(F.col(KEY).isNotNull()).select(*event, "copies", "conflicting", "nodes")


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
        F.min(F.when(valid, F.col("event.ts"))).alias("firstTs"),
        F.max(F.when(valid, F.col("event.ts"))).alias("lastTs"),
        F.countDistinct(F.when(valid, F.col("event.brokerName"))).alias("sets"),
    )


def raft(events: DataFrame) -> DataFrame:
    return events.where(F.col("source") == "raft")


def local(events: DataFrame) -> DataFrame:
    return events.where(F.col("source") == "local")


def set_raft(events: DataFrame) -> DataFrame:
    """Raft events about a broker set (brokerName given)."""
    return raft(events).where(F.col("brokerName").isNotNull())


def raft_order(*partition: str) -> WindowSpec:
    return Window.partitionBy(*partition).orderBy("term", "index", "eventId")


def local_order(*partition: str) -> WindowSpec:
    return Window.partitionBy(*partition).orderBy("ts", "eventId")


def timeline_order(*partition: str) -> WindowSpec:
    """Raft and local events of a set together: by wall-clock time, a local observation before
    a raft event of the same millisecond (the leader logs a loss before the election it causes)."""
    return Window.partitionBy(*partition).orderBy("ts", "term", F.col("index").asc_nulls_first(), F.col("eventId"))


def with_segment(set_events: DataFrame) -> DataFrame:
    """Add `segment`: it grows by one after each CLEAN_BROKER_DATA that removed the whole set,
    since a re-registered set starts its epochs again from 0."""
    reset = ((F.col("type") == "CLEAN_BROKER_DATA") & F.col("masterEpoch").isNull()).cast("int")
    before = raft_order("brokerName").rowsBetween(Window.unboundedPreceding, -1)
    return set_events.withColumn("segment", F.coalesce(F.sum(reset).over(before), F.lit(0)))


def horizon(events: DataFrame) -> DataFrame:
    """One row, `horizonTs`: the last timestamp in the log; open intervals end there."""
    return events.agg(F.max("ts").alias("horizonTs"))
