"""Without the `audit` extra, the audit's commands stop with one line naming it (docs/images.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from brokergroup import cli
from brokergroup.common import extras
from brokergroup.demo import audit as demo_audit

INSTALL = "pip install 'brokergroup[audit]'"


@pytest.fixture
def without_pyspark(monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules makes both `import pyspark` and find_spec("pyspark") see no such module.
    monkeypatch.setitem(sys.modules, "pyspark", None)


@pytest.mark.parametrize(
    ("argv", "what"),
    [(["audit", "{dir}"], "the Spark audit"), (["bench", "audit", "--sizes", "1000"], "the audit benchmark")],
)
@pytest.mark.usefixtures("without_pyspark")
def test_the_audit_commands_name_the_extra(
    argv: list[str], what: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main([a.replace("{dir}", str(tmp_path)) for a in argv]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    command = argv[0]
    assert line == f"brokergroup {command}: {what} needs pyspark, which is not installed: {INSTALL}"


@pytest.mark.usefixtures("without_pyspark")
def test_the_demo_says_why_it_skips_the_audit() -> None:
    assert demo_audit.missing() == f"pyspark is not installed ({INSTALL})"


def test_a_part_of_an_extra_is_checked_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert extras.missing(extras.AUDIT, "pyspark") is None
    assert extras.missing(extras.AUDIT) == f"matplotlib is not installed ({INSTALL})"


def test_every_command_line_parser_builds_without_the_extra(tmp_path: Path) -> None:
    # A fresh interpreter, so that nothing imported by other tests hides a top-level import.
    code = (
        "import sys\n"
        "sys.modules.update(pyspark=None, matplotlib=None)\n"
        "from brokergroup import cli\n"
        "cli.build_parser()\n"
        "print(sorted(m for m in sys.modules if m.startswith(('pyspark', 'matplotlib', 'py4j')) and sys.modules[m]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
