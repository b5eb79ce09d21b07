"""Open a run in DuckDB: canonical tables as views over its Parquet, then the views of `queries/`."""

from __future__ import annotations

import difflib
import importlib
import math
import os
import re
import shutil
import tempfile
import uuid
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from prof_engine import schema
from prof_engine._process import address_space_limit
from prof_engine._sql import literal, no_progress_bar, size_bytes
from prof_engine.engine.options import RunOptions
from prof_engine.engine.views import ViewDef, closure, defining, definitions, public_views, reads
from prof_engine.errors import QueryError, RunError
from prof_engine.store.location import is_remote, register, run_path
from prof_engine.store.manifest import (
    cann_args,
    finalised,
    host_only_ranks_possible,
    quality_rules,
    read_manifest,
    restrict,
    run_devices,
    run_findings,
    run_ranks,
)
from prof_engine.store.partitions import NULL_PARTITION, hive_types, rank_dir


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _optional(module: str, install: str):
    """`module`, imported; a missing one is one line naming what to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise QueryError(f"{module} is not installed: pip install '{install}'") from None


class Result:
    """The answer to a query: one result type, converted on demand (`.arrow()`, `.pl()`, `.df()`)."""

    def __init__(self, table: pa.Table, total: int | None = None) -> None:
        self._table = table
        # rows of the whole answer, where this holds only its first ones (`Run.summary`'s tables)
        self.total = table.num_rows if total is None else total

    @property
    def columns(self) -> list[str]:
        return self._table.column_names

    def __len__(self) -> int:
        return self._table.num_rows

    def arrow(self) -> pa.Table:
        return self._table

    def pl(self):
        """The rows as a polars DataFrame (polars is an optional extra: `prof-engine[polars]`)."""
        return _optional("polars", "prof-engine[polars]").from_arrow(self._table)

    def df(self):
        """The rows as a pandas DataFrame (pandas is not a dependency: `pip install pandas`)."""
        _optional("pandas", "pandas")
        return self._table.to_pandas()

    def rows(self) -> list[tuple]:
        cols = [c.to_pylist() for c in self._table.columns]
        return list(zip(*cols))

    def __repr__(self) -> str:
        return f"<Result {self._table.num_rows} rows × {self._table.num_columns} columns: {', '.join(self.columns)}>"

    def _repr_html_(self, max_rows: int = 20) -> str:
        """A table of the first `max_rows` rows, as Jupyter shows a result (`tables.html_table`:
        every name and value escaped)."""
        from prof_engine.engine.tables import html_table

        head = self._table.slice(0, max_rows)
        more = f", first {head.num_rows} shown" if head.num_rows < self._table.num_rows else ""
        return f"{html_table(head)}<p>{self._table.num_rows} rows × {self._table.num_columns} columns{more}</p>"


# What a query session's DuckDB may hold before it spills (`connect`): at most this, or DuckDB's own
# default (80 % of RAM) where that is less. A full CSV export of `kernel_launch` at 10 M tasks
# peaked at 4.8 GB under DuckDB's default and at 2.4 GB under this, in the same time; the views'
# targets were not slower.
QUERY_MEMORY_LIMIT = "2GB"
MEMORY_LIMIT_ENV = "PROF_ENGINE_MEMORY_LIMIT"
# Peak TFLOPS the user gives per precision, for devices the datasheet table (queries/_device_peaks.sql)
# does not list or lists otherwise: `bf16=989.4,fp8=1979`.
PEAK_TFLOPS_ENV = "PROF_ENGINE_PEAK_TFLOPS"
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")
# Files of queries/ that attaching a run whole (`compare`) does not run: their table macros are bound
# at creation (a macro has no deferred binding), and binding `show`'s summaries, which read most of
# the views, took ~0.13 s of every attach. `Run.summary` creates them at its first call.
ON_DEMAND = ("_summary",)
# Files of queries/ that only finalisation uses (the lanes' macros: every run stores the lanes); not
# created in a run's session, whatever its queries name (~19 ms).
FINALIZE_ONLY = ("_lanes",)

# Titles of `Run.summary`'s tables that other faces look for (the report charts the steps).
QUALITY_TITLE = "Data quality (data_quality: what the import had to guess)"
STEPS_TITLE = "Step breakdown (µs)"


def given_peaks(peak_tflops: Mapping[str, float | str] | None = None) -> dict[str, float]:
    """The peaks the user gives, TFLOPS per precision: `peak_tflops`, else what
    `PROF_ENGINE_PEAK_TFLOPS` says (`bf16=989.4,fp8=1979`), else none. They replace the datasheet's
    for every device of a run (`_device_peaks`)."""
    where = "peak_tflops"
    if peak_tflops is None:
        text = os.environ.get(PEAK_TFLOPS_ENV, "").strip()
        if not text:
            return {}
        where, peak_tflops = PEAK_TFLOPS_ENV, {}
        for part in text.split(","):
            key, sep, number = part.partition("=")
            if not sep:
                raise QueryError(f"{PEAK_TFLOPS_ENV}: {part.strip()!r} is not precision=TFLOPS (e.g. bf16=989.4)")
            peak_tflops[key.strip()] = number.strip()
    peaks = {}
    for key, value in peak_tflops.items():
        precision = str(key).lower()
        if precision not in PRECISIONS:
            raise QueryError(f"{where}: {key!r} is not a precision ({', '.join(PRECISIONS)})")
        try:
            tflops = float(value)
        except (TypeError, ValueError):
            raise QueryError(f"{where}: {key}={value!r} is not a number of TFLOPS") from None
        if not math.isfinite(tflops) or tflops <= 0:
            raise QueryError(f"{where}: {key}={value} is not a positive number of TFLOPS")
        peaks[precision] = tflops
    return peaks


def connect(memory_limit: str | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection for runs and their views: insertion order kept, no progress bar. What a
    query spills goes to a directory of its own under the system's temporary directory, which
    DuckDB creates on the first spill and removes on close (its default, `.tmp` in the current
    directory, would litter the user's directory, or fail where it is read-only).

    DuckDB's memory is capped at `memory_limit` (a size such as "4GB"), else at what
    `PROF_ENGINE_MEMORY_LIMIT` says, else at `QUERY_MEMORY_LIMIT` or DuckDB's default where that
    is less: a query over a run of any size spills rather than take most of the machine."""
    con = duckdb.connect(
        config={
            "preserve_insertion_order": True,
            "temp_directory": str(Path(tempfile.gettempdir()) / f"prof-engine-{uuid.uuid4().hex}"),
        }
    )
    no_progress_bar(con)
    limit, where = memory_limit, "memory_limit"
    if limit is None and os.environ.get(MEMORY_LIMIT_ENV):
        limit, where = os.environ[MEMORY_LIMIT_ENV], MEMORY_LIMIT_ENV
    try:
        if limit is None:
            cap, text = size_bytes(QUERY_MEMORY_LIMIT), QUERY_MEMORY_LIMIT
            assert cap is not None  # QUERY_MEMORY_LIMIT is in a form size_bytes reads
            if (space := address_space_limit()) is not None and space // 4 < cap:  # under `ulimit -v`
                cap = max(space // 4, 16 << 20)  # DuckDB spills, not aborts
                text = f"{cap >> 20}MiB"
            default = size_bytes(con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])
            if default is None or default > cap:  # unread: more than any cap
                con.execute(f"SET memory_limit = '{text}'")
        else:
            con.execute("SET memory_limit = ?", [str(limit)])
    except duckdb.Error as e:
        con.close()
        raise QueryError(f"{where}: {limit!r} is not a memory size such as '4GB' ({str(e).splitlines()[0]})") from None
    return con


