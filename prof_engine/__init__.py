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

import importlib
from typing import TYPE_CHECKING, Any

from prof_engine.errors import (
    CollectError,
    InputError,
    ProfEngineError,
    QueryError,
    RunError,
)

__version__ = "0.1.0"

# Imported on first use: `import prof_engine` (as `from prof_engine import mstx` in a training
# script, or the CLI's --help) stays cheap, and pyarrow and DuckDB (~0.3 s, ~90 MB) load with the
# part that needs them. Name -> (module, attribute; None: the module itself).
_LAZY: dict[str, tuple[str, str | None]] = {
    "OpRecord": ("prof_engine.collect.writer", "OpRecord"),
    "Profiler": ("prof_engine.collect.profiler", "Profiler"),
    "export_summaries": ("prof_engine.collect.profiler", "export_summaries"),
    "ProfilerAction": ("prof_engine.collect.schedule", "ProfilerAction"),
    "schedule": ("prof_engine.collect.schedule", "schedule"),
    "ProfilerActivity": ("prof_engine.collect.config", "ProfilerActivity"),
    "ProfilerLevel": ("prof_engine.collect.config", "ProfilerLevel"),
    "mstx": ("prof_engine.collect.mstx", None),
    "Result": ("prof_engine.engine", "Result"),
    "Run": ("prof_engine.engine", "Run"),
    "open": ("prof_engine.engine", "open_run"),  # the library's verb
    "Comparison": ("prof_engine.engine.compare", "Comparison"),
    "compare": ("prof_engine.engine.compare", "compare"),
    "import_trace": ("prof_engine.vendor_check", "import_trace"),  # import_sources, then the vendor's summaries checked
    "upgrade": ("prof_engine.store.upgrade", "upgrade_run"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'prof_engine' has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = importlib.import_module(module)
    value = getattr(value, attr) if attr else value
    globals()[name] = value  # once: the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


if TYPE_CHECKING:  # what the names are, for type checkers and editors
    from prof_engine.collect import (
        OpRecord,
        Profiler,
        ProfilerAction,
        ProfilerActivity,
        ProfilerLevel,
        export_summaries,
        mstx,
        schedule,
    )
    from prof_engine.engine import Result, Run
    from prof_engine.engine import open_run as open
    from prof_engine.engine.compare import Comparison, compare
    from prof_engine.store.upgrade import upgrade_run as upgrade
    from prof_engine.vendor_check import import_trace

__all__ = [
    "CollectError",
    "Comparison",
    "InputError",
    "OpRecord",
    "ProfEngineError",
    "Profiler",
    "ProfilerAction",
    "ProfilerActivity",
    "ProfilerLevel",
    "QueryError",
    "Result",
    "Run",
    "RunError",
    "compare",
    "export_summaries",
    "import_trace",
    "mstx",
    "open",
    "schedule",
    "upgrade",
]
