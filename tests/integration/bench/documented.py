"""Run a bench command exactly as docs/benchmarks.md gives it."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]


def run_documented(command: str, tmp_path: Path, *, as_block: bool = False, timeout: float = 540) -> dict[str, Any]:
    """Check that docs/benchmarks.md gives `command` (in a code span; with `as_block`, as a line of its own in a
    code block), run it with `--out` in `tmp_path`, require exit code 0, and return the JSON it wrote."""
    written = f"\n{command}\n" if as_block else f"`{command}`"
    assert written in (ROOT / "docs" / "benchmarks.md").read_text(), f"docs/benchmarks.md does not give {written!r}"
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [*shlex.split(command), "--out", str(out)], capture_output=True, text=True, timeout=timeout, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(out.read_text())
    return report
