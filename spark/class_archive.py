"""A class-data-sharing archive (JDK AppCDS) for the driver JVMs that `brokergroup audit` launches.

A Spark driver loads, parses and verifies some ten thousand classes from Spark's jars before and during
its first queries; on a small input that is a large part of the run (at 10k lines about half of the
session start-up's JVM CPU and a tenth of the job's). An archive of those classes, memory-mapped at
start-up, skips that work. The JDK builds it from a run:

- **First run** (no archive yet for this Java and this pyspark): the JVM writes the classes it loaded,
  when it exits, to a file of its own (`-XX:ArchiveClassesAtExit`). `finish` ends that JVM after the
  job, waits for the archive and renames it into place, so a run started meanwhile never maps a
  half-written one. The first run is therefore a few seconds longer.
- **Later runs** map it (`-XX:SharedArchiveFile`). A JVM that cannot use it (another JDK build,
  another class path) runs without it; its CDS warnings are off (`-Xlog:cds*=off`), so the audit's
  output stays clean either way.

The archives live in `$XDG_CACHE_HOME/brokergroup/spark-cds/` (default `~/.cache/…`), one file of
about 190 MB per Java binary and pyspark install; delete the folder to rebuild them.
`BROKERGROUP_SPARK_CDS=0` turns the archive off.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import os
import shutil
import subprocess
from pathlib import Path

import pyspark
from pyspark import SparkContext

logger = logging.getLogger(__name__)

ENV_SWITCH = "BROKERGROUP_SPARK_CDS"
QUIET = "-Xlog:cds*=off"
DUMP_TIMEOUT_S = 300.0


@dataclasses.dataclass(frozen=True)
class Plan:
    archive: Path
    """Where the archive for this Java and pyspark is (or will be)."""
    pending: Path | None
    """The file this run's JVM writes at exit, renamed to `archive` by `finish`; None when the archive
    exists and this run only maps it."""

    @property
    def java_options(self) -> str:
        if self.pending is None:
            return f"-XX:SharedArchiveFile={self.archive} {QUIET}"
        return f"-XX:ArchiveClassesAtExit={self.pending} {QUIET}"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "brokergroup" / "spark-cds"


def java_binary() -> Path | None:
    """The `java` spark-submit will run: $JAVA_HOME/bin/java, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_for(java: Path) -> Path:
    """One archive per Java binary (path and modification time) and pyspark install (path and version):
    the JVM refuses an archive of another build or class path, so a new one needs a name of its own."""
    key = f"{java}:{java.stat().st_mtime_ns}:{Path(pyspark.__file__).parent}:{pyspark.__version__}"
    return cache_dir() / f"spark-{pyspark.__version__}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def plan() -> Plan | None:
    """What the JVM about to be launched should do with the archive; None when it is turned off or no
    Java is found (Spark then fails with its own message)."""
    if os.environ.get(ENV_SWITCH, "1") == "0":
        return None
    java = java_binary()
    if java is None:
        return None
    archive = archive_for(java)
    if archive.is_file():
        return Plan(archive, None)
    try:
        archive.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # a read-only or foreign cache folder (a container's home): run without an archive
        logger.info("no class-data-sharing archive: cannot create %s: %s", archive.parent, e)
        return None
    return Plan(archive, archive.with_name(f"{archive.name}.{os.getpid()}.tmp"))


def finish(archive_plan: Plan) -> None:
    """After `SparkSession.stop()` of a session whose JVM this process launched with `archive_plan`:
    when that JVM writes an archive, end it now (pyspark's JVM exits when its stdin closes), wait for
    the archive and move it into place. pyspark launches a new JVM for a later session."""
    if archive_plan.pending is None:
        return
    pending = archive_plan.pending
    gateway = SparkContext._gateway
    proc: subprocess.Popen[bytes] | None = getattr(gateway, "proc", None)
    try:
        if gateway is not None:
            with contextlib.suppress(Exception):  # the JVM may be gone already; exiting is the point
                gateway.shutdown()
        if proc is not None and proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
            proc.wait(timeout=DUMP_TIMEOUT_S)
        if proc is not None and proc.returncode == 0 and pending.is_file():
            pending.replace(archive_plan.archive)
            logger.info("class-data-sharing archive written: %s", archive_plan.archive)
    except subprocess.TimeoutExpired:
        logger.warning("the driver JVM did not exit within %.0f s; no class-data-sharing archive", DUMP_TIMEOUT_S)
    finally:
        pending.unlink(missing_ok=True)
        SparkContext._gateway = None
        SparkContext._jvm = None