# PRAGMAs that only read the catalog or the build: the rest change settings or state, and the
# statements --safe SQL may run are an allow-list (`refusal`), so an unknown one is refused.
READING_PRAGMAS = frozenset(
    "show_tables show_tables_expanded table_info show version platform database_list database_size "
    "functions collations storage_info".split()
)


def _tokens(sql: str) -> list[tuple[int, str]]:
    """(offset, text) of each token of `sql` but comments, by DuckDB's own tokenizer."""
    found = [(start, kind) for start, kind in duckdb.tokenize(sql)]
    ends = [start for start, _ in found[1:]] + [len(sql)]
    return [
        (start, sql[start:end].strip()) for (start, kind), end in zip(found, ends) if kind != duckdb.token_type.comment
    ]


def _kind(con: duckdb.DuckDBPyConnection, sql: str) -> str | None:
    """The kind of statement `sql` is ("SELECT", "COPY"...), where it is exactly one; else None.
    SHOW, DESCRIBE and SUMMARIZE are SELECTs."""
    try:
        statements = con.extract_statements(sql)
        return str(statements[0].type).rsplit(".", 1)[-1] if len(statements) == 1 else None
    except (duckdb.Error, ValueError):  # ValueError: a kind DuckDB's Python API has no name for
        return None


def _explained(con: duckdb.DuckDBPyConnection, sql: str) -> str:
    """The kind of statement the EXPLAIN statement `sql` explains: what follows `EXPLAIN [ANALYZE]`
    and its options in parentheses, if any ("SELECT" where either reading parses as one SELECT;
    "a statement" where neither parses alone). EXPLAIN ANALYZE runs its statement: a COPY in it writes."""
    kinds = [kind for _, kind in _explained_statements(con, sql)]
    return "SELECT" if "SELECT" in kinds else next((k for k in kinds if k), "a statement")


def _explained_statements(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple[str, str | None]]:
    """The readings of what the EXPLAIN statement `sql` explains, each with its kind (`_kind`):
    what follows `EXPLAIN [ANALYZE]`, and what follows its options in parentheses, if any."""
    tokens = _tokens(sql)
    at = 1 + (len(tokens) > 1 and tokens[1][1].upper() in ("ANALYZE", "ANALYSE"))
    starts = [tokens[at][0]] if at < len(tokens) else []
    if starts and tokens[at][1] == "(":  # `EXPLAIN (FORMAT json) SELECT`: what follows the options
        depth = 0
        for k in range(at, len(tokens)):
            depth += {"(": 1, ")": -1}.get(tokens[k][1], 0)
            if depth == 0:
                starts += [tokens[k + 1][0]] if k + 1 < len(tokens) else []
                break
    return [(sql[start:], _kind(con, sql[start:])) for start in starts]


def refusal(con: duckdb.DuckDBPyConnection, query: str) -> str | None:
    """Why `query` is not read-only SQL (the kind of its first statement that is not), or None:
    every statement is a SELECT, an EXPLAIN [ANALYZE] of a SELECT, or a PRAGMA of READING_PRAGMAS.
    An allow-list over DuckDB's own parse: a statement kind it does not know is refused too."""
    for statement in con.extract_statements(query):
        try:
            kind = statement.type
        except ValueError:  # a kind DuckDB's Python API has no name for (`UPDATE EXTENSIONS`)
            return "this statement"
        name = str(kind).rsplit(".", 1)[-1]
        if kind == duckdb.StatementType.SELECT:
            continue
        if kind == duckdb.StatementType.EXPLAIN:
            if (explained := _explained(con, statement.query)) == "SELECT":
                continue
            return f"EXPLAIN of {explained}"
        if kind == duckdb.StatementType.PRAGMA:
            tokens = _tokens(statement.query)
            # `PRAGMA name` or `PRAGMA name(args)`; `PRAGMA name = value` sets
            if (
                len(tokens) > 1
                and tokens[1][1].lower() in READING_PRAGMAS
                and (len(tokens) == 2 or tokens[2][1] in ("(", ";"))
            ):
                continue
            return "a PRAGMA that is not a read of the catalog"
        return name
    return None


