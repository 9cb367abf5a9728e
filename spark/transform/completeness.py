"""Completeness of the log: raft index gaps, per-node gaps and conflicting copies.

Raft indices are contiguous within a term: once a leader serves, every entry it commits is a
batch with one event. The head of a term is not: the new leader's no-op and barrier entries
carry no event. So only gaps *inside* a term are reported, over the union of all nodes' logs
(`index_gap`, with the first missing index and how many are missing).

A node may also miss events that other nodes logged, e.g. after installing a snapshot instead
of replaying the journal. `node_gap` reports, per node and term, runs of indices that some
node logged, that lie strictly between the node's own first and last raft index, and that the
node does not have. Both are warnings: the audit goes on with what it has.

`conflicting_record` is a violation: two copies of one eventId that differ in anything but
`node`, i.e. the nodes' logs diverged.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from brokergroup.spark.transform import findings, prepare


def positions(events: DataFrame) -> DataFrame:
    """Distinct raft (term, index) with their earliest ts and every node that logged them."""
    return (
        prepare.raft(events)
        .groupBy("term", "index")
        .agg(
            F.min("ts").alias("ts"),
            F.array_sort(F.array_distinct(F.flatten(F.collect_list("nodes")))).alias("nodes"),
        )
    )


def index_gaps(positions_df: DataFrame) -> DataFrame:
    """One row per gap inside a term: first missing index and how many are missing."""
    w = Window.partitionBy("term").orderBy("index")
    return (
        positions_df.withColumn("next", F.lead("index").over(w))
        .where(F.col("next") - F.col("index") > 1)
        .select(
            "term",
            (F.col("index") + 1).alias("firstMissing"),
            (F.col("next") - F.col("index") - 1).alias("missing"),
            F.col("ts").alias("beforeTs"),
        )
    )


def node_gaps(positions_df: DataFrame) -> DataFrame:
    """Per node and term: runs of indices other nodes logged inside the node's own range."""
    present = positions_df.select(F.explode("nodes").alias("node"), "index")
    ranges = present.groupBy("node").agg(F.min("index").alias("lo"), F.max("index").alias("hi"))
    missing = positions_df.crossJoin(F.broadcast(ranges)).where(
        (F.col("index") > F.col("lo"))
        & (F.col("index") < F.col("hi"))
        & ~F.array_contains(F.col("nodes"), F.col("node"))
    )
    w = Window.partitionBy("node", "term").orderBy("index")
    return (
        missing.withColumn("run", F.col("index") - F.row_number().over(w))
        .groupBy("node", "term", "run")
        .agg(F.min("index").alias("firstMissing"), F.count(F.lit(1)).alias("missing"), F.min("ts").alias("ts"))
        .drop("run")
    )


def gap_findings(index_gaps_df: DataFrame, node_gaps_df: DataFrame) -> list[DataFrame]:
    index_detail = F.format_string(
        "%d raft index(es) missing from every node's log, from %d", "missing", "firstMissing"
    )
    node_detail = F.format_string(
        "node %s lacks %d raft index(es) other nodes logged, from %d", "node", "missing", "firstMissing"
    )
    return [
        findings.as_findings(
            index_gaps_df,
            "index_gap",
            detail=index_detail,
            term=F.col("term"),
            index=F.col("firstMissing"),
            ts=F.col("beforeTs"),
            value=F.col("missing"),
        ),
        findings.as_findings(
            node_gaps_df,
            "node_gap",
            detail=node_detail,
            node=F.col("node"),
            term=F.col("term"),
            index=F.col("firstMissing"),
            ts=F.col("ts"),
            value=F.col("missing"),
        ),
    ]


def conflict_findings(events: DataFrame) -> DataFrame:
    detail = F.format_string("copies of event %s differ between nodes", "eventId")
    conflicting = events.where(F.col("conflicting"))
    return findings.as_findings(
        conflicting, "conflicting_record", detail=detail, **findings.at_record(), value=F.col("copies")
    )
