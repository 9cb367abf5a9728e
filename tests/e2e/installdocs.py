"""docs/install.md's command blocks, run literally (the install, uninstall and real-node tests)."""

from __future__ import annotations

import re
import shlex
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from tests.e2e.kubeenv import ControlPlane

ROOT = Path(__file__).resolve().parents[2]
INSTALL_MD = ROOT / "docs" / "install.md"


def section_commands(title: str) -> list[str]:
    """The command lines of the ```bash blocks of install.md's section `## <title>`, in order."""
    text = INSTALL_MD.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    body = text[start : end if end != -1 else None]
    lines: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", body, flags=re.S):
        lines += [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return lines


def run_literally(plane: ControlPlane, line: str, *, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    """One documented command, with the control plane's kubectl or helm and its admin kubeconfig."""
    argv = shlex.split(line, comments=True)
    tools = {"kubectl": plane.kubectl, "helm": plane.helm}
    assert argv[0] in tools, f"install.md: {line!r} is neither kubectl nor helm"
    try:
        return tools[argv[0]](*argv[1:], timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"install.md: {line!r} did not finish in {timeout} s") from exc


def watch_literally(plane: ControlPlane, line: str, until: Callable[[str], bool], *, timeout: float) -> list[str]:
    """A documented `kubectl … -w`: run it as a user would, read what it prints until a line satisfies
    `until`, then stop it (a watch never ends by itself). Returns the lines read."""
    argv = shlex.split(line, comments=True)
    assert argv[0] == "kubectl" and ("-w" in argv or "--watch" in argv), f"install.md: {line!r} is not a kubectl watch"
    command = [
        str(plane.binaries.kubectl),
        f"--kubeconfig={plane.admin_kubeconfig}",
        f"--cache-dir={plane.work_dir / 'kubectl-cache'}",
        *argv[1:],
    ]
    seen: list[str] = []
    found = threading.Event()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as process:

        def read() -> None:
            assert process.stdout is not None
            for out in process.stdout:
                seen.append(out.rstrip("\n"))
                if until(seen[-1]):
                    found.set()
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            if not found.wait(timeout):
                raise AssertionError(f"install.md: {line!r} never printed what was waited for in {timeout} s: {seen}")
        finally:
            process.kill()
            reader.join(timeout=10)
    return seen
