"""`python3 -m brokergroup.bench.store_restart --index-only` (docs/benchmarks.md, issue 18 item 2) writes and
loads the persisted consume-queue files and reports the load time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

COMMAND = "python3 -m brokergroup.bench.store_restart --messages 100000 --index-only"


def test_the_documented_index_only_command_loads_every_entry_it_wrote() -> None:
    assert COMMAND in Path("docs/benchmarks.md").read_text()
    args = COMMAND.split()
    done = subprocess.run([sys.executable, *args[1:]], capture_output=True, text=True, timeout=600, check=True)
    result = json.loads(done.stdout)
    assert result["messages"] == result["loaded_entries"] == 100000
    assert result["index_load_s"] > 0 and result["index_write_s"] > 0
