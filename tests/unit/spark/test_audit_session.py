"""The session settings by input size (`session.sized_for`, `session.local_conf`): a small input runs
without code generation or adaptive execution, with 1 shuffle partition and a quick-JIT-only JVM,
whoever built the session; the session's own values come back afterwards. A frame the job keeps
(`checkpoint.keep`) is one node in later plans, computed once, until released, and one planned
`partitioned` keeps its partitioning; the gap tables read the kept raft positions. Tables are written
two at a time, in the caller's job group, and a failed write releases every table kept. And the summary
query keeps a part whose aggregate is null (no rows) as null (`load.summary_values`)."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest
from audit_factories import Events, Scenario, persistent_rdds
from pyspark.errors import utils as pyspark_errors
from pyspark.sql import DataFrame, SparkSession

from brokergroup.spark import checkpoint, contract, explain, load, session, transform
from brokergroup.spark.params import AuditParams
from brokergroup.spark.transform import completeness, prepare

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


def plan_nodes(df: DataFrame) -> int:
    """How many operators the analysed plan of `df` has (one line each in its tree string)."""
    return int(df._jdf.queryExecution().analyzed().treeString().count("\n"))


def one_action(spark: SparkSession, df: DataFrame) -> explain.RunStats:
    with explain.tracked(spark.sparkContext) as group:
        assert df.count() == 7
    return explain.RunStats.of(spark.sparkContext, group)


def test_a_kept_frame_is_one_node_computed_once_until_released(spark: SparkSession) -> None:
    before = persistent_rdds(spark)
    built = spark.range(0, 50, 1, 4).selectExpr("id % 7 AS k").groupBy("k").count()  # 4 partitions: a shuffle
    assert plan_nodes(built) > 2
    kept = checkpoint.keep(built)
    assert plan_nodes(kept) == 1
    assert plan_nodes(kept.where("k > 2")) == 2  # a step on it plans only what it adds
    assert sorted(r.k for r in kept.collect()) == list(range(7))  # the first action fills the blocks
    assert persistent_rdds(spark) == before + 1
    again = one_action(spark, built)
    assert (again.stages, again.skipped_stages) == (2, 0)  # the frame itself is computed again, shuffle and all
    read = one_action(spark, kept)
    assert (read.stages, read.skipped_stages, read.shuffle_read_bytes) == (1, 0, 0)  # the kept one: its blocks
    checkpoint.release([kept])
    assert persistent_rdds(spark) == before
    with pytest.raises(Exception, match="CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND"):
        kept.count()


@pytest.mark.parametrize("small_input", [False, True])
def test_a_kept_frame_s_blocks_are_on_disk_unless_the_input_is_small(spark: SparkSession, small_input: bool) -> None:
    """At 10M lines rows kept on the heap filled it (peak RSS 4.7 GB against 2.8 GB on disk); a small
    input's stay in memory, which was faster."""
    kept = checkpoint.keep(spark.range(0, 1000, 1, 2).selectExpr("id", "id % 7 AS k"), small_input=small_input)
    try:
        assert kept.count() == 1000  # fills the blocks
        rdd_id = kept._jdf.queryExecution().logical().rdd().id()
        infos = [i for i in spark.sparkContext._jsc.sc().getRDDStorageInfo() if i.id() == rdd_id]
        assert len(infos) == 1
        assert infos[0].numCachedPartitions() == 2
        in_memory, on_disk = infos[0].memSize(), infos[0].diskSize()
        assert (in_memory > 0, on_disk > 0) == ((True, False) if small_input else (False, True))
    finally:
        checkpoint.release([kept])


