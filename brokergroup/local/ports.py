"""Free loopback ports for local processes, chosen below the kernel's ephemeral range.

A port found by binding to port 0 comes from the ephemeral range, the range the kernel also takes the
source port of every outgoing connection from. Between choosing such a port and a server binding it (a
broker binds its replication port only once it has registered with the controller, seconds later), a
client connection on the machine can take it, and the server fails with EADDRINUSE. Ports outside the
ephemeral range are never handed to connections: only a server listening there can hold one, and the
bind check here sees it. Ports handed out are remembered for the life of the process, so two sets started
one after the other never share one.
"""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

SPAN = range(20000, 30000)
"""Where ports are chosen: below Kubernetes' NodePort range (30000-32767) and Linux's default ephemeral
range (32768-60999)."""
EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL = (32768, 60999)

_handed_out: set[int] = set()
_lock = threading.Lock()


def ephemeral_range(path: Path = EPHEMERAL) -> tuple[int, int]:
    """The kernel's ephemeral port range (Linux's default where it cannot be read)."""
    try:
        low, high = (int(part) for part in path.read_text().split())
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL
    return low, high


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct ports on `host` that nothing listens on, outside the ephemeral range when the
    machine leaves any of `SPAN` outside it (else, as a last resort, ports the kernel picks)."""
    if count < 1:
        raise ValueError(f"count must be at least 1, not {count}")
    low, high = ephemeral_range()
    span = [port for port in SPAN if not low <= port <= high]
    if len(span) < count:
        return _kernel_ports(count, host)
    with _lock:
        chosen = _choose(span, count, host)
        if len(chosen) < count:  # every port was handed out once already: start the round again
            _handed_out.difference_update(span)
            chosen = _choose(span, count, host)
        if len(chosen) < count:
            raise RuntimeError(f"fewer than {count} free ports on {host} in {SPAN.start}-{SPAN.stop - 1}")
        _handed_out.update(chosen)
        return chosen


def _choose(span: list[int], count: int, host: str) -> list[int]:
    candidates = [port for port in span if port not in _handed_out]
    random.shuffle(candidates)  # processes choosing at once rarely pick the same port
    chosen: list[int] = []
    for port in candidates:
        if _bindable(host, port):
            chosen.append(port)
            if len(chosen) == count:
                break
    return chosen


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _kernel_ports(count: int, host: str) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()
