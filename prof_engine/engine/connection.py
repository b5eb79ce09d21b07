"""A run's DuckDB connection (`connect`: its memory cap, its spill directory), the peaks a user
gives (`given_peaks`), and a query's DuckDB error as the line a user sees (`query_error`)."""

from __future__ import annotations

import difflib
import math
import os
import re
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path

import duckdb

from prof_engine import schema
from prof_engine._process import address_space_limit
from prof_engine._sql import no_progress_bar, size_bytes
from prof_engine.engine.views import public_views
from prof_engine.errors import QueryError

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


# Lines of DuckDB's hints a query's error keeps after its first: "Did you mean", candidate
# columns, the query's line with a caret under the error.
HINT_LINES = 4


_MISSING_TABLE = re.compile(r"Catalog Error: Table with name (.+?) does not exist")


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
    (`Run.create_views`), so for `op_sumary` it never guessed op_summary."""
    known = sorted({v.name for v in public_views()} | set(schema.tables()))
    wanted = name.strip('"').lower()
    close = (
        difflib.get_close_matches(wanted, known, n=3, cutoff=0.75)
        or [k for k in known if any(len(w) >= 4 and wanted.startswith(w) for w in k.split("_"))][:3]
    )
    if close:
        return "Did you mean " + " or ".join(f'"{c}"' for c in close) + "?"
    return "`prof-engine views` lists the run's views"