def sandbox(con: duckdb.DuckDBPyConnection, files: Iterable[str], *also: Path) -> None:
    """Lock `con` for SQL from others, once the run's tables exist: DuckDB may open only `files`
    (the run's Parquet files its views read: no directory, so no new file anywhere, and not the
    manifest) and the directories `also` (files derived from it, in a private temporary directory);
    no extension installed or loaded, no database attached, and no setting changed after this.
    DuckDB can still write a file it may read, so `Run.sql` lets only reads through (`refusal`);
    what it spills goes to its own private temporary directory, which DuckDB allows itself."""
    con.execute("SET allowed_paths = ?", [sorted(set(files))])
    con.execute("SET allowed_directories = ?", [[f"{d.resolve()}/" for d in also]])
    con.execute("SET enable_external_access = false")
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET lock_configuration = true")


# Lines of DuckDB's hints a query's error keeps after its first: "Did you mean", candidate
# columns, the query's line with a caret under the error.
HINT_LINES = 4
_MISSING_TABLE = re.compile(r"Catalog Error: Table with name (.+?) does not exist")
# What DuckDB's binder lacks: a table or view, a scalar or table function (`Run._bind`)
_MISSING_NAME = re.compile(r'Catalog Error: [A-Za-z ]*with name "?([^"\s!]+)"? does not exist')


def query_error(e: Exception, hints: bool = False) -> QueryError:
    """A DuckDB error in a query as the line a user sees, with DuckDB's hints under it where
    `hints` (a user's own SQL). Running out of the session's memory (a DuckDB error, or an OSError
    where the rows streamed through Arrow) says how to give it more."""
    lines = [line.rstrip() for line in str(e).splitlines() if line.strip()] or [type(e).__name__]
    first = lines[0]
    if isinstance(e, duckdb.OutOfMemoryException) or first.startswith("Out of Memory Error"):
        return QueryError(
            f"the query ran out of memory within the session's limit ({first}); set "
            f"{MEMORY_LIMIT_ENV} to allow more (e.g. 8GB), or query fewer steps (--step)"
        )
    more = lines[1:] if hints else []
    if hints and (missing := _MISSING_TABLE.match(first)):
        more = [line for line in more if not line.startswith("Did you mean")] + [_suggest(missing[1])]
    return QueryError("\n".join([f"SQL error: {first}", *more[:HINT_LINES]]))


def _suggest(name: str) -> str:
    """A hint for a table `name` that does not exist: the run's views and tables it is close to,
    else those with a word it starts with (`kernels`: kernel_details...). Not DuckDB's own guess:
    it knows only what the session holds, and views are created as queries first name them
    (`Run.prepare`), so for `op_sumary` it never guessed op_summary."""
    known = sorted({v.name for v in public_views()} | set(schema.tables()))
    wanted = name.strip('"').lower()
    close = (
        difflib.get_close_matches(wanted, known, n=3, cutoff=0.75)
        or [k for k in known if any(len(w) >= 4 and wanted.startswith(w) for w in k.split("_"))][:3]
    )
    if close:
        return "Did you mean " + " or ".join(f'"{c}"' for c in close) + "?"
    return "`prof-engine views` lists the run's views"


