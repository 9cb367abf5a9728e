"""The power-loss file system's model: what survives a drop, and what does not (no FUSE here)."""

from __future__ import annotations

import errno

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from brokergroup.chaos.powerfs_core import PAGE, FileData, FsError, PowerFs


def disk_with_dir() -> PowerFs:
    fs = PowerFs()
    fs.mkdir("/m1", 0o755)
    fs.mkdir("/m1/store", 0o755)
    fs.fsync("/m1")  # the directory's own name is durable
    return fs


def write_file(fs: PowerFs, path: str, data: bytes, *, sync: bool) -> int:
    fh = fs.create(path, 0o644)
    fs.write(None, data, 0, fh)
    if sync:
        fs.fsync(None, fh)
    return fh


def test_a_file_written_fsynced_and_named_durably_survives() -> None:
    fs = disk_with_dir()
    fh = write_file(fs, "/m1/store/a", b"hello", sync=True)
    fs.fsync("/m1/store")
    fs.release(fh)
    report = fs.drop(["m1"])
    assert fs.read("/m1/store/a", 100, 0) == b"hello"
    assert report.files_reverted == 0 and report.entries_reverted == 0


def test_a_write_not_fsynced_is_gone() -> None:
    fs = disk_with_dir()
    write_file(fs, "/m1/store/a", b"hello", sync=True)
    fs.fsync("/m1/store")
    fh = fs.open("/m1/store/a")
    fs.write(None, b"HELLO, world", 0, fh)
    assert fs.read("/m1/store/a", 100, 0) == b"HELLO, world"
    report = fs.drop(["m1"])
    assert fs.read("/m1/store/a", 100, 0) == b"hello"
    assert fs.getattr("/m1/store/a").size == 5
    assert report.files_reverted == 1 and report.bytes_lost == PAGE and report.handles_closed == 2


def test_a_fsynced_file_whose_directory_was_not_fsynced_is_gone_whole() -> None:
    fs = disk_with_dir()
    write_file(fs, "/m1/store/a", b"data", sync=True)
    fs.drop(["m1"])
    assert fs.readdir("/m1/store") == []
    with pytest.raises(FsError) as caught:
        fs.resolve("/m1/store/a")
    assert caught.value.errno == errno.ENOENT


def test_a_durable_name_without_fsynced_data_comes_back_empty() -> None:
    fs = disk_with_dir()
    write_file(fs, "/m1/store/a", b"data", sync=False)
    fs.fsync("/m1/store")
    fs.drop(["m1"])
    assert fs.readdir("/m1/store") == ["a"]
    assert fs.read("/m1/store/a", 10, 0) == b""


def test_a_rename_not_followed_by_a_directory_fsync_is_undone() -> None:
    fs = disk_with_dir()
    write_file(fs, "/m1/store/f", b"old", sync=True)
    write_file(fs, "/m1/store/f.tmp", b"new", sync=True)
    fs.fsync("/m1/store")
    fs.rename("/m1/store/f.tmp", "/m1/store/f")
    assert fs.readdir("/m1/store") == ["f"] and fs.read("/m1/store/f", 10, 0) == b"new"
    report = fs.drop(["m1"])
    assert fs.readdir("/m1/store") == ["f", "f.tmp"]
    assert fs.read("/m1/store/f", 10, 0) == b"old"
    assert report.entries_reverted == 1


def test_a_rename_made_durable_stays() -> None:
    fs = disk_with_dir()
    write_file(fs, "/m1/store/f", b"old", sync=True)
    write_file(fs, "/m1/store/f.tmp", b"new", sync=True)
    fs.fsync("/m1/store")
    fs.rename("/m1/store/f.tmp", "/m1/store/f")
    fs.fsync("/m1/store")
    report = fs.drop(["m1"])
    assert fs.readdir("/m1/store") == ["f"] and fs.read("/m1/store/f", 10, 0) == b"new"
    assert report.inodes_freed == 1  # the replaced file


def test_a_file_renamed_over_another_survives_a_power_loss_elsewhere() -> None:
    fs = disk_with_dir()
    fs.mkdir("/m2", 0o755)
    fs.release(write_file(fs, "/m1/store/f", b"old", sync=True))
    fs.fsync("/m1/store")
    fs.release(write_file(fs, "/m1/store/f.tmp", b"new", sync=True))
    fs.rename("/m1/store/f.tmp", "/m1/store/f")  # the name "f" is durable for the old inode only
    fs.drop(["m2"])
    fs.sync_all()
    assert fs.read("/m1/store/f", 10, 0) == b"new"
    assert fs.getattr("/m1/store/f").links == 1


def test_an_unlink_not_made_durable_is_undone_and_a_mkdir_too() -> None:
    fs = disk_with_dir()
    write_file(fs, "/m1/store/seg", b"x" * 10, sync=True)
    fs.fsync("/m1/store")
    fs.unlink("/m1/store/seg")
    fs.mkdir("/m1/store/sub", 0o755)
    fs.drop(["m1"])
    assert fs.readdir("/m1/store") == ["seg"]
    assert fs.read("/m1/store/seg", 100, 0) == b"x" * 10


def test_an_unsynced_truncation_is_undone_and_a_synced_one_hides_old_bytes() -> None:
    fs = disk_with_dir()
    fh = write_file(fs, "/m1/store/seg", b"a" * (PAGE + 100), sync=True)
    fs.fsync("/m1/store")
    fs.truncate(None, 10, fh)
    fs.drop(["m1"])
    assert fs.read("/m1/store/seg", 2 * PAGE, 0) == b"a" * (PAGE + 100)
    fh = fs.open("/m1/store/seg")
    fs.truncate(None, 10, fh)
    fs.fsync(None, fh)
    fs.truncate(None, PAGE + 100, fh)  # grows again: the cut bytes read as zeros
    assert fs.read("/m1/store/seg", 2 * PAGE, 0) == b"a" * 10 + bytes(PAGE + 90)
    fs.drop(["m1"])
    assert fs.read("/m1/store/seg", 2 * PAGE, 0) == b"a" * 10


