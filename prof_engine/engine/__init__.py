"""The engine: open runs in DuckDB, register canonical tables and the views of `queries/`."""

from prof_engine.engine.session import Result, Run, open_run

__all__ = ["Result", "Run", "open_run"]
