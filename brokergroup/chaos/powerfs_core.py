"""The power-loss filesystem's model: what a strict disk keeps when the power goes, in plain Python.

Anchors: Jepsen's LazyFS (a FUSE layer that keeps unsynced writes in its own cache and drops them
on command), Pebble's strict MemFS and RocksDB's FaultInjectionTestFS. Stricter than LazyFS, which
applies create/rename/unlink to its backing file system at once: here the namespace is volatile
too, as on a file system that promises only what POSIX does.

    every inode:  a volatile (current) state, what reads see, and a durable state, what a power
                  loss leaves;
    file:         fsync/fdatasync(file)  -> durable content and size := current
    directory:    fsync(directory)       -> durable entries := current entries (create, rename,
                                            unlink and mkdir of its children become durable)
    drop(disks):  every inode of those disks -> current := durable; open handles are gone;
                  inodes no entry reaches any more are freed.

A file's own fsync does not make its name durable (a new file fsynced in a directory that is not
is lost whole), and a directory's fsync does not make its files' contents durable (a name made
durable without its data comes back empty): the strictest reading of POSIX, not ext4's
data=ordered. fdatasync counts as fsync (it must persist a size change too).

Disks. Each directory at the top of the file system is one disk (one machine of a chaos run); it
exists, durably, once made. `drop` takes disk names, so one power loss hits some machines and not
others. Nothing crosses disks: a rename or link between two of them fails with EXDEV, as between
two file systems; files cannot live at the top level (EPERM).

Contents are kept in pages of 4 KiB: a fsync moves only the pages written since the last one, a
truncation hides durable pages past the cut until a fsync makes it durable. Errors are `FsError`
with an errno, which the FUSE shell (powerfs.py) hands to the kernel.
"""

from __future__ import annotations

import dataclasses
import errno
import stat
from collections.abc import Callable, Iterator

PAGE = 4096
MAX_LISTED = 40
ROOT = 1
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
_ZERO_PAGE = bytes(PAGE)


class FsError(OSError):
    """A file-system error: `errno` for the kernel, and what went wrong for the log."""

    def __init__(self, code: int, what: str) -> None:
        super().__init__(code, what)


class FileData:
    """A file's bytes: durable pages and size, and the volatile view on top of them."""

    def __init__(self) -> None:
        self.durable: dict[int, bytes] = {}
        self.durable_size = 0
        self.pages: dict[int, bytes] = {}
        """Pages written (or cut) since the last sync; they shadow the durable ones."""
        self.size = 0
        self.cut = 0
        """Durable bytes at and after `cut` are hidden (a truncation not yet synced)."""

    @property
    def dirty(self) -> bool:
        return bool(self.pages) or self.size != self.durable_size or self.cut != self.durable_size

    def _page(self, index: int) -> bytes:
        page = self.pages.get(index)
        if page is not None:
            return page
        start = index * PAGE
        durable = self.durable.get(index)
        if durable is None or start >= self.cut:
            return _ZERO_PAGE
        if start + PAGE > self.cut:  # the page the cut runs through: zeros after it
            return durable[: self.cut - start] + bytes(start + PAGE - self.cut)
        return durable

    def read(self, offset: int, size: int) -> bytes:
        end = min(offset + size, self.size)
        if offset >= end:
            return b""
        out = bytearray()
        for index in range(offset // PAGE, (end - 1) // PAGE + 1):
            page = self._page(index)
            lo = max(offset - index * PAGE, 0)
            hi = min(end - index * PAGE, PAGE)
            out += page[lo:hi]
        return bytes(out)

    def write(self, offset: int, data: bytes) -> None:
        end = offset + len(data)
        position = offset
        while position < end:
            index, lo = divmod(position, PAGE)
            take = min(PAGE - lo, end - position)
            page = bytearray(self._page(index))
            page[lo : lo + take] = data[position - offset : position - offset + take]
            self.pages[index] = bytes(page)
            position += take
        self.size = max(self.size, end)

    def truncate(self, size: int) -> None:
        if size < self.size:
            index, within = divmod(size, PAGE)
            if within:
                self.pages[index] = self._page(index)[:within] + bytes(PAGE - within)
                index += 1
            for later in [i for i in self.pages if i >= index]:
                del self.pages[later]
            self.cut = min(self.cut, size)
        self.size = size

    def sync(self) -> int:
        """Make the current content durable; returns how many pages were written."""
        written = len(self.pages)
        if self.cut < self.durable_size:
            first_hidden = self.cut // PAGE
            for index in [i for i in self.durable if i >= first_hidden and i not in self.pages]:
                page = self._page(index)
                if page is _ZERO_PAGE:
                    del self.durable[index]
                else:
                    self.durable[index] = page
        self.durable.update(self.pages)
        for index in [i for i in self.durable if i * PAGE >= self.size]:
            del self.durable[index]
        self.pages = {}
        self.durable_size = self.cut = self.size
        return written

    def drop(self) -> None:
        self.pages = {}
        self.size = self.cut = self.durable_size


@dataclasses.dataclass
class Inode:
    ino: int
    disk: str
    mode: int
    """File type and permission bits, as st_mode."""
    data: FileData | None = None
    entries: dict[str, int] | None = None
    durable_entries: dict[str, int] | None = None
    links: int = 0
    """Current directory entries naming it."""
    mtime_ns: int = 0
    ctime_ns: int = 0

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)


