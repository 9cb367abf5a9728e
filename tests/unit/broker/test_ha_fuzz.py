"""Property tests of the HA decoders: any bytes give frames or ProtocolError; frames round-trip."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from brokergroup.broker.errors import ProtocolError
from brokergroup.broker.protocol.ha import (
    INT32_MAX,
    INT64_MAX,
    NEED_DATA,
    EpochStart,
    MasterFrame,
    MasterFrameDecoder,
    MasterHandshake,
    MasterHead,
    MasterTransfer,
    SlaveFrame,
    SlaveFrameDecoder,
    SlaveHandshake,
    SlaveTransferAck,
    encode,
)
from brokergroup.broker.store.indexes import HeadState

offsets = st.integers(0, INT64_MAX // 2)
slave_frames = st.one_of(
    st.builds(
        SlaveHandshake,
        slave_broker_id=st.integers(1, INT64_MAX),
        is_sync_from_last_file=st.booleans(),
        is_async_learner=st.booleans(),
    ),
    st.builds(SlaveTransferAck, offsets),
)


@st.composite
def master_handshakes(draw: st.DrawFn) -> MasterHandshake:
    steps = draw(st.lists(st.tuples(st.integers(1, 1000), st.integers(1, 10**6)), max_size=20))
    entries, epoch, start = [], draw(st.integers(0, 5)) - 1, draw(st.integers(0, 10**6)) - 1
    for epoch_step, start_step in steps:
        epoch, start = epoch + epoch_step, start + start_step
        entries.append(EpochStart(epoch, start))
    max_offset = (entries[-1].start_offset if entries else 0) + draw(st.integers(0, 10**6))
    last_epoch = entries[-1].epoch if entries else draw(st.integers(0, INT32_MAX))
    return MasterHandshake(master_max_phy_offset=max_offset, master_last_epoch=last_epoch, entries=tuple(entries))


@st.composite
def master_transfers(draw: st.DrawFn) -> MasterTransfer:
    offset, body = draw(offsets), draw(st.binary(max_size=300))
    return MasterTransfer(
        offset=offset,
        epoch=draw(st.integers(0, INT32_MAX)),
        epoch_start_offset=draw(st.integers(0, offset + len(body))),
        confirm_offset=draw(offsets),
        body=body,
    )


counts = st.integers(0, INT64_MAX)
names = st.text(max_size=12)
master_heads = st.builds(
    MasterHead,
    st.builds(
        HeadState,
        counts,
        st.dictionaries(st.tuples(names, st.integers(0, 2**31 - 1)), counts, max_size=5),
        st.dictionaries(st.tuples(names, names, st.integers(0, 2**31 - 1)), st.integers(-1, INT64_MAX), max_size=5),
        st.dictionaries(counts, st.integers(-1, INT64_MAX), max_size=5),
    ),
)
master_frames = st.one_of(master_handshakes(), master_transfers(), master_heads)


def chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def drain(decoder: SlaveFrameDecoder | MasterFrameDecoder, pieces: list[bytes]) -> list[SlaveFrame | MasterFrame]:
    frames: list[SlaveFrame | MasterFrame] = []
    total = sum(len(p) for p in pieces)
    for piece in pieces:
        decoder.feed(piece)
        while (frame := decoder.next_frame()) is not NEED_DATA:
            frames.append(frame)
            assert len(frames) <= total // 12, "every frame consumes at least 12 bytes"
    return frames


@settings(max_examples=150, deadline=None)
@given(frames=st.lists(slave_frames, max_size=10), cuts=st.lists(st.integers(0, 10**6), max_size=20))
def test_slave_frames_round_trip_in_any_chunking(frames: list[SlaveFrame], cuts: list[int]) -> None:
    data = b"".join(encode(f) for f in frames)
    decoder = SlaveFrameDecoder()
    assert drain(decoder, chunks(data, cuts)) == frames
    assert decoder.buffered == 0


@settings(max_examples=150, deadline=None)
@given(frames=st.lists(master_frames, max_size=6), cuts=st.lists(st.integers(0, 10**6), max_size=20))
def test_master_frames_round_trip_in_any_chunking(frames: list[MasterFrame], cuts: list[int]) -> None:
    data = b"".join(encode(f) for f in frames)
    decoder = MasterFrameDecoder()
    assert drain(decoder, chunks(data, cuts)) == frames
    assert decoder.buffered == 0


def decode_anything(decoder: SlaveFrameDecoder | MasterFrameDecoder, pieces: list[bytes]) -> None:
    try:
        frames = drain(decoder, pieces)
    except ProtocolError:
        return  # the only exception allowed
    assert all(isinstance(f, SlaveFrame | MasterFrame) for f in frames)


@settings(max_examples=300, deadline=None)
@given(
    prefix=st.lists(slave_frames, max_size=3),
    junk=st.binary(max_size=200),
    cuts=st.lists(st.integers(0, 1000), max_size=10),
)
def test_slave_decoder_takes_any_bytes(prefix: list[SlaveFrame], junk: bytes, cuts: list[int]) -> None:
    data = b"".join(encode(f) for f in prefix) + junk
    decode_anything(SlaveFrameDecoder(), chunks(data, cuts))


@settings(max_examples=300, deadline=None)
@given(
    prefix=st.lists(master_frames, max_size=2),
    junk=st.binary(max_size=200),
    cuts=st.lists(st.integers(0, 1000), max_size=10),
)
def test_master_decoder_takes_any_bytes(prefix: list[MasterFrame], junk: bytes, cuts: list[int]) -> None:
    data = b"".join(encode(f) for f in prefix) + junk
    decode_anything(MasterFrameDecoder(max_transfer_body=1024, max_handshake_entries=16), chunks(data, cuts))


@settings(max_examples=200, deadline=None)
@given(frame=master_frames, position=st.integers(0, 10**6), value=st.integers(0, 255))
def test_master_decoder_survives_a_flipped_byte(frame: MasterFrame, position: int, value: int) -> None:
    data = bytearray(encode(frame))
    data[position % len(data)] = value
    decode_anything(MasterFrameDecoder(), [bytes(data)])
