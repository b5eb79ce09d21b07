"""The `prof-engine` command line: a thin face over the library (same verbs, same names)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from prof_engine._process import memory_cause, out_of_memory
from prof_engine.cli._command import Command, Group
from prof_engine.errors import ProfEngineError

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

app = typer.Typer(
    name="prof-engine",
    help="Profiling traces into Parquet; msprof-style reports through DuckDB SQL.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # plain click help and errors: rich's formatting imports ~0.15 s of modules (markdown, pygments)
    rich_markup_mode=None,
    add_completion=False,
    cls=Group,
)


def _version(value: bool) -> None:
    if value:
        from prof_engine import __version__

        print(f"prof-engine {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Profiling traces into Parquet; msprof-style reports through DuckDB SQL."""


# text, not Path: pathlib would make `s3://bucket/run` `s3:/bucket/run`
RunArg = Annotated[
    str,
    typer.Argument(
        help="Run directory (made by `prof-engine import`), or its URI on object storage (s3://bucket/run).",
        show_default=False,
    ),
]
StepsOpt = Annotated[list[int] | None, typer.Option("--step", "-s", help="Only these steps (repeatable).")]
RanksOpt = Annotated[
    list[int] | None,
    typer.Option(
        "--rank",
        "-r",
        help="Only these ranks (repeatable): only their files are read, and cluster views compare only them.",
    ),
]
WideOpt = Annotated[bool, typer.Option("--wide", help="Print every column, however wide the table.")]
ExecutorOpt = Annotated[
    str | None,
    typer.Option(
        "--executor",
        help="local or ray: rank-scope views per group of ranks in parallel (worker processes, or Ray tasks), then cluster views once.",
    ),
]
AddressOpt = Annotated[
    str | None, typer.Option("--address", help="With --executor ray: the Ray cluster (default: a local Ray).")
]
RanksPerTaskOpt = Annotated[
    int | None,
    typer.Option(
        "--ranks-per-task",
        min=1,
        help="With --executor: ranks each task computes (default: the ranks spread over the CPUs, 128 at most).",
    ),
]


def _check_executor(executor: str | None, address: str | None, ranks_per_task: int | None) -> None:
    """The executor options' rules (`_ray.executor_misuse`), broken: a usage error (exit 2)."""
    from prof_engine._ray import executor_misuse

    if misuse := executor_misuse(executor, address, ranks_per_task):
        raise typer.BadParameter(misuse[1], param_hint=misuse[0])


