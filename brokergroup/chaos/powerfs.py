"""The power-loss file system: the model of powerfs_core.py behind FUSE, and a control socket.

    brokergroup chaos powerfs mount --backing DIR --mount DIR --control SOCKET
    brokergroup chaos powerfs drop --control SOCKET [--mount DIR] [DISK ...]
    brokergroup chaos powerfs status --control SOCKET

runs in the foreground until the mount is unmounted (`fusermount3 -u DIR`). At start it loads the
tree in `--backing` as durable state (the disk at rest); at unmount it makes everything durable
(a clean shutdown) and writes the tree back there, so the files can be read after the run. In
between everything lives in this process's memory, and the control socket takes one JSON line per
request:

    {"op": "drop", "disks": ["n0", "bs0-1"]}   power loss of those disks (all when null)
    {"op": "status"}                            disks, unsynced inodes per disk, inode count
    {"op": "sync"}                              make everything durable (no loss)
    {"op": "save"}                              that, and write the tree to --backing now

Kill every process using a disk before dropping it: whatever it writes later goes nowhere (its
handles fail with EIO). The kernel is told to cache nothing it would have to be told to forget:
entry, attribute and negative-lookup timeouts are 0 and each open drops cached pages; shared
writable mmaps (pysyncobj's journal) reach the file system at msync, munmap (also a killed
process's) or writeback, so `PowerFsClient.drop` also calls syncfs(2) on the mount first.

Needs /dev/fuse, libfuse3 (Debian `fuse3`) and `mfusepy`.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import dataclasses
import errno
import json
import logging
import os
import shutil
import socket
import socketserver
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from brokergroup.chaos.powerfs_core import Attr, FsError, PowerFs

logger = logging.getLogger(__name__)

MOUNT_TIMEOUT_S = 15.0
UNMOUNT_RETRY_S = 10.0
EXIT_TIMEOUT_S = 15.0


# ---- at rest --------------------------------------------------------------------------------------
def load_tree(fs: PowerFs, backing: Path) -> int:
    """Load `backing` as the durable state; returns the number of files."""
    files = 0
    for directory, dirs, names in os.walk(backing):
        relative = Path(directory).relative_to(backing)
        if relative == Path() and names:
            raise ValueError(f"{backing}: files at the top ({', '.join(sorted(names)[:3])}); only disk folders may be")
        for name in sorted(dirs):
            fs.load(f"/{relative / name}", (Path(directory) / name).stat().st_mode, None)
        for name in sorted(names):
            path = Path(directory) / name
            fs.load(f"/{relative / name}", path.stat().st_mode, path.read_bytes())
            files += 1
    return files


def save_tree(fs: PowerFs, backing: Path) -> int:
    """Write the durable tree to `backing` (which then holds exactly it); returns the number of files."""
    wanted = {path.lstrip("/"): node for path, node in fs.walk_durable()}
    for directory, dirs, names in os.walk(backing, topdown=False):
        for name in names + dirs:
            path = Path(directory) / name
            relative = str(path.relative_to(backing))
            node = wanted.get(relative)
            if node is None or node.is_dir != path.is_dir():
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    files = 0
    for relative, node in wanted.items():
        target = backing / relative
        if node.is_dir:
            target.mkdir(exist_ok=True)
        else:
            target.write_bytes(fs.durable_content(node))
            files += 1
        target.chmod(stat.S_IMODE(node.mode))
    return files


# ---- the FUSE shell --------------------------------------------------------------------------------
def _stat(attr: Attr) -> dict[str, int]:
    return {
        "st_ino": attr.ino,
        "st_mode": attr.mode,
        "st_nlink": attr.links,
        "st_size": attr.size,
        "st_blocks": (attr.size + 511) // 512,
        "st_blksize": 4096,
        "st_uid": os.getuid(),
        "st_gid": os.getgid(),
        "st_atime": attr.mtime_ns,
        "st_mtime": attr.mtime_ns,
        "st_ctime": attr.ctime_ns,
    }


def operations(fs: PowerFs, lock: threading.Lock) -> Any:
    """The mfusepy Operations over `fs`; every call holds `lock` (the control socket takes it too)."""
    import mfusepy

    class Operations(mfusepy.Operations):  # type: ignore[misc]
        use_ns = True

        def init_with_config(self, _conn: Any, config: Any) -> None:
            if config is None:
                return
            config.entry_timeout = config.attr_timeout = config.negative_timeout = 0.0
            config.hard_remove = 1  # an unlinked open file is not renamed to .fuse_hidden*
            config.use_ino = 1
            config.kernel_cache = config.auto_cache = config.direct_io = 0

        def getattr(self, path: str | None, fh: int | None = None) -> dict[str, int]:
            with lock:
                return _stat(fs.getattr(path, fh))

        def readdir(self, path: str, _fh: int) -> list[tuple[str, dict[str, int], int]]:
            with lock:
                node = fs.resolve(path)
                here = [(".", {"st_ino": node.ino, "st_mode": node.mode}, 0), ("..", {"st_mode": stat.S_IFDIR}, 0)]
                return here + [(n, {"st_ino": i, "st_mode": m}, 0) for n, i, m in fs.listing(path)]

        def opendir(self, path: str) -> int:
            with lock:
                return fs.opendir(path)

        def releasedir(self, _path: str | None, fh: int) -> int:
            with lock:
                fs.release(fh)
            return 0

        def mkdir(self, path: str, mode: int) -> int:
            with lock:
                fs.mkdir(path, mode)
            return 0

        def rmdir(self, path: str) -> int:
            with lock:
                fs.rmdir(path)
            return 0

        def unlink(self, path: str) -> int:
            with lock:
                fs.unlink(path)
            return 0

        def rename(self, old: str, new: str) -> int:
            with lock:
                fs.rename(old, new)
            return 0

        def create(self, path: str, mode: int, flags: int) -> int:
            with lock:
                return fs.create(path, mode, exclusive=bool(flags & os.O_EXCL))

        def open(self, path: str, flags: int) -> int:
            with lock:
                return fs.open(path, truncate=bool(flags & os.O_TRUNC))

        def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
            with lock:
                return fs.read(path, size, offset, fh)

        def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
            with lock:
                return fs.write(path, bytes(data), offset, fh)

        def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
            with lock:
                fs.truncate(path, length, fh)
            return 0

        def fallocate(self, path: str | None, mode: int, offset: int, size: int, fh: int) -> int:
            with lock:
                fs.fallocate(path, mode, offset, size, fh)
            return 0

        def fsync(self, path: str | None, _datasync: int, fh: int) -> int:
            with lock:
                fs.fsync(path, fh)
            return 0

        def fsyncdir(self, path: str | None, _datasync: int, fh: int) -> int:
            with lock:
                fs.fsync(path, fh)
            return 0

        def flush(self, _path: str | None, _fh: int) -> int:
            return 0  # close(2) promises nothing about durability

        def release(self, _path: str | None, fh: int) -> int:
            with lock:
                fs.release(fh)
            return 0

        def chmod(self, path: str | None, mode: int) -> int:
            with lock:
                fs.chmod(path, mode)
            return 0

        def chown(self, path: str | None, _uid: int, _gid: int) -> int:
            with lock:
                fs.resolve(path or "/")
            return 0

        def utimens(self, path: str | None, times: tuple[int, int] | None = None) -> int:
            with lock:
                fs.utimens(path, times[1] if times else time.time_ns())
            return 0

        def access(self, path: str, _amode: int) -> int:
            with lock:
                fs.resolve(path)
            return 0

        def statfs(self, _path: str) -> dict[str, int]:
            return {"f_bsize": 4096, "f_frsize": 4096, "f_blocks": 1 << 24, "f_bfree": 1 << 23,
                    "f_bavail": 1 << 23, "f_files": 1 << 20, "f_ffree": 1 << 19, "f_namemax": 255}  # fmt: skip

        def link(self, _target: str, _source: str) -> int:
            raise FsError(errno.EPERM, "hard links are not supported")

        def symlink(self, _target: str, _source: str) -> int:
            raise FsError(errno.EPERM, "symbolic links are not supported")

    return Operations()


# ---- the control socket ------------------------------------------------------------------------------
def handle(fs: PowerFs, lock: threading.Lock, request: dict[str, Any], backing: Path) -> dict[str, Any]:
    op = request.get("op")
    with lock:
        if op == "save":
            fs.sync_all()
            return {"ok": True, "files": save_tree(fs, backing)}
        if op == "drop":
            disks = request.get("disks")
            report = fs.drop(None if disks is None else [str(d) for d in disks])
            logger.warning("power loss: %s", report)
            return {"ok": True, **report.to_dict()}
        if op == "sync":
            fs.sync_all()
            return {"ok": True}
        if op == "status":
            return {"ok": True, "disks": fs.disks(), "unsynced": fs.unsynced(), "inodes": len(fs.inodes)}
    return {"ok": False, "error": f"unknown op {op!r}; use drop, sync, save or status"}


def serve_control(fs: PowerFs, lock: threading.Lock, path: Path, backing: Path) -> socketserver.UnixStreamServer:
    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            for line in self.rfile:
                try:
                    answer = handle(fs, lock, json.loads(line), backing)
                except (ValueError, FsError) as exc:
                    answer = {"ok": False, "error": str(exc)}
                self.wfile.write(json.dumps(answer).encode() + b"\n")

    path.unlink(missing_ok=True)
    server = socketserver.ThreadingUnixStreamServer(str(path), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="powerfs-control", daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> int:
    """`mount` (foreground, until unmounted), `drop` (power loss of disks) or `status`."""
    parser = argparse.ArgumentParser(prog="powerfs", description="a FUSE file system that loses unsynced data")
    commands = parser.add_subparsers(dest="command", required=True)
    mount = commands.add_parser("mount", help="mount it and serve until unmounted (fusermount3 -u MOUNT)")
    mount.add_argument(
        "--backing", type=Path, required=True, help="the disk at rest: loaded at start, saved at unmount"
    )
    mount.add_argument("--mount", type=Path, required=True, help="where to mount it (an empty folder)")
    mount.add_argument("--control", type=Path, required=True, help="the control socket to create")
    drop = commands.add_parser("drop", help="power loss: drop what the disks had not fsynced")
    drop.add_argument("--control", type=Path, required=True)
    drop.add_argument("--mount", type=Path, default=None, help="syncfs(2) it first (the kernel's dirty pages)")
    drop.add_argument("disks", nargs="*", help="disk names (top-level folders); all when none")
    status = commands.add_parser("status", help="disks and what each holds unsynced")
    status.add_argument("--control", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "drop":
            print(json.dumps(PowerFsClient(args.control, args.mount).drop(args.disks or None)))
            return 0
        if args.command == "status":
            print(json.dumps(PowerFsClient(args.control).status()))
            return 0
    except PowerFsError as exc:
        print(f"powerfs: {exc}", file=sys.stderr)
        return 1
    return serve(args.backing, args.mount, args.control)


def serve(backing: Path, mount: Path, control: Path) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s powerfs %(levelname)s %(message)s")
    backing.mkdir(parents=True, exist_ok=True)
    mount.mkdir(parents=True, exist_ok=True)
    fs, lock = PowerFs(time.time_ns), threading.Lock()
    try:
        loaded = load_tree(fs, backing)
    except ValueError as exc:
        print(f"powerfs: {exc}", file=sys.stderr)
        return 2
    server = serve_control(fs, lock, control, backing)
    logger.info("mounting %s (backing %s, %d files loaded), control %s", mount, backing, loaded, control)
    import mfusepy

    try:
        mfusepy.FUSE(operations(fs, lock), str(mount), foreground=True, nothreads=True, fsname="powerfs")
    finally:
        server.shutdown()
        server.server_close()
        control.unlink(missing_ok=True)
        with lock:
            fs.sync_all()
            saved = save_tree(fs, backing)
        logger.info("unmounted %s; saved %d files to %s", mount, saved, backing)
    return 0


# ---- the harness's side ----------------------------------------------------------------------------------
class PowerFsError(RuntimeError):
    """The power-loss file system did not start, answer or stop as asked."""


def syncfs(path: Path) -> None:
    """syncfs(2) on the file system holding `path`: the kernel's dirty pages go to the FUSE process."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if libc.syncfs(fd) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"syncfs({path}): {os.strerror(code)}")
    finally:
        os.close(fd)


