"""The Spark integration tests share the unit tier's one SparkSession (and its CI rule), and use
the controller tests' broker processes."""

from __future__ import annotations

from tests.integration.controller.test_heartbeat_stream import brokers
from tests.unit.spark.conftest import spark

__all__ = ["brokers", "spark"]
