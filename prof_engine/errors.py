"""The one error family of prof-engine.

Every problem a user can cause (a missing file, a truncated trace, a run that already exists, an
unknown view) is raised as a subclass of `ProfEngineError` whose message says what went wrong,
where, and how to fix it. The CLI catches this class in one place and prints one line.
"""

from __future__ import annotations


class ProfEngineError(Exception):
    """Base class: a user-facing problem, message ready to print."""

    def _render_traceback_(self) -> list[str]:
        # IPython/Jupyter show this in place of the traceback: one line, as the CLI prints it
        return [f"{type(self).__name__}: {self}"]


class InputError(ProfEngineError):
    """A source file or directory cannot be read as a trace (missing, empty, truncated, corrupt, unknown)."""


class RunError(ProfEngineError):
    """A run directory is missing, incomplete, of an unknown schema version, or already exists."""


class QueryError(ProfEngineError):
    """A view or SQL query cannot be answered (unknown name, SQL error)."""


class ThresholdError(ProfEngineError):
    """A comparison threshold (`--fail-if`) is not in the documented grammar or names nothing compared."""


class CollectError(ProfEngineError):
    """The collector cannot do what it was asked (a bad schedule, config file or command to profile)."""
