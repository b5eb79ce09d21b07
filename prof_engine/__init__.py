"""prof-engine: a columnar analytics engine over profiling traces.

    import prof_engine
    prof_engine.import_trace(["trace.json.gz"], "run")      # Kineto / Chrome trace → run store
    run = prof_engine.open("run")                          # DuckDB over the run's Parquet
    run.view("op_statistic").pl()                          # msprof-style reports as polars / Arrow
    run.sql("select * from overlap where Type = 'Free'").df()
    run.export(["step_trace"], "out", fmt="csv")
    prof_engine.compare("yesterday", "today").changes().pl()   # what changed, beyond the noise
"""

from __future__ import annotations

from prof_engine.engine import Result, Run, open_run as open  # noqa: A001 - the library's verb
from prof_engine.engine.compare import Comparison, compare
from prof_engine.errors import InputError, ProfEngineError, QueryError, RunError
from prof_engine.importers import import_sources as import_trace

__version__ = "0.1.0"

__all__ = ["Comparison", "InputError", "ProfEngineError", "QueryError", "Result", "Run", "RunError", "compare",
           "import_trace", "open"]
