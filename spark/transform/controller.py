"""The controller's own leadership: leader changes and leaderless intervals.

A node that starts serving as controller leader logs CONTROLLER_LEADER_CHANGED with its term.
Raft allows one leader per term, so two nodes claiming one term is a violation
(`controller_term_conflict`).

The log has no record of the moment a leader died, so a leaderless interval is measured from
the last event of the previous leader's terms (any event whose term lies in
[previous term, new term)) to the new leader's CONTROLLER_LEADER_CHANGED. It is therefore an
upper bound when the old leader was idle before it died. A negative interval is an overlap:
the old leader still logged after the new one took over (it had not noticed yet).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from brokergroup.spark.transform import elections, findings, prepare


def claims(events: DataFrame) -> DataFrame:
    """Per term: the node(s) that claimed leadership and when."""
    changes = prepare.local(events).where(F.col("type") == "CONTROLLER_LEADER_CHANGED")
    first = F.struct("ts", "node", "eventId")
    return changes.groupBy("term").agg(
        F.min(first).alias("first"),
        F.array_sort(F.collect_set("node")).alias("nodes"),
    )


def leaders(events: DataFrame) -> DataFrame:
    """One row per term with a leader: who, since when, and the leaderless interval before it."""
    by_term = claims(events).select("term", F.col("first.node").alias("node"), F.col("first.ts").alias("ts"))
    w = Window.orderBy("term")
    ordered = by_term.withColumn("previousTerm", F.lag("term").over(w)).withColumn(
        "previousNode", F.lag("node").over(w)
    )
    last_per_term = events.groupBy(F.col("term").alias("t")).agg(F.max("ts").alias("lastTs"))
    in_between = (F.col("t") >= F.col("previousTerm")) & (F.col("t") < F.col("term"))
    last_before = (
        ordered.join(F.broadcast(last_per_term), in_between, "left")
        .groupBy("term")
        .agg(F.max("lastTs").alias("lastEventBeforeMs"))
    )
    return (
        ordered.join(last_before, "term", "left")
        .withColumn("leaderlessMs", F.col("ts") - F.col("lastEventBeforeMs"))
        .withColumn("day", elections.utc_day(F.col("ts")))
        .select("term", "node", "ts", "day", "previousTerm", "previousNode", "lastEventBeforeMs", "leaderlessMs")
    )


def term_conflicts(events: DataFrame) -> DataFrame:
    conflicted = claims(events).where(F.size("nodes") > 1)
    detail = F.format_string("nodes %s each claim to lead this term", F.array_join("nodes", ", "))
    return findings.as_findings(
        conflicted,
        "controller_term_conflict",
        detail=detail,
        term=F.col("term"),
        ts=F.col("first.ts"),
        value=F.size("nodes"),
    )
