"""`brokergroup local` and `demo` refuse bad flags with exit code 2 and the reason, before starting anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokergroup.cli import main


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["local", "up", "--sets", "0"], "--sets 0: must be between 1 and 16"),
        (["local", "up", "--controllers", "12"], "--controllers 12: must be between 1 and 9"),
        (["local", "up", "--replicas", "1"], "--mode sync needs at least 2 replicas per set"),
        (["local", "up", "--name", "My_Cluster"], "--name 'My_Cluster'"),
        (["local", "up", "--timeout", "0"], "--timeout 0"),
        (["demo", "--messages", "3"], "--messages 3: at least 20"),
    ],
)
def test_values_that_cannot_work_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    dir_flag = ["--dir", str(tmp_path / "c")] if args[0] == "local" else ["--out", str(tmp_path / "c")]
    assert main([*args, *dir_flag]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["local", "up", "--mode", "quorum"], "invalid choice: 'quorum'"),
        (["local", "up", "--profile", "slow"], "invalid choice: 'slow'"),
        (["local", "up", "--replicas", "three"], "invalid int value: 'three'"),
        (["local", "status", "--bogus"], "unrecognized arguments: --bogus"),
        (["local"], "the following arguments are required: VERB"),
        (["demo", "--profile", "slow"], "invalid choice: 'slow'"),
    ],
)
def test_malformed_flags_exit_2(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(args)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
