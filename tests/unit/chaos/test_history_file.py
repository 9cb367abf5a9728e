"""History files: one flushed JSON line per operation; a torn last line is skipped."""

from __future__ import annotations

from pathlib import Path

from brokergroup.chaos.history import HistoryWriter, read_history


def test_operations_round_trip_in_order_with_increasing_time(tmp_path: Path) -> None:
    path = tmp_path / "h" / "history.jsonl"
    with HistoryWriter(path) as history:
        history.record("p0", "invoke", "send", {"queue": "q", "producerId": 1, "seq": 0, "payload": "x"})
        history.record("p0", "ok", "send", {"queue": "q", "producerId": 1, "seq": 0, "payload": "x"})
        assert len(path.read_text().splitlines()) == 2  # flushed per line, before close
    ops = list(read_history(path))
    assert [(o["process"], o["type"], o["f"]) for o in ops] == [("p0", "invoke", "send"), ("p0", "ok", "send")]
    assert ops[0]["value"]["producerId"] == 1
    assert 0 <= ops[0]["time"] <= ops[1]["time"]


def test_torn_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as history:
        history.record("c0", "invoke", "poll", {"queue": "q", "offset": 0})
    with path.open("a") as f:
        f.write('{"process": "c0", "type": "ok", "f": "po')
    assert [o["type"] for o in read_history(path)] == ["invoke"]