class Run:
    """A run opened for querying: `run.view("op_statistic")`, `run.sql("select ...")`.

    `steps` restricts every table (and so every view) to those steps; partitions of other steps
    are never read. `ranks` restricts the run to those ranks: its tables, and the manifest's
    (`run_ranks`, `run_devices`, `run_findings`, `manifest`), hold only theirs, and only their
    directories of the run are listed and read (`<table>/rank=<r>/`); a view of scope `rank` then
    gives the whole run's rows of those ranks (see `engine.views`). `memory_limit` caps DuckDB's
    memory (a size such as "4GB"; default: see `connect`); what does not fit spills to a
    temporary directory. `peak_tflops` gives the
    devices' peaks per precision (`{"bf16": 989.4}`; default: `PROF_ENGINE_PEAK_TFLOPS`), in
    place of the datasheet figures op_flops and flops_summary measure against. The views of
    `queries/` are created in the session when a query first names them (`prepare`): creating all
    fifty took ~0.25 s of every open, whichever view was then asked for. `read_only_sql` makes
    `sql` safe to serve to others: only SELECT statements (EXPLAIN [ANALYZE] of one, PRAGMAs that read
    the catalog: `refusal`), no file but the run's Parquet readable, nothing written, installed or
    attached, no setting changed (`sandbox`).
    """

    def __init__(self, path: Path | str, *, options: RunOptions | None = None) -> None:
        self.path = run_path(path)
        self.options = options if options is not None else RunOptions()
        self.steps = list(self.options.steps) if self.options.steps else None
        self.ranks = list(self.options.ranks) if self.options.ranks else None
        self.read_only_sql = self.options.read_only_sql
        self._open()

    def _open(self) -> None:
        whole = read_manifest(self.path)
        try:
            self.manifest = restrict(whole, self.ranks)
        except RunError as e:
            raise QueryError(f"{self.path}: {e}") from None
        if self.steps:
            _check_steps(self.path, self.manifest, self.steps)
        self.con = connect(self.options.memory_limit)
        # the files of queries/ not created in this session yet
        self._uncreated = set(definitions()) - set(FINALIZE_ONLY)
        try:
            attach(self.con, self.path, whole, self.steps, self.options.peak_tflops, (), self.ranks)
            if self.read_only_sql:
                sandbox(self.con, _READS.get(self.con, ()), *self._derived_dirs())
        except BaseException:
            self.close()
            raise

    def _derived_dirs(self) -> list[Path]:
        """Directories of files derived from the run that its views read (`grouped.GroupedRun`)."""
        return []

    def _replaced(self) -> bool:
        """Whether another run now stands at this run's path (`import --force` swapped it in)."""
        try:
            return read_manifest(self.path)["id"] != self.manifest["id"]
        except Exception:  # noqa: BLE001 - no readable run there: not a replacement to reopen
            return False

    def __enter__(self) -> Run:
        return self

    def __repr__(self) -> str:
        m = self.manifest
        steps = len(step_numbers(m))
        return (
            f"<Run {self.path}: {m['source']['format']}, ranks {m['ranks']}, {steps} steps, "
            f"{m['tables'].get('slices', 0):,} records{f', steps {self.steps}' if self.steps else ''}"
            f"{f', restricted to ranks {self.ranks}' if self.ranks else ''}>"
        )

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self.con.close()
        release_snapshots(self.con)

    def create_views(self, names: Iterable[str]) -> None:
        """Create the files of queries/ `names` (views, macros), and all they require, that this
        session has not created yet: their SQL, computed where a query reads them."""
        wanted = closure(names) & self._uncreated
        for view in definitions().values():  # each after what it requires: macros bind at creation
            if view.name in wanted:
                _create(self.con, view)
        self._uncreated -= wanted

    def prepare(self, names: Iterable[str]) -> None:
        """Make the files of queries/ `names` ready to read: created (`create_views`); a
        `GroupedRun` computes their rank-scope views on its executor first. `sql` prepares what
        its query reads; other readers of `con` (export) call this first."""
        self.create_views(names)

    def _ready(self, query: str) -> None:
        """Prepare what `query` reads, as DuckDB's parser finds it (`views.reads`), in one call
        (a `GroupedRun`: one round of tasks). Views named in its strings (SQL run from a string:
        `query_table('op_summary')`) are created, not computed; a query of the catalog creates
        every view first, so that it lists the run's views. A statement the parser does not
        serialise (EXPLAIN, COPY, PRAGMA...) is bound instead (`_bind`)."""
        try:
            statements = [(s.type, s.query) for s in self.con.extract_statements(query)]
        except (duckdb.Error, ValueError):  # SQL that does not parse: its query says why, with hints
            return
        names: set[str] = set()
        unread: list[str] = []
        catalog = False
        for kind, text in statements:
            if kind == duckdb.StatementType.EXPLAIN:  # what it explains
                text = next((t for t, k in _explained_statements(self.con, text) if k), text)
            found = reads(self.con, text)
            if found is None:
                catalog |= kind == duckdb.StatementType.PRAGMA  # PRAGMA show_tables, table_info
                unread += [text] * (kind != duckdb.StatementType.PRAGMA)
                continue
            catalog |= found.catalog
            names |= found.names
            self.create_views(defining(found.in_strings))
        if catalog:
            self.create_views([name for name in definitions() if name not in ON_DEMAND])
        self.prepare(defining(names))
        for text in unread:
            self._bind(text)

    def _bind(self, statement: str) -> None:
        """Prepare what `statement` reads by binding it (`EXPLAIN`: bound and planned, not run) as
        often as DuckDB's binder names a view, macro or table function of queries/ it lacks."""
        for _ in range(len(definitions())):  # each round prepares one file at least
            try:
                self.con.execute(f"EXPLAIN {statement}")
                return
            except duckdb.CatalogException as e:
                missing = _MISSING_NAME.search(str(e))
                files = [f for f in defining([missing[1]]) if f in self._uncreated] if missing else []
                if not files:
                    return  # not one of ours: running the statement says so
                self.prepare(files)
            except (duckdb.Error, ValueError):  # the statement's own error: running it says so
                return

    def sql(self, query: str, params: Iterable[Any] | None = None) -> Result:
        """Run SQL over the run's tables and views; return the result."""
        try:
            if self.read_only_sql and (refused := refusal(self.con, query)):
                raise QueryError(
                    f"--safe runs read-only SQL (SELECT, EXPLAIN [ANALYZE] of a SELECT, PRAGMAs that read "
                    f"the catalog), not {refused}"
                )
            self._ready(query)
            rel = self.con.sql(query, params=list(params) if params is not None else None)
            return Result(rel.to_arrow_table() if rel is not None else pa.table({}))
        except duckdb.IOException as e:
            # the run was replaced (import --force) since it was opened: its files are gone, so
            # the query is answered from the run now at the path, never from a half of each
            if not self._replaced():
                raise query_error(e, hints=True) from None
        except duckdb.Error as e:
            raise query_error(e, hints=True) from None
        self.close()
        self._open()
        return self.sql(query, params)

    def view(self, name: str) -> Result:
        """The rows of a view (see `views()`)."""
        names = [v.name for v in public_views()]
        if name not in names:
            raise QueryError(f"unknown view {name!r}; views: {', '.join(names)}")
        return self.sql(f'SELECT * FROM "{name}"')

    def summary(self, top: int = 10, more: bool = False) -> dict[str, Result]:
        """The tables `prof-engine show` prints: step breakdown, top ops, op types, API calls, and
        advice (its findings, or a row saying none fired and what was checked); with `more` (the
        report), framework ops, the streams' idle gaps by cause, the matrix multiplies' and
        convolutions' FLOPS, communication by op type, memory peaks and the ops that allocated most
        where the run has them, from the `summary_*` table macros (`sql` may call them too)."""
        self.prepare(["_summary"])
        n = max(int(top), 1)
        tables = {}
        # each table is computed once: data_quality's warnings filtered from its rows, here
        quality = self.quality().arrow()
        warned = quality.filter(pc.equal(quality["Level"], "warning"))
        if warned.num_rows:  # first: every number below rests on these guesses
            tables[QUALITY_TITLE] = Result(warned.select(["Rank", "Device", "Rule", "Count", "Share(%)", "Detail"]))
        tables |= {
            STEPS_TITLE: self._head("summary_steps", n * 10),
            f"Top {n} ops by total duration": self._head("summary_top_ops", n),
            f"Top {n} op types (op_statistic)": self._head("summary_op_types", n),
            f"Top {n} API calls (api_statistic)": self._head("summary_apis", n),
        }
        tables["Advice (advice: what to look at first)"] = self._head("summary_advice", n)  # or "no findings"
        if more:
            for title, macro in (
                (f"Top {n} framework ops by device time (key_averages)", "summary_framework_ops"),
                (f"Top {n} idle gaps per stream, by cause (idle_time)", "summary_idle"),
                (f"Top {n} matrix multiplies and convolutions by device time (op_flops)", "summary_flops"),
                (f"Top {n} communication op types (communication)", "summary_comm"),
                (f"Top {n} memory peaks (memory)", "summary_memory"),
                (f"Top {n} ops by memory allocated (op_memory)", "summary_op_memory"),
            ):
                result = self._head(macro, n)
                if len(result):
                    tables[title] = result
        return tables

    def _head(self, macro: str, limit: int) -> Result:
        """The first `limit` rows of the summary table macro `macro`, with `total` its row count in
        full: the macro's rows are computed once, all of them (summaries: aggregates, a row per
        name, rank or step), and cut here (a count by a second query computed the table again)."""
        rows = self.sql(f"SELECT * FROM {macro}(NULL)").arrow()
        return Result(rows.slice(0, limit), rows.num_rows)

    def quality(self) -> Result:
        """The `data_quality` view: what the import had to guess, per rank, device and rule."""
        return self.sql("SELECT * FROM data_quality")

    def quality_warnings(self) -> list[str]:
        """One line per data-quality warning rule that fired, over every rank and device: what
        `import` prints as warnings and `info` lists (empty when nothing was guessed)."""
        return warning_lines(self.quality())

    def info(self) -> Result:
        """The manifest in brief, as (item, value) rows."""
        m = self.manifest
        steps = step_numbers(m)
        names = {(r, d): name for r, d, name, *_ in run_devices(m) if name}
        devices = [
            f"r{r}:{d}" + (f" ({names[r, d]})" if (r, d) in names else "")
            for r, d in sorted({(d["rank"], d["device"]) for d in m.get("devices", [])})
        ]
        span = (m["end_ns"] - m["start_ns"]) / 1e6 if m.get("start_ns") is not None else None
        items = {
            "source format": m["source"]["format"]
            + (f" (versions {', '.join(m['source']['versions'])})" if m["source"]["versions"] else ""),
            "sources": ", ".join(s["path"] for s in m["sources"]),
            "schema version": m["schema_version"],
            "state": m.get("state", "complete"),  # collector runs: recording, complete or interrupted
            "created": m["created"],
            "ranks": ", ".join(map(str, m["ranks"])),
            "hosts": ", ".join(m.get("hosts", [])) or "-",
            "devices": ", ".join(devices),
            "steps": f"{len(steps)}: {steps[0]}..{steps[-1]}" if steps else "none",
            "time span (ms)": f"{span:.3f}" if span is not None else "-",
            **{f"rows: {t}": f"{n:,}" for t, n in m["tables"].items()},
        }
        warnings = self.quality_warnings()
        items |= {f"data quality: {w.split(':', 1)[0]}": w.split(":", 1)[1].strip() for w in warnings} or {
            "data quality": "no rule fired (prof-engine check)"
        }
        # built by DuckDB: pyarrow would import pandas (~0.3 s) to convert Python values
        return self.sql(
            "SELECT unnest(?::VARCHAR[]) AS item, unnest(?::VARCHAR[]) AS value",
            [list(items), [str(v) for v in items.values()]],
        )

    def export(self, views: Sequence[str] = (), out_dir: str | os.PathLike[str] = ".", fmt: str = "csv") -> list[Path]:
        """Write views (default: the summaries) as msprof-named files in `out_dir`; see engine.export."""
        from prof_engine.engine.export import export_views

        return export_views(self, out_dir, views, fmt)

    def report(self, target: Path | str = "report.html", top: int = 20) -> Path:
        """Write the run as one self-contained HTML page (the `show` tables, a step chart)."""
        from prof_engine.engine.report import write_report

        return write_report(self, target, top)

    def export_timeline(self, target: Path | str) -> Path:
        """Write the run as a Chrome trace JSON file with Overlap Analysis lanes."""
        from prof_engine.engine.export import export_timeline

        return export_timeline(self, target)

    @staticmethod
    def views() -> list[ViewDef]:
        """The public views with their documentation."""
        return public_views()


