"""HA frame decoders: partial input, several frames per read, and every validation error."""

from __future__ import annotations

import struct

import pytest

from brokergroup.broker.errors import BrokerError, ProtocolError
from brokergroup.broker.protocol.ha import (
    NEED_DATA,
    EpochStart,
    MasterFrame,
    MasterFrameDecoder,
    MasterHandshake,
    MasterTransfer,
    SlaveFrame,
    SlaveFrameDecoder,
    SlaveHandshake,
    SlaveTransferAck,
    encode,
)

HANDSHAKE = MasterHandshake(
    master_max_phy_offset=500, master_last_epoch=4, entries=(EpochStart(1, 0), EpochStart(4, 300))
)
TRANSFER = MasterTransfer(offset=300, epoch=4, epoch_start_offset=300, confirm_offset=280, body=b"x" * 50)


def test_slave_frames_fed_byte_by_byte_appear_only_when_complete() -> None:
    frames: list[SlaveFrame] = [SlaveHandshake(slave_broker_id=3), SlaveTransferAck(0), SlaveTransferAck(77)]
    decoder = SlaveFrameDecoder()
    seen = []
    for byte in b"".join(encode(f) for f in frames):
        decoder.feed(bytes([byte]))
        frame = decoder.next_frame()
        if frame is not NEED_DATA:
            seen.append(frame)
            assert decoder.buffered == 0
    assert seen == frames


def test_a_handshake_with_only_12_bytes_buffered_is_not_parsed() -> None:
    # RocketMQ's master parses once 12 bytes are buffered; a 16-byte handshake must wait.
    decoder = SlaveFrameDecoder()
    decoder.feed(encode(SlaveHandshake(slave_broker_id=5))[:12])
    assert decoder.next_frame() is NEED_DATA
    assert decoder.buffered == 12


def test_master_frames_fed_byte_by_byte() -> None:
    frames: list[MasterFrame] = [
        HANDSHAKE,
        TRANSFER,
        MasterTransfer(offset=350, epoch=4, epoch_start_offset=300, confirm_offset=350),
    ]
    decoder = MasterFrameDecoder()
    seen = []
    for byte in b"".join(encode(f) for f in frames):
        decoder.feed(bytes([byte]))
        while (frame := decoder.next_frame()) is not NEED_DATA:
            seen.append(frame)
    assert seen == frames


def test_several_frames_in_one_feed_come_out_in_order() -> None:
    decoder = MasterFrameDecoder()
    decoder.feed(encode(TRANSFER) + encode(HANDSHAKE) + encode(TRANSFER)[:10])
    assert decoder.next_frame() == TRANSFER
    assert decoder.next_frame() == HANDSHAKE
    assert decoder.next_frame() is NEED_DATA
    assert decoder.buffered == 10


def master_header(state: int, body_size: int) -> bytes:
    return struct.pack(">ii", state, body_size)


MASTER_ERRORS = [
    (struct.pack(">i", 0), "state=0"),
    (struct.pack(">i", 3), "state=3"),
    (struct.pack(">i", -1), "state=-1"),
    (master_header(2, -1), "bodySize=-1"),
    (master_header(1, -12), "bodySize=-12"),
    (master_header(1, 13), "bodySize=13 is not a multiple of 12"),
    (master_header(1, 12 * 1001), "more than 1000 epoch entries"),
    (master_header(2, 32 * 1024 * 1024 + 1), "bodySize=33554433 exceeds"),
    (master_header(2, 0) + struct.pack(">qiqq", -1, 1, 0, 0), "offset=-1"),
    (master_header(2, 0) + struct.pack(">qiqq", 0, -2, 0, 0), "epoch=-2"),
    (master_header(2, 0) + struct.pack(">qiqq", 0, 1, -3, 0), "epochStartOffset=-3"),
    (master_header(2, 0) + struct.pack(">qiqq", 0, 1, 0, -4), "confirmOffset=-4"),
    (master_header(2, 0) + struct.pack(">qiqq", 10, 1, 11, 0), "epochStartOffset=11 is beyond"),
    (master_header(2, 1) + struct.pack(">qiqq", 2**63 - 1, 1, 0, 0) + b"z", r"offset \+ bodySize"),
    (master_header(1, 0) + struct.pack(">qi", -5, 1), "masterMaxPhyOffset=-5"),
    (master_header(1, 0) + struct.pack(">qi", 5, -1), "masterLastEpoch=-1"),
    (master_header(1, 12) + struct.pack(">qi", 5, 1) + struct.pack(">iq", -1, 0), "epoch=-1"),
    (master_header(1, 12) + struct.pack(">qi", 5, 1) + struct.pack(">iq", 1, -9), "startOffset=-9"),
    (master_header(1, 12) + struct.pack(">qi", 5, 2) + struct.pack(">iq", 1, 0), "masterLastEpoch=2 differs"),
    (master_header(1, 12) + struct.pack(">qi", 5, 1) + struct.pack(">iq", 1, 6), "beyond masterMaxPhyOffset=5"),
    (
        master_header(1, 24) + struct.pack(">qi", 9, 2) + struct.pack(">iqiq", 2, 0, 1, 5),
        "must strictly increase",
    ),
    (
        master_header(1, 24) + struct.pack(">qi", 9, 2) + struct.pack(">iqiq", 1, 5, 2, 5),
        "must strictly increase",
    ),
]


