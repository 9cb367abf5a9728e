"""The Spark tier: one `local[1]` SparkSession for the whole pytest run, and frames from records.

The JVM takes seconds to start, so every Spark test (unit and integration) shares this one
session; `tests/integration/spark/conftest.py` imports the same fixture. Without Java the Spark
tests skip locally and fail under CI=true, where a missing tool is a failure.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from brokergroup.spark import contract, schema, session
from brokergroup.spark.transform import prepare
from tests.needs import missing


def require_java() -> None:
    if shutil.which("java") or os.environ.get("JAVA_HOME"):
        return
    missing("the Spark tests need Java 17 or 21 (java on PATH or JAVA_HOME)")


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    require_java()
    spark, created = session.build(master="local[1]", shuffle_partitions=1, driver_memory="1g", small_input=True)
    # Test fixtures are tiny: interpreting expressions beats compiling them (a Spark testing switch).
    spark.conf.set("spark.sql.codegen.factoryMode", "NO_CODEGEN")
    yield spark
    if created:
        spark.stop()


@pytest.fixture
def frame(spark: SparkSession) -> Callable[[list[dict[str, Any]]], DataFrame]:
    """frame(records): the rows `extract.read` would give for these lines."""

    def make(records: list[dict[str, Any]]) -> DataFrame:
        rows = [(*(r.get(c) for c in contract.EVENT_COLUMNS), None) for r in records]
        return spark.createDataFrame(rows, schema.READ_SCHEMA).withColumn(schema.FILE_COLUMN, F.lit("test.jsonl"))

    return make


@pytest.fixture
def events(frame: Callable[[list[dict[str, Any]]], DataFrame]) -> Callable[[list[dict[str, Any]]], DataFrame]:
    """events(records): deduplicated events, as the transforms take them."""

    def make(records: list[dict[str, Any]]) -> DataFrame:
        return prepare.events_of(prepare.group_lines(frame(records)))

    return make