def warning_lines(quality: Result) -> list[str]:
    """`Run.quality_warnings` of the rows of data_quality `quality`."""
    by_rule: dict[str, list[tuple]] = {}
    for row in quality.rows():
        if row[8] == "warning":  # notes say how the data was read: `check` lists them
            by_rule.setdefault(row[2], []).append(row)
    lines = []
    for rule, rows in by_rule.items():
        count = sum(r[3] for r in rows)
        totals = [r[4] for r in rows]
        share = f" of {sum(totals):,} ({100 * count / sum(totals):.2f} %)" if None not in totals and sum(totals) else ""
        where = sorted({f"r{r[0]}" + (f":{r[1]}" if r[1] else "") for r in rows if r[0] is not None})
        at = f" on {', '.join(where[:6])}{', ...' if len(where) > 6 else ''}" if where else ""
        detail = next((r[6] for r in rows if r[6]), None)
        lines.append(f"{rule}: {count:,}{share}{at}: {rows[0][7]}" + (f" ({detail})" if detail else ""))
    return lines


def _create_table(con: duckdb.DuckDBPyConnection, name: str, table: schema.Table, rows: Sequence[tuple] = ()) -> None:
    """A table of `table`'s columns holding `rows`, in the current schema (an Arrow registration
    would be connection-wide, and Arrow built from Python values imports pandas). The rows go in
    as one list per column, unnested side by side: `executemany` binds a statement per row (8 s
    for the 27,000 rows of a 3,000-rank run)."""
    con.execute(f'CREATE TABLE "{name}" ({", ".join(f"{_ident(c.name)} {c.sql_type}" for c in table.columns)})')
    if rows:
        unnested = ", ".join(f"unnest(?::{c.sql_type}[])" for c in table.columns)
        con.execute(f'INSERT INTO "{name}" SELECT {unnested}', [list(column) for column in zip(*rows, strict=True)])


