"""`brokergroup bench audit` with several sizes: each size runs in a child process with a JVM of its own,
started as `brokergroup audit` starts it for that input (a small input: the small-input settings), and
the audit it times is the CLI's job (the same Spark jobs as `--explain` counts). The first size's JVM
writes the class-data-sharing archive, the second's maps it, as two `brokergroup audit` runs would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.unit.spark.conftest import require_java

ROOT = Path(__file__).resolve().parents[3]


def test_each_size_runs_in_its_own_jvm_with_the_cli_settings(tmp_path: Path) -> None:
    require_java()
    out = tmp_path / "bench.json"
    command = [sys.executable, "-m", "brokergroup.cli", "bench", "audit", "--lines", "1k,2k", "--out", str(out)]
    env = os.environ | {"XDG_CACHE_HOME": str(tmp_path / "cache")}  # the first size's JVM writes the class archive
    subprocess.run(command, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, timeout=900)
    assert [p.suffix for p in (tmp_path / "cache" / "brokergroup" / "spark-cds").iterdir()] == [".jsa"]
    sizes = json.loads(out.read_text())["sizes"]
    assert len(sizes) == 2
    for size, asked in zip(sizes, (1000, 2000), strict=True):
        assert asked <= size["lines"] < asked + 10  # generate cuts at the count, after the current batch
        assert size["smallInput"] is True
        assert size["sessionStartSeconds"] > 0
        assert size["baseline"]["counted"] == size["lines"]
        spark = size["audit"]["spark"]
        assert spark["jobs"] > 0 and spark["shuffleWriteBytes"] > 0
        assert size["audit"]["cpuSeconds"]["jvm"] > 0
