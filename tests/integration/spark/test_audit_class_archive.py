"""`brokergroup audit` as a user runs it, twice, in a fresh cache: the first run's driver JVM writes the
class-data-sharing archive and it is moved into place when the run ends (no temporary file left); the
second run starts with that archive (`test_audit_class_archive` in the unit tier checks the JVM options that
map it), keeps it and finds the same. Neither prints a JVM CDS message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.unit.spark.conftest import require_java

ROOT = Path(__file__).resolve().parents[3]


def audit(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "brokergroup.cli", "audit", *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)


def test_the_first_run_writes_the_archive_and_the_next_maps_it(tmp_path: Path) -> None:
    require_java()
    env = {k: v for k, v in os.environ.items() if k != "BROKERGROUP_SPARK_CDS"} | {"XDG_CACHE_HOME": str(tmp_path)}
    logs = tmp_path / "logs"
    generated = audit("generate", "--out", str(logs), "--sets", "2", "--days", "0.5", "--seed", "4", env=env)
    assert generated.returncode == 0, generated.stderr
    cache = tmp_path / "brokergroup" / "spark-cds"

    first = audit(str(logs), "--out", str(tmp_path / "first"), "--no-report", env=env)
    assert first.returncode == 0, first.stderr
    archives = sorted(p.name for p in cache.iterdir())
    assert len(archives) == 1 and archives[0].endswith(".jsa"), archives  # no .tmp left behind
    assert (cache / archives[0]).stat().st_size > 10_000_000

    second = audit(str(logs), "--out", str(tmp_path / "second"), "--no-report", env=env)
    assert second.returncode == 0, second.stderr
    assert sorted(p.name for p in cache.iterdir()) == archives
    for run in (first, second):
        assert "cds" not in (run.stdout + run.stderr).lower()

    def findings(name: str) -> tuple[object, object]:
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        return summary["input"], summary["findings"]

    assert findings("second") == findings("first")
