"""Run a Python program under the collector, from outside it: what `prof-engine collect` does.

`collect_program(["python", "train.py", "--lr", "0.1"], "run", settings)` writes the settings to
a private config file, starts `python -m prof_engine.collect.run train.py --lr 0.1` with
`PROF_ENGINE_CONFIG` naming it, waits for the program and returns the run it recorded with the
program's exit status.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from prof_engine.collect.config import ENV, Settings
from prof_engine.collect.schedule import Schedule, schedule
from prof_engine.errors import CollectError, RunError
from prof_engine.store import MANIFEST

_PYTHON = re.compile(r"^python[0-9.]*(\.exe)?$")
_OPTIONS_WITH_VALUE = ("-W", "-X", "-Q")


@dataclass(frozen=True)
class Collected:
    """What `collect_program` made: the run directory and the program's exit status."""

    run: Path
    returncode: int


def steps_schedule(steps: str | None) -> Schedule:
    """`--steps`: "A-B" records steps A to B, "N" step N alone; None every step. A warmup step
    precedes the first recorded one when there is room for it."""
    if steps is None:
        return schedule(active=1)
    m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", steps)
    if not m or (m.group(2) is not None and int(m.group(2)) < int(m.group(1))):
        raise CollectError(f"--steps {steps!r}: give a step N or a range A-B of step numbers (A <= B)")
    first, last = int(m.group(1)), int(m.group(2) or m.group(1))
    warmup = 1 if first > 0 else 0
    return schedule(wait=0, warmup=warmup, active=last - first + 1, repeat=1, skip_first=first - warmup)


def child_command(command: Sequence[str]) -> list[str]:
    """`python [options] script|-m module args` → the same under `-m prof_engine.collect.run`."""
    if not command:
        raise CollectError("nothing to run: give the program after --, e.g. prof-engine collect -- python train.py")
    argv = list(command)
    if argv[0].endswith(".py"):
        argv = [sys.executable, *argv]
    if not _PYTHON.match(Path(argv[0]).name):
        raise CollectError(f"{argv[0]}: prof-engine collect runs Python programs: "
                           "prof-engine collect -- python train.py ARGS")
    i = 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-m":
        if argv[i] == "-c":
            raise CollectError("python -c is not supported: put the program in a file")
        i += 2 if argv[i] in _OPTIONS_WITH_VALUE else 1
    if i >= len(argv):
        raise CollectError("no script to run: prof-engine collect -- python train.py ARGS")
    if argv[i] != "-m" and not Path(argv[i]).is_file():  # before a run is made for it
        raise CollectError(f"{argv[i]}: no such file (the Python program to profile)")
    return [*argv[:i], "-m", "prof_engine.collect.run", *argv[i:]]


def _claim(run: Path, force: bool) -> None:
    if not run.exists():
        return
    if not force:
        raise RunError(f"{run}: already exists (pass --force to replace it)")
    if not (run / MANIFEST).is_file():
        raise RunError(f"{run}: exists and is not a prof-engine run; refusing to replace it")
    shutil.rmtree(run)


def collect_program(command: Sequence[str], output: Path | str, settings: Settings = Settings(), *,
                    force: bool = False) -> Collected:
    """Run `command` (a Python program) under the collector into the run `output`."""
    run = Path(output).absolute()
    child = child_command(command)
    _claim(run, force)
    settings = replace(settings, output=str(run), schedule=settings.schedule or steps_schedule(None))
    with tempfile.TemporaryDirectory(prefix="prof_engine_collect_") as tmp:
        config = Path(tmp) / "config.json"
        config.write_text(json.dumps(settings.as_json()), encoding="utf-8")
        env = {**os.environ, ENV: str(config), "WORLD_SIZE": os.environ.get("WORLD_SIZE", "1")}
        code = subprocess.run(child, env=env).returncode
    if not (run / MANIFEST).is_file():
        raise CollectError(f"the program exited with status {code} before anything was recorded")
    return Collected(run, code)
