"""docs/broker.md's epoch-file and confirm-checkpoint examples, byte for byte against the code (issue 23 item 3).

The golden bytes are written here too, so a change of the format fails even if the docs were
regenerated from the new code; the docs examples must equal them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from brokergroup.broker.errors import EpochFileError
from brokergroup.broker.store.checkpoint import ConfirmCheckpoint, decode_checkpoint, encode_checkpoint
from brokergroup.broker.store.epoch import OPEN, EpochCache, EpochEntry, decode_epoch_file, encode_epoch_file
from brokergroup.broker.store.message_store import CONFIRM_FILE, EPOCH_FILE

DOC = Path(__file__).resolve().parents[3] / "docs" / "broker.md"

ENTRIES = [EpochEntry(1, 0), EpochEntry(2, 4096), EpochEntry(5, 1048576)]
EPOCH_GOLDEN = b"3\n2470440699\n1-0\n2-4096\n5-1048576\n"
CONFIRM_GOLDEN = b"1052672\n4071734567\n"


def documented(file_name: str) -> bytes:
    block = re.search(rf"```text {re.escape(file_name)}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert block is not None, f"docs/broker.md lost its {file_name} example"
    return block[1].encode("ascii")


def test_the_documented_examples_are_the_golden_bytes() -> None:
    assert documented(EPOCH_FILE) == EPOCH_GOLDEN
    assert documented(CONFIRM_FILE) == CONFIRM_GOLDEN


def test_epoch_file_golden_bytes() -> None:
    assert encode_epoch_file(ENTRIES) == EPOCH_GOLDEN
    decoded = decode_epoch_file(EPOCH_GOLDEN)
    assert [(e.epoch, e.start_offset, e.end_offset) for e in decoded] == [
        (1, 0, 4096),
        (2, 4096, 1048576),
        (5, 1048576, OPEN),
    ]
    assert encode_epoch_file([]) == b"0\n0\n" and decode_epoch_file(b"0\n0\n") == []


def test_epoch_file_written_by_the_cache_is_the_golden_bytes(tmp_path: Path) -> None:
    path = tmp_path / EPOCH_FILE
    cache = EpochCache.open(path)
    for entry in ENTRIES:
        assert cache.append_entry(entry)
    assert path.read_bytes() == EPOCH_GOLDEN
    assert [(e.epoch, e.start_offset) for e in EpochCache.open(path).entries()] == [(1, 0), (2, 4096), (5, 1048576)]


def test_a_flipped_digit_in_the_epoch_file_is_a_crc_mismatch() -> None:
    with pytest.raises(EpochFileError, match="crc32 mismatch"):
        decode_epoch_file(EPOCH_GOLDEN.replace(b"2-4096", b"2-4097"))


def test_confirm_checkpoint_golden_bytes(tmp_path: Path) -> None:
    assert encode_checkpoint(1052672) == CONFIRM_GOLDEN
    assert decode_checkpoint(CONFIRM_GOLDEN) == 1052672
    checkpoint = ConfirmCheckpoint(tmp_path / CONFIRM_FILE)
    checkpoint.write(1052672)
    assert (tmp_path / CONFIRM_FILE).read_bytes() == CONFIRM_GOLDEN
    assert decode_checkpoint(CONFIRM_GOLDEN.replace(b"1052672", b"1052673")) is None
