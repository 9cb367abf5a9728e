"""Making files and folders survive a power loss: fsync of a path, and a `mkdir -p` whose folders do.

A file's fsync makes its bytes durable, not its name: the folder holding the entry needs an fsync
too. Used by the broker's store and the controller's Raft snapshot and event log.
"""

from __future__ import annotations

import os
from pathlib import Path


def fsync_path(path: Path, *, directory: bool = False) -> None:
    """fsync a file, or a folder (its entries: files created, renamed or removed in it)."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def durable_mkdir(directory: Path) -> None:
    """mkdir -p whose new folders survive a power loss: each folder made is fsynced into its parent."""
    missing: list[Path] = []
    here = directory.absolute()
    while not here.exists():
        missing.append(here)
        here = here.parent
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        fsync_path(folder.parent, directory=True)
    if not directory.is_dir():
        raise NotADirectoryError(f"{directory} exists and is not a folder")


def write_synced(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Create or truncate `path`, write all of `data` and fsync it (the first half of a durable replace)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_durably(path: Path, data: bytes) -> None:
    """Make `path` hold `data`, old or new whole after any crash: write `<name>.tmp`, fsync it, rename it
    over `path`, fsync the folder. A reader should delete a leftover `<name>.tmp` (a torn write)."""
    temp = path.with_name(path.name + ".tmp")
    write_synced(temp, data)
    temp.replace(path)
    fsync_path(path.parent, directory=True)
