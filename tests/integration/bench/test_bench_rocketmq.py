"""`brokergroup bench rocketmq`, as docs/benchmarks.md gives it: Apache RocketMQ 5 in controller mode (7 JVMs, from
the anchor harness) and our sync produce benchmark, one round each, then the medians, ratios and issue 17's goals."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.needs import missing

ROOT = Path(__file__).resolve().parents[3]
HARNESS_CANDIDATES = (ROOT.parent / "shared" / "anchors" / "rocketmq", Path("/work/shared/anchors/rocketmq"))


def harness() -> Path:
    given = os.environ.get("BROKERGROUP_ROCKETMQ_HARNESS")
    for path in ([Path(given)] if given else []) + list(HARNESS_CANDIDATES):
        if (path / "rmq_anchor.py").is_file():
            return path
    missing("the RocketMQ anchor harness (set BROKERGROUP_ROCKETMQ_HARNESS to its folder)")


def documented_smoke_line() -> str:
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    blocks: list[str] = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    lines = [line.strip() for block in blocks for line in block.splitlines()]
    (line,) = [line for line in lines if line.startswith("brokergroup bench rocketmq --rounds 1")]
    return line


@pytest.mark.timeout(900)  # 7 JVMs start (about 40 s idle), then both systems' phases
def test_the_documented_short_run_compares_both_systems(tmp_path: Path) -> None:
    for tool in ("java", "javac", "mvn"):
        if shutil.which(tool) is None:
            missing(f"{tool} is not on PATH (scripts/test installs openjdk-17-jdk-headless and maven)")
    argv = shlex.split(documented_smoke_line())
    out = Path(argv[argv.index("--out") + 1])
    out.unlink(missing_ok=True)
    env = {**os.environ, "BROKERGROUP_ROCKETMQ_HARNESS": str(harness())}
    done = subprocess.run(
        [sys.executable, "-m", "brokergroup.cli", *argv[1:]],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert [r["order"] for r in doc["rounds"]] == [["rocketmq", "brokergroup"]]
    for side in ("rocketmq", "brokergroup"):
        assert doc[side]["single_msgs_per_s"] > 0 and doc[side]["batched_msgs_per_s"] > 0, doc[side]
        assert doc[side]["single_cpu_ms"] > 0, doc[side]
    ratio = doc["ratio_brokergroup_over_rocketmq"]["single_msgs_per_s"]
    assert abs(ratio - doc["brokergroup"]["single_msgs_per_s"] / doc["rocketmq"]["single_msgs_per_s"]) < 0.001
    assert set(doc["goals"]) == {"single_msgs_per_s", "single_p99_ms", "batched_msgs_per_s", "single_cpu_ms"}
    assert "| single_msgs_per_s |" in done.stdout


FULL_RUN = (
    "BROKERGROUP_ROCKETMQ_HARNESS=/work/shared/anchors/rocketmq "
    "python3 -m brokergroup.cli bench rocketmq --rounds 2 --messages 60000"
)


@pytest.mark.timeout(1500)  # 7 JVMs twice, 60k messages a phase on each side: about 4.5 min here
def test_the_documented_60k_comparison_runs_as_written(tmp_path: Path) -> None:
    """The command docs/benchmarks.md gives for issue 17's sixteenth session, run as written (its environment
    assignment included, `--out` added): two rounds in alternated order, 60k messages a phase."""
    assert f"`{FULL_RUN}`" in (ROOT / "docs" / "benchmarks.md").read_text()
    assignment, *argv = shlex.split(FULL_RUN)
    name, value = assignment.split("=", 1)
    if not (Path(value) / "rmq_anchor.py").is_file():
        missing(f"the RocketMQ anchor harness at {value}, where the documented command looks for it")
    out = tmp_path / "rocketmq-60k.json"
    done = subprocess.run(
        [*argv, "--out", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, name: value},
        cwd=ROOT,
        timeout=1400,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["params"]["messages"] == 60000, doc["params"]
    assert [r["order"] for r in doc["rounds"]] == [["rocketmq", "brokergroup"], ["brokergroup", "rocketmq"]]
    for side in ("rocketmq", "brokergroup"):
        assert doc[side]["single_msgs_per_s"] > 0 and doc[side]["batched_msgs_per_s"] > 0, doc[side]
    assert set(doc["goals"]) == {"single_msgs_per_s", "single_p99_ms", "batched_msgs_per_s", "single_cpu_ms"}
