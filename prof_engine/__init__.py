"""prof-engine: a columnar analytics engine over profiling traces.

    import prof_engine
    prof_engine.import_trace(["trace.json.gz"], "run")      # Kineto / Chrome trace → run store
    run = prof_engine.open("run")                          # DuckDB over the run's Parquet
    run.view("op_statistic").pl()                          # msprof-style reports as polars / Arrow
    run.sql("select * from overlap where Type = 'Free'").df()
    run.export(["step_trace"], "out", fmt="csv")
    prof_engine.compare("yesterday", "today").changes().pl()   # what changed, beyond the noise

    with prof_engine.Profiler("run", schedule=prof_engine.schedule(wait=1, warmup=1, active=3)) as prof:
        ...; prof.step()                                   # record a program step by step
    with prof_engine.mstx.range("forward"): ...           # markers (free when nothing records)
"""

from __future__ import annotations

from prof_engine import _allocator

_allocator.use_jemalloc()  # before anything imports pyarrow: see prof_engine._allocator

from prof_engine.collect import (
    OpRecord, Profiler, ProfilerAction, ProfilerActivity, ProfilerLevel, export_summaries, mstx, schedule,
)
from prof_engine.engine import Result, Run, open_run as open  # noqa: A001 - the library's verb
from prof_engine.engine.compare import Comparison, compare
from prof_engine.errors import CollectError, InputError, ProfEngineError, QueryError, RunError
from prof_engine.importers import import_sources as import_trace

__version__ = "0.1.0"

__all__ = ["CollectError", "Comparison", "InputError", "OpRecord", "ProfEngineError", "Profiler", "ProfilerAction", "ProfilerActivity",
           "ProfilerLevel", "QueryError", "Result", "Run", "RunError", "compare", "export_summaries", "import_trace", "mstx", "open",
           "schedule"]
