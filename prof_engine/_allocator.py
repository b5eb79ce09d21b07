"""Which allocator Arrow's buffers come from: jemalloc, chosen before pyarrow loads.

Arrow's default allocator in the pyarrow wheels, mimalloc, keeps pages its threads freed until
the thread that owns them allocates again. An import allocates on several threads (decoding and
conversion on the main thread, Parquet encoding on the staging and the partition writers'
threads) and frees much of it on another thread than the one that allocated it, so freed pages
stay resident: with at most ~20 MB of Arrow buffers live at once, a 100 MB Kineto trace's import
peaked at ~350 MB of RSS. With Arrow's jemalloc, which returns freed pages within its decay time
whichever thread freed them, the same import peaks ~40 MB lower in the same time.

Arrow picks its allocator once, when pyarrow is loaded, from `ARROW_DEFAULT_MEMORY_POOL`;
`pyarrow.set_memory_pool` later changes only what pyarrow's Python API allocates, not what Arrow's
C++ code (Parquet encoding, compute kernels) allocates on its own, and it had no effect on the
peak. So `use_jemalloc()` sets the variable, if the user has not, before prof_engine imports
pyarrow; processes prof-engine starts (import workers) inherit it. Only on Linux, where the
pyarrow wheels and conda-forge builds include jemalloc (elsewhere Arrow would warn that the
backend is unsupported). Where pyarrow was imported first, the user's allocator stays.
"""

from __future__ import annotations

import ctypes
import os
import sys

ENV = "ARROW_DEFAULT_MEMORY_POOL"


def use_jemalloc() -> None:
    """Ask for Arrow's jemalloc allocator, if pyarrow is not loaded yet and the user chose none."""
    if sys.platform.startswith("linux") and "pyarrow" not in sys.modules:
        os.environ.setdefault(ENV, "jemalloc")


M_MMAP_THRESHOLD = -3  # mallopt's parameter numbers (malloc.h)
M_ARENA_MAX = -8
MMAP_THRESHOLD = 1 << 20  # above DuckDB's 256 KiB blocks (glibc's own initial threshold: 128 KiB)
ARENA_MAX = 2


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


def limit_arenas() -> None:
    """At most `ARENA_MAX` glibc heaps (arenas) instead of 8 per core.

    glibc gives each new thread a heap of its own, up to 8 per core, and a heap keeps the free space
    below its top. An import starts threads unit after unit (the reader, the scanner's pool, the
    partition writers), so a process converting unit after unit spread its small blocks over more
    and more heaps: converting 24 rank files of 50 MB in one process, its anonymous memory grew
    from 56 to 117 MiB; with two heaps it stays flat (16 units: 171-185 MiB held between units
    instead of 180-242, peak 265-274 MiB instead of 306-321). The large buffers come from Arrow's
    and DuckDB's own allocators, so two heaps are little contended, but a one-file import was ~3 %
    slower with them: so it is set where a process converts unit after unit (an import of several
    units, an import worker, the collector's writer). The setting stays for the rest of the
    process, as `fix_mmap_threshold`'s does."""
    _mallopt(M_ARENA_MAX, ARENA_MAX)


def fix_mmap_threshold() -> None:
    """Keep glibc's mmap threshold at 1 MiB instead of letting it grow.

    glibc serves blocks above the threshold by mmap and gives them back on free, but each such
    free raises the threshold to the freed block's size (up to 32 MB). After the trace reader's
    8 MB chunks, every block below 8 MB comes from glibc's heaps, one per thread; DuckDB's Arrow
    results (MBs, built on DuckDB's threads, freed on the writers') are such blocks, and a heap
    does not return free space below its top: at the peak of a 100 MB trace's finalisation,
    ~40 MB of RSS was free heap. Setting the threshold fixes it (and stops its growth). glibc only;
    elsewhere (musl, macOS) nothing is done.

    1 MiB, not glibc's initial 128 KiB: DuckDB's buffer blocks (256 KiB) and Arrow's zstd contexts
    then come from the heaps and are reused, where at 128 KiB each was mapped, faulted in and
    unmapped anew (a 329 MB trace's import: 254 k page faults instead of 308 k, 0.1 s less CPU and
    0.09 s less wall in ten alternating runs each, 1 MiB more peak RSS).

    The setting stays for the rest of the process: in an import worker, the next units' 8 MB
    chunks are then mapped and faulted in anew (~+0.1 s of CPU per 100 MB converted). Without it
    a worker grew from unit to unit (16 units of 50 MB: 317-347 MiB instead of 282-296 MiB), and
    `malloc_trim` after each batch of the finalize, which leaves the threshold alone, did not
    stop that growth."""
    _mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
