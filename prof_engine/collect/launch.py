"""Run a Python program under the collector, from outside it: what `prof-engine collect` does.

`collect_program(["python", "train.py", "--lr", "0.1"], "run", settings)` writes the settings to
a private config file, starts `python -m prof_engine.collect.run train.py --lr 0.1` with
`PROF_ENGINE_CONFIG` naming it, waits for the program and returns the run it recorded with the
program's exit status.

The program is supervised: SIGINT and SIGTERM sent to this process are passed on to it, and the
kernel kills it when this process dies (even by kill -9), so it never runs on unwatched. Its
writer process (see `handoff`) outlives it to publish what it was handed; the run is read only
once the writer has finished, told by the end-of-file of a pipe that only the writer holds open.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from prof_engine._process import die_with_parent, untuned_environ
from prof_engine.collect.config import ENV, Settings
from prof_engine.collect.schedule import Schedule, schedule
from prof_engine.errors import CollectError
from prof_engine.store.manifest import MANIFEST, check_replaceable

_PYTHON = re.compile(r"^python[0-9.]*(\.exe)?$")
_OPTIONS_WITH_VALUE = ("-W", "-X", "-Q")
# Names the descriptor of the pipe whose end-of-file says the writer is done (run.py hands it on).
WRITER_FD_ENV = "PROF_ENGINE_WRITER_FD"
FORWARDED = (signal.SIGINT, signal.SIGTERM)
_SI_USER_MAX = 0  # si_code <= 0: a process sent the signal (kill, tgkill, sigqueue); > 0: the kernel (a terminal)


@dataclass(frozen=True)
class Collected:
    """What `collect_program` made: the run directory and how the program ended."""

    run: Path
    returncode: int  # as subprocess gives it: -N when signal N killed the program
    signal: int | None = None  # the first SIGINT/SIGTERM this process got (and passed on) while it ran
    writer_done: bool = True  # False when a second signal stopped the wait for the writer: the run may grow

    @property
    def status(self) -> int:
        """The exit status to pass on, as a shell gives it: 128+N for a program killed by signal N;
        128+N too for one that ended in order after this process was sent signal N."""
        if self.returncode < 0:
            return 128 - self.returncode
        if self.returncode == 0 and self.signal is not None:
            return 128 + self.signal
        return self.returncode

    def describe(self) -> str:
        """How the program ended, in words ("" for a plain exit 0)."""
        if self.returncode < 0:
            return f"the program was killed by {_signal_name(-self.returncode)}"
        if self.signal is not None:
            return f"the program exited with status {self.returncode} after {_signal_name(self.signal)}"
        return f"the program exited with status {self.returncode}" if self.returncode else ""


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
        raise CollectError(
            f"{argv[0]}: prof-engine collect runs Python programs: prof-engine collect -- python train.py ARGS"
        )
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
    check_replaceable(run, force)
    if run.exists():
        shutil.rmtree(run)


def collect_program(
    command: Sequence[str], output: Path | str, settings: Settings = Settings(), *, force: bool = False
) -> Collected:
    """Run `command` (a Python program) under the collector into the run `output`."""
    run = Path(output).absolute()
    child = child_command(command)
    _claim(run, force)
    settings = replace(settings, output=str(run), schedule=settings.schedule or steps_schedule(None))
    with tempfile.TemporaryDirectory(prefix="prof_engine_collect_") as tmp:
        config = Path(tmp) / "config.json"
        config.write_text(json.dumps(settings.as_json()), encoding="utf-8")
        # the program is the user's: none of the CLI's own tuning (`_process.tune_owned_process`)
        env = {**untuned_environ(), ENV: str(config), "WORLD_SIZE": os.environ.get("WORLD_SIZE", "1")}
        done = _supervise(child, env, run)
    if not (run / MANIFEST).is_file():
        how = done.describe() or "the program exited with status 0"
        raise CollectError(f"{how} before anything was recorded")
    return done


def _supervise(child: list[str], env: dict[str, str], run: Path) -> Collected:
    """Run `child`, passing SIGINT/SIGTERM on to it, until it and its writer have ended.

    The signals are blocked here and taken with sigtimedwait, which says who sent each: Ctrl-C in
    a terminal reaches the whole foreground group, the program included, and is not sent twice (a
    second SIGINT could break the program's orderly stop). One that reaches another thread of this
    process (numpy's, Arrow's) comes through the handler instead and is passed on."""
    if not hasattr(signal, "sigtimedwait") or threading.current_thread() is not threading.main_thread():
        # not Linux, or not where signals can be handled: no supervision beyond waiting
        with subprocess.Popen(child, env=env) as proc:
            return Collected(run, proc.wait())
    received: list[tuple[int, bool]] = []  # (signal, sent by a process)

    def handler(signum: int, frame: object) -> None:
        received.append((signum, True))

    parent = os.getpid()
    mask = {*FORWARDED, signal.SIGCHLD}  # SIGCHLD only wakes the wait below at once
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, mask)
    old_handlers = {s: signal.signal(s, handler) for s in FORWARDED}
    read_end, write_end = os.pipe()

    def in_child() -> None:  # between fork and exec
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        die_with_parent(parent)

    try:
        try:
            proc = subprocess.Popen(
                child, env={**env, WRITER_FD_ENV: str(write_end)}, pass_fds=(write_end,), preexec_fn=in_child
            )  # noqa: PLW1509 - only a mask and a prctl run there
        finally:
            os.close(write_end)
        first: int | None = None
        code: int | None = None
        waited = time.monotonic()
        told = False
        while True:
            info = signal.sigtimedwait(mask, 0.1)
            if info is not None and info.si_signo in FORWARDED:
                received.append((info.si_signo, info.si_code <= _SI_USER_MAX))
            while received:
                signum, sent = received.pop(0)
                if code is None:
                    first = first or signum
                    if sent:
                        proc.send_signal(signum)
                else:  # after the program: stop waiting for the writer
                    return Collected(run, code, first or signum, writer_done=False)
            if code is None:
                code = proc.poll()
                waited = time.monotonic()
            elif _closed(read_end):
                return Collected(run, code, first)
            elif not told and time.monotonic() - waited > 1:
                told = True
                print(
                    f"prof-engine: waiting for the collector to finish writing {run} (Ctrl-C to stop waiting)",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        os.close(read_end)
        for s, h in old_handlers.items():
            signal.signal(s, h)
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def _closed(fd: int) -> bool:
    """Whether every writer end of the pipe `fd` is closed (nothing is ever written into it)."""
    return bool(select.select([fd], [], [], 0)[0]) and os.read(fd, 1) == b""


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