def test_a_power_loss_hits_only_the_disks_named() -> None:
    fs = disk_with_dir()
    fs.mkdir("/m2", 0o755)
    write_file(fs, "/m2/f", b"kept", sync=False)
    write_file(fs, "/m1/f", b"lost", sync=False)
    fs.drop(["m1"])
    assert fs.readdir("/m2") == ["f"] and fs.read("/m2/f", 10, 0) == b"kept"
    assert fs.readdir("/m1") == ["store"]
    assert fs.unsynced() == {"m2": 2}  # the file's data and m2's entry


def test_handles_of_a_dropped_disk_fail_and_disks_do_not_mix() -> None:
    fs = disk_with_dir()
    fs.mkdir("/m2", 0o755)
    fh = write_file(fs, "/m1/store/a", b"x", sync=True)
    with pytest.raises(FsError) as cross:
        fs.rename("/m1/store/a", "/m2/a")
    assert cross.value.errno == errno.EXDEV
    with pytest.raises(FsError) as top:
        fs.create("/stray", 0o644)
    assert top.value.errno == errno.EPERM
    fs.drop(["m1"])
    with pytest.raises(FsError) as gone:
        fs.write(None, b"late", 0, fh)
    assert gone.value.errno == errno.EIO
    with pytest.raises(FsError, match="no such disk: m9"):
        fs.drop(["m9"])


def test_an_unlinked_open_file_stays_readable_until_released() -> None:
    fs = disk_with_dir()
    fh = write_file(fs, "/m1/store/a", b"still here", sync=False)
    fs.unlink("/m1/store/a")
    assert fs.read(None, 100, 0, fh) == b"still here"
    fs.release(fh)
    fs.sync_all()
    assert all(node.data is None for node in fs.inodes.values())  # freed


def test_the_durable_tree_round_trips_through_load() -> None:
    fs = disk_with_dir()
    write_file(fs, "/m1/store/a", b"x" * (3 * PAGE + 5), sync=True)
    write_file(fs, "/m1/store/b", b"volatile", sync=False)
    fs.fsync("/m1/store")
    again = PowerFs()
    for path, node in fs.walk_durable():
        again.load(path, node.mode, None if node.is_dir else fs.durable_content(node))
    assert again.readdir("/m1/store") == ["a", "b"]
    assert again.read("/m1/store/a", 4 * PAGE, 0) == b"x" * (3 * PAGE + 5)
    assert again.read("/m1/store/b", 10, 0) == b""
    assert again.unsynced() == {}


ops = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(0, 3 * PAGE), st.binary(min_size=1, max_size=PAGE + 7)),
        st.tuples(st.just("truncate"), st.integers(0, 4 * PAGE), st.just(b"")),
        st.tuples(st.just("sync"), st.just(0), st.just(b"")),
        st.tuples(st.just("drop"), st.just(0), st.just(b"")),
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_file_data_matches_a_byte_array_with_a_durable_copy(sequence: list[tuple[str, int, bytes]]) -> None:
    data, current, durable = FileData(), bytearray(), bytearray()
    for op, number, blob in sequence:
        if op == "write":
            if number > len(current):
                current += bytes(number - len(current))
            current[number : number + len(blob)] = blob
            data.write(number, blob)
        elif op == "truncate":
            current = current[:number] + bytes(max(0, number - len(current)))
            data.truncate(number)
        elif op == "sync":
            durable = bytearray(current)
            data.sync()
        else:
            current = bytearray(durable)
            data.drop()
        assert data.size == len(current)
        assert data.read(0, len(current) + PAGE) == bytes(current)
    assert data.read(1, 5) == bytes(current[1:6])


names = st.sampled_from(["a", "b", "c"])
disks = st.sampled_from(["m1", "m2"])
namespace_ops = st.lists(
    st.tuples(st.sampled_from(["write", "rename", "unlink", "fsyncdir", "drop"]), disks, names, names, st.booleans()),
    max_size=25,
)


@settings(max_examples=500, deadline=None)
@given(namespace_ops)
@example([("write", "m1", "a", "a", True), ("fsyncdir", "m1", "a", "a", True), ("write", "m1", "b", "b", True),
          ("rename", "m1", "b", "a", True), ("drop", "m2", "a", "a", True)])  # fmt: skip
def test_no_sequence_of_namespace_changes_and_power_losses_leaves_a_dangling_entry(
    sequence: list[tuple[str, str, str, str, bool]],
) -> None:
    fs = PowerFs()
    for disk in ("m1", "m2"):
        fs.mkdir(f"/{disk}", 0o755)
    for op, disk, name, other, sync in sequence:
        path = f"/{disk}/{name}"
        try:
            if op == "write":
                fs.release(write_file(fs, path, name.encode(), sync=sync))
            elif op == "rename":
                fs.rename(path, f"/{disk}/{other}")
            elif op == "unlink":
                fs.unlink(path)
            elif op == "fsyncdir":
                fs.fsync(f"/{disk}")
            else:
                fs.drop([disk])
        except FsError:
            continue
        for node in fs.inodes.values():
            for ino in [*(node.entries or {}).values(), *(node.durable_entries or {}).values()]:
                assert ino in fs.inodes, f"after {op} {path}: an entry names freed inode {ino}"
        for d in ("m1", "m2"):
            for n in fs.readdir(f"/{d}"):
                assert fs.read(f"/{d}/{n}", 100, 0) in (b"", n.encode(), b"a", b"b", b"c")
