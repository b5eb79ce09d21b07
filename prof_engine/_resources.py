"""Where the data files that ship with prof-engine live (`schemas/`, `queries/`).

A wheel carries them inside the package (`prof_engine/_data/…`); a source checkout or an editable
install reads them from the repository root, where they are edited.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


@cache
def data_dir(name: str) -> Path:
    """Directory `name` (``schemas`` or ``queries``) of this installation."""
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"prof-engine installation is incomplete: no {name}/ directory beside {_PACKAGE}")
