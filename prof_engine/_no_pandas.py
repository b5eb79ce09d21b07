"""Keeps pandas out of the processes prof-engine owns that import traces.

pyarrow imports pandas the first time it converts a Python value (`pa.array`, `pa.scalar`, a
compute function given a Python scalar), to check whether the value is a pandas object. An import
converts many and never hands pyarrow a pandas object, and loading pandas costs a 100 MB import
~0.3 s and ~30 MiB. So the processes prof-engine owns that import (`prof-engine import`, the
import workers, the collector's writer: `_process.tune_owned_process`) block pandas for good; a
library call never does, since the block holds in every thread of the process.
"""

from __future__ import annotations

import sys


class _Absent:
    """A meta path finder under which `import pandas` raises ModuleNotFoundError."""

    def find_spec(self, name: str, path=None, target=None) -> None:
        if name == "pandas":
            raise ModuleNotFoundError("pandas is not imported in a prof-engine import process", name=name)


def block_pandas() -> bool:
    """Make `import pandas` fail from now on in this process (unless pandas is already imported,
    when pyarrow's checks cost nothing). Returns whether it did."""
    if "pandas" in sys.modules or any(isinstance(f, _Absent) for f in sys.meta_path):
        return False
    sys.meta_path.insert(0, _Absent())  # pyarrow's first try then fails, and it takes pandas as absent
    return True
