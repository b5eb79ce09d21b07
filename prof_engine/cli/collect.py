"""`prof-engine collect -- python train.py ARGS`: record a program, then print its summaries."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer


def collect(
    command: Annotated[
        list[str],
        typer.Argument(
            help="The program, after --: python SCRIPT ARGS... or python -m MODULE ARGS...",
            show_default=False,
            metavar="-- PROGRAM...",
        ),
    ],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Run directory to create (default: prof_run_<time>).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing run.")] = False,
    steps: Annotated[str | None, typer.Option(help="Steps to record: N, or A-B (default: every step).")] = None,
    level: Annotated[str | None, typer.Option(help="Level_none, Level0, Level1 (default) or Level2.")] = None,
    activity: Annotated[
        list[str] | None,
        typer.Option("--activity", help="CPU or CUDA (repeatable; default: CPU, and CUDA with a GPU)."),
    ] = None,
    profile_memory: Annotated[
        bool | None, typer.Option("--profile-memory/--no-profile-memory", help="Allocator events.", show_default=False)
    ] = None,
    with_stack: Annotated[
        bool | None, typer.Option("--with-stack/--no-with-stack", help="Python stacks.", show_default=False)
    ] = None,
    sampling_interval_ms: Annotated[
        float | None, typer.Option("--sampling-interval-ms", min=1, help="System sampling period.")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            help="JSON config file (keys as PROF_ENGINE_CONFIG's; default: the file it names); options given here win."
        ),
    ] = None,
    top: Annotated[int, typer.Option(min=1, help="Rows per summary table.")] = 10,
) -> None:
    """Run a Python program under the collector, then show its run.

    \b
    Example:
      prof-engine collect -- python train.py --epochs 1

    Steps are the program's optimizer steps; each finished step is written while the program runs.
    SIGINT/SIGTERM sent here go to the program; one killed by signal N exits 128+N. If the collector's
    writer process dies, the run keeps the steps it had published, marked interrupted, and this exits 1."""
    # here, not at the top: launch loads pyarrow (the run's manifest), which --help must not
    from prof_engine import open, render
    from prof_engine.collect.config import Settings, activities_of, from_env, level_of, load
    from prof_engine.collect.launch import collect_program, steps_schedule
    from prof_engine.engine.session import step_numbers

    given = Settings(
        level=level_of(level, "--level") if level else None,
        activities=activities_of(activity, "--activity") if activity else None,
        schedule=steps_schedule(steps) if steps else None,
        profile_memory=profile_memory,
        with_stack=with_stack,
        sampling_interval_ms=sampling_interval_ms,
    )
    # options win over the config file: --config's, else the one PROF_ENGINE_CONFIG names (as the
    # collector reads it in a program run without the CLI)
    settings = given.merged_over(load(config) if config else from_env())
    run_dir = output or Path(settings.output or f"prof_run_{time.strftime('%Y%m%d_%H%M%S')}")
    done = collect_program(command, run_dir, settings, force=force)
    with open(done.run) as run:  # the writer has finished: the run holds every step it will
        if done.writer_done:
            for title, result in run.summary(top).items():
                render.table(result, title=title)
        steps_seen = len(step_numbers(run.manifest))
        state = run.manifest.get("state")
    if done.writer_done:
        render.err.print(f"recorded {steps_seen} step(s) into {done.run}", highlight=False)
    else:
        render.err.print(
            f"stopped waiting: {steps_seen} step(s) in {done.run} so far; the collector may still be writing into it",
            highlight=False,
        )
    if done.describe():
        render.err.print(done.describe(), highlight=False)
    if done.status:
        raise typer.Exit(done.status)
    if done.writer_done and state != "complete":  # the program ended in order, yet the run was never closed
        render.err.print(
            f"Error: the collector's writer process died before the run was complete (its line above says how): "
            f"{done.run} keeps the {steps_seen} step(s) it had published, marked {state}",
            highlight=False,
        )
        raise typer.Exit(1)
