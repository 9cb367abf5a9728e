"""The SparkSession of the audit, the benchmark and the tests.

Locally (`local[N]`) the session binds to 127.0.0.1, has no UI, computes dates in UTC and uses
few shuffle partitions (Spark's default of 200 is meant for clusters). The JVM logs only
errors: a log4j2 configuration is written to a temporary file and handed to the driver JVM,
which pyspark starts on the first session.

Small inputs (`small_input`, the job decides by file size) run faster without whole-stage code
generation and adaptive query execution: compiling and re-planning then cost more than the data.

Under `spark-submit` (on Kubernetes) the master and resources come from the submit command:
pass `master=None`.
"""

from __future__ import annotations

import atexit
import os
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession

LOG4J2 = """\
rootLogger.level = error
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def quiet_log_config() -> Path:
    fd, name = tempfile.mkstemp(prefix="brokergroup-log4j2-", suffix=".properties")
    with os.fdopen(fd, "w") as f:
        f.write(LOG4J2)
    path = Path(name)
    atexit.register(lambda: path.unlink(missing_ok=True))
    return path


SMALL_INPUT_BYTES = 64 * 1024 * 1024
SMALL_INPUT_CONF = {"spark.sql.codegen.wholeStage": "false", "spark.sql.adaptive.enabled": "false"}


def local_conf(*, shuffle_partitions: int, driver_memory: str | None, small_input: bool = False) -> dict[str, str]:
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.default.parallelism": str(shuffle_partitions),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={quiet_log_config().as_uri()}",
    }
    if driver_memory:
        conf["spark.driver.memory"] = driver_memory
    if small_input:
        conf |= SMALL_INPUT_CONF
    return conf


def build(
    *,
    master: str | None,
    app_name: str = "brokergroup-audit",
    shuffle_partitions: int = 8,
    driver_memory: str | None = "2g",
    small_input: bool = False,
) -> tuple[SparkSession, bool]:
    """(session, created): the active session if there is one, else a new one. Whoever created
    the session stops it."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
        if master.startswith("local"):
            conf = local_conf(
                shuffle_partitions=shuffle_partitions, driver_memory=driver_memory, small_input=small_input
            )
            for key, value in conf.items():
                builder = builder.config(key, value)
    else:
        builder = builder.config("spark.sql.session.timeZone", "UTC")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark, True


def driver_pid(spark: SparkSession) -> int:
    """Process id of the JVM that runs the driver (and, locally, the executors)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return int(jvm.java.lang.ProcessHandle.current().pid())