def _file_list(files: list[Path]) -> str:
    """`files` as a DuckDB list literal of paths (for read_parquet, parquet_schema, parquet_metadata)."""
    return "[" + ", ".join(literal(f) for f in files) + "]"


def _parquet_source(files: list[Path], union_by_name: bool) -> str:
    listing = _file_list(files)
    return (
        f"read_parquet({listing}, hive_partitioning = true, union_by_name = {str(union_by_name).lower()}, "
        f"hive_types = {hive_types(files)})"
    )


def _file_columns(con: duckdb.DuckDBPyConnection, files: list[Path]) -> tuple[bool, set[str]]:
    """Whether all `files` have the same columns, in the same order, of the same types; and the
    names of the columns any of them has."""
    listing = _file_list(files)
    shapes, names = con.execute(
        f"SELECT count(DISTINCT columns), flatten(list(names)) FROM (SELECT file_name, string_agg(name || ' ' || "
        f"duckdb_type, ', ' ORDER BY column_id) AS columns, list(name) AS names FROM parquet_schema({listing}) "
        f"WHERE num_children IS NULL GROUP BY file_name)"
    ).fetchall()[0]  # an aggregate: one row
    return shapes <= 1, set(names or ())


def step_numbers(manifest: dict) -> list[int]:
    """The run's steps (the manifest lists each per rank), in order."""
    return sorted({s["step"] for s in manifest.get("steps", [])})


def _check_steps(path: Path, manifest: dict, steps: list[int]) -> None:
    """QueryError if a step asked for is none of the run's: every view would be silently empty."""
    known = step_numbers(manifest)
    missing = sorted(set(steps) - set(known))
    if missing:
        have = (
            "none"
            if not known
            else ", ".join(map(str, known))
            if len(known) <= 10
            else f"{len(known)}, {known[0]}..{known[-1]}"
        )
        raise QueryError(
            f"{path}: no step{'s' * (len(missing) > 1)} {', '.join(map(str, missing))} in this run (its steps: {have})"
        )


def _partition_files(table_dir: Path, steps: list[int] | None, ranks: list[int] | None = None) -> list[Path]:
    """The Parquet files of a table, rank by rank in rank order (then by path), so that a view
    without an ORDER BY lists ranks as groups of ranks computed apart do (`engine.grouped`); with
    `ranks`, only those under the ranks' `rank=<r>` directories are listed; with `steps`, those of
    the steps' partitions, unless none is (the view's step filter then leaves no rows either way)."""
    dirs = [table_dir] if ranks is None else [table_dir / rank_dir(r) for r in ranks]
    files = sorted((f for d in dirs for f in _parquet_files(d)), key=lambda f: _rank_order(table_dir, f))
    if steps:
        wanted = {f"step={s}" for s in steps}
        return [f for f in files if f.parent.name in wanted] or files
    return files


def _parquet_files(top: Path) -> Iterator[Path]:
    """The Parquet files under `top`. Locally by `os.walk`: pathlib's rglob took 2 of the 3 s of
    opening a 1,000-rank run (9,000 files); a run on object storage lists through its `RemotePath`."""
    if is_remote(top):
        yield from top.rglob("*.parquet")
        return
    for where, _, names in os.walk(top):
        yield from (Path(where, n) for n in names if n.endswith(".parquet"))


def _rank_order(table_dir: Path, f: Path) -> tuple[int, str]:
    """A file's place: its `rank=<r>` directory's rank (the NULL rank's: after every rank), then its path."""
    number = f.relative_to(table_dir).parts[0].removeprefix("rank=")
    return (int(number) if number.isdigit() else 1 << 62, str(f))


def _in_sorted_order(table_dir: Path, files: list[Path]) -> list[Path] | None:
    """`files` of a table written in its `sort_by` order (`partitions.SortedWriter`: a file per
    rank and partition, rows in order) listed by rank and partition, so that reading them in turn
    reads the rows in order; None where they are not one file per rank and partition."""
    if not files:
        return []
    levels = {f: dict(p.split("=", 1) for p in f.relative_to(table_dir).parts[:-1]) for f in files}

    def key(f: Path) -> tuple:  # rank, then each directory level: device=<escaped>, step=<n>
        step, rank = levels[f].get("step", NULL_PARTITION), levels[f].get("rank", NULL_PARTITION)
        return (
            None if rank == NULL_PARTITION else int(rank),
            unquote(levels[f].get("device", "")),
            step == NULL_PARTITION,
            0 if step == NULL_PARTITION else int(step),
        )

    keys = {f: key(f) for f in files}
    if any(k[0] is None for k in keys.values()) or len(set(keys.values())) < len(files):
        return None
    return sorted(files, key=keys.__getitem__)