class _Progress:
    """A progress bar on stderr that appears only once an import has taken more than a second.
    Once every byte is read it says the run is being finalised (steps, nesting, launch links:
    up to a third of a large import), rather than sit at 100 %."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.bar: Progress | None = None
        self.task: TaskID | None = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            if time.monotonic() - self.start < 1.0 or not sys.stderr.isatty():
                return
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

            from prof_engine.render import err

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                console=err,
                transient=True,
            )
            self.bar.start()
            self.task = self.bar.add_task("importing", total=total)
        assert self.task is not None  # added with the bar
        self.bar.update(
            self.task,
            completed=done,
            description="finalising (steps, nesting, links)" if done >= total else "importing",
        )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


@app.command("import", cls=Command)
def import_(
    sources: Annotated[list[Path], typer.Argument(help="Trace files (.json, .json.gz) or directories of them.")],
    output: Annotated[str, typer.Option("--output", "-o", help="Run directory to create.")],
    force: Annotated[bool, typer.Option("--force", help="Replace an existing run.")] = False,
    jobs: Annotated[
        int | None, typer.Option("--jobs", "-j", min=1, help="Parallel processes (default: cores).")
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 when the import had to guess (see `check`).")
    ] = False,
    executor: Annotated[
        str | None,
        typer.Option(
            "--executor",
            help="local (the default: --jobs processes) or ray: each trace a Ray task (the sources at the same path on its nodes).",
        ),
    ] = None,
    address: AddressOpt = None,
    merge_unrelated: Annotated[
        bool,
        typer.Option(
            "--merge-unrelated",
            help="Import sources that are not one job (Ascend output and Kineto traces, different world sizes, hosts or times) as one run.",
        ),
    ] = False,
) -> None:
    """Import traces into a run.

    \b
    Examples (the second on a Ray cluster):
      prof-engine import trace.json.gz -o run
      prof-engine import /shared/traces -o /shared/run --executor ray
    """
    from prof_engine import import_trace
    from prof_engine import open as open_run
    from prof_engine.render import err

    _check_executor(executor, address, None)
    if executor == "ray" and jobs is not None:
        raise typer.BadParameter("counts this machine's processes; Ray schedules by its CPUs", param_hint="--jobs")
    progress = _Progress()
    try:
        run = import_trace(
            sources,
            output,
            force=force,
            jobs=jobs,
            progress=progress,
            executor=executor,
            address=address,
            merge_unrelated=merge_unrelated,
        )
    finally:
        progress.close()
    from prof_engine.store.manifest import brief_ranks, load_manifest

    # with an executor, the rules' counts by groups too
    unsummarised = None
    try:
        with open_run(run, executor=executor, address=address) as r:
            m, warnings = r.manifest, r.quality_warnings()
    except Exception as e:  # noqa: BLE001 - the run is published and complete: its summary failing is a warning, not exit 1
        m, warnings, unsummarised = load_manifest(Path(run)), [], _summary_failure(e)
    for skipped in m["skipped"]:
        err.print(f"Warning: left out: {skipped['error']}", highlight=False)
    _print_left_out(m.get("left_out") or [])
    for line in warnings:
        err.print(f"Warning: {line}", highlight=False)
    err.print(
        f"imported {len(m['sources'])} file(s) ({m['source']['format']}) into {run}: "
        f"{m['tables']['slices']:,} records, ranks [{brief_ranks(m['ranks'])}], "
        f"{len({s['step'] for s in m['steps']})} steps"
        + (f"; {len(warnings)} data-quality rule(s) fired: prof-engine check {output}" if warnings else "")
    )
    if unsummarised is not None:
        err.print(
            f"Warning: the import is complete, but its data-quality summary could not be computed ({unsummarised}); "
            f"`prof-engine check {output}` computes it",
            highlight=False,
        )
    # --strict cannot pass what it could not check
    if strict and (warnings or m["skipped"] or unsummarised is not None):
        raise typer.Exit(1)


def _summary_failure(e: Exception) -> str:
    """Why the summary after an import failed, in an importer's terms: a DuckDB out-of-memory error
    names a query setting (memory_limit), which an import does not take."""
    if out_of_memory(e):
        from prof_engine._process import address_space_hint

        hint = address_space_hint()
        return f"out of memory; {hint}" if hint else "out of memory; free memory, or import with fewer --jobs"
    return f"{type(e).__name__}: {memory_cause(e)}"


def _print_left_out(left_out: list[dict[str, str]]) -> None:
    """The files of the imported directories that are no trace, a line per reason: how many, a few names."""
    from prof_engine.render import err

    reasons: dict[str, list[str]] = {}
    for x in left_out:
        reasons.setdefault(x["reason"], []).append(Path(x["path"]).name)
    for reason, names in reasons.items():
        shown = ", ".join(names[:3]) + (f", … ({len(names)} in all)" if len(names) > 3 else "")
        err.print(f"Note: left out {len(names)} file(s): {reason}: {shown}", highlight=False)


@app.command(cls=Command)
def export(
    run: RunArg,
    views: Annotated[list[str] | None, typer.Argument(help="Views to export (default: the summaries).")] = None,
    # text, not Path: pathlib drops the trailing `/` that says `-o new_dir/` is a directory
    output: Annotated[
        str,
        typer.Option(
            "--output",
            "-o",
            help="Directory (with --timeline: the .json file, or a directory for timeline_<time>.json: an existing one, or one written with a trailing /).",
        ),
    ] = ".",
    fmt: Annotated[str, typer.Option("--format", "-f", help="csv, json or parquet.")] = "csv",
    steps: StepsOpt = None,
    ranks: RanksOpt = None,
    timeline: Annotated[bool, typer.Option("--timeline", help="Write a Chrome trace for Perfetto instead.")] = False,
    executor: ExecutorOpt = None,
    address: AddressOpt = None,
    ranks_per_task: RanksPerTaskOpt = None,
) -> None:
    """Export views as msprof-named files.

    \b
    Examples (the second on a Ray cluster):
      prof-engine export run step_trace -o out
      prof-engine export run -o out --executor ray
    """
    from prof_engine import open
    from prof_engine.engine.export import FORMATS
    from prof_engine.render import err

    if fmt not in FORMATS:
        raise typer.BadParameter(f"unknown format {fmt!r}; use {', '.join(FORMATS)}", param_hint="--format")
    _check_executor(executor, address, ranks_per_task)
    if executor is not None and timeline:
        raise typer.BadParameter("--timeline is one file, written in one process", param_hint="--executor")
    # with an executor, export computes every view asked for in one round of tasks
    with open(run, steps, ranks=ranks, executor=executor, ranks_per_task=ranks_per_task, address=address) as r:
        written = [r.export_timeline(output)] if timeline else r.export(views or (), output, fmt)
    for path in written:
        err.print(f"wrote {path}")


@app.command(cls=Command)
def query(
    run: RunArg,
    sql: Annotated[str, typer.Argument(help="SQL over the run's tables and views.")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, csv or json (JSON lines).")] = "table",
    steps: StepsOpt = None,
    ranks: RanksOpt = None,
    limit: Annotated[int, typer.Option(min=0, help="Rows a table prints (0: all); csv and json print all.")] = 1000,
    wide: WideOpt = False,
    safe: Annotated[
        bool,
        typer.Option(
            "--safe",
            help="Read-only SQL for serving others: SELECT, EXPLAIN [ANALYZE] of a SELECT and catalog PRAGMAs only; no file but the run's Parquet, nothing written, installed, attached or set.",
        ),
    ] = False,
    executor: ExecutorOpt = None,
    address: AddressOpt = None,
    ranks_per_task: RanksPerTaskOpt = None,
) -> None:
    """Run SQL: full DuckDB (it can read and write any file, COPY, ATTACH, INSTALL) unless --safe.

    \b
    Example:
      prof-engine query run "select * from overlap where Type = 'Free'"
    """
    from functools import partial

    from prof_engine import open, render

    table = partial(
        render.table,
        limit=limit or None,
        wide=wide,
        hint="--wide or --format csv shows all",
        more="--limit N shows more, --format csv all",
    )
    writers: dict[str, Callable[..., object]] = {"table": table, "csv": render.csv, "json": render.json_lines}
    if fmt not in writers:
        raise typer.BadParameter(f"unknown format {fmt!r}; use table, csv or json", param_hint="--format")
    _check_executor(executor, address, ranks_per_task)
    with open(
        run,
        steps,
        read_only_sql=safe,
        ranks=ranks,
        executor=executor,
        ranks_per_task=ranks_per_task,
        address=address,
    ) as r:
        writers[fmt](r.sql(sql))


@app.command(cls=Command)
def show(
    run: RunArg,
    steps: StepsOpt = None,
    ranks: RanksOpt = None,
    top: Annotated[int, typer.Option(min=1, help="Rows per table (the step breakdown: 10 times as many).")] = 10,
    wide: WideOpt = False,
    executor: ExecutorOpt = None,
    address: AddressOpt = None,
    ranks_per_task: RanksPerTaskOpt = None,
) -> None:
    """Print the step breakdown, top ops, op statistics and API statistics. Long C++ names are
    shortened (templates and arguments elided); --wide and export print them whole."""
    from prof_engine import open, render

    _check_executor(executor, address, ranks_per_task)
    with open(run, steps, ranks=ranks, executor=executor, ranks_per_task=ranks_per_task, address=address) as r:
        shortened = False
        for title, result in r.summary(top).items():
            shortened |= render.table(
                result,
                title=title,
                wide=wide,
                more="a larger --top shows more; `prof-engine export` writes all",
                short_names=not wide,
            )
        if shortened:
            render.note(render.SHORTENED)


@app.command(cls=Command)
def report(
    run: RunArg,
    output: Annotated[
        str,
        typer.Option(
            "--output",
            "-o",
            help="The .html file, or a directory for report.html (an existing one, or one written with a trailing /).",
        ),
    ] = "report.html",
    steps: StepsOpt = None,
    top: Annotated[int, typer.Option(min=1, help="Rows per table.")] = 20,
    executor: ExecutorOpt = None,
    address: AddressOpt = None,
    ranks_per_task: RanksPerTaskOpt = None,
) -> None:
    """Write one self-contained HTML page: a summary (step time, where it goes, the top findings),
    the advice, the step breakdown as a chart, top ops, op types, API calls; the manifest last.

    \b
    Example:
      prof-engine report run -o run.html
    """
    from prof_engine import open
    from prof_engine.render import err

    _check_executor(executor, address, ranks_per_task)
    with open(run, steps, executor=executor, ranks_per_task=ranks_per_task, address=address) as r:
        err.print(f"wrote {r.report(output, top)}")


@app.command(cls=Command)
def check(
    run: RunArg,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 when a warning rule fired (notes do not count).")
    ] = False,
    wide: WideOpt = False,
    executor: ExecutorOpt = None,
    address: AddressOpt = None,
    ranks_per_task: RanksPerTaskOpt = None,
) -> None:
    """List what the import had to guess (the data_quality view), per rank, device and rule.

    \b
    Example:
      prof-engine check run
    """
    from prof_engine import open, render

    _check_executor(executor, address, ranks_per_task)
    with open(run, executor=executor, ranks_per_task=ranks_per_task, address=address) as r:
        found, warnings = r.quality(), r.quality_warnings()
        skipped = r.manifest["skipped"]
    for s in skipped:
        render.err.print(f"left out: {s['error']}", highlight=False)
    if len(found):
        # kept longest: what the rule found here (Detail) over its general sentence (Meaning)
        render.table(
            found,
            title=f"{run}: data quality",
            wide=wide,
            priority=["Rule", "Level", "Detail", "Count", "Rank", "Device", "Share(%)"],
        )
    elif not skipped:
        render.out.print(f"{run}: no data-quality rule fired: the import guessed nothing", highlight=False)
    if strict and (warnings or skipped):
        raise typer.Exit(1)


@app.command(cls=Command)
def views() -> None:
    """List the views with what each answers."""
    from prof_engine import Run
    from prof_engine.render import out

    views = Run.views()
    width = max(len(v.name) for v in views)
    for v in views:
        out.print(f"[bold]{v.name:<{width}}[/bold]  {v.summary}", highlight=False)


@app.command(cls=Command)
def info(run: RunArg) -> None:
    """Summarise a run's manifest: source, ranks, devices, steps, rows."""
    from prof_engine import open, render

    with open(run) as r:
        render.table(r.info(), title=str(run))


