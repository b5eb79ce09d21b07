"""The native helpers: the trace scanner (`scan.c`) and the host and lane passes of finalisation
(`host_pass.c`, `lanes.c`), built at install time into the extension module `_ext` (`module.c`
wraps them; `setup.py` builds it), and beside them their Python ports: `fallback.py` (the passes)
and `pychunks.py` (the scanner's chunks of events).

Where it was not built (no C compiler at install), `load()` warns once and returns None, and the
callers take the ports: the same algorithms and results, slower. `PROF_ENGINE_NATIVE=0` chooses
them without a warning (the tests check each port equal to its C twin). `passes.py` chooses for
the passes, `importers/chrome.py` for the chunks (through `importers/scan.py`, the C scanner's face).
"""

from __future__ import annotations

import logging
import os
from functools import cache
from types import ModuleType

log = logging.getLogger(__name__)


@cache
def load() -> ModuleType | None:
    """The extension module `_ext`, or None where it is not built or not wanted (see the module doc)."""
    if os.environ.get("PROF_ENGINE_NATIVE", "1") == "0":
        return None
    try:
        from prof_engine._native import _ext
    except ImportError as e:
        log.warning(
            "prof-engine's native helpers are not built (%s): trace imports run ~3x slower; install a C "
            "compiler (cc, gcc or clang) and reinstall prof-engine",
            e,
        )
        return None
    return _ext