@pytest.mark.parametrize(("data", "message"), MASTER_ERRORS, ids=[m for _, m in MASTER_ERRORS])
def test_master_decoder_rejects_invalid_fields(data: bytes, message: str) -> None:
    decoder = MasterFrameDecoder()
    decoder.feed(data)
    with pytest.raises(ProtocolError, match=message):
        decoder.next_frame()


SLAVE_ERRORS = [
    (struct.pack(">i", 0), "state=0"),
    (struct.pack(">i", 4), "state=4"),
    (struct.pack(">ihhq", 1, 2, 0, 1), "isSyncFromLastFile=2"),
    (struct.pack(">ihhq", 1, 0, -1, 1), "isAsyncLearner=-1"),
    (struct.pack(">ihhq", 1, 0, 0, 0), "slaveBrokerId=0"),
    (struct.pack(">iq", 2, -1), "slaveMaxPhyOffset=-1"),
]


@pytest.mark.parametrize(("data", "message"), SLAVE_ERRORS, ids=[m for _, m in SLAVE_ERRORS])
def test_slave_decoder_rejects_invalid_fields(data: bytes, message: str) -> None:
    decoder = SlaveFrameDecoder()
    decoder.feed(data)
    with pytest.raises(ProtocolError, match=message):
        decoder.next_frame()


def test_invalid_header_is_rejected_before_the_body_arrives() -> None:
    decoder = MasterFrameDecoder()
    decoder.feed(master_header(2, 2**31 - 1))  # nothing of the 2 GiB body needs to be buffered
    with pytest.raises(ProtocolError, match="bodySize=2147483647"):
        decoder.next_frame()


def test_limits_are_configurable() -> None:
    decoder = MasterFrameDecoder(max_transfer_body=4, max_handshake_entries=1)
    decoder.feed(encode(MasterTransfer(offset=0, epoch=1, epoch_start_offset=0, confirm_offset=0, body=b"1234")))
    assert isinstance(decoder.next_frame(), MasterTransfer)
    decoder.feed(encode(HANDSHAKE))
    with pytest.raises(ProtocolError, match="more than 1 epoch entries"):
        decoder.next_frame()
    with pytest.raises(ValueError, match="max_transfer_body"):
        MasterFrameDecoder(max_transfer_body=-1)


@pytest.mark.parametrize("decoder", [SlaveFrameDecoder(), MasterFrameDecoder()])
def test_decoder_is_poisoned_after_an_error(decoder: SlaveFrameDecoder | MasterFrameDecoder) -> None:
    decoder.feed(struct.pack(">i", 7))
    with pytest.raises(ProtocolError, match="state=7"):
        decoder.next_frame()
    with pytest.raises(ProtocolError, match=r"unusable after an earlier error: .*state=7"):
        decoder.next_frame()
    with pytest.raises(ProtocolError, match="unusable"):
        decoder.feed(encode(SlaveTransferAck(1)))
    assert issubclass(ProtocolError, BrokerError)


def test_frames_refuse_invalid_values_on_construction() -> None:
    with pytest.raises(ProtocolError, match="slaveMaxPhyOffset=-1"):
        SlaveTransferAck(-1)
    with pytest.raises(ProtocolError, match="epoch=2147483648"):
        MasterTransfer(offset=0, epoch=2**31, epoch_start_offset=0, confirm_offset=0)
    with pytest.raises(ProtocolError, match="slaveBrokerId=-3"):
        SlaveHandshake(slave_broker_id=-3)