def _register_tables(
    con: duckdb.DuckDBPyConnection, path: Path, manifest: dict, steps: list[int] | None, ranks: list[int] | None = None
) -> tuple[dict[str, str], set[str]]:
    """Create the run's tables as views; return the SELECT each must have once the views of
    `queries/` exist (`attach`): until then a table with files reads an empty table of its types.
    And the tables whose view reads their rows in their `sort_by` order (`_in_sorted_order`).

    Why: DuckDB binds a table's scan again at every reference, and the views reference `slices`
    dozens of times, at CREATE and at each query. With a glob that means listing the directory
    tree each time, and with union_by_name reading every file's footer each time: tens of seconds
    to open a run of a thousand partitions. So the files are listed once, here; in a run of an
    older schema version their schemas are compared once, and union_by_name is used only where
    they differ (written by different versions; without it DuckDB would cast every file to the
    first one's types); and the views are created against the empty stand-ins, which bind at no
    cost."""
    rows = manifest.get("tables", {})
    # files written under this schema version have its columns and types (the writer casts every
    # batch to them): reading every footer to check (~0.1 s per 1,000 files) is for older runs
    current = str(manifest.get("schema_version")) == schema.schema_version()
    _create_table(con, "_run_ranks", schema.tables()["run_ranks"], run_ranks(manifest))
    con.execute("CREATE VIEW run_ranks AS SELECT * FROM _run_ranks")
    _create_table(con, "_run_devices", schema.tables()["run_devices"], run_devices(manifest))
    con.execute("CREATE VIEW run_devices AS SELECT * FROM _run_devices")
    _create_table(con, "_run_findings", schema.tables()["run_findings"], run_findings(manifest))
    con.execute("CREATE VIEW run_findings AS SELECT * FROM _run_findings")
    _create_table(con, "_quality_rules", schema.tables()["quality_rules"], quality_rules())
    con.execute("CREATE VIEW quality_rules AS SELECT * FROM _quality_rules")
    final, in_order = {}, set()
    filters = ([f"step IN ({', '.join(map(str, steps))})"] if steps else []) + (
        [f"rank IN ({', '.join(map(str, ranks))})"] if ranks is not None else []
    )
    where = f" WHERE {' AND '.join(filters)}" if filters else ""
    for name, table in schema.stored_tables().items():
        cols = ", ".join(f'"{c}"' for c in table.column_names)
        files = _partition_files(path / name, steps, ranks) if rows.get(name) and (path / name).is_dir() else []
        if table.sort_by:
            ordered = _in_sorted_order(path / name, files)
            if ordered is not None:
                files = ordered
                in_order.add(name)
        if files:
            _READS.setdefault(con, set()).update(str(f) for f in files)
            uniform, present = (True, set(table.column_names)) if current else _file_columns(con, files)
            # a column added to the schema since the run was written reads as NULL (rank, device and
            # step are always there: a column, or a directory level)
            cols = ", ".join(
                f'"{c.name}"'
                if c.name in present or c.name in ("rank", *schema.PARTITION_KEYS)
                else f'NULL::{c.sql_type} AS "{c.name}"'
                for c in table.columns
            )
            final[name] = f"SELECT {cols} FROM {_parquet_source(files, not uniform)}{where}"
            if uniform:
                con.execute(
                    f'CREATE TABLE "_shape_{name}" AS SELECT {cols} FROM {_parquet_source(files[:1], False)} LIMIT 0'
                )
                src = f'"_shape_{name}"'
            else:
                src = _parquet_source(files, True)
        else:
            _create_table(con, f"_empty_{name}", table)
            src = f"_empty_{name}"
        con.execute(f"CREATE VIEW {name} AS SELECT {cols} FROM {src}{where}")
        con.execute(f"COMMENT ON VIEW {name} IS {literal(table.description)}")
    return final, in_order


_DEFERS_BINDING: list[bool] = []  # once known: whether this DuckDB takes `WITH (DEFER_BINDING)`