@dataclasses.dataclass
class PowerFsClient:
    control: Path
    mount: Path | None = None
    timeout_s: float = 30.0

    def request(self, request: dict[str, Any]) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(self.timeout_s)
            try:
                sock.connect(str(self.control))
                sock.sendall(json.dumps(request).encode() + b"\n")
                with sock.makefile("rb") as answer:
                    line = answer.readline()
            except OSError as exc:
                raise PowerFsError(f"powerfs control {self.control}: {exc}") from exc
        if not line:
            raise PowerFsError(f"powerfs control {self.control}: no answer to {request}")
        reply: dict[str, Any] = json.loads(line)
        if not reply.get("ok"):
            raise PowerFsError(f"powerfs: {reply.get('error')}")
        return reply

    def drop(self, disks: list[str] | None = None) -> dict[str, Any]:
        """Power loss of `disks` (all when None). Kill their processes first."""
        if self.mount is not None:
            syncfs(self.mount)
        return self.request({"op": "drop", "disks": disks})

    def status(self) -> dict[str, Any]:
        return self.request({"op": "status"})


class MountedPowerFs:
    """A powerfs process started by the harness: mounted on enter, unmounted and saved on exit."""

    def __init__(self, backing: Path, mount: Path, control: Path, log: Path) -> None:
        self.backing, self.mount, self.control, self.log = backing, mount, control, log
        self.proc: subprocess.Popen[bytes] | None = None
        self.client = PowerFsClient(control, mount)

    def start(self) -> None:
        command = [sys.executable, "-m", "brokergroup.chaos.powerfs", "mount", "--backing", str(self.backing),
                   "--mount", str(self.mount), "--control", str(self.control)]  # fmt: skip
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise PowerFsError(f"powerfs exited with {self.proc.returncode}: see {self.log}")
            if os.path.ismount(self.mount) and self.control.exists():
                self.client.status()
                return
            time.sleep(0.05)
        self.stop()
        raise PowerFsError(f"powerfs did not mount {self.mount} within {MOUNT_TIMEOUT_S:.0f} s: see {self.log}")

    def stop(self) -> None:
        """Save the tree to the backing folder (everything made durable), then unmount and wait.

        Saved first, over the control socket: a process that entered a new mount namespace while
        the file system was mounted (`ip netns exec`, also another harness's) keeps a copy of the
        mount that no unmount here reaches, and the FUSE process serves it until that process
        ends; it is then killed, its files already saved."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                saved = self.client.request({"op": "save"})
                logger.info("powerfs saved %d files to %s", saved["files"], self.backing)
            except PowerFsError as exc:
                logger.warning("powerfs could not save before unmounting: %s", exc)
        deadline = time.monotonic() + UNMOUNT_RETRY_S  # a process that is still exiting keeps it busy
        while os.path.ismount(self.mount):
            done = subprocess.run(["fusermount3", "-u", str(self.mount)], capture_output=True, check=False)
            if done.returncode == 0:
                break
            if time.monotonic() > deadline:
                logger.warning("unmounting %s lazily: %s", self.mount, done.stderr.decode(errors="replace").strip())
                subprocess.run(["fusermount3", "-u", "-z", str(self.mount)], capture_output=True, check=False)
                break
            time.sleep(0.2)
        try:
            self.proc.wait(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            holders = _holders(self.mount)
            logger.warning("powerfs did not exit after unmounting %s (killed; its files were saved before): "
                           "mounted still in the mount namespaces of %s", self.mount, holders)  # fmt: skip
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def __enter__(self) -> MountedPowerFs:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def _holders(mount: Path) -> list[str]:
    """Processes whose mount namespace still has `mount` (which keeps the file system alive)."""
    found = []
    for mountinfo in Path("/proc").glob("[0-9]*/mountinfo"):
        with contextlib.suppress(OSError):
            if f" {mount} " in mountinfo.read_text():
                cmdline = (mountinfo.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{mountinfo.parent.name}: {cmdline[:100]}")
    return found


def missing_capabilities() -> list[str]:
    """Why powerfs cannot run here (empty when it can)."""
    missing = []
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        missing.append("/dev/fuse is not usable (needs root or the fuse group)")
    if shutil.which("fusermount3") is None:
        missing.append("fusermount3 is not installed (Debian package fuse3)")
    with contextlib.suppress(ImportError, OSError, EnvironmentError):
        import mfusepy  # noqa: F401

        return missing
    return [*missing, "mfusepy or libfuse3 is not installed (pip install mfusepy; Debian package libfuse3-3)"]


if __name__ == "__main__":
    sys.exit(main())
