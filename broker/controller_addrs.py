"""Controller addresses as `name:port`, and what a name's DNS answers make of them (pure; `controller_dns`
resolves and refreshes)."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence


def split_address(address: str) -> tuple[str, int]:
    """`name:port` -> (name, port). Raises ValueError naming the address."""
    host, sep, port = address.removeprefix("http://").rstrip("/").rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"controller address {address!r}: expected name:port")
    return host.strip("[]"), int(port)


def join_address(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ipaddress.ip_address(ip).version == 6 else f"{ip}:{port}"


def resolve_addresses(
    configured: Sequence[str], answers: Mapping[str, Sequence[str]], previous: Mapping[str, Sequence[str]]
) -> dict[str, list[str]]:
    """Each configured `name:port` -> its `ip:port` addresses, sorted.

    `answers[name]` is the latest lookup (missing or empty: no answer); without an answer the
    address keeps `previous[address]`, or stands for itself when it never resolved.
    """
    out: dict[str, list[str]] = {}
    for address in configured:
        host, port = split_address(address)
        ips = sorted(set(answers.get(host, ())))
        if ips:
            out[address] = [join_address(ip, port) for ip in ips]
        else:
            out[address] = list(previous.get(address) or [address])
    return out


def flatten(resolved: Mapping[str, Sequence[str]]) -> list[str]:
    """Every address once, in configured order."""
    return list(dict.fromkeys(a for addresses in resolved.values() for a in addresses))
