"""The native helpers, built on first use into one library and loaded with ctypes: the trace
scanner (`scan.c`) and the host and lane passes of finalisation (`host_pass.c`, `lanes.c`).

The library is compiled once per source version with the system C compiler (`$CC`, else `cc`)
and kept beside this file, or under the user's cache directory where the package directory is
read-only. Without a compiler, or with `PROF_ENGINE_NATIVE=0`, `load()` returns None and the
importers use their pure-Python path: the results are the same, only slower.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

log = logging.getLogger(__name__)

SOURCES = tuple(sorted(Path(__file__).parent.glob("*.c")))


class ScanResult(ctypes.Structure):
    _fields_ = [("consumed", ctypes.c_int64), ("n", ctypes.c_int64), ("err_pos", ctypes.c_int64),
                ("status", ctypes.c_int32), ("after_event", ctypes.c_int32)]


def _library_name() -> str:
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in SOURCES) + f"{platform.machine()} {sys.platform}".encode())
    key = digest.hexdigest()[:16]
    return f"_native_{key}.so"


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "prof-engine"


def _build(target: Path) -> None:
    """Compile the sources into `target`, atomically (a half-written library is never visible)."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        raise OSError("no C compiler (cc, gcc or clang) on PATH")
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    fd, tmp = tempfile.mkstemp(prefix=".native-", suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        proc = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", tmp, *map(str, SOURCES)],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode:
            raise OSError(f"{cc} failed: {proc.stderr.strip()[:500]}")
        os.chmod(tmp, 0o755)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _bind(lib: ctypes.CDLL) -> ctypes.CDLL:
    p, i32, i64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64
    lib.pe_scan.restype = i64
    lib.pe_scan.argtypes = [p, i64, i64, i32, i64, ctypes.c_char_p, i32, ctypes.c_char_p, i32,
                            p, p, p, p, ctypes.POINTER(ScanResult)]
    lib.pe_gather.restype = i64
    lib.pe_gather.argtypes = [p, p, p, p, i64, i32, p, p, p, p, ctypes.POINTER(i64)]
    lib.pe_gather_i64.restype = i64
    lib.pe_gather_i64.argtypes = [p, p, p, p, i64, i32, p, p, ctypes.POINTER(i64)]
    lib.pe_host_new.restype = p
    lib.pe_host_new.argtypes = [i64, p, p, p, p, p]
    lib.pe_host_free.restype = None
    lib.pe_host_free.argtypes = [p]
    lib.pe_host_pass.restype = i64
    lib.pe_host_pass.argtypes = [p, i64, p, p, p, p, p, p, p, p, p, p, p, p]
    lib.pe_lanes_new.restype = p
    lib.pe_lanes_new.argtypes = []
    lib.pe_lanes_free.restype = None
    lib.pe_lanes_free.argtypes = [p]
    lib.pe_lanes.restype = i64
    lib.pe_lanes.argtypes = [p, i64, p, p, p, p, p, p, p, p]
    lib.pe_lanes_finish.restype = i64
    lib.pe_lanes_finish.argtypes = [p, p, p, p, p]
    lib.pe_step_at.restype = None
    lib.pe_step_at.argtypes = [p, i64, p, p, p, p]
    return lib


@cache
def load() -> ctypes.CDLL | None:
    """The scanner library, built if needed; None where it cannot be had (see the module doc)."""
    if os.environ.get("PROF_ENGINE_NATIVE", "1") == "0":
        return None
    name = _library_name()
    candidates = [Path(__file__).with_name(name), _cache_dir() / name]
    for path in candidates:
        if path.exists():
            try:
                return _bind(ctypes.CDLL(str(path)))
            except OSError as e:
                log.debug("cannot load %s: %s", path, e)
    for path in candidates:
        try:
            _build(path)
            return _bind(ctypes.CDLL(str(path)))
        except (OSError, subprocess.SubprocessError) as e:
            last = e
    log.info("native helpers unavailable (%s); using their pure-Python paths", last)
    return None
