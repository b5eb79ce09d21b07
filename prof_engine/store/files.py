"""Atomic, owner-writable file creation: a file appears whole or not at all."""

from __future__ import annotations

import ctypes
import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prof_engine.errors import RunError


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
    for dirpath, _dirnames, filenames in os.walk(root):
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


class RunLock:
    """The lock of the run at `out`: a `.<name>.lock` file beside it, flock'ed for as long as one
    process writes the run, so a second writer fails at once instead of replacing the first's
    run. Released (and its file removed) by `release`, or by the process's death."""

    def __init__(self, out: Path) -> None:
        self.path = out.with_name(f".{out.name}.lock")
        make_dirs(out.parent)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, FILE_MODE)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise RunError(
                    f"{out}: another prof-engine process is writing this run; wait for it, or write to another path"
                ) from None
            try:  # the holder before us may have removed the file we opened: lock the one at the path
                if os.stat(self.path).st_ino == os.fstat(fd).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)
        self.fd: int | None = fd

    def release(self) -> None:
        if self.fd is not None:
            self.path.unlink(missing_ok=True)  # while held: a waiter that opened it retries
            os.close(self.fd)
            self.fd = None


def remove_debris(out: Path) -> None:
    """Remove what imports into `out` killed before they finished left beside it (hidden staging
    and replaced directories). Only while holding `out`'s RunLock: then no live writer owns them."""
    prefix = f".{out.name}."
    for p in out.parent.iterdir() if out.parent.is_dir() else ():
        if p.name.startswith(prefix) and p.name.endswith((".importing", ".replaced")) and p.is_dir():
            shutil.rmtree(p, ignore_errors=True)


_RENAME_EXCHANGE, _AT_FDCWD = 2, -100


def exchange(a: Path, b: Path) -> bool:
    """Swap directories `a` and `b` in one atomic step (Linux renameat2), so a reader of either path
    sees one or the other, never neither. False where the system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0