@dataclasses.dataclass(frozen=True)
class Attr:
    ino: int
    mode: int
    size: int
    links: int
    mtime_ns: int
    ctime_ns: int


@dataclasses.dataclass(frozen=True)
class DropReport:
    disks: tuple[str, ...]
    files_reverted: int
    bytes_lost: int
    """Volatile bytes that were never made durable (page granularity)."""
    entries_reverted: int
    """Directories whose entries differed from their durable ones."""
    handles_closed: int
    inodes_freed: int
    reverted: tuple[str, ...] = ()
    """Paths (before the drop) of the files and directories that lost something, `+` marking
    files that lost data and `/` directories that lost entries; at most `MAX_LISTED`."""

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def split(path: str) -> list[str]:
    return [part for part in path.split("/") if part]


class PowerFs:
    """The whole file system: inodes, handles and disks. Not thread-safe: the shell holds a lock."""

    def __init__(self, clock_ns: Callable[[], int] = lambda: 0) -> None:
        self._clock = clock_ns
        now = clock_ns()
        self.inodes: dict[int, Inode] = {
            ROOT: Inode(ROOT, "", stat.S_IFDIR | 0o755, entries={}, durable_entries={}, links=2, mtime_ns=now)
        }
        self.handles: dict[int, int] = {}
        """Open file handle -> inode."""
        self._next_ino = ROOT + 1
        self._next_fh = 1

    # ---- lookup ---------------------------------------------------------------------------------
    def resolve(self, path: str) -> Inode:
        node = self.inodes[ROOT]
        for part in split(path):
            if node.entries is None:
                raise FsError(errno.ENOTDIR, f"{path}: a component is not a directory")
            ino = node.entries.get(part)
            if ino is None:
                raise FsError(errno.ENOENT, f"{path}: no such file or directory")
            node = self.inodes[ino]
        return node

    def _parent(self, path: str) -> tuple[Inode, str]:
        parts = split(path)
        if not parts:
            raise FsError(errno.EBUSY, "the root cannot be changed")
        parent = self.resolve("/".join(parts[:-1]))
        if parent.entries is None:
            raise FsError(errno.ENOTDIR, f"{path}: the parent is not a directory")
        return parent, parts[-1]

    def _node(self, path: str | None, fh: int | None) -> Inode:
        if fh:
            ino = self.handles.get(fh)
            if ino is None:
                raise FsError(errno.EIO, f"handle {fh} is gone (power loss)")
            return self.inodes[ino]
        if path is None:
            raise FsError(errno.ENOENT, "no path and no handle")
        return self.resolve(path)

    def getattr(self, path: str | None, fh: int | None = None) -> Attr:
        node = self._node(path, fh)
        size = node.data.size if node.data is not None else PAGE
        links = node.links if not node.is_dir else 2
        return Attr(node.ino, node.mode, size, links, node.mtime_ns, node.ctime_ns)

    def readdir(self, path: str) -> list[str]:
        node = self.resolve(path)
        if node.entries is None:
            raise FsError(errno.ENOTDIR, f"{path}: not a directory")
        return sorted(node.entries)

    def listing(self, path: str) -> list[tuple[str, int, int]]:
        """(name, inode, mode) of each entry of a directory, for readdir."""
        node = self.resolve(path)
        names = self.readdir(path)
        assert node.entries is not None
        return [(name, node.entries[name], self.inodes[node.entries[name]].mode) for name in names]

    # ---- namespace ----------------------------------------------------------------------------
    def _new(self, parent: Inode, name: str, mode: int) -> Inode:
        if parent.ino == ROOT and not stat.S_ISDIR(mode):
            raise FsError(errno.EPERM, f"/{name}: only disks (directories) live at the top level")
        now = self._clock()
        disk = name if parent.ino == ROOT else parent.disk
        node = Inode(self._next_ino, disk, mode, mtime_ns=now, ctime_ns=now)
        if stat.S_ISDIR(mode):
            node.entries, node.durable_entries = {}, {}
        else:
            node.data = FileData()
        self._next_ino += 1
        self.inodes[node.ino] = node
        self._link(parent, name, node)
        if parent.ino == ROOT:  # a disk exists once made
            assert parent.durable_entries is not None
            parent.durable_entries[name] = node.ino
        return node

    def _link(self, parent: Inode, name: str, node: Inode) -> None:
        assert parent.entries is not None
        parent.entries[name] = node.ino
        node.links += 1
        parent.mtime_ns = self._clock()

    def _unlink_entry(self, parent: Inode, name: str) -> Inode:
        assert parent.entries is not None
        node = self.inodes[parent.entries.pop(name)]
        node.links -= 1
        parent.mtime_ns = self._clock()
        return node

    def mkdir(self, path: str, mode: int) -> None:
        parent, name = self._parent(path)
        if name in (parent.entries or {}):
            raise FsError(errno.EEXIST, f"{path}: exists")
        self._new(parent, name, stat.S_IFDIR | (mode & 0o7777))

    def create(self, path: str, mode: int, *, exclusive: bool = False) -> int:
        """Open `path`, making an empty file if it does not exist; returns a handle."""
        parent, name = self._parent(path)
        assert parent.entries is not None
        ino = parent.entries.get(name)
        if ino is not None:
            if exclusive:
                raise FsError(errno.EEXIST, f"{path}: exists")
            node = self.inodes[ino]
            if node.is_dir:
                raise FsError(errno.EISDIR, f"{path}: is a directory")
        else:
            node = self._new(parent, name, stat.S_IFREG | (mode & 0o7777))
        return self._open_handle(node)

    def open(self, path: str, *, truncate: bool = False) -> int:
        node = self.resolve(path)
        if truncate and node.data is not None:
            node.data.truncate(0)
            node.mtime_ns = self._clock()
        return self._open_handle(node)

    def opendir(self, path: str) -> int:
        node = self.resolve(path)
        if not node.is_dir:
            raise FsError(errno.ENOTDIR, f"{path}: not a directory")
        return self._open_handle(node)

    def _open_handle(self, node: Inode) -> int:
        fh = self._next_fh
        self._next_fh += 1
        self.handles[fh] = node.ino
        return fh

    def release(self, fh: int) -> None:
        self.handles.pop(fh, None)

    def unlink(self, path: str) -> None:
        parent, name = self._parent(path)
        node = self.resolve(path)
        if node.is_dir:
            raise FsError(errno.EISDIR, f"{path}: is a directory")
        self._unlink_entry(parent, name)

    def rmdir(self, path: str) -> None:
        parent, name = self._parent(path)
        node = self.resolve(path)
        if not node.is_dir:
            raise FsError(errno.ENOTDIR, f"{path}: not a directory")
        if node.entries:
            raise FsError(errno.ENOTEMPTY, f"{path}: not empty")
        self._unlink_entry(parent, name)
        if parent.ino == ROOT:  # a removed disk is gone for good
            assert parent.durable_entries is not None
            parent.durable_entries.pop(name, None)

    def rename(self, old: str, new: str, flags: int = 0) -> None:
        if flags & RENAME_EXCHANGE or flags & ~RENAME_NOREPLACE:
            raise FsError(errno.EINVAL, f"rename flags {flags:#x} are not supported")
        old_parent, old_name = self._parent(old)
        new_parent, new_name = self._parent(new)
        node = self.resolve(old)
        if ROOT in (old_parent.ino, new_parent.ino):
            raise FsError(errno.EPERM, f"{old} -> {new}: disks cannot be renamed")
        if old_parent.disk != new_parent.disk:
            raise FsError(errno.EXDEV, f"{old} -> {new}: crosses disks")
        assert new_parent.entries is not None
        target_ino = new_parent.entries.get(new_name)
        if target_ino == node.ino:
            return
        if node.is_dir and self._contains(node, new_parent):
            raise FsError(errno.EINVAL, f"{old} -> {new}: into itself")
        if target_ino is not None:
            if flags & RENAME_NOREPLACE:
                raise FsError(errno.EEXIST, f"{new}: exists")
            target = self.inodes[target_ino]
            if target.is_dir and not node.is_dir:
                raise FsError(errno.EISDIR, f"{new}: is a directory")
            if node.is_dir and not target.is_dir:
                raise FsError(errno.ENOTDIR, f"{new}: not a directory")
            if target.entries:
                raise FsError(errno.ENOTEMPTY, f"{new}: not empty")
            self._unlink_entry(new_parent, new_name)
        self._unlink_entry(old_parent, old_name)
        self._link(new_parent, new_name, node)
        node.ctime_ns = self._clock()

    def _contains(self, directory: Inode, node: Inode) -> bool:
        """Is `node` `directory` or below it (current entries)?"""
        stack = [directory]
        while stack:
            current = stack.pop()
            if current.ino == node.ino:
                return True
            stack += [self.inodes[i] for i in (current.entries or {}).values() if self.inodes[i].is_dir]
        return False

    def chmod(self, path: str | None, mode: int, fh: int | None = None) -> None:
        node = self._node(path, fh)
        node.mode = stat.S_IFMT(node.mode) | (mode & 0o7777)
        node.ctime_ns = self._clock()

    def utimens(self, path: str | None, mtime_ns: int | None, fh: int | None = None) -> None:
        node = self._node(path, fh)
        node.mtime_ns = mtime_ns if mtime_ns is not None else self._clock()

    # ---- data ---------------------------------------------------------------------------------
    def _file(self, path: str | None, fh: int | None) -> FileData:
        node = self._node(path, fh)
        if node.data is None:
            raise FsError(errno.EISDIR, f"{path}: is a directory")
        return node.data

    def read(self, path: str | None, size: int, offset: int, fh: int | None = None) -> bytes:
        return self._file(path, fh).read(offset, size)

    def write(self, path: str | None, data: bytes, offset: int, fh: int | None = None) -> int:
        self._file(path, fh).write(offset, data)
        self._node(path, fh).mtime_ns = self._clock()
        return len(data)

    def truncate(self, path: str | None, size: int, fh: int | None = None) -> None:
        if size < 0:
            raise FsError(errno.EINVAL, f"{path}: negative size {size}")
        self._file(path, fh).truncate(size)
        self._node(path, fh).mtime_ns = self._clock()

    def fallocate(self, path: str | None, mode: int, offset: int, length: int, fh: int | None = None) -> None:
        if mode:
            raise FsError(errno.EOPNOTSUPP, f"fallocate mode {mode:#x} is not supported")
        data = self._file(path, fh)
        if offset + length > data.size:
            data.truncate(offset + length)

    def fsync(self, path: str | None, fh: int | None = None) -> None:
        """fsync or fdatasync of a file or a directory (a directory's makes its entries durable)."""
        node = self._node(path, fh)
        if node.data is not None:
            node.data.sync()
        else:
            assert node.entries is not None
            node.durable_entries = dict(node.entries)

    # ---- power ----------------------------------------------------------------------------------
    def disks(self) -> list[str]:
        root = self.inodes[ROOT]
        assert root.entries is not None
        return sorted(root.entries)

    def drop(self, disks: list[str] | None = None) -> DropReport:
        """Power loss of `disks` (default: all): everything not made durable is gone."""
        chosen = set(self.disks() if disks is None else disks)
        unknown = chosen - set(self.disks())
        if unknown:
            raise FsError(errno.ENOENT, f"no such disk: {', '.join(sorted(unknown))}")
        files = lost = reverted = 0
        paths = self._paths()
        listed: list[str] = []
        for node in self.inodes.values():
            if node.disk not in chosen:
                continue
            if (node.data is not None and node.data.dirty) or (
                node.entries is not None and node.entries != node.durable_entries
            ):
                mark = "+" if node.data is not None else "/"
                listed.append(f"{mark}{paths.get(node.ino, f'(unlinked inode {node.ino})')}")
            if node.data is not None and node.data.dirty:
                files += 1
                lost += len(node.data.pages) * PAGE
                node.data.drop()
            elif node.entries is not None and node.entries != node.durable_entries:
                reverted += 1
                assert node.durable_entries is not None
                node.entries = dict(node.durable_entries)
        closed = [fh for fh, ino in self.handles.items() if self.inodes[ino].disk in chosen]
        for fh in closed:
            del self.handles[fh]
        freed = self._collect()
        shown = tuple(sorted(listed)[:MAX_LISTED])
        return DropReport(tuple(sorted(chosen)), files, lost, reverted, len(closed), freed, shown)

    def _paths(self) -> dict[int, str]:
        """A path of every named inode: its current name, or else its durable one."""
        out: dict[int, str] = {ROOT: "/"}
        stack = [(ROOT, "")]
        while stack:
            ino, path = stack.pop()
            node = self.inodes[ino]
            for name, child in {**(node.durable_entries or {}), **(node.entries or {})}.items():
                if child not in out:
                    out[child] = f"{path}/{name}"
                    stack.append((child, f"{path}/{name}"))
        return out

    def sync_all(self) -> None:
        """Everything durable, as a clean unmount leaves it."""
        for node in self.inodes.values():
            if node.data is not None:
                node.data.sync()
            else:
                node.durable_entries = dict(node.entries or {})
        self._collect()

    def _collect(self) -> int:
        """Free inodes that no entry (current or durable) and no handle reaches; recount links."""
        reached = {ROOT} | set(self.handles.values())
        stack = list(reached)
        while stack:
            node = self.inodes[stack.pop()]
            for ino in [*(node.entries or {}).values(), *(node.durable_entries or {}).values()]:
                if ino not in reached:
                    reached.add(ino)
                    stack.append(ino)
        freed = [ino for ino in self.inodes if ino not in reached]
        for ino in freed:
            del self.inodes[ino]
        for node in self.inodes.values():
            node.links = 0
        for node in self.inodes.values():
            for ino in (node.entries or {}).values():
                self.inodes[ino].links += 1
        return len(freed)

    def unsynced(self) -> dict[str, int]:
        """Per disk, the inodes holding something a power loss would take."""
        out: dict[str, int] = {}
        for node in self.inodes.values():
            if (node.data is not None and node.data.dirty) or (
                node.entries is not None and node.entries != node.durable_entries
            ):
                out[node.disk] = out.get(node.disk, 0) + 1
        return out

    # ---- at rest: the durable tree, to save and to load -----------------------------------------
    def walk_durable(self) -> Iterator[tuple[str, Inode]]:
        """(path, inode) of every durably named inode, parents before children."""
        stack: list[tuple[str, int]] = [("", ROOT)]
        while stack:
            path, ino = stack.pop()
            node = self.inodes[ino]
            if ino != ROOT:
                yield path, node
            for name, child in sorted((node.durable_entries or {}).items(), reverse=True):
                stack.append((f"{path}/{name}", child))

    def durable_content(self, node: Inode) -> bytes:
        assert node.data is not None
        data = node.data
        out = bytearray(data.durable_size)
        for index, page in data.durable.items():
            start = index * PAGE
            out[start : start + PAGE] = page[: max(0, min(PAGE, data.durable_size - start))]
        return bytes(out[: data.durable_size])

    def load(self, path: str, mode: int, content: bytes | None) -> None:
        """Add a durable directory (`content` None) or file, as found at rest; parents first."""
        parent, name = self._parent(path)
        if stat.S_ISDIR(mode):
            node = self._new(parent, name, stat.S_IFDIR | (mode & 0o7777))
        else:
            node = self._new(parent, name, stat.S_IFREG | (mode & 0o7777))
            assert node.data is not None
            node.data.write(0, content or b"")
            node.data.sync()
        assert parent.durable_entries is not None
        parent.durable_entries[name] = node.ino
