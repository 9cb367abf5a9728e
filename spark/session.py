"""The SparkSession of the audit, the benchmark and the tests.

Locally (`local[N]`) the session binds to 127.0.0.1, has no UI, computes dates in UTC and uses
few shuffle partitions (Spark's default of 200 is meant for clusters). The JVM logs only
errors: a log4j2 configuration is written to a temporary file and handed to the driver JVM,
which pyspark starts on the first session.

Small inputs run faster without code generation and adaptive query execution, and with one shuffle
partition: compiling, re-planning and scheduling then cost more than the data. The job switches these
runtime settings itself for the input it reads (`sized_for`).

Under `spark-submit` (on Kubernetes: spark/k8s/, docs/audit.md) the master and resources come from
the submit command and win over the `master` asked for: `brokergroup audit DIR` defaults to
`local[*]` only when it starts the JVM itself. `master=None` leaves the choice to Spark.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from brokergroup.spark import class_archive

logger = logging.getLogger(__name__)

SUBMIT_GATEWAY_ENV = "PYSPARK_GATEWAY_PORT"
"""Set by spark-submit (PythonRunner) for the Python it starts: the JVM already runs, with spark-submit's
--master and --conf as its configuration, and pyspark connects to it instead of launching one."""

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
SMALL_INPUT_CONF = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
}
"""Runtime SQL settings for inputs under SMALL_INPUT_BYTES: no compiling (neither whole stages nor the
single projections, predicates and orderings, which `NO_CODEGEN` interprets instead of compiling with
Janino in every task's first use), no re-planning, and one shuffle partition. Each partition is a task
per stage, and every task is serialised, scheduled and deserialised; a second core gains nothing on a
few MB, and meanwhile runs the driver's planning, the JIT and the garbage collector. With one partition
some exchanges also go (a single partition already satisfies a window's or a join's distribution):
at 10k lines 39 stages and 81 tasks instead of 55 and 170 with two."""

SMALL_INPUT_PARALLELISM = "1"
"""`spark.default.parallelism` of a JVM launched for a small input: the file scan packs a few MB of
input into one task instead of one per file."""


SMALL_INPUT_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
"""For a driver JVM this process launches for a small input: only the quick JIT compiler (C1). A run of
seconds ends before C2's optimised code pays for its compile time, which on 2 cores competes with the job.
Unlike SMALL_INPUT_CONF it is fixed when the JVM starts: `brokergroup audit` decides before it builds the
session, `brokergroup bench audit` runs each input size in a JVM of its own."""


def is_small(input_bytes: int | None) -> bool:
    """Whether an input of this size gets SMALL_INPUT_CONF; None (a URI Spark lists itself) is not small."""
    return input_bytes is not None and input_bytes < SMALL_INPUT_BYTES


@contextlib.contextmanager
def sized_for(spark: SparkSession, input_bytes: int | None) -> Iterator[bool]:
    """SMALL_INPUT_CONF for the block when the input is small (yields whether it is), the session's own
    values restored afterwards. The job runs in this, so `brokergroup audit`, the benchmark
    and the tests run a given input with the same settings, whatever session they share."""
    small = is_small(input_bytes)
    with runtime_settings(spark, SMALL_INPUT_CONF if small else {}):
        yield small


@contextlib.contextmanager
def runtime_settings(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """`settings` for the block; afterwards each key has the session's own value again, or none."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


PYSPARK_DEBUGGING = "spark.python.sql.dataFrameDebugging.enabled"
"""PySpark's call-site capture: while on, every DataFrame and Column function call of this Python also
asks the JVM for the active session, a setting and the origin object, and sets and clears the origin
(about 5,500 of a 10k run's 18,000 py4j calls, and about half of the run's Python CPU). It only adds the
Python line to the context of a Spark error. PySpark reads it once per process, from the first active
session: so it is a session setting (`sql_conf`), not one the job can switch per run."""


def sql_conf(*, shuffle_partitions: int, small_input: bool = False) -> dict[str, str]:
    """Session settings for any master, spark-submit's too: UTC dates, few shuffle partitions (audit
    inputs are MB to GB), no PySpark call-site capture, and, for small inputs, no code generation or adaptive
    execution."""
    conf = {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        PYSPARK_DEBUGGING: "false",
    }
    if small_input:
        conf |= SMALL_INPUT_CONF
    return conf


def local_conf(
    *,
    shuffle_partitions: int,
    driver_memory: str | None,
    small_input: bool = False,
    archive: class_archive.Plan | None = None,
) -> dict[str, str]:
    """`sql_conf` plus the driver settings of a JVM this process launches for a local master: loopback
    only, no UI, quiet logs, the heap, for a small input the quick JIT only, and the class-data-sharing
    archive to map or write (`class_archive`)."""
    java_options = f"-Dlog4j2.configurationFile={quiet_log_config().as_uri()}"
    if small_input:
        java_options += f" {SMALL_INPUT_JAVA_OPTIONS}"
    if archive is not None:
        java_options += f" {archive.java_options}"
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.default.parallelism": SMALL_INPUT_PARALLELISM if small_input else str(shuffle_partitions),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.extraJavaOptions": java_options,
    }
    if driver_memory:
        conf["spark.driver.memory"] = driver_memory
    return conf | sql_conf(shuffle_partitions=shuffle_partitions, small_input=small_input)


