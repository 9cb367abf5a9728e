"""The synthetic log generator: the controller's format and layout, determinism, and planted
anomalies that the plain-Python audit finds exactly (no more, no fewer)."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from brokergroup.common.settings import SettingsError
from brokergroup.spark import extract, invariants, simulate
from brokergroup.spark.generate import GenerateConfig, generate
from brokergroup.spark.params import AuditParams


def make(tmp_path: Path, name: str = "logs", **config: Any) -> tuple[Path, Any]:
    out = tmp_path / name
    return out, generate(GenerateConfig(out=out, **({"sets": 3, "days": 1.0, "seed": 3} | config)))


def records_of(out: Path) -> list[dict[str, Any]]:
    records, corrupt = extract.read_records(extract.discover(out))
    assert corrupt == 0
    return records


def keys(found: list[dict[str, Any]]) -> list[tuple[tuple[bool, object], ...]]:
    return sorted(invariants.finding_key(f) for f in found)


def test_same_seed_same_bytes_and_another_seed_other_bytes(tmp_path: Path) -> None:
    a, _ = make(tmp_path, "a")
    b, _ = make(tmp_path, "b")
    c, _ = make(tmp_path, "c", seed=4)
    files = sorted(p.relative_to(a) for p in a.rglob("*.jsonl"))
    assert files == sorted(p.relative_to(b) for p in b.rglob("*.jsonl"))
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    assert (a / files[0]).read_bytes() != (c / files[0]).read_bytes()


def test_the_controllers_layout_format_and_replication(tmp_path: Path) -> None:
    out, result = make(tmp_path, max_file_bytes=64 * 1024, controller_failovers=12.0)
    names = [p.relative_to(out).as_posix() for p in result.files]
    assert all(re.fullmatch(r"controllers/(n\d)/events/events-\1-\d{6}\.jsonl", n) for n in names)
    assert any(n.endswith("-000001.jsonl") for n in names)  # rolled by size
    text = resources.files("brokergroup.controller").joinpath("event.schema.json").read_text(encoding="utf-8")
    validator = jsonschema.Draft202012Validator(
        json.loads(text), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    records = records_of(out)
    assert len(records) == result.lines
    for record in records:
        assert [e.message for e in validator.iter_errors(record)] == [], record
    copies: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        copies[record["eventId"]].append(record)
    leader_of = {r["term"]: r["node"] for r in records if r["type"] == "CONTROLLER_LEADER_CHANGED"}
    assert len(leader_of) > 3
    for same in copies.values():
        if same[0]["source"] == "raft":
            assert sorted(r["node"] for r in same) == ["n0", "n1", "n2"]
            assert len({json.dumps({**r, "node": None}, sort_keys=True) for r in same}) == 1
        else:
            assert len(same) == 1 and same[0]["node"] == leader_of[same[0]["term"]]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_without_plants_the_audit_finds_nothing(tmp_path: Path, seed: int) -> None:
    out, _ = make(tmp_path, seed=seed, days=3.0, fault_rate=60.0)
    assert invariants.audit_findings(records_of(out), AuditParams()) == []


@pytest.mark.parametrize("plant", simulate.PLANTS)
def test_each_plant_alone_is_found_exactly(tmp_path: Path, plant: str) -> None:
    out, result = make(tmp_path, plants=(plant,))
    assert len(result.planted) == 1
    assert keys(invariants.audit_findings(records_of(out), AuditParams())) == keys(result.planted)
    manifest = json.loads((out / "planted.json").read_text())
    assert manifest["planted"] == result.planted


def test_all_plants_in_one_set_are_found_exactly(tmp_path: Path) -> None:
    out, result = make(tmp_path, sets=1, days=2.0, plants=simulate.PLANTS)
    found = invariants.audit_findings(records_of(out), AuditParams())
    assert sorted(f["kind"] for f in found) == ["index_gap", "long_risk_window", "split_brain", "unclean_election"]
    assert keys(found) == keys(result.planted)


def test_max_lines_cuts_the_log(tmp_path: Path) -> None:
    _, result = make(tmp_path, max_lines=500)
    assert 500 <= result.lines < 503


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"sets": 0}, "sets (0) must be at least 1"),
        ({"days": 0}, "days (0) must be positive"),
        ({"plants": ("meteor",)}, "unknown plant(s) meteor"),
        ({"nodes": 12}, "nodes (12) must be between 1 and 9"),
    ],
)
def test_bad_settings_are_refused_with_a_reason(tmp_path: Path, config: dict[str, Any], message: str) -> None:
    with pytest.raises(SettingsError, match=re.escape(message)):
        GenerateConfig(out=tmp_path, **config).validate()


def test_an_output_folder_with_logs_is_refused(tmp_path: Path) -> None:
    make(tmp_path)
    with pytest.raises(SettingsError, match="already holds logs"):
        make(tmp_path)