@app.command(cls=Command)
def upgrade(
    run: RunArg,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the upgraded run here instead of in place.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing --output run.")] = False,
) -> None:
    """Rewrite a run of an older schema (1.x) as an import of today stores it, in place (atomically).

    \b
    Example:
      prof-engine upgrade run
    """
    from prof_engine import upgrade as upgrade_run
    from prof_engine.render import err
    from prof_engine.schema import schema_version

    path = upgrade_run(run, output, force=force)
    err.print(f"{path}: schema {schema_version()}, every derived table and column stored", highlight=False)


from prof_engine.cli.collect import collect as _collect  # noqa: E402 - a command of its own module

app.command("collect", cls=Command)(_collect)

from prof_engine.cli.compare import compare as _compare  # noqa: E402 - a command of its own module

app.command("compare", cls=Command)(_compare)


def main() -> None:
    """Console entry point: user errors become one `Error:` line on stderr and exit code 1; Ctrl-C
    exits 130 without a traceback; running out of memory says which limit to raise."""
    try:
        app()
    except ProfEngineError as e:
        print(f"Error: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("Interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as e:  # noqa: BLE001 - only out-of-memory is answered here; the rest re-raise
        if not out_of_memory(e):
            if isinstance(e, OSError):
                print(f"Error: {e.strerror or e}: {e.filename or ''}".rstrip(": "), file=sys.stderr)
                sys.exit(1)
            raise
        print(f"Error: out of memory ({memory_cause(e)}); {_memory_advice()}", file=sys.stderr)
        sys.exit(1)


def _memory_advice() -> str:
    from prof_engine._process import address_space_hint

    if (hint := address_space_hint()) is not None:
        return f"{hint}, or import with --jobs 1"
    return "free memory, or import with --jobs 1; queries: set PROF_ENGINE_MEMORY_LIMIT lower (e.g. 1GB) to spill"
