"""Shared test helpers: where the real fixtures are, and tiny synthetic traces."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO.parent / "shared" / "fixtures"


def fixture_path(*parts: str) -> Path:
    """A real profiler output under ../shared/fixtures; skips the test where it is absent (a user's clone)."""
    path = FIXTURES.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"fixture {path} is absent (it ships beside the repository in CI, not in a clone)")
    return path


def stored_rows(run: Path, table: str) -> dict[str, list[tuple]]:
    """The rows of a run's stored `table` by partition, in a canonical order: DuckDB writes the
    tables that have no `sort_by` in no set order."""
    import pyarrow.parquet as pq

    rows: dict[str, list[tuple]] = {}
    for f in (run / table).glob("**/*.parquet"):
        t = pq.read_table(f, partitioning=None)
        rows.setdefault(str(f.parent.relative_to(run)), []).extend(zip(*(c.to_pylist() for c in t.columns)))
    return {part: sorted(r, key=repr) for part, r in rows.items()}


def load_events(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Independent reader for checks: (top-level object, events) of a Chrome trace with the json module.

    Non-integer numbers are read as exact Decimals (µs with ns digits do not fit a float)."""
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rt", encoding="utf-8") as f:
        data = json.load(f, parse_float=Decimal)
    if isinstance(data, list):
        return {}, data
    return data, data["traceEvents"]


def write_trace(path: Path, events: list[dict[str, Any]], **top: Any) -> Path:
    """Write a Kineto-shaped trace (object form) with `events` and extra top-level keys."""
    path.write_text(json.dumps({"schemaVersion": 1, **top, "traceEvents": events}), encoding="utf-8")
    return path


def x(
    name: str, ts: float, dur: float, cat: str = "cpu_op", pid: int | str = 1, tid: int | str = 1, **args: Any
) -> dict:
    """A complete ('X') event, times in µs."""
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


@pytest.fixture(scope="session")
def torch_npu_db_run(tmp_path_factory):
    """(source, open run) of the torch_npu 2-rank `.db` fixture (another session of the text
    fixture's job), imported once for the session."""
    import prof_engine

    src = fixture_path("ascend", "torch_npu_2rank_level1_db")
    run = prof_engine.open(prof_engine.import_trace([src], tmp_path_factory.mktemp("npu_db") / "run"))
    yield src, run
    run.close()


def ascend_db_copy(tmp_path: Path) -> Path:
    """A writable copy of rank 0's profiler database of the `.db` fixture, in a rank directory of
    its own under `tmp_path` (import `tmp_path`); returns the database's path."""
    import shutil

    out = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    db = out / "ascend_pytorch_profiler_0.db"
    shutil.copyfile(
        fixture_path(
            "ascend",
            "torch_npu_2rank_level1_db",
            "rank0_ascend_pt",
            "ASCEND_PROFILER_OUTPUT",
            "ascend_pytorch_profiler_0.db",
        ),
        db,
    )
    return db


def ascend_database(src: Path, rank: int, name: str | None = None):
    """Rank `rank`'s profiler database (or its `name`) in the `.db` fixture at `src`, read-only,
    rows as sqlite3.Row (by index or by column name)."""
    import sqlite3

    path = src / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / (name or f"ascend_pytorch_profiler_{rank}.db")
    con = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)  # writes no -shm beside it
    con.row_factory = sqlite3.Row
    return con


@pytest.fixture(scope="session")
def torch_npu_text_run(tmp_path_factory):
    """(source, open run) of the torch_npu 2-rank text fixture, imported once for the session."""
    import prof_engine

    src = fixture_path("ascend", "torch_npu_2rank_level1_text")
    run = prof_engine.open(prof_engine.import_trace([src], tmp_path_factory.mktemp("npu") / "run"))
    yield src, run
    run.close()


# One rank of a CPU-only data-parallel job: per step, eight 256×256 matmuls then a gloo all_reduce
# of 4 MB that nothing overlaps; torch.profiler records steps 2-4 (ProfilerStep#1-3).
_GLOO_RANK = """
import sys, torch, torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, schedule
rank, out = int(sys.argv[1]), sys.argv[2]
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method=sys.argv[3], rank=rank, world_size=2)
a, grad = torch.randn(256, 256), torch.randn(1_000_000)
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=3, repeat=1),
             on_trace_ready=lambda p: p.export_chrome_trace(f"{out}/rank{rank}.json")) as prof:
    for _ in range(4):
        for _ in range(8):
            a = torch.tanh(a @ a)
        dist.all_reduce(grad)
        prof.step()
dist.destroy_process_group()
"""


@pytest.fixture(scope="session")
def gloo_2rank_run(tmp_path_factory):
    """(source, open run) of a 2-rank CPU-only gloo job recorded with torch.profiler (`_GLOO_RANK`,
    one process per rank), imported once for the session."""
    import subprocess
    import sys

    pytest.importorskip("torch")
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("this torch build has no gloo backend")
    import prof_engine

    tmp = tmp_path_factory.mktemp("gloo_2rank")
    src = tmp / "traces"
    src.mkdir()
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", _GLOO_RANK, str(rank), str(src), (tmp / "store").as_uri()],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]
    for proc in ranks:
        _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr[-2000:]
    run = prof_engine.open(prof_engine.import_trace([src], tmp / "run"))
    yield src, run
    run.close()


def cli_in_process(cwd: Path, *args: Any, env: dict[str, str] | None = None) -> Any:
    """`prof-engine ARGS` run in `cwd` through the console script's own `main` (its `Error:` lines,
    exit codes and out-of-memory answers), in this process: a subprocess costs a Python start and
    the CLI's imports (~1.5 s) per call. A subprocess.CompletedProcess, stdout and stderr apart; an
    exception that escapes `main` is a traceback on stderr and exit 1, as in a process. Only for
    tests not about the process itself (signals, its tuning, limits, umask: those run a process)."""
    import contextlib
    import io
    import subprocess
    import sys
    import traceback

    from prof_engine import _native
    from prof_engine.cli import main

    _native.load.cache_clear()  # a process reads PROF_ENGINE_NATIVE once, at its start: so does this call
    # binary-backed, as a process's: CSV and Parquet writers write to sys.stdout.buffer
    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="") for _ in range(2))
    argv = ["prof-engine", *map(str, args)]
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(cwd)
        mp.setattr(sys, "argv", argv)
        for key, value in (env or {}).items():
            mp.setenv(key, value)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if isinstance(e.code, str):
                    print(e.code, file=sys.stderr)
            except Exception:  # noqa: BLE001 - what a process would print before dying with 1
                traceback.print_exc()
                code = 1
    _native.load.cache_clear()
    said = []
    for stream in (out, err):
        stream.flush()
        said.append(stream.buffer.getvalue().decode("utf-8", "replace"))  # type: ignore[attr-defined]
    return subprocess.CompletedProcess(argv, code, *said)


