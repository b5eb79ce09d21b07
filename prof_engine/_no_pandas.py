"""Keeps pandas out of trace imports.

pyarrow imports pandas the first time it converts a Python value (`pa.array`, `pa.scalar`, a
compute function given a Python scalar), to check whether the value is a pandas object. An import
converts many and never hands pyarrow a pandas object; importing pandas cost a 100 MB import
~0.2-0.4 s of its ~2 s on two cores (it competes with the import's reader and writer threads) and
~30 MiB of its ~300 MiB peak.

While `without_pandas()` is active (around every import: `import_trace`), `import pandas` fails
in every thread of the process, and pyarrow takes pandas as absent for those checks. Afterwards
pyarrow is told again the moment pandas is imported (`_Watch`), so a pandas object handed to
pyarrow later is one (a categorical Series becomes a dictionary array, not strings), and
`to_pandas` works as ever. Processes that only import (import workers, the collector's writer)
block pandas for good (`block_pandas`).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager


class _Absent:
    """A meta path finder under which `import pandas` raises ModuleNotFoundError."""

    def find_spec(self, name: str, path=None, target=None) -> None:
        if name == "pandas":
            raise ModuleNotFoundError("pandas is not imported while prof-engine imports a trace", name=name)


class _Watch:
    """A meta path finder that, when pandas is first imported, has pyarrow import it again once
    it is loaded (pyarrow's check after a failed import happens only where pandas is required)."""

    def find_spec(self, name: str, path=None, target=None):
        if name != "pandas":
            return None
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            load = spec.loader.exec_module

            def exec_module(module) -> None:
                load(module)
                import pyarrow as pa

                try:
                    pa.lib._pandas_api.compat  # noqa: B018 - the property is the retry
                except ImportError:  # a pandas pyarrow does not support: as before
                    pass

            # wrapping this one module's loader is the point: mypy rejects assigning to a method
            spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def block_pandas() -> bool:
    """Make `import pandas` fail from now on in this process (unless pandas is already imported,
    when pyarrow's checks cost nothing). Returns whether it did."""
    if "pandas" in sys.modules or any(isinstance(f, _Absent) for f in sys.meta_path):
        return False
    sys.meta_path.insert(0, _Absent())
    import pyarrow as pa

    # pyarrow tries now, under the block, and takes pandas as absent. Its first try holds a lock
    # that a second try from `_Watch` (within the import pyarrow's try would make) would wait on
    # for ever; its later tries do not take it.
    pa.lib._pandas_api.have_pandas  # noqa: B018 - the property is the try
    return True


@contextmanager
def without_pandas() -> Iterator[None]:
    """`import pandas` fails within; pyarrow is told once pandas is imported after it."""
    blocked = block_pandas()
    try:
        yield
    finally:
        if blocked:
            sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, (_Absent, _Watch))]
            sys.meta_path.insert(0, _Watch())
