"""The benches' CPU figures come from each process's CPU-time clock: nanoseconds, exited threads included."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from brokergroup.bench import cpu
from brokergroup.bench.produce import MACHINE, STEAL, CpuMeter

CHILD = """
import sys, threading, time

def burn() -> None:
    end = time.thread_time() + 0.003   # 3 ms of CPU, under one 10 ms clock tick
    while time.thread_time() < end:
        pass

print("ready", flush=True)
sys.stdin.readline()
thread = threading.Thread(target=burn)
thread.start()
thread.join()
print("done", flush=True)
sys.stdin.readline()
"""


def test_a_thread_s_3_ms_count_after_it_has_exited_though_they_are_under_one_clock_tick() -> None:
    """/proc/<pid>/stat would read 0 or 10 ms for the same 3 ms."""
    with subprocess.Popen(
        [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdin is not None and child.stdout is not None
        assert child.stdout.readline() == "ready\n"
        before = cpu.process_cpu_seconds(child.pid)
        child.stdin.write("burn\n")
        child.stdin.flush()
        assert child.stdout.readline() == "done\n"  # the burning thread has been joined
        after = cpu.process_cpu_seconds(child.pid)
        child.stdin.close()
        child.wait(timeout=10)
    assert before is not None and after is not None
    assert 0.003 <= after - before < 0.009, (before, after)
    assert cpu.process_cpu_seconds(child.pid) is None  # reaped: gone, not 0


def test_the_clock_of_this_process_matches_its_own_process_time() -> None:
    before = time.process_time()
    mine = cpu.process_cpu_seconds(os.getpid())
    after = time.process_time()
    assert mine is not None and before <= mine <= after


def test_a_phase_reports_the_time_the_hypervisor_stole_apart_from_other_processes() -> None:
    """Over 2 s: ours used 150 % of a core, the machine was busy 190 % of which 30 % stolen, so other
    processes used 10 %. Our CPU per message counts only ours."""
    before: dict[str, float | None] = {"master": 1.0, "kernel:master": 0.1, MACHINE: 100.0, STEAL: 5.0}
    after: dict[str, float | None] = {"master": 4.0, "kernel:master": 0.3, MACHINE: 103.8, STEAL: 5.6}
    out = CpuMeter.percent(before, after, 2.0)
    assert out["total"] == 150.0
    assert out["stolen by the hypervisor"] == 30.0
    assert out["other processes"] == 10.0
    assert out["kernel"] == {"master": 10.0}


def test_the_machine_s_steal_time_is_read_from_proc_stat() -> None:
    snap = CpuMeter({}).snapshot()
    busy, steal = snap[MACHINE], snap[STEAL]
    assert isinstance(busy, float) and isinstance(steal, float)
    assert 0 <= steal <= busy