# The Quick start's recording command, as the README gives it (test_readme checks it is there).
QUICK_START_RECORD = "python examples/record_trace.py -o trace.json"


@pytest.fixture(scope="session")
def quick_start_trace(tmp_path_factory) -> Path:
    """trace.json recorded by the Quick start's command, as a process, once for the session: each
    recording costs a torch start (~6 s) and the README, docs and notebook tests read the same one."""
    import shlex
    import subprocess
    import sys

    pytest.importorskip("torch")
    base = tmp_path_factory.mktemp("quick_start_trace")
    _, script, *args = shlex.split(QUICK_START_RECORD)
    done = subprocess.run(
        [sys.executable, str(REPO / script), *args], cwd=base, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{QUICK_START_RECORD}: {done.stderr[-2000:]}"
    return base / "trace.json"


@pytest.fixture(scope="session")
def nccl_2rank_run(tmp_path_factory) -> Path:
    """The 2-rank NCCL fixture imported once for the session (~4 s each time otherwise); tests only
    read it (open, query, export elsewhere), never write into it."""
    import prof_engine

    src = fixture_path("kineto", "hta_sampled_2rank_nccl")
    return Path(prof_engine.import_trace([src], tmp_path_factory.mktemp("nccl_2rank") / "run"))


@pytest.fixture(autouse=True)
def _no_inherited_terminal_width(monkeypatch):
    """COLUMNS/LINES, as pytest-xdist's workers have them (80) or readline writes them into the C
    environment, would be inherited and honoured by a CLI subprocess, cutting its tables to 80
    columns. Tests that want a width pass one."""
    import os

    for name in ("COLUMNS", "LINES"):
        monkeypatch.delenv(name, raising=False)
        os.unsetenv(name)
