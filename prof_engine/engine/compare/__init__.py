"""Compare runs: a baseline and other runs side by side in one DuckDB session, judged with statistics.

    cmp = prof_engine.compare("yesterday", "today")        # a Result: one row per level, item and run
    cmp.changes().pl()                                       # only what changed, by impact
    cmp.check(["step_time > +5%"])                           # [] or the reasons a CI gate fails

The session: each run's tables and views are created in a schema of their own (`run_0` is the
baseline, then `run_1`, ...) by the same code as `prof_engine.open` (`engine.catalog.attach`).
DuckDB binds the names in a view or macro in the view's own schema, so every view's SQL stays as
it is and reads only its own run. (A `run` column on every table would have meant rewriting every
view to partition by run.) `queries/compare/_samples.sql`, created in each run's schema, says
what is measured; its rows are gathered into `compare_samples` with a `run` column, and
`queries/compare/_shift.sql` and `_report.sql` compute the statistics over it.

The statistics rule (also in `Comparison.method`, printed with every comparison): samples are
one per rank, device and step; each side has a median and a spread (1.4826 × MAD). The change is
the Hodges–Lehmann shift — the median of the differences candidate − baseline between samples of
the same rank (ranks of a job do different work; runs that share no rank are pooled) — with a
confidence interval (default 95 %) from the rank-stratified Mann–Whitney test. An item with too
few samples for that interval is `inconclusive`, never judged on its estimate alone. The same
statistic gives each item a p-value against the noise floor, max(noise_floor × |baseline median|,
1 µs per step; 1 MB for memory); Benjamini–Hochberg adjusts them within each level, and a change
counts only when its q-value is at most 1 − confidence and its whole interval lies beyond the
floor, so run-to-run noise reads `no change` and hundreds of items yield few false findings; an
estimate beyond twice the floor that is not significant reads `inconclusive`, not `no change`. An op
whose input shapes changed is matched by name (`shapes changed`). Runs with no item in common
are an error, not "no significant change". The algorithm is spelled out in
queries/compare/_shift.sql and _report.sql.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from prof_engine._resources import data_dir
from prof_engine.engine.catalog import attach
from prof_engine.engine.connection import connect, query_error
from prof_engine.engine.result import Result
from prof_engine.engine.session import Run
from prof_engine.engine.views import ViewDef, parse
from prof_engine.errors import QueryError
from prof_engine.store.location import run_path
from prof_engine.store.manifest import read_manifest

if TYPE_CHECKING:
    from prof_engine.engine.compare.thresholds import Threshold

LEVELS = ("step", "op_type", "op", "api", "communication", "memory")
RunLike = Path | str | Run


@dataclass(frozen=True)
class Settings:
    """How a difference is judged: confidence of the interval, noise floor, sample cap."""

    confidence: float = 0.95
    noise_floor: float = 0.02  # share of the baseline median
    min_us: float = 1.0  # smallest time change that counts, µs per step
    min_mb: float = 1.0  # smallest memory change that counts, MB
    max_samples: int = 200  # per side and item; more are thinned (the interval only widens)

    def __post_init__(self) -> None:
        if not 0.5 <= self.confidence < 1:
            raise QueryError(f"confidence {self.confidence} is out of range; use a value in [0.5, 1), e.g. 0.95")
        if not 0 <= self.noise_floor < 10:
            raise QueryError(f"noise floor {self.noise_floor} is out of range; use a share such as 0.02 (2 %)")

    @property
    def z(self) -> float:
        return statistics.NormalDist().inv_cdf(1 - (1 - self.confidence) / 2)

    def method(self) -> str:
        """The rule, in one paragraph, as printed with every comparison."""
        return (
            f"Hodges–Lehmann shift (median of the run − baseline differences between samples of the same "
            f"rank) with a {self.confidence:.0%} confidence interval from the rank-stratified Mann–Whitney test, "
            f"over one sample per rank, device and step; an item with too few samples for that interval is "
            f"inconclusive. A change counts only when its whole interval lies beyond the noise floor "
            f"max({self.noise_floor:.0%} of the baseline median, {self.min_us:g} µs/step; {self.min_mb:g} MB for "
            f"memory) and the Benjamini–Hochberg q-value of its p-value (same test, against the floor), "
            f"adjusted within each level, is at most {1 - self.confidence:.0%}: a false discovery rate of "
            f"{1 - self.confidence:.0%} per level. Ops whose input shapes changed are matched by name."
        )


@cache
def _sql(name: str) -> ViewDef:
    return parse(data_dir("queries") / "compare" / f"{name}.sql")


def _run_source(run: RunLike) -> tuple[Path, list[int] | None]:
    if isinstance(run, Run):
        return run.path, run.steps
    return run_path(run), None  # a URI: read in place from object storage


def _labels(paths: Sequence[Path]) -> list[str]:
    """Run names for the output: directory names, or the paths as given where names repeat."""
    names = [p.name or str(p) for p in paths]
    names = [n if names.count(n) == 1 else str(p) for n, p in zip(names, paths)]
    return [n if names.count(n) == 1 else f"{n} ({i})" for i, n in enumerate(names)]


class Batch:
    """Runs side by side in one DuckDB session: run `i` in schema `run_i` (0: the baseline).

    `batch.sql("select * from run_1.step_trace")` queries any of them; `compare()` uses it.
    """

    def __init__(self, runs: Sequence[RunLike]) -> None:
        sources = [_run_source(r) for r in runs]
        manifests = [read_manifest(path) for path, _ in sources]  # every run is one before any is attached
        self.labels = _labels([p for p, _ in sources])
        self.manifests = manifests
        self.con = connect()
        try:
            for i, ((path, steps), manifest) in enumerate(zip(sources, manifests)):
                self.con.execute(f"CREATE SCHEMA run_{i}")
                self.con.execute(f"SET schema = 'run_{i}'")
                attach(self.con, path, manifest, steps)
                self._execute(_sql("_samples"))
            self.con.execute("SET schema = 'main'")
        except BaseException:
            self.con.close()
            raise

    def __enter__(self) -> Batch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.con.close()

    def _execute(self, view: ViewDef) -> None:
        try:
            self.con.execute(view.statements())
        except duckdb.Error as e:
            raise QueryError(f"queries/compare/{view.path.name}: {e}") from None

    def sql(self, query: str, params: Sequence[object] | None = None) -> Result:
        """Run SQL over the runs' schemas (`run_0.step_trace`, ...); return the result."""
        try:
            return Result(self.con.sql(query, params=list(params) if params is not None else None).to_arrow_table())
        except duckdb.Error as e:
            raise query_error(e) from None

    def report(self, levels: Sequence[str], settings: Settings) -> pa.Table:
        """The comparison of every run with run 0 (columns: queries/compare/_report.sql)."""
        self.con.execute("CREATE OR REPLACE TABLE compare_runs (run INTEGER, label VARCHAR)")
        self.con.executemany("INSERT INTO compare_runs VALUES (?, ?)", list(enumerate(self.labels)))
        self._gather([lv for lv in LEVELS if lv in levels])
        self._execute(_sql("_shift"))
        self._execute(_sql("_report"))
        s = settings
        query = self.con.sql(
            "SELECT * FROM compare_report(?, ?, ?, ?, ?)",
            params=[s.z, s.noise_floor, s.min_us, s.min_mb, s.max_samples],
        )
        return query.to_arrow_table()

    def _gather(self, levels: list[str]) -> None:
        """Each run's samples into `main.compare_samples`, its macros called in its own schema."""
        try:
            for i in range(len(self.labels)):
                self.con.execute(f"SET schema = 'run_{i}'")
                if i == 0:
                    self.con.execute(
                        "CREATE OR REPLACE TABLE main.compare_samples AS "
                        "SELECT 0 AS run, * FROM _compare_step() WITH NO DATA"
                    )
                for level in levels:  # names from LEVELS, never from input
                    self.con.execute(f"INSERT INTO main.compare_samples SELECT {i}, * FROM _compare_{level}()")
        except duckdb.Error as e:
            raise QueryError(f"queries/compare/_samples.sql: {str(e).splitlines()[0]}") from None
        finally:
            self.con.execute("SET schema = 'main'")


