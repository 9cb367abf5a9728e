"""The store's small state files as two lines, a CRC and a JSON document (pure).

Used by the head-state file (`head.py`) and the index checkpoint (`index_checkpoint.py`)::

    <crc32>\\n     zlib CRC-32 of the JSON line below, newline included, decimal
    <json>\\n      one JSON object (ASCII, compact: no raw newline inside)

Decoding raises ValueError or TypeError naming what is wrong; the field helpers below do the same for
the values inside, so a damaged file is refused with a message instead of being half read.
"""

from __future__ import annotations

import json
import zlib
from typing import Any, Final

INT64_MAX: Final = 2**63 - 1


def encode(document: dict[str, Any]) -> bytes:
    line = json.dumps(document, separators=(",", ":"), ensure_ascii=True).encode() + b"\n"
    return b"%d\n" % zlib.crc32(line) + line


def decode(data: bytes) -> dict[str, Any]:
    """The JSON object in `data`, once its framing and CRC are checked."""
    crc_line, sep, line = data.partition(b"\n")
    if not sep or not crc_line.isdigit() or not line.endswith(b"\n") or line.count(b"\n") != 1:
        raise ValueError("expected two lines: <crc32> and <json>")
    if zlib.crc32(line) != int(crc_line):
        raise ValueError(f"crc32 mismatch: stored {int(crc_line)}, computed {zlib.crc32(line)}")
    try:
        document = json.loads(line)
    except ValueError as error:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ValueError(f"the JSON line does not parse: {error}") from None
    if not isinstance(document, dict):
        raise TypeError("the JSON line is not an object")
    return document


def integer(value: Any, what: str, low: int = -1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= INT64_MAX:
        raise ValueError(f"{what} must be an integer in [{low}, {INT64_MAX}], not {value!r}")
    return value


def string(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, not {value!r}")
    return value


def array(value: Any, what: str, width: int | None = None) -> list[Any]:
    if not isinstance(value, list) or (width is not None and len(value) != width):
        items = "a list" if width is None else f"a list of {width} items"
        raise ValueError(f"{what} must be {items}, not {value!r}")
    return value


def rows(document: dict[str, Any], key: str, width: int) -> list[list[Any]]:
    """`document[key]`: a list of lists of `width` items each."""
    if key not in document:
        raise ValueError(f"the JSON object has no {key!r}")
    return [array(row, f"{key}[{i}]", width) for i, row in enumerate(array(document[key], repr(key)))]
