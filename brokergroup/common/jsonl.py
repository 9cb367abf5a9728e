"""JSON-lines files written by processes that may be killed mid-line (histories, event logs)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def read_jsonl(path: Path) -> Iterator[Any]:
    """The records of a JSON-lines file, in order; a torn line (its writer was killed) is skipped."""
    with path.open(encoding="utf-8") as f:
        for line in f:
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue
