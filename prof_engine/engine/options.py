"""How a run is opened: one `RunOptions` value, built and checked in one place."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from prof_engine import _ray
from prof_engine.errors import QueryError


@dataclass(frozen=True, kw_only=True)  # by name only: a field moved is never read as another
class RunOptions:
    """What `prof_engine.open` takes besides the path, checked when it is built (the executor
    options' rules: `_ray.executor_misuse`), so that a `Run` and a `GroupedRun` take it as it is.

    `steps`: only these steps, in the order given; `ranks`: only these ranks (sorted, each once);
    None (or empty) for all. `memory_limit`, `peak_tflops`, `read_only_sql`: see `Run`.
    `executor` ("local" or "ray"), `ranks_per_task`, `address`: compute the rank-scope views by
    groups of ranks (`engine.grouped`); without an executor the run is computed in this process."""

    steps: tuple[int, ...] | None = None
    ranks: tuple[int, ...] | None = None
    memory_limit: str | None = None
    peak_tflops: Mapping[str, float] | None = None
    read_only_sql: bool = False
    executor: str | None = None
    ranks_per_task: int | None = None
    address: str | None = None

    def __post_init__(self) -> None:
        _ray.check_executor(self.executor, self.address, QueryError, self.ranks_per_task)
        # normalised once: a frozen dataclass sets its fields through object.__setattr__
        object.__setattr__(self, "steps", tuple(int(s) for s in self.steps) if self.steps else None)
        object.__setattr__(self, "ranks", tuple(sorted({int(r) for r in self.ranks})) if self.ranks else None)
