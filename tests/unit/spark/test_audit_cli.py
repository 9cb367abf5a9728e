"""`brokergroup audit` on bad input (exit 2, the path named, before any Spark starts) and
`brokergroup audit generate` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brokergroup import cli


def audit(*args: str) -> int:
    return cli.main(["audit", *args])


def test_a_missing_folder_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nowhere"
    assert audit(str(missing), "--out", str(tmp_path / "out")) == 2
    assert f"{missing}: no such file or directory" in capsys.readouterr().err


def test_an_empty_folder_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert audit(str(tmp_path), "--out", str(tmp_path / "out")) == 2
    assert f"{tmp_path}: no event-log files (*.jsonl) below it" in capsys.readouterr().err


def test_files_without_events_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "events-n0-000000.jsonl").write_text("\n\n")
    assert audit(str(tmp_path)) == 2
    assert f"{tmp_path}: the 1 event-log file(s) below it hold no events" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("this is not json\n", "not an event log: line 1 is not JSON"),
        ("\n[1, 2, 3]\n", "not an event log: line 2 is not an event record"),
        ('{"schemaVersion": 2, "eventId": "e"}\n', "event-log schemaVersion 2 is not supported (this audit reads 1)"),
    ],
)
def test_a_file_that_is_not_an_event_log_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, reason: str
) -> None:
    good = tmp_path / "n0" / "events" / "events-n0-000000.jsonl"
    good.parent.mkdir(parents=True)
    good.write_text('{"schemaVersion": 1, "eventId": "e"}\n')
    bad = tmp_path / "n1" / "events" / "events-n1-000000.jsonl"
    bad.parent.mkdir(parents=True)
    bad.write_text(content)
    assert audit(str(tmp_path)) == 2
    assert f"brokergroup audit: {bad}: {reason}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["some-dir", "--sets", "3"], "--sets: options of `audit generate`, not of `audit DIR`"),
        (["generate", "--out", "x", "--fail-on-violations"], "--fail-on-violations: not an option of `audit generate`"),
        (["generate"], "audit generate: --out DIR is required"),
        (["generate", "--out", "x", "--plant", "meteor"], "unknown plant(s) meteor"),
        (["some-dir", "--min-in-sync-replicas", "0"], "min-in-sync-replicas (0) must be at least 1"),
    ],
)
def test_options_of_the_other_form_and_bad_values_are_refused(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert audit(*args) == 2
    assert message in capsys.readouterr().err


def test_generate_writes_logs_and_the_planted_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "gen"
    code = audit(
        "generate", "--out", str(out), "--sets", "2", "--days", "0.5", "--seed", "9", "--plant", "unclean,index-gap"
    )
    assert code == 0
    printed = capsys.readouterr().out
    manifest = json.loads((out / "planted.json").read_text())
    assert f"{manifest['lines']} lines, {manifest['events']} events in 3 files under {out}" in printed
    assert sorted(p["kind"] for p in manifest["planted"]) == ["index_gap", "unclean_election"]
    assert sorted(p.name for p in out.rglob("*.jsonl")) == [f"events-n{i}-000000.jsonl" for i in range(3)]
