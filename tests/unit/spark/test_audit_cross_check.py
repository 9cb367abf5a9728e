"""The job's cross-check: Spark's findings against the plain-Python ones, as multisets of keys."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from audit_factories import Scenario
from pyspark.sql import DataFrame, SparkSession

from brokergroup.spark import contract, invariants, job, schema
from brokergroup.spark.params import AuditParams


@pytest.fixture
def logged(tmp_path: Path) -> tuple[list[Path], list[dict[str, Any]]]:
    """An event log with one unclean election, and what the plain-Python invariants find in it."""
    s = Scenario().running_set()
    s.at(5_000).elect("s", 2, unclean=True)
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in s.records))
    found = invariants.audit_findings(s.records, AuditParams())
    assert found, "the scenario must produce findings"
    return [path], found


def as_table(spark: SparkSession, found: list[dict[str, Any]]) -> DataFrame:
    return spark.createDataFrame([tuple(f[c] for c in contract.FINDING_COLUMNS) for f in found], schema.FINDING_SCHEMA)


def check(spark: SparkSession, files: list[Path], spark_found: list[dict[str, Any]]) -> dict[str, Any]:
    settings = job.JobSettings(input=str(files[0]), out=files[0].parent / "out")
    return job.cross_check(as_table(spark, spark_found), files, lines=1, settings=settings)


def test_the_same_findings_agree(spark: SparkSession, logged: tuple[list[Path], list[dict[str, Any]]]) -> None:
    files, found = logged
    result = check(spark, files, found)
    assert result == {"status": "agree", "findings": len(found), "onlySpark": [], "onlyPython": []}


def test_a_finding_spark_reports_twice_disagrees(
    spark: SparkSession, logged: tuple[list[Path], list[dict[str, Any]]]
) -> None:
    files, found = logged
    result = check(spark, files, [*found, found[0]])
    twice = {c: found[0][c] for c in contract.FINDING_KEY}
    assert result == {"status": "disagree", "findings": len(found) + 1, "onlySpark": [twice], "onlyPython": []}


def test_a_finding_only_python_reports_is_listed(
    spark: SparkSession, logged: tuple[list[Path], list[dict[str, Any]]]
) -> None:
    files, found = logged
    result = check(spark, files, found[1:])
    assert result["status"] == "disagree"
    assert result["onlyPython"] == [{c: found[0][c] for c in contract.FINDING_KEY}]
    assert result["onlySpark"] == []