@dataclass
class _Meta:
    baseline: str
    runs: list[str]
    settings: Settings
    levels: tuple[str, ...] = field(default=LEVELS)
    warnings: list[str] = field(default_factory=list)


class Comparison(Result):
    """The comparison of runs with a baseline: a `Result` (`.pl()`, `.arrow()`, `.df()`) with one row per
    level, item and run (columns documented in queries/compare/_report.sql), plus what it was made of."""

    def __init__(self, table: pa.Table, meta: _Meta) -> None:
        super().__init__(table)
        self.baseline = meta.baseline
        self.runs = meta.runs
        self.settings = meta.settings
        self.levels = meta.levels
        self.warnings = meta.warnings  # lines to show before the comparison (runs of unlike devices)

    @property
    def method(self) -> str:
        """Which test and which rule decided each status."""
        return self.settings.method()

    def changes(self) -> Result:
        """Only the rows that changed — status neither `no change` nor `inconclusive` — in the same order
        (by level, then impact)."""
        import pyarrow.compute as pc

        from prof_engine.engine.compare.text import UNCHANGED

        return Result(self.arrow().filter(pc.invert(pc.is_in(self.arrow()["Status"], value_set=pa.array(UNCHANGED)))))

    def wide(self) -> Result:
        """One row per item, a column group per run (`<run> Median`, `<run> Delta(%)`, `<run> Status`)."""
        from prof_engine.engine.compare.text import wide

        return Result(wide(self))

    def check(self, thresholds: Sequence[str | Threshold]) -> list[str]:
        """The reasons the thresholds fail (grammar: `prof_engine.engine.compare.thresholds`); [] = pass."""
        from prof_engine.engine.compare.thresholds import check

        return check(self, thresholds)

    def undecided(self, thresholds: Sequence[str | Threshold]) -> list[str]:
        """The thresholds no row fails but an `inconclusive` row might, with how many samples would
        decide each (`thresholds.undecided`); [] when every threshold is decided."""
        from prof_engine.engine.compare.thresholds import undecided

        return undecided(self, thresholds)

    def markdown(self, top: int = 10) -> str:
        """The comparison as Markdown tables, one per level (top `top` rows by impact; 0: all)."""
        from prof_engine.engine.compare.text import markdown

        return markdown(self, top)

    def __repr__(self) -> str:
        changed = len(self.changes())
        return f"<Comparison of {', '.join(self.runs)} with {self.baseline}: {len(self)} rows, {changed} changed>"


