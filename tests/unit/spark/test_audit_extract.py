"""Spark: reading real files (explicit schema, PERMISSIVE), deduplication and line statistics."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from audit_factories import Scenario, rows
from pyspark.sql import DataFrame, SparkSession

from brokergroup.spark import extract, load
from brokergroup.spark.transform import prepare


def write_logs(folder: Path, s: Scenario) -> list[Path]:
    """One file per node, as the controller lays them out."""
    for record in s.records:
        events = folder / record["node"] / "events"
        events.mkdir(parents=True, exist_ok=True)
        with (events / f"events-{record['node']}-000000.jsonl").open("a") as f:
            f.write(json.dumps(record, separators=(",", ":")) + "\n")
    return extract.discover(folder)


def test_every_node_read_torn_and_bad_lines_counted_and_located(spark: SparkSession, tmp_path: Path) -> None:
    s = Scenario().running_set()
    s.at(2_000).lost("s", 2)
    files = write_logs(tmp_path, s)
    torn = files[1]
    with torn.open("a") as f:
        f.write('{"schemaVersion":1,"eventId":"9f0e')  # the node was killed mid-write
    with files[2].open("a") as f:
        f.write(json.dumps(s.records[0] | {"eventId": "x-1", "schemaVersion": 2}) + "\n")
        f.write(json.dumps(s.records[0] | {"eventId": "x-2", "ts": "soon"}) + "\n")
    raw = extract.read(spark, str(tmp_path), files)
    grouped = prepare.group_lines(raw)
    stats = load.first(prepare.line_stats(grouped))
    assert {k: stats[k] for k in ("lines", "events", "duplicates", "corrupt", "invalid", "conflicting", "sets")} == {
        "lines": 16 + 3,
        "events": 6,
        "duplicates": 10,
        "corrupt": 2,  # the torn line, and a ts that is not a number
        "invalid": 1,
        "conflicting": 0,
        "sets": 1,
    }
    located = extract.corrupt_lines_by_file(raw)
    assert sorted(located) == sorted([(str(torn), 1), (str(files[2]), 1)])


def test_events_keep_the_smallest_node_and_list_every_node(
    events: Callable[[list[dict[str, object]]], DataFrame],
) -> None:
    s = Scenario().running_set()
    s.at(2_000).lost("s", 2)
    out = events(s.records)
    assert rows(out.groupBy("source", "node", "copies", "nodes").count()) == [
        {"source": "local", "node": "n0", "copies": 1, "nodes": ["n0"], "count": 1},
        {"source": "raft", "node": "n0", "copies": 3, "nodes": ["n0", "n1", "n2"], "count": 5},
    ]


def test_a_field_the_format_does_not_know_is_ignored(spark: SparkSession, tmp_path: Path) -> None:
    """A newer controller may add a field (e.g. the event's position in its raft entry): the audit reads
    the records as before, and copies that differ only in that field are not a conflict."""
    s = Scenario().running_set()
    s.at(2_000).lost("s", 2)
    for n, record in enumerate(s.records):
        record["entryPosition"] = n if record["node"] == "n0" else 0
    files = write_logs(tmp_path, s)
    stats = load.first(prepare.line_stats(prepare.group_lines(extract.read(spark, str(tmp_path), files))))
    counts = {k: stats[k] for k in ("lines", "events", "invalid", "corrupt", "conflicting")}
    assert counts == {"lines": 16, "events": 6, "invalid": 0, "corrupt": 0, "conflicting": 0}
