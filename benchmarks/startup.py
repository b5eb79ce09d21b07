"""Start-up of the `prof-engine` console script: CPU and wall time of help, usage errors and `show`.

    python benchmarks/startup.py                 # best of 7 runs of each command
    python benchmarks/startup.py --repeat 15 --importtime show

Each command runs in a process of its own, as a user runs it (the console script beside this
interpreter, else `python -m prof_engine`). CPU s is the child's user + system time (steadier than
wall on a busy machine); each column is the best of --repeat runs. The ratio is the command's CPU
over that of `python -c 'import typer'`, the floor any typer CLI pays: issue 38 asks `--help` and
usage errors to stay within 3x. `show RUN` runs on a 4-step run imported from a small trace of
`gen_kineto.py`, made once into a temporary directory. --importtime NAME prints the 15 slowest
imports (self + children, `python -X importtime`) of the command named NAME.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gen_kineto import write_trace  # noqa: E402

# name -> the console script's arguments; None is the baseline, `python -c 'import typer'`
COMMANDS: dict[str, list[str] | None] = {
    "import typer": None,
    "--help": ["--help"],
    "show --help": ["show", "--help"],
    "compare --help": ["compare", "--help"],
    "show (no RUN)": ["show"],
    "compare (no RUNs)": ["compare"],
    "show --bogus": ["show", "run", "--bogus"],
    "show RUN": ["show", "{run}"],
}


def _entry() -> list[str]:
    script = Path(sys.executable).with_name("prof-engine")
    return [str(script)] if script.exists() else [sys.executable, "-m", "prof_engine"]


def _argv(args: list[str] | None, run: str) -> list[str]:
    if args is None:
        return [sys.executable, "-c", "import typer"]
    return [*_entry(), *(a.format(run=run) for a in args)]


def _once(argv: list[str]) -> tuple[float, float, int]:
    """(CPU s, wall s, exit code) of one run of `argv`, its output discarded."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, wall, proc.returncode


def _make_run(work: Path) -> str:
    trace, run = work / "t.json", work / "run"
    stats = write_trace(trace, 0.21, blocks=1)
    assert stats["steps"] == 4, stats  # the case: a 4-step run
    done = subprocess.run([*_entry(), "import", str(trace), "-o", str(run)], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"import failed: {done.stderr.strip()}")
    return str(run)


def _importtime(argv: list[str]) -> None:
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    if argv[0] != sys.executable:
        argv = [sys.executable, "-c", "from prof_engine._entry import main; main()", *argv[1:]]
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    rows = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            _, cum, name = line[len("import time:") :].split("|")
            rows.append((int(cum), name.rstrip()))
    for cum, name in sorted(rows, reverse=True)[:15]:
        print(f"  {cum / 1e6:6.3f} s  {name}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7, help="runs of each command; the best is kept")
    ap.add_argument("--importtime", metavar="NAME", help="also print the slowest imports of this command")
    ap.add_argument("--only", action="append", metavar="NAME", help="only these commands (repeatable)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="prof-engine-startup-"))
    try:
        run = _make_run(work)
        names = [n for n in COMMANDS if not args.only or n in args.only or n == "import typer"]
        best: dict[str, tuple[float, float, int]] = {}
        for _ in range(args.repeat):  # interleaved: a burst of load on the machine hits every command alike
            for name in names:
                cpu, wall, code = _once(_argv(COMMANDS[name], run))
                old = best.get(name, (float("inf"), float("inf"), code))
                best[name] = (min(old[0], cpu), min(old[1], wall), code)
        base = best["import typer"][0]
        print(f"best of {args.repeat}; ratio = CPU / CPU of `python -c 'import typer'`")
        print(f"{'command':<20} {'CPU s':>7} {'wall s':>7} {'ratio':>6} {'exit':>5}")
        for name in names:
            cpu, wall, code = best[name]
            print(f"{name:<20} {cpu:7.3f} {wall:7.3f} {cpu / base:5.1f}x {code:5d}")
        if args.importtime:
            print(f"\nslowest imports of `{args.importtime}` (cumulative):")
            _importtime(_argv(COMMANDS[args.importtime], run))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
