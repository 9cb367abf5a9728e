"""The support bundle's writer: every part under one folder, refusals listed in errors.txt, unsafe event-log
names never become paths."""

from __future__ import annotations

import tarfile
from pathlib import Path

from brokergroup.kubectl.report import Bundle, _eventlog_names
from brokergroup.kubectl.targets import PluginError


def test_parts_and_refusals_land_in_the_tarball(tmp_path: Path) -> None:
    bundle = Bundle("bg-report")
    bundle.add("brokergroup.yaml", lambda: "kind: BrokerGroup\n")
    bundle.add("raw.bin", lambda: b"\x00\x01")

    def refused() -> str:
        raise PluginError("cannot list pods in mq: forbidden (RBAC): no")

    bundle.add("pods.yaml", refused)
    bundle.write(tmp_path / "bg-report.tar.gz")
    with tarfile.open(tmp_path / "bg-report.tar.gz") as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    assert set(files) == {"bg-report/brokergroup.yaml", "bg-report/raw.bin", "bg-report/errors.txt"}
    assert files["bg-report/raw.bin"] == b"\x00\x01"
    assert files["bg-report/errors.txt"] == b"pods.yaml: cannot list pods in mq: forbidden (RBAC): no\n"


def test_event_log_names_come_from_the_listing_and_stay_file_names() -> None:
    listing = {"nodeId": "n0", "files": [{"name": "events-1.jsonl", "size": 3}, {"name": "../etc"}, {"name": ".."}, {}]}
    assert _eventlog_names(listing) == ["events-1.jsonl"]
    assert _eventlog_names(["a.jsonl", "b/c"]) == ["a.jsonl"]
    assert _eventlog_names("garbage") == []