def build(
    *,
    master: str | None,
    app_name: str = "brokergroup-audit",
    shuffle_partitions: int = 8,
    driver_memory: str | None = "2g",
    small_input: bool = False,
    class_data_sharing: bool = False,
) -> tuple[SparkSession, bool]:
    """(session, created): the active session if there is one, else a new one. Whoever created
    the session stops it, with `stop`.

    Under spark-submit its master, application name and resources win over `master`, `app_name` and
    `driver_memory`; only `sql_conf` is added. `class_data_sharing`: a local driver JVM this process
    launches maps the class archive, or writes it if there is none yet (`class_archive`)."""
    global _archive
    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    submitted = submitted_master()
    builder = SparkSession.builder
    if submitted is not None:
        logger.info("Spark master %s from spark-submit (asked for: %s)", submitted, master)
        conf = sql_conf(shuffle_partitions=shuffle_partitions, small_input=small_input)
    elif master is not None and master.startswith("local"):
        builder = builder.master(master).appName(app_name)
        launches = SparkContext._gateway is None
        _archive = class_archive.plan() if class_data_sharing and launches else None
        conf = local_conf(
            shuffle_partitions=shuffle_partitions,
            driver_memory=driver_memory,
            small_input=small_input,
            archive=_archive,
        )
    else:
        builder = (builder.master(master) if master is not None else builder).appName(app_name)
        conf = sql_conf(shuffle_partitions=shuffle_partitions, small_input=small_input)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark, True


_archive: class_archive.Plan | None = None
"""The class archive plan of the JVM `build` launched last, for `stop`."""


def stop(spark: SparkSession) -> None:
    """Stop a session `build` created; if its JVM writes the class archive, let it finish and keep it."""
    global _archive
    spark.stop()
    if _archive is not None:
        archive, _archive = _archive, None
        class_archive.finish(archive)


def submitted_master() -> str | None:
    """The master spark-submit set, when spark-submit started this Python; None for a plain `python` or
    `brokergroup audit`.

    Under spark-submit, `SparkConf()` shows the JVM's settings (spark.master included) only once pyspark
    is connected to that JVM; before, it is an empty Python-side dict. So this connects first, which
    only happens when spark-submit handed over its JVM (SUBMIT_GATEWAY_ENV): otherwise connecting would
    launch a JVM before the driver settings of `build` are known."""
    if SUBMIT_GATEWAY_ENV not in os.environ:
        return None
    SparkContext._ensure_initialized()
    master = SparkConf().get("spark.master")
    return master or None


def driver_pid(spark: SparkSession) -> int:
    """Process id of the JVM that runs the driver (and, locally, the executors)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return int(jvm.java.lang.ProcessHandle.current().pid())
