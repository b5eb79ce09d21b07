"""Atomic, owner-writable file creation: a file appears whole or not at all."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _umask() -> int:
    """The process's umask, read without changing it where Linux shows it (`os.umask` can only be
    read by setting it, which races with threads that create files)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# What prof-engine creates is never group- or world-writable, and never looser than the user's
# umask asks (077 keeps runs private). Read at import: a umask is set once, before work starts.
_MASK = _umask() | 0o022
FILE_MODE = 0o666 & ~_MASK
DIR_MODE = 0o777 & ~_MASK


def make_dirs(path: Path) -> None:
    """mkdir -p, with every directory it creates owner-writable only (`DIR_MODE`)."""
    missing = []
    p = Path(path)
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        d.mkdir(exist_ok=True)
        os.chmod(d, DIR_MODE)


def output_file(target: str | os.PathLike, default_name: str) -> Path:
    """The file a one-file output (a report, a timeline) goes to: `target`, or `default_name` inside
    it when `target` is a directory or is written as one (a trailing `/`; pathlib drops it)."""
    text = os.fspath(target)
    path = Path(text)
    if path.is_dir() or text.endswith(("/", os.sep)):
        return path / default_name
    return path


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it is renamed onto `path`, else removed."""
    make_dirs(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def restrict_tree(root: Path) -> None:
    """Make everything under `root` owner-writable only (`FILE_MODE`, `DIR_MODE`)."""
    for dirpath, dirnames, filenames in os.walk(root):
        os.chmod(dirpath, DIR_MODE)
        for f in filenames:
            os.chmod(os.path.join(dirpath, f), FILE_MODE)


def merge_tree(src: Path, dst: Path) -> None:
    """Move everything under `src` into `dst` by renames (same file system): a directory `dst`
    lacks moves whole, one it has is merged entry by entry. Files must not exist in `dst` (part
    files have unique names); `src` is left empty. A missing `src` moves nothing."""
    if not Path(src).is_dir():
        return
    make_dirs(dst)
    for entry in Path(src).iterdir():
        target = Path(dst) / entry.name
        if entry.is_dir() and target.is_dir():
            merge_tree(entry, target)
        elif target.exists():
            raise FileExistsError(f"{target}: already exists")
        else:
            os.rename(entry, target)
