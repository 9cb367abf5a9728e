"""pysyncobj's "truncating already-applied log entries … may have diverged" warning, reproduced.

Run as `python -m brokergroup.bench.raft_divergence <raw|fixed> <self> <other> <other> <ops> <concurrency> <password>`
(three processes; `raft_divergence_run` starts them). Every process joins the group with the
controller's settings (`appendEntriesUseBatch=False`, pipelined appends, a password); `raw` runs
pysyncobj 0.3.17 as released, `fixed` runs `FixedSyncObj` with the durable journal (the controller's
Raft). The leader drives `ops` distinct replicated commands with `concurrency` in flight.

Each process records, in order, every command its state machine applies (`[index, value]`) and every
truncation of entries it had already applied: the entries removed (index, term, sha256 of the
command) and, at the end, the entries its log holds at those indexes. It prints one JSON line.
Comparing them answers the question of issue 19: is an already-applied entry ever *replaced* by a
different one (state divergence), or re-appended unchanged (a benign duplicate)?"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from pysyncobj import SyncObj, SyncObjConf, SyncObjConsumer, replicated

from brokergroup.controller.raft_fixes import FixedSyncObj
from brokergroup.controller.replicated import open_journal
from brokergroup.local.ports import free_ports


def digest(command: Any) -> str:
    return hashlib.sha256(bytes(command)).hexdigest()[:16]


class Recorder(SyncObjConsumer):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.applied: list[list[int]] = []

    @replicated  # type: ignore[untyped-decorator]
    def add(self, value: int) -> int:
        self.applied.append([int(self._syncObj.raftLastApplied) + 1, value])
        return value


def recording(base: type) -> type:
    """`base` (SyncObj or FixedSyncObj) that records every truncation of already-applied entries."""

    class Recording(base):  # type: ignore[misc]
        truncations: list[dict[str, Any]]

        def _SyncObj__deleteEntriesFrom(self, fromIDx: int) -> None:
            last_applied = int(self._SyncObj__raftLastApplied)
            if fromIDx <= last_applied:
                log = self._SyncObj__raftLog
                first = log[0][1]
                removed = [[e[1], e[2], digest(e[0])] for e in log[fromIDx - first :] if e[1] <= last_applied]
                self.truncations.append({"from": fromIDx, "last_applied": last_applied, "removed": removed})
            super()._SyncObj__deleteEntriesFrom(fromIDx)

    return Recording


def main(argv: list[str]) -> int:
    kind, me, others, ops, concurrency, password = argv[0], argv[1], argv[2:4], int(argv[4]), int(argv[5]), argv[6]
    barrier = Path(argv[7]) if len(argv) > 7 else None
    recorder = Recorder()
    conf_args: dict[str, Any] = {"password": password, "appendEntriesUseBatch": False, "commandsWaitLeader": False}
    with tempfile.TemporaryDirectory(prefix="bg-divergence-") as tmp:
        if kind == "fixed":
            node = recording(FixedSyncObj)(
                me, others, SyncObjConf(journalFile=open_journal(Path(tmp) / "raft"), **conf_args), consumers=[recorder]
            )
        else:
            node = recording(SyncObj)(me, others, SyncObjConf(**conf_args), consumers=[recorder])
        node.truncations = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and node._getLeader() is None:
            time.sleep(0.05)
        time.sleep(0.5)
        if node._isLeader():
            slots = threading.Semaphore(concurrency)
            for value in range(ops):
                slots.acquire()
                recorder.add(value, callback=lambda _r, _e: slots.release())
        deadline, seen, quiet_since = time.monotonic() + 180, -1, time.monotonic()
        while time.monotonic() < deadline and len(recorder.applied) < ops:  # or nothing new for 5 s
            if len(recorder.applied) != seen:
                seen, quiet_since = len(recorder.applied), time.monotonic()
            elif seen > 0 and time.monotonic() - quiet_since > 5:
                break
            time.sleep(0.05)
        if barrier is not None:
            # Stay in the cluster until every node has applied everything (or given up): a node that
            # started late must still find a leader to catch up from.
            (barrier / me.replace(":", "_")).write_text(str(len(recorder.applied)))
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline and len(list(barrier.iterdir())) < 3:
                time.sleep(0.05)
        time.sleep(1.0)
        log = node._SyncObj__raftLog
        first = log[0][1]
        final = {}
        for truncation in node.truncations:
            for idx, _term, _sha in truncation["removed"]:
                entry = log[idx - first] if first <= idx <= log[-1][1] else None
                final[str(idx)] = None if entry is None else [entry[1], entry[2], digest(entry[0])]
        print(
            json.dumps(
                {
                    "node": me,
                    "leader": bool(node._isLeader()),
                    "applied": recorder.applied,
                    "truncations": node.truncations,
                    "final": final,
                }
            ),
            flush=True,
        )
        node.destroy()
    return 0


def raft_divergence_run(kind: str, *, ops: int, concurrency: int) -> list[dict[str, Any]]:
    """Run the three processes; every node's JSON report."""
    addrs = [f"127.0.0.1:{p}" for p in free_ports(3)]
    barrier = Path(tempfile.mkdtemp(prefix="bg-divergence-barrier-"))
    procs = []
    for i, me in enumerate(addrs):
        others = [a for j, a in enumerate(addrs) if j != i]
        command = [sys.executable, "-m", "brokergroup.bench.raft_divergence", kind, me, *others, str(ops)]
        procs.append(
            subprocess.Popen(
                [*command, str(concurrency), "divergence-bench", str(barrier)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    reports = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=400)
            lines = [line for line in out.splitlines() if line.startswith("{")]
            if not lines:
                raise RuntimeError(f"a {kind} node printed no report: {err[-2000:]}")
            reports.append(json.loads(lines[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        shutil.rmtree(barrier, ignore_errors=True)
    return reports


def summary(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Truncations of applied entries, how many were replaced by a different entry, and whether every
    node applied the same sequence of commands at the same indexes."""
    truncated = replaced = 0
    for report in reports:
        for truncation in report["truncations"]:
            for idx, term, sha in truncation["removed"]:
                truncated += 1
                if report["final"].get(str(idx)) != [idx, term, sha]:
                    replaced += 1
    sequences = {json.dumps(r["applied"]) for r in reports}
    return {
        "truncation_events": sum(len(r["truncations"]) for r in reports),
        "applied_entries_truncated": truncated,
        "applied_entries_replaced_by_a_different_entry": replaced,
        "same_applied_sequence_on_every_node": len(sequences) == 1,
        "applied_per_node": [len(r["applied"]) for r in reports],
    }


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("raw", "fixed") and len(sys.argv) in (8, 9):
        sys.exit(main(sys.argv[1:]))
    if len(sys.argv) == 4 and sys.argv[1] in ("raw", "fixed"):  # <kind> <ops> <concurrency>: run all three
        print(json.dumps(summary(raft_divergence_run(sys.argv[1], ops=int(sys.argv[2]), concurrency=int(sys.argv[3])))))
        sys.exit(0)
    print(__doc__, file=sys.stderr)
    sys.exit(2)
