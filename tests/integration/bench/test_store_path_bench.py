"""`python3 -m brokergroup.bench.store_path` (docs/benchmarks.md, issue 17, sixteenth session), run as the docs give
it: a master store takes binary batches, a slave store appends the master's log, and the CPU per message of each is
reported per round and as a median."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.bench.documented import run_documented

pytestmark = pytest.mark.integration

COMMAND = "python3 -m brokergroup.bench.store_path --batches 2000 --rounds 5"


def test_the_documented_command_reports_the_cpu_per_message_of_master_and_slave(tmp_path: Path) -> None:
    result = run_documented(COMMAND, tmp_path)
    assert (result["batches"], result["batch"], result["body_bytes"], len(result["rounds"])) == (2000, 32, 1024, 5)
    for figures in (*result["rounds"], result["median"]):
        assert figures["master_us_per_message"] > 0 and figures["slave_us_per_message"] > 0, figures


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--batch", "0"), "--batch (0) 1..1024"),
        (("--batch", "1025"), "--batch (1025) 1..1024"),
        (("--batches", "0"), "--batches (0)"),
        (("--rounds", "-1"), "--rounds (-1)"),
        (("--batches", "x"), "--batches: invalid int value: 'x'"),
    ],
)
def test_bad_input_is_named(args: tuple[str, ...], named: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "brokergroup.bench.store_path", *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and named in done.stderr, done.stderr
