"""`python3 -m tests.e2e.realnode serve WORK_DIR`: start the real node and hold it until SIGTERM or SIGINT
(scripts/dev-cluster runs this in the background). Writes WORK_DIR/kubeconfig (the admin's) once the node is
up and WORK_DIR/timings.json; a failed start exits 1 with the reason on stderr."""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import signal
import sys
import threading
from pathlib import Path

from tests.e2e.realnode.node import RealNode, RealNodeError


def main() -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tests.e2e.realnode")
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("work_dir", type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    work: Path = args.work_dir.resolve()
    (work / "kubeconfig").unlink(missing_ok=True)
    node = RealNode(work)
    try:
        node.start()
    except (RealNodeError, AssertionError, OSError) as exc:
        print(f"the real node did not start: {exc}", file=sys.stderr)
        return 1
    try:
        (work / "timings.json").write_text(json.dumps(node.timings, indent=2))
        shutil.copy(node.kubeconfig(), work / "kubeconfig.tmp")
        (work / "kubeconfig.tmp").rename(work / "kubeconfig")
        stop.wait()
    finally:
        (work / "kubeconfig").unlink(missing_ok=True)
        node.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
