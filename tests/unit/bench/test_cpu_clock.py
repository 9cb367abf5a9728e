"""The benches' CPU figures come from each process's CPU-time clock: nanoseconds, exited threads included."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from brokergroup.bench import cpu

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
