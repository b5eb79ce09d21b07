"""Allocator settings for the processes prof-engine owns (see `_process.tune_owned_process`).

Each setting lasts for the rest of the process, so no library call makes one: a caller's process
keeps its own allocators.

Arrow's jemalloc: Arrow's default allocator in the pyarrow wheels, mimalloc, keeps pages that
another thread than their owner freed until the owner allocates again. An import allocates and
frees on different threads (decoding, staging, partition writers), so jemalloc, which returns
freed pages within its decay time whichever thread freed them, lowers a 100 MB trace's peak RSS
by ~40 MB. Arrow reads `ARROW_DEFAULT_MEMORY_POOL` once, when pyarrow loads
(`pyarrow.set_memory_pool` does not reach what Arrow's C++ code allocates), hence the variable.
"""

from __future__ import annotations

import ctypes
import sys

ENV = "ARROW_DEFAULT_MEMORY_POOL"
M_MMAP_THRESHOLD = -3  # mallopt's parameter numbers (malloc.h)
M_ARENA_MAX = -8
MMAP_THRESHOLD = 1 << 20
ARENA_MAX = 2


def jemalloc_wanted() -> bool:
    """Whether to ask Arrow for jemalloc: on Linux, whose pyarrow builds include it (elsewhere Arrow
    warns that the backend is unsupported), and only before pyarrow loads (it reads the choice once)."""
    return sys.platform.startswith("linux") and "pyarrow" not in sys.modules


def _mallopt(param: int, value: int) -> None:
    """glibc's `mallopt`; elsewhere (musl, macOS) nothing is done."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - raises AttributeError where the C library is not glibc
        libc.mallopt(param, value)
    except (OSError, AttributeError):
        pass


def limit_arenas(arenas: int = ARENA_MAX) -> None:
    """At most `arenas` glibc heaps instead of 8 per core.

    glibc gives each new thread a heap of its own, and a heap keeps the free space below its top; a
    process that converts unit after unit starts new threads for each, so without a limit its
    memory grows from unit to unit. The large buffers come from Arrow's and DuckDB's allocators,
    so two heaps are little contended."""
    _mallopt(M_ARENA_MAX, arenas)


def fix_mmap_threshold() -> None:
    """Keep glibc's mmap threshold at 1 MiB instead of letting it grow.

    Each free of an mmapped block raises the threshold to that block's size (up to 32 MB); after
    the trace reader's 8 MB chunks, DuckDB's Arrow results (MBs, freed on other threads) would come
    from glibc's heaps, which do not return free space below their top. 1 MiB, not glibc's initial
    128 KiB: DuckDB's 256 KiB buffer blocks then come from the heaps and are reused, not mapped anew.
    """
    _mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
