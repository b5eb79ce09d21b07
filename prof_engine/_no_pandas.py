"""Keeps pandas out of the processes that import traces.

pyarrow imports pandas the first time it converts a Python value (`pa.array`, `pa.scalar`, a
compute function given a Python scalar), to check whether the value is a pandas object. An import
converts many and never hands pyarrow a pandas object; importing pandas cost it ~0.4 s of a
100 MB import's ~2.3 s on two cores (the import competes with its reader and writer threads)
and ~35 MiB of its ~300 MiB peak. While `without_pandas()` is active, `import pandas` fails:
pyarrow then takes pandas as absent for those checks, and tries again when it is asked for
pandas itself (`to_pandas`, `from_pandas`), so a later `Result.df()` still works.

Used where the process is prof-engine's own: import worker processes, the CLI's `import`, the
collector's writer process. Not inside `import_trace` called from a user's program, where
pyarrow would go on taking pandas objects given to `pa.array` for plain sequences (a categorical
Series would become strings) until something asked it for pandas.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


class _Absent:
    """A meta path finder under which `import pandas` raises ModuleNotFoundError."""

    def find_spec(self, name: str, path=None, target=None) -> None:
        if name == "pandas":
            raise ModuleNotFoundError("pandas is not imported while prof-engine imports a trace", name=name)


def block_pandas() -> bool:
    """Make `import pandas` fail from now on in this process (unless pandas is already imported,
    when pyarrow's checks cost nothing). Returns whether it did."""
    if "pandas" in sys.modules or any(isinstance(f, _Absent) for f in sys.meta_path):
        return False
    sys.meta_path.insert(0, _Absent())
    return True


def unblock_pandas() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _Absent)]


@contextmanager
def without_pandas() -> Iterator[None]:
    """`import pandas` fails within (see the module docstring)."""
    blocked = block_pandas()
    try:
        yield
    finally:
        if blocked:
            unblock_pandas()