def test_a_kept_frame_planned_partitioned_keeps_its_partitioning(spark: SparkSession) -> None:
    def shuffles(kept: DataFrame) -> bool:
        counted = kept.groupBy("k").count()  # by the keys `kept` is partitioned by
        assert sorted(r["count"] for r in counted.collect()) == [1] * 7
        return "Exchange hashpartitioning" in str(counted._jdf.queryExecution().executedPlan())

    with session.runtime_settings(spark, {checkpoint.ADAPTIVE: "true", "spark.sql.shuffle.partitions": "4"}):

        def built() -> DataFrame:  # a new frame each time: a frame is planned once, by its first use
            return spark.range(0, 50, 1, 4).selectExpr("id % 7 AS k").groupBy("k").count()  # a shuffle by k

        partitioned, plain = checkpoint.keep(built(), partitioned=True), checkpoint.keep(built())
        assert spark.conf.get(checkpoint.ADAPTIVE) == "true"  # planned without, and the setting back
        try:
            assert not shuffles(partitioned)
            assert shuffles(plain)  # adaptive execution left its partitioning unknown
        finally:
            checkpoint.release([partitioned, plain])


def test_the_gap_tables_read_the_positions_they_are_given(events: Events) -> None:
    """The job keeps the raft positions once (`completeness.positions`, an aggregation of every raft
    event) for the two gap tables, which otherwise compute it each."""
    s = Scenario()
    s.at(0).register("s")
    s.at(10).elect("s", 1)
    evs = events(s.records)
    timeline = prepare.raft_timeline(evs)

    def aggregates(tables: dict[str, DataFrame]) -> list[bool]:
        """Whether each gap table's plan reads the events (their `source`, which the positions filter on)."""
        plans = [str(tables[name]._jdf.queryExecution().optimizedPlan()) for name in ("index_gaps", "node_gaps")]
        return [re.search(r"\bsource#\d+", plan) is not None for plan in plans]

    assert aggregates(transform.base_tables(evs, timeline, AuditParams())) == [True, True]
    kept = checkpoint.keep(completeness.positions(evs))
    try:
        given = transform.base_tables(evs, timeline, AuditParams(), kept)
        assert aggregates(given) == [False, False]
        assert given["index_gaps"].count() == given["node_gaps"].count() == 0
    finally:
        checkpoint.release([kept])


def test_table_writes_run_two_at_a_time_in_the_caller_s_job_group(spark: SparkSession, tmp_path: Path) -> None:
    tables = {name: spark.range(3) for name in ("first", "second", "third")}
    second_started = threading.Event()
    overlapped: list[bool] = []

    def on_start(name: str) -> None:
        if name == "first":  # one at a time, "second" would start only after this returns: the wait times out
            overlapped.append(second_started.wait(timeout=60))
        elif name == "second":
            second_started.set()

    with explain.tracked(spark.sparkContext) as group:
        kept = load.write_tables(tables, tmp_path, on_start)
    try:
        assert overlapped == [True]
        assert list(kept) == list(tables)  # in the order given
        assert all((tmp_path / name / "_SUCCESS").exists() for name in tables)
        assert explain.RunStats.of(spark.sparkContext, group).jobs >= len(tables)  # the writes' jobs are the run's
    finally:
        checkpoint.release(kept.values())


def test_a_failed_table_write_releases_every_table_kept(spark: SparkSession, tmp_path: Path) -> None:
    before = persistent_rdds(spark)
    tables = {"good": spark.range(3), "bad": spark.range(1).selectExpr("raise_error('planted') AS x")}
    with pytest.raises(Exception, match="planted"):
        load.write_tables(tables, tmp_path, writers=1)  # one at a time: "good" surely starts
    assert (tmp_path / "good" / "_SUCCESS").exists()  # the first table was written, and kept
    assert persistent_rdds(spark) == before


def test_after_a_failed_table_write_no_other_write_starts(spark: SparkSession, tmp_path: Path) -> None:
    tables = {"bad": spark.range(1).selectExpr("raise_error('planted') AS x"), "later": spark.range(3)}
    started: list[str] = []
    with pytest.raises(Exception, match="planted"):
        load.write_tables(tables, tmp_path, started.append, writers=1)
    assert started == ["bad"]
    assert not (tmp_path / "later").exists()


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
