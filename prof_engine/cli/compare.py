"""`prof-engine compare`: runs beside a baseline, sorted by impact, with regression gates for CI.

Exit codes: 0 when every `--fail-if` threshold passes, 3 when one fails (one `regression:` line on
stderr), 4 when none fails but one cannot be decided (an `inconclusive` item might pass it: one
`inconclusive:` line per threshold on stderr, with about how many samples would decide), 2 for
usage errors (a threshold outside the grammar, an unknown format or level), 1 for a problem with a
run (missing, not a run).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from prof_engine.errors import ThresholdError
from prof_engine.store.location import run_path

if TYPE_CHECKING:  # engine.compare loads DuckDB and pyarrow: only a comparison does (not --help)
    from prof_engine.engine.compare import Comparison
    from prof_engine.engine.compare.thresholds import Threshold

# engine.compare's LEVELS, spelt out for --help without loading the engine (a test holds them equal)
LEVEL_HELP = "step, op_type, op, api, communication, memory"

FORMATS = ("table", "csv", "json", "markdown")
_STATUS_STYLE = {
    "slower": "red",
    "higher": "red",
    "added": "yellow",
    "removed": "yellow",
    "count changed": "yellow",
    "shapes changed": "yellow",
    "faster": "green",
    "lower": "green",
    "inconclusive": "dim",
}


def _runs(runs: list[str], baseline: str | None) -> tuple[Path, list[Path]]:
    """(baseline, others): the first run is the baseline unless --baseline names it; it is never its
    own candidate. A run is a directory or a URI on object storage (`run_path`)."""
    paths = [run_path(r) for r in runs]
    if baseline is None:
        if len(paths) < 2:
            raise typer.BadParameter("give a baseline and at least one run: BASE RUN [RUN...]", param_hint="RUNS")
        return paths[0], paths[1:]
    base = run_path(baseline)
    others = [p for p in paths if str(p.resolve()) != str(base.resolve())]  # a URI resolves to itself
    if not others:
        raise typer.BadParameter("no run to compare with the baseline", param_hint="RUNS")
    return base, others


def _gates(texts: list[str]) -> list[Threshold]:
    from prof_engine.engine.compare.thresholds import parse_threshold

    try:
        return [parse_threshold(t) for t in texts]
    except ThresholdError as e:
        raise typer.BadParameter(str(e), param_hint="--fail-if") from None


def _table(cmp: Comparison, top: int, wide: bool = False) -> None:
    from prof_engine.engine.compare.text import level_tables, verdict
    from prof_engine.render import Column, grid, note, out

    out.print(f"[bold]Compared with {cmp.baseline}[/bold]: {', '.join(cmp.runs)}", highlight=False)
    # left out first when the console is narrow: what the verdict needs least (calls, interval, where)
    keep = [
        "Item",
        "Status",
        "Delta %",
        "Delta",
        "Run median ± spread",
        "Base median ± spread",
        *cmp.runs,
        "Base",
        "Detail",
    ]
    for t in level_tables(cmp, top):
        columns = [
            Column(h) if h in ("Item", "Where", "Detail", "Status") else Column(h, "number", "right") for h in t.headers
        ]
        styles = [_STATUS_STYLE.get(row[-1]) for row in t.rows] if len(cmp.runs) == 1 else None
        grid(
            columns,
            t.rows,
            title=t.title,
            wide=wide,
            priority=keep,
            styles=styles,
            hint="--wide or --format csv shows all",
        )
        if t.hidden:
            note(f"… {t.hidden} more rows ({t.hidden_changed} changed); --top 0 shows all")
    out.print(verdict(cmp), highlight=False)
    out.print(f"[dim]Method: {cmp.method}[/dim]", highlight=False)


def _write(cmp: Comparison, fmt: str, top: int, wide: bool = False) -> None:
    from prof_engine import render
    from prof_engine.engine.compare.text import verdict

    if fmt == "table":
        _table(cmp, top, wide)
    elif fmt == "markdown":
        sys.stdout.write(cmp.markdown(top) + "\n")
    elif fmt == "csv":
        render.csv(cmp)
        render.err.print(f"{verdict(cmp)}\nMethod: {cmp.method}", highlight=False)
    else:
        doc = {
            "baseline": cmp.baseline,
            "runs": cmp.runs,
            "method": cmp.method,
            "verdict": verdict(cmp),
            "rows": cmp.arrow().to_pylist(),
        }
        sys.stdout.write(render.json_text(doc) + "\n")


def compare(
    runs: Annotated[
        list[str],
        typer.Argument(
            help="BASE RUN [RUN...]; with --baseline, the runs to compare (a glob such as sweep/*); directories, or URIs on object storage (s3://bucket/run).",
            show_default=False,
        ),
    ],
    baseline: Annotated[
        str | None,
        typer.Option("--baseline", "-b", metavar="RUN", help="The baseline run (then every RUN is compared with it)."),
    ] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, csv, json or markdown.")] = "table",
    fail_if: Annotated[
        list[str] | None,
        typer.Option(
            "--fail-if",
            help="Exit 3 when a significant change passes this, e.g. 'step_time > +5%' (repeatable); exit 4 when none does but an inconclusive item might (too few samples, or too wide an interval: the line says how many samples would decide). Grammar: METRIC > AMOUNT or METRIC < AMOUNT; METRIC is step_time or a level, optionally with [item], e.g. op_type[aten::mm]; AMOUNT is a signed number with %, us, ms or MB.",
        ),
    ] = None,
    level: Annotated[
        list[str] | None, typer.Option("--level", "-l", help=f"Only these levels (repeatable): {LEVEL_HELP}.")
    ] = None,
    top: Annotated[int, typer.Option(min=0, help="Rows per level in table and markdown output (0: all).")] = 10,
    noise_floor: Annotated[
        float, typer.Option(min=0, help="Changes within this % of the baseline median are 'no change'.")
    ] = 2.0,
    confidence: Annotated[float, typer.Option(min=0.5, max=0.999, help="Confidence of the intervals.")] = 0.95,
    wide: Annotated[bool, typer.Option("--wide", help="Print every column, however wide the table.")] = False,
) -> None:
    """Compare runs with a baseline: step time and breakdown, op types, ops, APIs, communication, memory.

    \b
    Example:
      prof-engine compare yesterday today --fail-if 'step_time > +5%'

    Exit status: 0 every --fail-if passes; 3 one fails (a regression); 4 none fails but one cannot be
    decided (an inconclusive item might pass it; the line says about how many samples would decide);
    2 a usage error; 1 a run that cannot be read.
    """
    from prof_engine import compare as compare_runs
    from prof_engine.engine.compare import LEVELS

    if fmt not in FORMATS:
        raise typer.BadParameter(f"unknown format {fmt!r}; use {', '.join(FORMATS)}", param_hint="--format")
    if bad := [lv for lv in level or [] if lv not in LEVELS]:
        raise typer.BadParameter(f"unknown level {bad[0]!r}; use {', '.join(LEVELS)}", param_hint="--level")
    gates = _gates(fail_if or [])
    base, others = _runs(runs, baseline)
    cmp = compare_runs(base, *others, levels=level or LEVELS, noise_floor=noise_floor / 100, confidence=confidence)
    for line in cmp.warnings:
        print(f"Warning: {line}", file=sys.stderr)
    _write(cmp, fmt, top, wide)
    try:
        reasons = cmp.check(gates)
        unsure = cmp.undecided(gates)
    except ThresholdError as e:
        raise typer.BadParameter(str(e), param_hint="--fail-if") from None
    if reasons:
        print("; ".join(reasons), file=sys.stderr)
        raise typer.Exit(3)
    if unsure:  # a CI gate must not pass on what could not be judged
        print("\n".join(unsure), file=sys.stderr)
        raise typer.Exit(4)
