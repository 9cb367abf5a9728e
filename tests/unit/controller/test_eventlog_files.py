"""Reading the event-log files for `GET /v1/eventlog` and `GET /v1/eventlog/{name}`: this node's
files only, complete lines only, and file names that cannot leave the folder."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from brokergroup.controller import eventlog
from brokergroup.controller.eventlog import EventLogWriter, LogFile


def record(index: int, pad: int = 0) -> dict[str, object]:
    return {"schemaVersion": 1, "eventId": f"e{index}", "source": "raft", "index": index, "reason": "x" * pad}


def line(index: int, pad: int = 0) -> bytes:
    return (json.dumps({**record(index, pad), "node": "n1"}, separators=(",", ":")) + "\n").encode()


@pytest.fixture
def writer(tmp_path: Path) -> EventLogWriter:
    return EventLogWriter(tmp_path / "events", node_id="n1", max_bytes=4096)


@pytest.mark.parametrize(
    ("data", "size", "expected"),
    [
        (b"", 0, 0),
        (b"a\nb\n", 4, 4),
        (b"a\nb\nhalf", 8, 4),
        (b"a\nb\nhalf", 3, 2),  # only the first `size` bytes count
        (b"no newline at all", 17, 0),
        (b"x" * 200_000 + b"\n" + b"y" * 150_000, 350_001, 200_001),  # the newline is chunks back
        (b"\n", 1, 1),
    ],
)
def test_complete_length_stops_after_the_last_newline(data: bytes, size: int, expected: int) -> None:
    assert eventlog.complete_length(io.BytesIO(data), size) == expected


@pytest.mark.parametrize(
    ("name", "safe"),
    [
        ("events-n1-000000.jsonl", True),
        ("events-ctl_0.a-000012.jsonl", True),
        ("anything-else.txt", True),  # safe, but not this node's file: 404, not 400
        ("..", False),
        (".", False),
        (".events-n1-000000.jsonl", False),
        ("../events-n1-000000.jsonl", False),
        ("a/b", False),
        ("events-n1..-000000.jsonl", False),
        ("a b", False),
        ("a\x00b", False),
        ("é", False),
        ("", False),
        ("x" * 256, False),
    ],
)
def test_only_plain_file_names_are_safe(name: str, safe: bool) -> None:
    assert eventlog.is_safe_file_name(name) is safe


def test_the_listing_holds_this_nodes_files_in_order_sized_to_complete_lines(writer: EventLogWriter) -> None:
    for i in range(1, 9):  # about 6 KiB; a batch goes to a new file once the current one has 4 KiB
        writer.append([record(i, pad=700)])
    folder = writer.files()[0].parent
    (folder / "events-n2-000000.jsonl").write_bytes(line(1))  # another node's, copied here
    (folder / "notes.txt").write_text("hello")
    last = writer.files()[-1]
    complete = last.stat().st_size
    with last.open("ab") as f:
        f.write(b'{"schemaVersion":1,"eventId":"e9"')  # the writer is mid-line
    listed = writer.listing()
    assert [f.name for f in listed] == ["events-n1-000000.jsonl", "events-n1-000001.jsonl"]
    assert listed[0] == LogFile("events-n1-000000.jsonl", writer.files()[0].stat().st_size)
    assert listed[1] == LogFile("events-n1-000001.jsonl", complete)
    assert listed[1].size < last.stat().st_size


def test_an_empty_folder_lists_nothing(writer: EventLogWriter) -> None:
    assert writer.listing() == []


def test_open_complete_gives_a_file_and_its_complete_length(writer: EventLogWriter) -> None:
    writer.append([record(1), record(2)])
    path = writer.files()[0]
    whole = path.read_bytes()
    with path.open("ab") as f:
        f.write(b'{"half')
    opened = writer.open_complete(path.name)
    assert opened is not None
    f, length = opened
    with f:
        assert (f.tell(), length) == (0, len(whole))
        assert f.read(length) == whole


@pytest.mark.parametrize(
    "name",
    ["events-n1-000007.jsonl", "events-n2-000000.jsonl", "notes.txt", "events-n1-0.jsonl", "events-n1-000000.json"],
)
def test_open_complete_knows_only_this_nodes_existing_files(writer: EventLogWriter, name: str) -> None:
    writer.append([record(1)])
    folder = writer.files()[0].parent
    (folder / "events-n2-000000.jsonl").write_bytes(line(1))
    (folder / "notes.txt").write_text("hello")
    (folder / "events-n1-0.jsonl").write_bytes(line(1))
    assert writer.open_complete(name) is None


def test_a_directory_with_a_files_name_is_not_a_file(writer: EventLogWriter) -> None:
    writer.append([record(1)])
    (writer.files()[0].parent / "events-n1-000005.jsonl").mkdir()
    assert writer.open_complete("events-n1-000005.jsonl") is None
    assert [f.name for f in writer.listing()] == ["events-n1-000000.jsonl"]
