"""Findings: the rows of the `findings` table, one per broken invariant or warning.

Every audit family turns its own evidence into findings with `as_findings`; `union` gathers
them into one table with `schema.FINDING_SCHEMA`. The kind decides the severity
(`contract.FINDING_KINDS`); only violations fail the job under `--fail-on-violations`.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from brokergroup.spark import contract, schema


def as_findings(
    df: DataFrame,
    kind: str,
    *,
    detail: Column,
    brokerName: Column | None = None,  # named after the columns
    brokerId: Column | None = None,
    node: Column | None = None,
    term: Column | None = None,
    index: Column | None = None,
    ts: Column | None = None,
    value: Column | None = None,
) -> DataFrame:
    """Rows of `df` as findings of one kind; a column left out is null."""
    given = {
        "brokerName": brokerName,
        "brokerId": brokerId,
        "node": node,
        "term": term,
        "index": index,
        "ts": ts,
        "value": value,
    }
    columns = [F.lit(kind).alias("kind"), F.lit(contract.FINDING_KINDS[kind]).alias("severity")]
    for field in schema.FINDING_SCHEMA.fields[2:-1]:
        column = given[field.name]
        columns.append((F.lit(None) if column is None else column).cast(field.dataType).alias(field.name))
    columns.append(detail.cast(T.StringType()).alias("detail"))
    return df.select(*columns)


def union(parts: list[DataFrame]) -> DataFrame:
    return reduce(DataFrame.unionByName, parts)


def at_record() -> dict[str, Column]:
    """The finding columns that place a record: its set, term, index and time."""
    return {"brokerName": F.col("brokerName"), "term": F.col("term"), "index": F.col("index"), "ts": F.col("ts")}