def compare(
    baseline: RunLike,
    *candidates: RunLike,
    levels: Sequence[str] = LEVELS,
    confidence: float = 0.95,
    noise_floor: float = 0.02,
) -> Comparison:
    """Compare each candidate run with the baseline at every level (see the module docstring); QueryError
    when a run shares no item with the baseline.

    `levels`: any of step, op_type, op, api, communication, memory. `confidence`: of the intervals;
    1 − confidence is also the false discovery rate allowed in each level.
    `noise_floor`: the share of the baseline median below which a change is `no change`.
    """
    if not candidates:
        raise QueryError("compare needs a baseline and at least one other run")
    unknown = [lv for lv in levels if lv not in LEVELS]
    if unknown or not levels:
        raise QueryError(f"unknown level {', '.join(unknown) or '(none)'}; levels: {', '.join(LEVELS)}")
    settings = Settings(confidence=confidence, noise_floor=noise_floor)
    with Batch([baseline, *candidates]) as batch:
        table = batch.report(levels, settings)
        warnings = _unlike_devices(batch.labels, batch.manifests)
        meta = _Meta(batch.labels[0], batch.labels[1:], settings, tuple(levels), warnings)
    _require_common(table, meta)
    return Comparison(table, meta)


def _accelerators(manifest: dict) -> list[str]:
    return sorted({d["device"] for d in manifest.get("devices", []) if d.get("device") != "host"})


def _unlike_devices(labels: Sequence[str], manifests: Sequence[dict]) -> list[str]:
    """One line per run that recorded accelerator activity where the baseline recorded none, or
    none where it did: its device items read as added or removed, and its step time is measured on
    another clock (the host's, not a device's), so a change there says nothing about the program."""
    base = _accelerators(manifests[0])
    lines = []
    for label, manifest in zip(labels[1:], manifests[1:]):
        mine = _accelerators(manifest)
        if bool(base) != bool(mine):
            gpu, cpu = (labels[0], label) if base else (label, labels[0])
            lines.append(
                f"{cpu} recorded no accelerator activity and {gpu} did ({', '.join(base or mine)}): a CPU-only run "
                f"against a GPU run compares different measurements; record both with the same activities"
            )
    return lines


def _require_common(table: pa.Table, meta: _Meta) -> None:
    """QueryError unless every run shares an item with the baseline: with nothing on both sides there
    is nothing to compare, and "no significant change" would be a claim without data."""
    rows = table.select(["Run", "Status"]).to_pylist()
    for run in meta.runs:
        mine = [r["Status"] for r in rows if r["Run"] == run]
        if any(status not in ("added", "removed") for status in mine):
            continue
        levels = ", ".join(meta.levels)
        only_base, only_run = mine.count("removed"), mine.count("added")
        why = (
            "neither has any"
            if not only_base and not only_run
            else f"{run} has none"
            if not only_run
            else f"{meta.baseline} has none"
            if not only_base
            else f"{only_base} only in {meta.baseline}, {only_run} only in {run}"
        )
        raise QueryError(
            f"{run} and {meta.baseline} have nothing in common to compare: no item of the levels "
            f"{levels} is in both ({why}); check that both runs recorded the same program and that "
            f"their ops are classified (prof-engine info RUN)"
        )
