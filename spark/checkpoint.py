"""Frames the job computes once and reads many times: local checkpoints, not caches.

A cached frame (`persist`) keeps its whole logical plan. Every query built on it is analysed over
that plan, from the JSON read on, and the cache manager compares each of its subtrees with every
cached plan before it can use the cached rows; each step of the DataFrame API analyses the plan so
far again. A local checkpoint keeps the rows in the executors' block stores (memory, spilling to
disk) and stands for them in later plans as one node, so every later step and query plans only
what it adds. With the job's frames cached, the summary's query had 830 nodes and took 1.8-2.1 s
to build at 10k lines (0.6 s on one-node frames); docs/benchmarks.md, issue 20, eleventh session,
has the run's numbers.

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

from pyspark.sql import DataFrame


def keep(df: DataFrame) -> DataFrame:
    """`df` as a one-node frame over rows computed once, by the first action that reads it."""
    return df.localCheckpoint(eager=False)


def release(frames: Iterable[DataFrame]) -> None:
    """Free the blocks of frames `keep` returned; a frame released cannot be read again."""
    for df in frames:
        # The one node is a LogicalRDD over the checkpointed RDD; PySpark has no call for it.
        df._jdf.queryExecution().logical().rdd().unpersist(False)
