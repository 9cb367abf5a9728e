"""`brokergroup audit --explain`: what one run cost Spark, without the Spark UI.

The job's actions run in a job group of their own (`tracked`); afterwards `RunStats.of` reads the
driver's status store (the one the UI would show, kept with the UI off too) for that group: how
many jobs, how many stages ran and how many were skipped (their shuffle output reused), how many
tasks, and the bytes shuffled. A change that adds a query or a shuffle shows here as a number,
which is what a regression test or a benchmark can compare.
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import Iterator
from typing import Any

from pyspark import SparkContext


@dataclasses.dataclass(frozen=True)
class RunStats:
    jobs: int
    stages: int
    """Stages that ran (completed or failed), over all jobs."""
    skipped_stages: int
    """Stages a job did not run because an earlier one left their shuffle output."""
    tasks: int
    shuffle_write_bytes: int
    shuffle_read_bytes: int
    input_bytes: int

    @classmethod
    def of(cls, sc: SparkContext, group: str) -> RunStats:
        """The statistics of every job of `group` that has ended."""
        jsc: Any = sc._jsc.sc()
        jsc.listenerBus().waitUntilEmpty()  # the status store is filled from the listener bus
        store = jsc.statusStore()
        job_ids = sorted(sc.statusTracker().getJobIdsForGroup(group))
        stages = skipped = tasks = 0
        stage_ids: set[int] = set()
        for job_id in job_ids:
            job = store.job(job_id)
            stages += job.numCompletedStages() + job.numFailedStages()
            skipped += job.numSkippedStages()
            tasks += job.numCompletedTasks()
            ids = job.stageIds().iterator()
            while ids.hasNext():
                stage_ids.add(int(ids.next()))
        write = read = input_bytes = 0
        for stage_id in sorted(stage_ids):
            attempts = store.stageData(stage_id, False, None, False, None).iterator()
            while attempts.hasNext():
                stage = attempts.next()
                if stage.status().toString() in ("COMPLETE", "FAILED"):
                    write += stage.shuffleWriteBytes()
                    read += stage.shuffleReadBytes()
                    input_bytes += stage.inputBytes()
        return cls(len(job_ids), stages, skipped, tasks, write, read, input_bytes)

    def as_json(self) -> dict[str, int]:
        return {
            "jobs": self.jobs,
            "stages": self.stages,
            "skippedStages": self.skipped_stages,
            "tasks": self.tasks,
            "shuffleWriteBytes": self.shuffle_write_bytes,
            "shuffleReadBytes": self.shuffle_read_bytes,
            "inputBytes": self.input_bytes,
        }


def line(stats: dict[str, int]) -> str:
    """`RunStats.as_json` as the one line `--explain` prints."""
    mb = 1024 * 1024
    return (
        f"Spark: {stats['jobs']} jobs, {stats['stages']} stages ({stats['skippedStages']} skipped), "
        f"{stats['tasks']} tasks; shuffle {stats['shuffleWriteBytes'] / mb:.1f} MiB written, "
        f"{stats['shuffleReadBytes'] / mb:.1f} MiB read; input {stats['inputBytes'] / mb:.1f} MiB"
    )


@contextlib.contextmanager
def tracked(sc: SparkContext) -> Iterator[str]:
    """Run the block's Spark actions in a new job group (of this thread); yields the group's id."""
    group = f"brokergroup-audit-{uuid.uuid4().hex}"
    before = sc.getLocalProperty("spark.jobGroup.id")
    sc.setJobGroup(group, "brokergroup audit")
    try:
        yield group
    finally:
        sc.setLocalProperty("spark.jobGroup.id", before)  # type: ignore[arg-type]
