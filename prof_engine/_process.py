"""Set-up of the worker processes prof-engine starts itself (never of a user's process)."""

from __future__ import annotations

import ctypes
import os
import resource
import signal

_PR_SET_PDEATHSIG = 1


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
