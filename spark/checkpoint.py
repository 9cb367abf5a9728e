"""Frames the job computes once and reads many times: local checkpoints, not caches.

A cached frame (`persist`) keeps its whole logical plan. Every query built on it is analysed over
that plan, from the JSON read on, and the cache manager compares each of its subtrees with every
cached plan before it can use the cached rows; each step of the DataFrame API analyses the plan so
far again. A local checkpoint keeps the rows in the executors' block stores and stands for them in
later plans as one node, so every later step and query plans only what it adds. With the job's
frames cached, the summary's query had 830 nodes and took 1.8-2.1 s to build at 10k lines (0.6 s
on one-node frames); docs/benchmarks.md, issue 20, eleventh session, has the run's numbers.

Where the blocks live depends on the input's size (`level`). A small input's (`session.is_small`)
stay deserialized in memory, spilling to disk (Spark's default): writing them to files cost a
10k-line run about a fifth more time. A larger input's are written serialized to the executors'
local disks, not kept as rows on the heap: at 10M lines the kept rows filled a 4 GB heap (a peak
RSS of 4.7 GB, against 2.8 GB on disk) and the run took 18 % longer for the collector's work with
them; at 1M lines the time was the same and the peak RSS a third lower. docs/benchmarks.md, issue
20, fourteenth session, has the runs. The operating system's page cache still keeps recently
written blocks in memory, outside the JVM.

`keep` is lazy: the first action that reads the frame (the job's line counts, a table's write)
computes it once and fills the blocks; later actions read them. `release` frees the blocks, which
Spark otherwise keeps until the driver's garbage collector drops the frame.

The price of no lineage: an executor lost during the run takes its blocks with it, and the next
action that needs them fails (`CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND`) instead of recomputing them.
With a local master there is no other executor to lose; on Kubernetes the run fails and is run
again by hand or at the schedule's next time, and a run overwrites its outputs (docs/audit.md, "A lost
executor fails the run").
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark import StorageLevel
from pyspark.sql import DataFrame

from brokergroup.spark import session

ADAPTIVE = "spark.sql.adaptive.enabled"
IN_MEMORY = StorageLevel.MEMORY_AND_DISK_DESER
"""Rows on the heap, spilling to disk: Spark's level for a local checkpoint."""
ON_DISK = StorageLevel.DISK_ONLY


def level(*, small_input: bool) -> StorageLevel:
    """Where `keep` puts the blocks of a run on an input of that size (see the module's docstring)."""
    return IN_MEMORY if small_input else ON_DISK


def keep(df: DataFrame, *, partitioned: bool = False, small_input: bool = False) -> DataFrame:
    """`df` as a one-node frame over rows computed once, by the first action that reads it, its
    blocks where `level` puts them for a run on a small input or not.

    `partitioned`: plan `df` without adaptive execution, so that the frame keeps the partitioning of
    its last shuffle and a later window or aggregation by the same keys does not shuffle its rows
    again. Adaptive execution decides the partitions only when it runs (it coalesces small ones), so
    a frame it planned has unknown partitioning in later plans. A frame is planned once, by its first
    use, so pass one not used yet; and the setting is the session's, so plan nothing else meanwhile
    (the job keeps the timeline before its table writes start)."""
    with session.runtime_settings(df.sparkSession, {ADAPTIVE: "false"} if partitioned else {}):
        return df.localCheckpoint(eager=False, storageLevel=level(small_input=small_input))


def release(frames: Iterable[DataFrame]) -> None:
    """Free the blocks of frames `keep` returned; a frame released cannot be read again."""
    for df in frames:
        # The one node is a LogicalRDD over the checkpointed RDD; PySpark has no call for it.
        df._jdf.queryExecution().logical().rdd().unpersist(False)
