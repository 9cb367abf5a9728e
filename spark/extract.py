"""Extract: find the event-log files of every node and read them with the explicit schema.

Input is a folder. Every `*.jsonl` file below it is read: `<data-dir>/events/` of one node,
the `controllers/` folder of a local group (`n0/events/…`, `n1/events/…`), or logs copied
from pods. Before Spark starts, each file's first line must be a JSON object of a known
`schemaVersion`; anything else is not an event log and stops the job with an error that names
the file (`AuditInputError`, exit code 2). Later bad lines, such as the torn last line of a
node killed mid-write, do not stop it: Spark reads in PERMISSIVE mode and the job counts and
reports them.

A URI with a scheme (`s3a://…`, `hdfs://…`) skips the local checks: Spark lists it itself.
"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from brokergroup.spark import contract, schema


class AuditInputError(Exception):
    """The input cannot be audited; the message names the path and the reason."""


def is_uri(location: str) -> bool:
    return "://" in location


def discover(location: Path) -> list[Path]:
    """The event-log files under `location`, sorted; each one checked to be an event log."""
    if not location.exists():
        raise AuditInputError(f"{location}: no such file or directory")
    if location.is_file():
        files = [location]
    else:
        files = sorted(p for p in location.rglob("*.jsonl") if p.is_file() and not p.name.startswith("."))
    if not files:
        raise AuditInputError(f"{location}: no event-log files (*.jsonl) below it")
    with_events = [path for path in files if first_record(path) is not None]
    if not with_events:
        raise AuditInputError(f"{location}: the {len(files)} event-log file(s) below it hold no events")
    return files


def first_record(path: Path) -> dict[str, Any] | None:
    """The first non-blank line of `path` parsed, or None for an empty file; AuditInputError if that
    line is not an event-log record of a schema version this audit reads."""
    try:
        with path.open("rb") as f:
            for number, line in enumerate(f, 1):
                if line.strip():
                    return _check_first(path, number, line)
    except OSError as exc:
        raise AuditInputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return None


def _check_first(path: Path, number: int, line: bytes) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except ValueError as exc:
        raise AuditInputError(f"{path}: not an event log: line {number} is not JSON ({exc})") from exc
    if not isinstance(record, dict) or "eventId" not in record:
        raise AuditInputError(f"{path}: not an event log: line {number} is not an event record")
    version = record.get("schemaVersion")
    if version != contract.SCHEMA_VERSION:
        raise AuditInputError(
            f"{path}: event-log schemaVersion {version!r} is not supported (this audit reads {contract.SCHEMA_VERSION})"
        )
    return record


def read(spark: SparkSession, location: str, files: list[Path] | None = None) -> DataFrame:
    """Every line as a row of `schema.READ_SCHEMA` plus `sourceFile`; bad lines kept (PERMISSIVE)."""
    reader = (
        spark.read.schema(schema.READ_SCHEMA)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", schema.CORRUPT_COLUMN)
    )
    if files is None:
        df = reader.option("recursiveFileLookup", "true").option("pathGlobFilter", "*.jsonl").json(location)
    else:
        df = reader.json([str(p) for p in files])
    return df.withColumn(schema.FILE_COLUMN, F.col("_metadata.file_path"))


def corrupt_lines_by_file(raw: DataFrame, limit: int = 20) -> list[tuple[str, int]]:
    """(file, corrupt lines) for the files with corrupt lines, most first. Reads the input again, so
    the job calls it only when the line statistics found corrupt lines."""
    # A line is corrupt only with respect to the columns a query parses, and Spark refuses a
    # query that references nothing but the corrupt-record column: so reference every column,
    # as the line statistics do.
    every = F.struct(*[F.col(c) for c in contract.EVENT_COLUMNS])
    counted = F.count(F.when(F.col(schema.CORRUPT_COLUMN).isNotNull(), every)).alias("lines")
    per_file = raw.groupBy(schema.FILE_COLUMN).agg(counted).where(F.col("lines") > 0)
    rows = per_file.orderBy(F.desc("lines"), schema.FILE_COLUMN).limit(limit).collect()
    return [(local_path(str(r[schema.FILE_COLUMN])), int(r["lines"])) for r in rows]


def local_path(uri: str) -> str:
    """A `file:` URI as Spark reports it, as a plain path; other URIs unchanged."""
    parsed = urllib.parse.urlparse(uri)
    return urllib.parse.unquote(parsed.path) if parsed.scheme == "file" else uri


def read_records(files: list[Path]) -> tuple[list[dict[str, Any]], int]:
    """Plain-Python read of every line, for the cross-check: (records, lines that are not JSON objects)."""
    records: list[dict[str, Any]] = []
    corrupt = 0
    for path in files:
        with path.open("rb") as f:
            for line in f:
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    corrupt += 1
                    continue
                if isinstance(record, dict):
                    records.append(record)
                else:
                    corrupt += 1
    return records, corrupt
