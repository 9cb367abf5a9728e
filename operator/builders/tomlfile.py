"""A small TOML writer for settings files: str, int, bool, lists of those, and nested tables.

No TOML writer is a dependency of the project and the settings files need only these types.
Scalars of a table come before its sub-tables (TOML requires it); keys keep their insertion order,
so the same dict always renders the same text. `tomllib.loads(dumps(d)) == d` for every supported
`d` (a unit test checks it, hostile strings included).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

INLINE_LIST_WIDTH: Final = 80
"""Longer lists are written one item per line."""
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


class TomlTypeError(TypeError):
    """A value this writer does not support (floats, dates, None, tables inside lists...)."""


def dumps(document: Mapping[str, Any]) -> str:
    """Render `document` as TOML text."""
    lines: list[str] = []
    _table(lines, (), document)
    return "\n".join(lines).lstrip("\n") + "\n"


def _table(lines: list[str], path: tuple[str, ...], table: Mapping[str, Any]) -> None:
    scalars = [(k, v) for k, v in table.items() if not isinstance(v, Mapping)]
    tables = [(k, v) for k, v in table.items() if isinstance(v, Mapping)]
    if path and (scalars or not tables):
        lines.append("")
        lines.append(f"[{'.'.join(_key(p) for p in path)}]")
    for key, value in scalars:
        lines.append(f"{_key(key)} = {_value(value, (*path, key))}")
    for key, value in tables:
        _table(lines, (*path, key), value)


def _key(key: Any) -> str:
    if not isinstance(key, str):
        raise TomlTypeError(f"TOML keys are strings, not {key!r}")
    return key if _BARE_KEY.fullmatch(key) else _string(key)


def _value(value: Any, where: tuple[str, ...]) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and -(2**63) <= value < 2**63:
        return str(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list | tuple) and all(isinstance(item, bool | int | str) for item in value):
        items = [_value(item, where) for item in value]
        if sum(len(i) + 2 for i in items) <= INLINE_LIST_WIDTH:
            return "[" + ", ".join(items) + "]"
        return "[\n" + "".join(f"    {item},\n" for item in items) + "]"
    raise TomlTypeError(
        f"{'.'.join(where)}: unsupported TOML value {value!r} ({type(value).__name__}); "
        "only strings, integers, booleans, lists of those and tables are supported"
    )


def _string(text: str) -> str:
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'
