"""`free_ports`: ports a later server can bind, never in the range the kernel takes clients' source ports from
(a broker binds its replication port seconds after the port is chosen; in the ephemeral range an outgoing
connection could take it meanwhile, which once failed a CI run with EADDRINUSE)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokergroup.local import ports


@pytest.fixture(autouse=True)
def fresh_memory() -> Iterator[None]:
    saved = set(ports._handed_out)
    ports._handed_out.clear()
    yield
    ports._handed_out.clear()
    ports._handed_out.update(saved)


def listening(port: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do
    s.bind(("127.0.0.1", port))
    s.listen()
    return s


def test_ports_are_outside_the_ephemeral_range_distinct_and_bindable() -> None:
    low, high = ports.ephemeral_range()
    handed = ports.free_ports(6) + ports.free_ports(6)
    assert len(set(handed)) == 12, handed  # never twice in one process
    assert all(port in ports.SPAN and not low <= port <= high for port in handed), (handed, (low, high))
    servers = [listening(port) for port in handed]  # the servers bind them (as the brokers do)
    for server in servers:
        server.close()


def test_a_port_a_server_listens_on_is_never_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = ports.free_ports(1)[0]
    ports._handed_out.clear()
    span = range(taken, taken + 3)
    monkeypatch.setattr(ports, "SPAN", span)
    with listening(taken):
        chosen = ports.free_ports(2)
    assert sorted(chosen) == [taken + 1, taken + 2], chosen


def test_a_used_up_span_starts_again_with_ports_that_are_still_free(monkeypatch: pytest.MonkeyPatch) -> None:
    first = ports.free_ports(2)
    ports._handed_out.clear()
    monkeypatch.setattr(ports, "SPAN", range(min(first), min(first) + 2))
    a = ports.free_ports(2)
    b = ports.free_ports(2)  # nothing left unhanded: the round starts again, the ports are still free
    assert sorted(a) == sorted(b) == [min(first), min(first) + 1]
    with listening(min(first)), pytest.raises(RuntimeError, match=r"fewer than 2 free ports on 127\.0\.0\.1"):
        ports.free_ports(2)


def test_a_machine_whose_ephemeral_range_covers_the_span_gets_kernel_ports(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real_low, real_high = ports.ephemeral_range()
    wide = tmp_path / "ip_local_port_range"
    wide.write_text("1024\t65535\n")
    assert ports.ephemeral_range(wide) == (1024, 65535)
    read = ports.ephemeral_range
    monkeypatch.setattr(ports, "ephemeral_range", lambda: read(wide))
    chosen = ports.free_ports(3)
    assert len(set(chosen)) == 3 and all(real_low <= port <= real_high for port in chosen), chosen
    for server in [listening(port) for port in chosen]:
        server.close()


@pytest.mark.parametrize("text", ["", "garbage", "1 2 3"])
def test_an_unreadable_range_is_linux_s_default(tmp_path: Path, text: str) -> None:
    bad = tmp_path / "range"
    bad.write_text(text)
    assert ports.ephemeral_range(bad) == ports.DEFAULT_EPHEMERAL
    assert ports.ephemeral_range(tmp_path / "missing") == ports.DEFAULT_EPHEMERAL


@pytest.mark.parametrize("count", [0, -1])
def test_a_count_below_one_is_refused(count: int) -> None:
    with pytest.raises(ValueError, match=f"count must be at least 1, not {count}"):
        ports.free_ports(count)
