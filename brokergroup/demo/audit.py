"""Step 6 of the demo: the Spark audit over the controllers' event logs, when it is installed.

The audit runs as its own process (`brokergroup audit DIR --out DIR`), so that its JVM comes and
goes with it and a failure of the audit cannot take the demo down. Its summary.json is read back.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from brokergroup.common import extras
from brokergroup.demo.model import AuditOutcome, describe


def missing() -> str | None:
    """Why the audit cannot run here, or None when it can."""
    why = extras.missing(extras.AUDIT)
    if why is not None:
        return why
    if shutil.which("java") is None:
        return "no Java runtime (pyspark needs one)"
    return None


def run(events: Path, out: Path, *, log: Path, timeout_s: float = 300.0) -> AuditOutcome:
    why = missing()
    if why is not None:
        return AuditOutcome(ran=False, line=f"audit skipped: {why}")
    target = out / "audit"
    command = [sys.executable, "-m", "brokergroup.cli", "audit", str(events), "--out", str(target)]
    command += ["--master", "local[2]", "--driver-memory", "1g"]
    with log.open("wb") as f:
        try:
            done = subprocess.run(command, stdout=f, stderr=subprocess.STDOUT, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            return AuditOutcome(ran=False, line=f"audit did not finish within {timeout_s:.0f} s; see {log.name}")
    summary_path = target / "summary.json"
    if done.returncode != 0 or not summary_path.exists():
        return AuditOutcome(ran=False, line=f"audit failed (exit {done.returncode}); see {log.name}")
    summary = json.loads(summary_path.read_text())
    report = target / "report.html"
    return AuditOutcome(
        ran=True,
        line=describe(summary),
        summary=summary,
        report=str(report.relative_to(out)) if report.exists() else None,
    )
