"""The epoch checkpoint file: format, atomic writes, `.bak` fallback, and write-through."""

from __future__ import annotations

import logging
import zlib
from pathlib import Path

import pytest

from brokergroup.broker.errors import EpochFileError
from brokergroup.broker.store.epoch import (
    OPEN,
    EpochCache,
    EpochEntry,
    EpochFile,
    decode_epoch_file,
    encode_epoch_file,
)

TWO = [EpochEntry(1, 0, 100), EpochEntry(2, 100)]


def test_golden_file_content() -> None:
    assert encode_epoch_file(TWO) == b"2\n355729437\n1-0\n2-100\n"
    assert zlib.crc32(b"1-0\n2-100\n") == 355729437  # the entry lines, newlines included


def test_zero_entries_is_a_real_file() -> None:
    assert encode_epoch_file([]) == b"0\n0\n"
    assert decode_epoch_file(b"0\n0\n") == []


def test_decode_chains_end_offsets() -> None:
    assert decode_epoch_file(encode_epoch_file(TWO)) == [EpochEntry(1, 0, 100), EpochEntry(2, 100, OPEN)]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty"),
        (b"2\n", "missing <size>"),
        (b"x\n0\n", "missing <size>"),
        (b"1\n%d\n1-0\n" % (zlib.crc32(b"1-0\n") ^ 1), "crc32 mismatch"),
        (b"2\n%d\n1-0\n" % zlib.crc32(b"1-0\n"), "size line says 2"),
        (b"1\n%d\n1-0" % zlib.crc32(b"1-0"), "no newline"),
        (b"1\n%d\n1+0\n" % zlib.crc32(b"1+0\n"), "bad entry line"),
        (b"1\n%d\n-1-0\n" % zlib.crc32(b"-1-0\n"), "bad entry line"),
        (b"1\n%d\n3000000000-0\n" % zlib.crc32(b"3000000000-0\n"), "epoch=3000000000"),
        (b"2\n%d\n2-0\n1-5\n" % zlib.crc32(b"2-0\n1-5\n"), "strictly increase"),
        (b"9" * 5000 + b"\n0\n", "missing <size>"),
    ],
)
def test_decode_refuses_damaged_files(data: bytes, message: str) -> None:
    with pytest.raises(EpochFileError, match=message):
        decode_epoch_file(data)


def test_write_then_read(tmp_path: Path) -> None:
    file = EpochFile(tmp_path / "epochFileCheckpoint")
    assert file.read() == []
    file.write(TWO)
    assert file.read() == TWO
    assert not file.backup.exists()
    file.write(TWO[:1])
    assert file.read() == [EpochEntry(1, 0)]
    assert decode_epoch_file(file.backup.read_bytes()) == TWO  # the previous content


def test_writing_zero_entries_really_empties_the_file(tmp_path: Path) -> None:
    file = EpochFile(tmp_path / "epoch")
    file.write(TWO)
    file.write([])
    assert file.path.read_bytes() == b"0\n0\n"
    assert file.read() == []


@pytest.mark.parametrize("damage", ["missing", "empty", "crc", "size"])
def test_read_falls_back_to_bak(tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture) -> None:
    file = EpochFile(tmp_path / "epoch")
    file.write(TWO[:1])
    file.write(TWO)  # .bak = [epoch 1]
    if damage == "missing":
        file.path.unlink()
    elif damage == "empty":
        file.path.write_bytes(b"")
    elif damage == "crc":
        file.path.write_bytes(file.path.read_bytes().replace(b"2-100", b"2-101"))
    else:
        file.path.write_bytes(file.path.read_bytes().replace(b"2\n", b"3\n", 1))
    with caplog.at_level(logging.WARNING):
        assert file.read() == [EpochEntry(1, 0)]
    assert "using" in caplog.text and ".bak" in caplog.text


def test_both_files_bad_is_an_error_naming_both(tmp_path: Path) -> None:
    file = EpochFile(tmp_path / "epoch")
    file.path.write_bytes(b"garbage\n")
    with pytest.raises(EpochFileError, match=r"cannot read .*epoch \(.*\) nor .*epoch\.bak \(file is missing\)"):
        file.read()
    file.backup.write_bytes(b"1\n0\n1-0\n")
    with pytest.raises(EpochFileError, match="crc32 mismatch"):
        file.read()


def test_writing_over_a_corrupt_main_file_keeps_the_good_backup(tmp_path: Path) -> None:
    file = EpochFile(tmp_path / "epoch")
    file.write(TWO[:1])
    file.write(TWO)
    file.path.write_bytes(b"junk")
    file.write([EpochEntry(1, 0), EpochEntry(2, 100), EpochEntry(3, 200)])
    assert decode_epoch_file(file.backup.read_bytes()) == [EpochEntry(1, 0)]
    assert file.read()[-1] == EpochEntry(3, 200)


def test_cache_writes_through_and_reloads(tmp_path: Path) -> None:
    path = tmp_path / "epoch"
    c = EpochCache.open(path)
    c.append_entry(EpochEntry(1, 0))
    c.append_entry(EpochEntry(2, 100))
    c.append_entry(EpochEntry(3, 100))  # #9942: replaces the empty epoch 2, on disk too
    assert EpochCache.open(path).entries() == (EpochEntry(1, 0, 100), EpochEntry(3, 100))
    c.truncate_suffix_by_epoch(1)
    assert EpochCache.open(path).entries() == ()
    assert path.read_bytes() == b"0\n0\n"


def test_a_failed_write_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "epoch"
    c = EpochCache.open(path)
    c.append_entry(EpochEntry(1, 0))
    (tmp_path / "epoch.tmp").mkdir()  # the temp file cannot be created
    with pytest.raises(IsADirectoryError):
        c.append_entry(EpochEntry(2, 50))
    assert c.entries() == (EpochEntry(1, 0),)
    assert EpochCache.open(path).entries() == (EpochEntry(1, 0),)
