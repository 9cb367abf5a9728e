"""The plugin's command line: usage errors and an unreadable kubeconfig are one line on stderr, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from brokergroup.kubectl import cli


def test_every_command_is_there() -> None:
    help_text = cli.parser().format_help()
    for command in ("status", "switchover", "fence", "unfence", "restart", "pause", "resume", "report"):
        assert command in help_text


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["status"],
        ["switchover", "bg"],
        ["fence", "bg"],
        ["restart", "bg"],
        ["status", "bg", "-o", "yaml"],
        ["frobnicate", "bg"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    assert "usage: kubectl brokergroup" in capsys.readouterr().err


def test_a_missing_kubeconfig_is_one_line(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "brokergroup.kubectl.cli", "--kubeconfig", str(tmp_path / "nope"), "status", "bg"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert run.returncode == 1
    assert run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot load the kubeconfig"), run.stderr
