"""The `prof-engine` console script: the CLI, loaded under a Ctrl-C guard (an interrupt while its
modules load exits 130 without a traceback, as one while it runs does)."""

from __future__ import annotations

import sys


def _fit_address_space() -> None:
    """Under an address-space limit (`ulimit -v`) every thread's stack and malloc arena counts, and
    a thread that cannot get them aborts the process (glibc: "cannot allocate memory for
    thread-local data"). So the CLI then keeps one malloc arena and few library threads: a 30 MB
    trace imports under 600 MB, and under less it fails with one line instead of an abort."""
    import os

    from prof_engine._process import address_space_limit

    if address_space_limit() is None:
        return
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # read when numpy, pyarrow load
    os.environ.setdefault("ARROW_IO_THREADS", "2")
    from prof_engine._allocator import M_ARENA_MAX, _mallopt

    _mallopt(M_ARENA_MAX, 1)


def main() -> None:
    _fit_address_space()
    try:
        from prof_engine.cli import main as cli_main
    except KeyboardInterrupt:
        print("Interrupted", file=sys.stderr)
        sys.exit(130)
    except (MemoryError, ImportError) as e:  # a library that could not be mapped: out of address space
        if isinstance(e, ImportError) and "failed to map segment" not in str(e):
            raise
        print(f"Error: out of memory while starting ({str(e) or type(e).__name__}); "
              f"raise the address-space limit (`ulimit -v`)",
              file=sys.stderr)
        sys.exit(1)
    cli_main()
