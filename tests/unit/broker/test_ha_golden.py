"""Golden bytes for the four HA frames (reference §4.3), written by hand from the layout tables."""

from __future__ import annotations

import pytest

from brokergroup.broker.protocol.ha import (
    NEED_DATA,
    EpochStart,
    Frame,
    MasterFrameDecoder,
    MasterHandshake,
    MasterTransfer,
    SlaveFrameDecoder,
    SlaveHandshake,
    SlaveTransferAck,
    encode,
)

SLAVE_HANDSHAKE_HEX = (
    "00000001"  # state = HANDSHAKE
    "0001"  # isSyncFromLastFile = 1
    "0000"  # isAsyncLearner = 0
    "0000000000000002"  # slaveBrokerId = 2
)
SLAVE_ACK_HEX = (
    "00000002"  # state = TRANSFER
    "0102030405060708"  # slaveMaxPhyOffset
)
MASTER_HANDSHAKE_HEX = (
    "00000001"  # state = HANDSHAKE
    "00000018"  # bodySize = 24 = 2 entries
    "0000000000001000"  # masterMaxPhyOffset = 4096
    "00000003"  # masterLastEpoch = 3
    "00000001"
    "0000000000000000"  # epoch 1 starts at 0
    "00000003"
    "0000000000000800"  # epoch 3 starts at 2048
)
MASTER_TRANSFER_HEX = (
    "00000002"  # state = TRANSFER
    "00000003"  # bodySize = 3
    "0000000000000100"  # offset = 256
    "00000002"  # epoch = 2
    "0000000000000080"  # epochStartOffset = 128
    "00000000000000f0"  # confirmOffset = 240
    "616263"  # body "abc"
)
HEARTBEAT_HEX = "0000000200000000000000000000010000000002000000000000008000000000000000f0"

SLAVE_CASES: list[tuple[Frame, str]] = [
    (SlaveHandshake(slave_broker_id=2, is_sync_from_last_file=True), SLAVE_HANDSHAKE_HEX),
    (SlaveHandshake(slave_broker_id=9, is_async_learner=True), "00000001000000010000000000000009"),
    (SlaveTransferAck(0x0102030405060708), SLAVE_ACK_HEX),
]
MASTER_CASES: list[tuple[Frame, str]] = [
    (
        MasterHandshake(
            master_max_phy_offset=4096,
            master_last_epoch=3,
            entries=(EpochStart(1, 0), EpochStart(3, 2048)),
        ),
        MASTER_HANDSHAKE_HEX,
    ),
    (MasterHandshake(master_max_phy_offset=0, master_last_epoch=0), "0000000100000000" + "00" * 8 + "00000000"),
    (MasterTransfer(offset=256, epoch=2, epoch_start_offset=128, confirm_offset=240, body=b"abc"), MASTER_TRANSFER_HEX),
    (MasterTransfer(offset=256, epoch=2, epoch_start_offset=128, confirm_offset=240), HEARTBEAT_HEX),
]


@pytest.mark.parametrize(("frame", "golden"), SLAVE_CASES + MASTER_CASES)
def test_encode_matches_golden_bytes(frame: Frame, golden: str) -> None:
    assert encode(frame).hex() == golden


@pytest.mark.parametrize(("frame", "golden"), SLAVE_CASES)
def test_slave_decoder_reads_golden_bytes(frame: Frame, golden: str) -> None:
    decoder = SlaveFrameDecoder()
    decoder.feed(bytes.fromhex(golden))
    assert decoder.next_frame() == frame
    assert decoder.next_frame() is NEED_DATA
    assert decoder.buffered == 0


@pytest.mark.parametrize(("frame", "golden"), MASTER_CASES)
def test_master_decoder_reads_golden_bytes(frame: Frame, golden: str) -> None:
    decoder = MasterFrameDecoder()
    decoder.feed(bytes.fromhex(golden))
    assert decoder.next_frame() == frame
    assert decoder.next_frame() is NEED_DATA


def test_frame_sizes_are_rocketmqs() -> None:
    assert len(bytes.fromhex(SLAVE_HANDSHAKE_HEX)) == 16
    assert len(bytes.fromhex(SLAVE_ACK_HEX)) == 12
    assert len(bytes.fromhex(HEARTBEAT_HEX)) == 36
    assert len(bytes.fromhex(MASTER_HANDSHAKE_HEX)) == 20 + 2 * 12


def test_transfer_end_offset_is_offset_plus_body() -> None:
    frame = MasterTransfer(offset=256, epoch=2, epoch_start_offset=128, confirm_offset=0, body=b"abc")
    assert frame.end_offset == 259
