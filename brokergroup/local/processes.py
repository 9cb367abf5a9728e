"""Local process handles shared by the controller and broker launchers."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
from pathlib import Path


@dataclasses.dataclass
class LocalProcess:
    name: str
    data_dir: Path
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    netns: str | None = None
    """Run inside this named network namespace (`ip netns exec`), as the chaos harness does."""
    detached: bool = False
    """Run in a new session with no standard input, so it outlives the launcher (`local up`)."""

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def spawn(self, command: list[str], env: dict[str, str]) -> None:
        if self.running:
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.netns is not None:
            # `ip netns exec` enters the namespace and execs the command: the pid stays the server's.
            command = ["ip", "netns", "exec", self.netns, *command]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL if self.detached else None,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **env},
                start_new_session=self.detached,
            )

    def signal(self, sig: signal.Signals) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            if sig in (signal.SIGKILL, signal.SIGTERM):
                self.proc.wait(timeout=30)

    def stop(self, timeout: float = 15) -> None:
        self.request_stop()
        self.wait_stopped(timeout)

    def request_stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()

    def wait_stopped(self, timeout: float = 15) -> None:
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def stop_all(processes: list[LocalProcess]) -> None:
    """SIGTERM every process first, then wait for each, so shutdowns overlap."""
    for process in processes:
        process.request_stop()
    for process in processes:
        process.wait_stopped()


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"
