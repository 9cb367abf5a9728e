"""`brokergroup bench audit`: the audit job on generated logs of 1M and 10M lines (`--lines 10k,1M,10M`).

For each size the benchmark generates the logs (`generate`, not timed in the result), then
starts a SparkSession (`local[2]` by default) as `brokergroup audit` would for that input (a small
input's JVM runs the quick JIT only, `session.SMALL_INPUT_JAVA_OPTIONS`; several sizes run one child
process each, so each gets its own JVM; `sessionStartSeconds` is that start-up) and in it:
1. warms the JVM up with one untimed read of the files;
2. baseline: a bare read-and-count of the same files with the same explicit schema, counting a
   parsed column so every line is really read (`count(eventId)`);
3. a second reference, `fullParse`: every column of every line parsed and dropped (Spark's
   `noop` sink), the least any job that looks at all fields must do;
4. the whole audit job (`job.run`: read, deduplicate, every table written as Parquet, the
   summary, the HTML report; no cross-check), with the settings `brokergroup audit` uses for
   that input size: `job.run` itself applies the small-input settings (`session.sized_for`), so
   the 10k-line run measures what a user's `brokergroup audit` of 10k lines runs, while the
   session's `--shuffle-partitions` apply to the larger inputs.

Throughput is input lines per second (and unique events per second for the audit), next to the
CPU seconds of the driver JVM (which runs the executors too) and of this Python process. The
audit also reports its Spark jobs, stages and shuffle bytes (`explain.RunStats`). Peak
memory is the driver JVM's peak resident set size (`VmHWM` in `/proc/<pid>/status`; local
mode runs the executors in the same JVM), reset before each phase by writing 5 to
`/proc/<pid>/clear_refs`. If the reset is refused, the value is the peak since the JVM
started and `peakRssReset` is false. The Python driver's own peak RSS (`ru_maxrss`, whole
process) is reported once.

Its flags are in `cli.add_bench_parser`, which builds without pyspark installed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyspark
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from brokergroup.bench.stats import machine
from brokergroup.spark import extract, generate, job, schema, session

LINES_PER_SET_DAY = 550
"""Roughly what `generate` writes per broker set and day at the benchmark's fault rate; used to
size the simulated period, which is then cut at the requested line count."""
SETS = 500
FAULT_RATE = 48.0


SUFFIXES = {"k": 1_000, "m": 1_000_000}


def line_counts(text: str) -> list[int]:
    """`10k,1M,10M` as [10000, 1000000, 10000000]; ValueError naming a bad item."""
    counts = []
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        scale = SUFFIXES.get(item[-1].lower(), 1)
        digits = item[:-1] if scale > 1 else item
        try:
            counts.append(int(float(digits) * scale))
        except ValueError:
            raise ValueError(f"{item!r} is not a line count (e.g. 10000, 10k, 1M)") from None
    return counts


def run(args: argparse.Namespace) -> int:
    try:
        sizes = line_counts(args.sizes)
    except ValueError as exc:
        print(f"brokergroup bench audit: --lines: {exc}", file=sys.stderr)
        return 2
    if not sizes or min(sizes) < 1000:
        print("brokergroup bench audit: --lines must be line counts of at least 1000", file=sys.stderr)
        return 2
    work = args.work or Path(tempfile.mkdtemp(prefix="brokergroup-bench-audit-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        if len(sizes) == 1:
            results = [bench_one(args, work / f"size-{sizes[0]}", sizes[0])]
        else:
            results = [bench_in_child(args, work, n) for n in sizes]
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    report = {
        "benchmark": "audit",
        "machine": machine() | {"loadAverage1m": round(os.getloadavg()[0], 2)},
        "sparkVersion": pyspark.__version__,
        "master": args.master,
        "driverMemory": args.driver_memory,
        "shufflePartitions": args.shuffle_partitions,
        "memoryMethod": "driver JVM VmHWM from /proc/<pid>/status, reset via /proc/<pid>/clear_refs before each phase",
        "pythonPeakRssMb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "sizes": results,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


def bench_in_child(args: argparse.Namespace, work: Path, lines: int) -> dict[str, Any]:
    """One size in a child process (`brokergroup bench audit --lines N`), so that each size gets a JVM
    of its own, started with the settings `brokergroup audit` would start it with for that input."""
    out = work / f"size-{lines}.json"
    command = [
        sys.executable,
        "-m",
        "brokergroup.cli",
        "bench",
        "audit",
        f"--lines={lines}",
        f"--master={args.master}",
        f"--driver-memory={args.driver_memory}",
        f"--shuffle-partitions={args.shuffle_partitions}",
        f"--work={work}",
        f"--out={out}",
    ]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    result: dict[str, Any] = json.loads(out.read_text())["sizes"][0]
    return result


def bench_one(args: argparse.Namespace, folder: Path, lines: int) -> dict[str, Any]:
    """Generate the logs, then start a session as `brokergroup audit` would for their size and measure."""
    days = math.ceil(lines / (SETS * LINES_PER_SET_DAY) * 1.3 * 10) / 10
    config = generate.GenerateConfig(
        out=folder / "logs", sets=SETS, days=days, fault_rate=FAULT_RATE, seed=1, max_lines=lines
    )
    started = time.monotonic()
    generated = generate.generate(config)
    generate_s = time.monotonic() - started
    files = extract.discover(folder / "logs")
    size_bytes = sum(p.stat().st_size for p in files)
    started = time.monotonic()
    spark, created = session.build(
        master=args.master,
        shuffle_partitions=args.shuffle_partitions,
        driver_memory=args.driver_memory,
        small_input=session.is_small(size_bytes),
        class_data_sharing=True,
    )
    session_s = time.monotonic() - started
    try:
        return bench_size(spark, folder, generated, days, generate_s, files, size_bytes) | {
            "sessionStartSeconds": round(session_s, 2),
            "smallInput": session.is_small(size_bytes),
        }
    finally:
        if created:
            session.stop(spark)


def bench_size(
    spark: SparkSession,
    folder: Path,
    generated: generate.GenerateResult,
    days: float,
    generate_s: float,
    files: list[Path],
    size_bytes: int,
) -> dict[str, Any]:
    pid = session.driver_pid(spark)

    def read_count() -> int:
        df = spark.read.schema(schema.READ_SCHEMA).json([str(p) for p in files])
        row = df.agg(F.count("eventId").alias("n")).first()
        assert row is not None
        return int(row["n"])

    def parse_all() -> None:
        spark.read.schema(schema.READ_SCHEMA).json([str(p) for p in files]).write.format("noop").mode(
            "overwrite"
        ).save()

    read_count()  # JIT and file cache warm-up, not measured
    baseline, counted = measured(pid, read_count)
    full_parse, _ = measured(pid, parse_all)
    settings = job.JobSettings(input=str(folder / "logs"), out=folder / "audit", explain=True)
    audit, result = measured(pid, lambda: job.run(spark, settings, files))
    summary = result.summary
    return {
        "lines": generated.lines,
        "events": generated.events,
        "files": len(files),
        "bytes": size_bytes,
        "sets": SETS,
        "days": days,
        "generateSeconds": round(generate_s, 1),
        "baseline": baseline | {"linesPerS": round(counted / baseline["seconds"]), "counted": counted},
        "fullParse": full_parse | {"linesPerS": round(generated.lines / full_parse["seconds"])},
        "audit": audit
        | {
            "linesPerS": round(generated.lines / audit["seconds"]),
            "eventsPerS": round(summary["input"]["events"] / audit["seconds"]),
            "findings": summary["findings"],
            "incidents": summary["incidents"]["total"],
            "spark": summary["spark"],
        },
        "auditOverBaseline": round(audit["seconds"] / baseline["seconds"], 2),
    }


def measured(pid: int, fn: Callable[[], Any]) -> tuple[dict[str, Any], Any]:
    """Run fn; (seconds and peak JVM RSS, fn's result)."""
    reset = reset_peak(pid)
    jvm_cpu, own_cpu = cpu_seconds(pid), time.process_time()
    started = time.monotonic()
    value = fn()
    seconds = time.monotonic() - started
    return {
        "seconds": round(seconds, 2),
        "cpuSeconds": {"jvm": round(cpu_seconds(pid) - jvm_cpu, 2), "python": round(time.process_time() - own_cpu, 2)},
        "peakRssMb": peak_rss_mb(pid),
        "peakRssReset": reset,
    }, value


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process `pid` (all its threads), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def reset_peak(pid: int) -> bool:
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def peak_rss_mb(pid: int) -> float | None:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return None