def defers_binding(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether this DuckDB creates a view without binding it (`views.defer_binding`, DuckDB 2.0;
    older versions bind every view at its creation)."""
    if not _DEFERS_BINDING:
        try:
            con.execute("CREATE OR REPLACE TEMP VIEW _defer_probe WITH (DEFER_BINDING) AS SELECT 1")
            con.execute("DROP VIEW _defer_probe")
            _DEFERS_BINDING.append(True)
        except duckdb.Error:
            _DEFERS_BINDING.append(False)
    return _DEFERS_BINDING[0]


def _create(con: duckdb.DuckDBPyConnection, view: ViewDef) -> None:
    try:
        con.execute(view.statements(defer=defers_binding(con)))
    except duckdb.Error as e:
        raise QueryError(f"queries/{view.path.name}: {e}") from None
    if view.public:
        con.execute(f'COMMENT ON VIEW "{view.name}" IS {literal(view.answers)}')


def attach(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    manifest: dict,
    steps: list[int] | None = None,
    peak_tflops: Mapping[str, float] | None = None,
    views: Sequence[str] | None = None,
    ranks: Sequence[int] | None = None,
) -> Path:
    """Create a run's tables and the views of `queries/` in the current schema of `con`
    (`peak_tflops`, `ranks`: see `Run`); return the directory whose files they read. `views`: the
    files of queries/ to create, with all they require (default: all but ON_DEMAND; a `Run`
    creates none here, and each when a query first names it).

    Views and macros bind names in their own schema, so several runs can sit side by side in one
    session, one schema each, with the view SQL unchanged (see `prof_engine.engine.compare`).
    A live collector run (recording, or its writer killed) lacks what needs all of a rank's
    records; its views read a snapshot of it finalised whole (`store.upgrade.snapshot`), in a
    private temporary directory removed with `con` (`release_snapshots`).
    """
    register(con, path)  # a run on object storage: DuckDB reads it through pyarrow's file system
    if not finalised(manifest):
        if is_remote(path):
            raise RunError(f"{path}: a run still recording is read from its own directory, not object storage")
        path, manifest = _snapshot(con, path, manifest)
    chosen = sorted({int(r) for r in ranks}) if ranks is not None else None
    # every rank the run holds, however few it is opened with: data_quality judges a rank's links
    # by it (links_to_absent_ranks), so that rank's rows are alike on every restriction (scope rank)
    held = ", ".join(str(int(r)) for r in manifest.get("ranks") or [])
    con.execute(f"CREATE OR REPLACE MACRO run_held_ranks() AS [{held}]::INTEGER[]")
    manifest = restrict(manifest, chosen)
    try:
        _attach(con, path, manifest, steps, given_peaks(peak_tflops), views, chosen)
    except duckdb.Error as e:  # reading the run's footers, within the session's memory limit
        raise query_error(e) from None
    return path


# Snapshots of live runs each connection reads (`attach`): removed by `release_snapshots`, or
# when the connection is garbage-collected or the process exits.
_SNAPSHOTS: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, list[weakref.finalize]] = weakref.WeakKeyDictionary()


def _snapshot(con: duckdb.DuckDBPyConnection, path: Path, manifest: dict) -> tuple[Path, dict]:
    from prof_engine.store.upgrade import snapshot

    where = Path(tempfile.mkdtemp(prefix="prof-engine-snapshot-"))
    remove_with(con, where)
    copy = snapshot(path, manifest, where / "run")
    return copy, read_manifest(copy)


def remove_with(con: duckdb.DuckDBPyConnection, directory: Path) -> None:
    """Remove `directory` (files a view of `con` reads) by `release_snapshots`, or when `con` is
    garbage-collected or the process exits."""
    _SNAPSHOTS.setdefault(con, []).append(weakref.finalize(con, shutil.rmtree, directory, True))


# The Parquet files each connection's views read (`_register_tables`): all `sandbox` lets it open.
_READS: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, set[str]] = weakref.WeakKeyDictionary()


def release_snapshots(con: duckdb.DuckDBPyConnection) -> None:
    """Remove the snapshots of live runs that `con` read (once it is closed)."""
    for remove in _SNAPSHOTS.pop(con, []):
        remove()


def _attach(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    manifest: dict,
    steps: list[int] | None,
    peaks: dict[str, float],
    views: Sequence[str] | None = None,
    ranks: list[int] | None = None,
) -> None:
    final, in_order = _register_tables(con, path, manifest, steps, ranks)
    _create_table(con, "_run_peaks", schema.tables()["run_peaks"], list(peaks.items()))
    con.execute("CREATE VIEW run_peaks AS SELECT * FROM _run_peaks")
    # Constants from the manifest and the files, which DuckDB folds into the views' plans:
    for macro, value in {
        # where no source writes CANN's keys, the args of API calls and tasks (most of the bytes
        # of 10 M records) are not read at all (`api_level`, `_operator_calls`)
        "run_cann_args": cann_args(manifest),
        # the lanes' files are read in overlap's order, which then sorts nothing
        "run_lanes_in_order": "lanes" in in_order,
        # whether a rank may fall back to host ops: if none, those branches never scan them
        "run_host_only_ranks": host_only_ranks_possible(manifest),
    }.items():
        con.execute(f"CREATE OR REPLACE MACRO {macro}() AS {str(bool(value)).lower()}")
    needed = closure(views) if views is not None else None
    for view in definitions().values():
        if view.name not in ON_DEMAND + FINALIZE_ONLY and (needed is None or view.name in needed):
            _create(con, view)
    for name, select in final.items():  # the views bind afresh at each query: now they read the files
        con.execute(f"CREATE OR REPLACE VIEW {name} AS {select}")
        con.execute(f"COMMENT ON VIEW {name} IS {literal(schema.stored_tables()[name].description)}")


def open_run(
    path: Path | str,
    steps: Sequence[int] | None = None,
    memory_limit: str | None = None,
    peak_tflops: Mapping[str, float] | None = None,
    read_only_sql: bool = False,
    ranks: Sequence[int] | None = None,
    executor: str | None = None,
    ranks_per_task: int | None = None,
    address: str | None = None,
) -> Run:
    """Open the run directory at `path` for querying (`memory_limit`, `peak_tflops`,
    `read_only_sql`, `ranks`: see `Run`). With `executor` ("local": a process pool; "ray": Ray
    tasks, on the cluster at `address`), the rank-scope views a query reads are computed per group
    of `ranks_per_task` ranks in parallel, the first time one is read (`engine.grouped.GroupedRun`).
    The keywords make one `RunOptions`, checked as it is built."""
    options = RunOptions(
        tuple(steps) if steps else None,
        tuple(ranks) if ranks else None,
        memory_limit,
        peak_tflops,
        read_only_sql,
        executor,
        ranks_per_task,
        address,
    )
    if options.executor is None:
        return Run(path, options=options)
    from prof_engine.engine.grouped import GroupedRun  # it builds on this module

    return GroupedRun(path, options=options)
