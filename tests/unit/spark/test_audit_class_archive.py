"""Which class-data-sharing archive a driver JVM maps or writes (`class_archive.plan`), and the JVM options
for each case (`session.local_conf`). The real JVM writing and then mapping it is
tests/integration/spark/test_audit_class_archive.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from brokergroup.spark import class_archive, session
from tests.unit.spark.conftest import require_java


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    require_java()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(class_archive.ENV_SWITCH, raising=False)
    return tmp_path / "brokergroup" / "spark-cds"


def test_without_an_archive_the_jvm_writes_one_to_a_file_of_its_own(cache: Path) -> None:
    plan = class_archive.plan()
    assert plan is not None
    assert plan.archive.parent == cache and plan.archive.suffix == ".jsa"
    assert plan.pending == plan.archive.with_name(f"{plan.archive.name}.{os.getpid()}.tmp")
    assert plan.java_options == f"-XX:ArchiveClassesAtExit={plan.pending} -Xlog:cds*=off"
    assert cache.is_dir() and not plan.archive.exists()


def test_an_existing_archive_is_mapped_and_not_written(cache: Path) -> None:
    first = class_archive.plan()
    assert first is not None
    first.archive.write_bytes(b"archive")
    plan = class_archive.plan()
    assert plan == class_archive.Plan(first.archive, None)
    assert plan.java_options == f"-XX:SharedArchiveFile={first.archive} -Xlog:cds*=off"


def test_the_switch_turns_it_off(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(class_archive.ENV_SWITCH, "0")
    assert class_archive.plan() is None


def test_a_cache_folder_that_cannot_be_made_means_no_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    require_java()
    blocker = tmp_path / "not-a-folder"
    blocker.write_bytes(b"")  # XDG_CACHE_HOME is a file: mkdir under it fails, as on a read-only home
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    monkeypatch.delenv(class_archive.ENV_SWITCH, raising=False)
    with caplog.at_level("INFO", logger=class_archive.__name__):
        assert class_archive.plan() is None
    assert "no class-data-sharing archive: cannot create" in caplog.text


def test_another_java_gets_another_archive(cache: Path, tmp_path: Path) -> None:
    java = class_archive.java_binary()
    assert java is not None
    other = tmp_path / "java"
    other.write_bytes(b"")
    assert class_archive.archive_for(other) != class_archive.archive_for(java)


def test_the_driver_options_carry_the_archive_plan(cache: Path) -> None:
    plan = class_archive.plan()
    assert plan is not None
    with_plan = session.local_conf(shuffle_partitions=2, driver_memory="1g", small_input=True, archive=plan)
    without = session.local_conf(shuffle_partitions=2, driver_memory="1g", small_input=True)
    assert with_plan["spark.driver.extraJavaOptions"].endswith(" " + plan.java_options)
    assert "ArchiveClassesAtExit" not in without["spark.driver.extraJavaOptions"]
