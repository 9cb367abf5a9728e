"""The session settings by input size (`session.sized_for`, `session.local_conf`): a small input runs
without code generation or adaptive execution, with 1 shuffle partition and a quick-JIT-only JVM,
whoever built the session; the session's own values come back afterwards. Whatever the size, the job's
caches are built in the job's own session, not a clone per cache. And the summary query
keeps a part whose aggregate is null (no rows) as null (`load.summary_values`)."""

from __future__ import annotations

from audit_factories import Events, Scenario
from pyspark.errors import utils as pyspark_errors
from pyspark.sql import DataFrame, SparkSession

from brokergroup.spark import contract, load, session, transform
from brokergroup.spark.params import AuditParams

SUMMARY_PARTS = (
    "elections",
    "incidents",
    "mttr",
    "syncStateSet",
    "riskWindows",
    "flapping",
    "controller",
    "indexGaps",
    "nodeGaps",
    "findings",
    "electionsByDay",
)


def test_a_small_input_runs_with_the_small_settings_and_the_session_gets_its_own_back(spark: SparkSession) -> None:
    own = {"spark.sql.shuffle.partitions": "5", "spark.sql.adaptive.enabled": "true"}
    with session.runtime_settings(spark, own):  # the shared test session's values come back for later tests
        with session.sized_for(spark, 1024) as small:
            assert small
            assert {k: spark.conf.get(k) for k in session.SMALL_INPUT_CONF} == session.SMALL_INPUT_CONF
        assert spark.conf.get("spark.sql.shuffle.partitions") == "5"
        assert spark.conf.get("spark.sql.adaptive.enabled") == "true"


def test_a_large_input_or_a_uri_keeps_the_session_settings(spark: SparkSession) -> None:
    before = spark.conf.get("spark.sql.shuffle.partitions")
    for size in (session.SMALL_INPUT_BYTES, None):
        with session.sized_for(spark, size) as small:
            assert not small
            assert spark.conf.get("spark.sql.shuffle.partitions") == before


def cached_in_a_clone(spark: SparkSession, df: DataFrame) -> bool:
    """Whether Spark's cache manager built the cached plan of `df` (persisted) in a clone of the session."""
    relation = spark._jsparkSession.sharedState().cacheManager().lookupCachedData(df._jdf).get()
    return not relation.cachedRepresentation().cacheBuilder().cachedPlan().session().equals(spark._jsparkSession)


def test_the_job_caches_in_its_own_session_not_a_clone_per_cache(spark: SparkSession) -> None:
    # Spark's defaults, under which every persist clones the session; the shared session gets them back.
    cloning = {
        "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "false",
        "spark.sql.sources.bucketing.autoBucketedScan.enabled": "true",
    }
    assert set(cloning) == set(session.JOB_CONF)
    with session.runtime_settings(spark, cloning):
        outside = spark.range(3).selectExpr("id * 3 AS x").persist()
        assert cached_in_a_clone(spark, outside)  # the check can tell
        outside.unpersist()
        for size in (1024, session.SMALL_INPUT_BYTES, None):
            with session.sized_for(spark, size):
                df = spark.range(3).selectExpr(f"id + {size or 0} AS x").persist()
                try:
                    assert not cached_in_a_clone(spark, df), size
                finally:
                    df.unpersist()
            assert {key: spark.conf.get(key) for key in cloning} == cloning


def test_a_session_the_audit_builds_has_no_pyspark_call_site_capture(spark: SparkSession) -> None:
    # The fixture's session is `session.build`'s; PySpark reads the setting once, from the first active session.
    assert spark.conf.get(session.PYSPARK_DEBUGGING) == "false"
    assert session.sql_conf(shuffle_partitions=8)[session.PYSPARK_DEBUGGING] == "false"
    assert not pyspark_errors.is_debugging_enabled()


def test_only_a_small_input_s_jvm_runs_the_quick_jit_only() -> None:
    small = session.local_conf(shuffle_partitions=8, driver_memory="1g", small_input=True)
    large = session.local_conf(shuffle_partitions=8, driver_memory="1g", small_input=False)
    assert small["spark.driver.extraJavaOptions"].endswith(" " + session.SMALL_INPUT_JAVA_OPTIONS)
    assert session.SMALL_INPUT_JAVA_OPTIONS not in large["spark.driver.extraJavaOptions"]
    assert small["spark.sql.shuffle.partitions"] == session.SMALL_INPUT_CONF["spark.sql.shuffle.partitions"]
    assert small["spark.default.parallelism"] == session.SMALL_INPUT_PARALLELISM
    assert large["spark.default.parallelism"] == "8"
    assert large["spark.sql.shuffle.partitions"] == "8"


def test_the_summary_query_keeps_the_null_aggregates_of_empty_tables(events: Events) -> None:
    s = Scenario()
    s.at(0).register("s")  # a set never elected: no election, risk window or incident
    values = load.summary_values(transform.audit(events(s.records), AuditParams()))
    assert set(values) == {*SUMMARY_PARTS}
    assert values["riskWindows"] == {"count": 0, "totalMs": 0, "maxMs": None, "open": 0, "long": 0}
    assert values["mttr"] == {"rows": []}
    assert values["controller"]["leaderlessMsMax"] is None
    assert values["findings"] == dict.fromkeys(contract.FINDING_KINDS, 0)
