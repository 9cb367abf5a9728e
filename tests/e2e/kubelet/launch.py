"""Container entry of the test kubelet: `ip netns exec <netns> python3 launch.py <spec.json>`.

`ip netns exec` has entered the pod's network namespace, unshared a mount namespace (with / made a recursive
slave, so nothing mounted here shows on the host) and bind-mounted /etc/netns/<netns>/{hosts,resolv.conf} over
/etc. This script then, in the same process:

1. asks for SIGKILL when the kubelet's thread that started it dies (PR_SET_PDEATHSIG), so a killed test run
   leaves no container behind;
2. unshares a UTS namespace and sets the pod's hostname, and mounts a private tmpfs on /dev/shm;
3. opens every volume folder first and bind-mounts it from its file descriptor (`/proc/self/fd/N`), so that a
   mount over, say, /tmp cannot hide the source of a later mount that lives under /tmp; `readOnly` remounts the
   bind read-only; `readOnlyRootFilesystem` remounts / read-only (in this mount namespace only);
4. re-binds, read-only, the project checkout (`keep`: our stand-in for the image) where a volume hid it,
   e.g. a clone under /tmp below the pod's /tmp emptyDir;
5. changes to `workingDir` and execs the container's command with exactly its environment (PATH of that
   environment resolves the executable), keeping the pid the kubelet knows.

Standard library only: it runs before anything of the project is importable in the container's view.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
CLONE_NEWUTS = 0x04000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384


def fail(message: str, code: int = 128) -> None:
    sys.stderr.write(f"test-kubelet launch: {message}\n")
    sys.stderr.flush()
    os._exit(code)


def main() -> None:
    with open(sys.argv[1]) as handle:
        spec = json.load(handle)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != spec["parent"]:
        fail("the kubelet is gone")
    if libc.unshare(CLONE_NEWUTS) != 0:
        fail(f"unshare(CLONE_NEWUTS): {os.strerror(ctypes.get_errno())}")
    hostname = spec["hostname"].encode()
    if libc.sethostname(hostname, len(hostname)) != 0:
        fail(f"sethostname: {os.strerror(ctypes.get_errno())}")
    # A container's own /dev/shm (64 MiB, as the container runtime makes it), not the host's.
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    if libc.mount(b"shm", b"/dev/shm", b"tmpfs", flags, b"mode=1777,size=65536k") != 0:
        fail(f"mount tmpfs on /dev/shm: {os.strerror(ctypes.get_errno())}")
    mounts = spec["mounts"]
    keep = [(path, os.open(path, os.O_PATH | os.O_CLOEXEC)) for path in spec.get("keep", [])]
    fds = [os.open(mount["source"], os.O_PATH | os.O_CLOEXEC) for mount in mounts]
    for mount, fd in zip(mounts, fds, strict=True):
        target = mount["target"].encode()
        if libc.mount(f"/proc/self/fd/{fd}".encode(), target, None, MS_BIND | MS_REC, None) != 0:
            fail(f"bind {mount['source']} on {mount['target']}: {os.strerror(ctypes.get_errno())}")
        if mount["readOnly"] and libc.mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY, None) != 0:
            fail(f"remount {mount['target']} read-only: {os.strerror(ctypes.get_errno())}")
    for fd in fds:
        os.close(fd)
    # The stand-in image (the checkout the installed code runs from), read-only, where a volume hid it.
    for path, fd in keep:
        if any(path == m["target"] or path.startswith(m["target"].rstrip("/") + "/") for m in mounts):
            os.makedirs(path, exist_ok=True)
            target = path.encode()
            if libc.mount(f"/proc/self/fd/{fd}".encode(), target, None, MS_BIND | MS_REC, None) != 0:
                fail(f"bind the image {path}: {os.strerror(ctypes.get_errno())}")
            if libc.mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY, None) != 0:
                fail(f"remount the image {path} read-only: {os.strerror(ctypes.get_errno())}")
        os.close(fd)
    # securityContext.readOnlyRootFilesystem: the root mount of this mount namespace only; the volumes and the
    # hosts files are mounts of their own and keep their flags, as in a container.
    if spec["readOnlyRoot"] and libc.mount(None, b"/", None, MS_REMOUNT | MS_BIND | MS_RDONLY, None) != 0:
        fail(f"remount / read-only: {os.strerror(ctypes.get_errno())}")
    try:
        os.chdir(spec["cwd"])
    except OSError as exc:
        fail(f"workingDir {spec['cwd']}: {exc}")
    argv, env = spec["argv"], spec["env"]
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        fail(f"exec {argv[0]!r} (PATH={env.get('PATH', '')}): {exc}", 127)


if __name__ == "__main__":
    main()
