"""Set-up of the processes prof-engine owns: the CLI, the import workers, the collector's writer.

A library call never tunes its caller's process (environment, allocator, blocked imports): a
user's notebook or training job is theirs. Only these processes call `tune_owned_process`.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal

from prof_engine import _allocator, _no_pandas

_PR_SET_PDEATHSIG = 1
# The variables `tune_owned_process` added to this process's environment (none a user had set),
# left out of the environment of a program prof-engine runs for the user (`collect`).
_added_env: dict[str, str] = {}


def tune_owned_process(*, converts: bool = False, finalizes: bool = False) -> None:
    """Tune a process prof-engine owns; call it first, before anything there imports pyarrow.

    Every such process gets Arrow's jemalloc (`_allocator`) and, under an address-space limit
    (`ulimit -v`), where each thread's stack and malloc arena counts, one malloc arena and few
    library threads. One that `converts` traces unit after unit (`prof-engine import`, an import
    worker, the collector's writer) keeps pandas out (`_no_pandas`) and its glibc heaps few; one that
    `finalizes` units in DuckDB (`prof-engine import`, an import worker) fixes glibc's mmap
    threshold (the writer's many small reads are slower with it). Settings last for the process."""
    limited = address_space_limit() is not None
    wanted = {_allocator.ENV: "jemalloc"} if _allocator.jemalloc_wanted() else {}
    if limited:
        wanted |= {"OPENBLAS_NUM_THREADS": "1", "ARROW_IO_THREADS": "2"}  # read when numpy, pyarrow load
    for name, value in wanted.items():
        if name not in os.environ:
            os.environ[name] = _added_env[name] = value
    if converts:
        _no_pandas.block_pandas()
    if finalizes:
        _allocator.fix_mmap_threshold()
    if converts or limited:
        _allocator.limit_arenas(1 if limited else _allocator.ARENA_MAX)


def untuned_environ() -> dict[str, str]:
    """This process's environment without what `tune_owned_process` added: for a user's program."""
    return {k: v for k, v in os.environ.items() if _added_env.get(k) != v}


def start_worker(parent: int) -> None:
    """Initializer of the worker processes prof-engine spawns to import or merge units (a module
    without pyarrow, so that the worker tunes itself before it loads pyarrow): it dies with its
    parent, never needs pandas, and converts unit after unit."""
    die_with_parent(parent)
    tune_owned_process(converts=True, finalizes=True)


def die_with_parent(parent: int) -> None:
    """Have the kernel kill this process when its parent dies (Linux's PR_SET_PDEATHSIG): a kill -9
    of an import leaves no worker converting on its own, holding the caller's terminal. Exits at
    once if the parent is already gone. Elsewhere a no-op."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (AttributeError, OSError):
        return
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # it died before the signal was armed
        os._exit(1)


def address_space_limit() -> int | None:
    """The process's address-space limit in bytes (`ulimit -v`), or None when there is none. DuckDB
    and Arrow size their memory by the machine's RAM, so under a smaller limit they must be told."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else soft


def address_space_hint() -> str | None:
    """What to tell a user who ran out of memory under an address-space limit; None without one."""
    space = address_space_limit()
    if space is None:
        return None
    return f"this process may use {space >> 20:,} MiB of address space (ulimit -v): raise it (`ulimit -v unlimited`)"


def out_of_memory(e: BaseException) -> bool:
    """Whether `e` says the process ran out of memory or address space: MemoryError, Arrow's and
    DuckDB's errors, the kernel's ENOMEM, a library that could not be mapped, threads that could not
    start (their stacks are address space too), and SystemError under an address-space limit (C
    code that failed to allocate without setting MemoryError). Which of them a limit hits first
    depends on the libraries' versions: pydantic, which typer loads to parse arguments, gave each."""
    text = str(e)
    return (
        isinstance(e, MemoryError)
        or (isinstance(e, OSError) and e.errno == errno.ENOMEM)
        or (isinstance(e, ImportError) and "failed to map segment" in text)
        or (isinstance(e, SystemError) and address_space_limit() is not None)
        or type(e).__name__ in ("ArrowMemoryError", "OutOfMemoryException")
        or "Failed to launch worker thread" in text
        or "can't start new thread" in text
        or "std::bad_alloc" in text
        or text.startswith("Out of Memory Error")
    )


def memory_cause(e: BaseException) -> str:
    """The line of an out-of-memory error that says what failed: numpy's ImportError opens with
    a page of advice and names the unmapped library further down."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    mapped = [ln for ln in lines if "failed to map segment" in ln]
    return (mapped or lines or [type(e).__name__])[0]
