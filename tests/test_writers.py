"""One writer per run, atomic replacement, and nothing left by a killed import: the run store's
side of reliability (issue 30, items 2 and 3)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import prof_engine
from conftest import REPO, write_trace, x
from prof_engine.store.files import RunLock, exchange


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "prof_engine", *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def small_trace(path: Path) -> Path:
    return write_trace(path, [x("ProfilerStep#1", 0, 100, cat="user_annotation"), x("aten::mm", 10, 50)])


def test_a_second_writer_of_a_run_fails_in_one_line(tmp_path):
    """Two imports into one `-o` at once both exited 0 and the later silently replaced the
    earlier. While a writer holds the run's lock, another import fails with one line and writes
    nothing; once it is released the import works and no lock file stays behind."""
    small_trace(tmp_path / "t.json")
    lock = RunLock(tmp_path / "run")
    try:
        proc = cli(tmp_path, "import", "t.json", "-o", "run")
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
        assert "another prof-engine process is writing this run" in proc.stderr and "Traceback" not in proc.stderr
        assert not (tmp_path / "run").exists()
    finally:
        lock.release()
    assert cli(tmp_path, "import", "t.json", "-o", "run").returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "t.json"]


def test_debris_of_a_killed_import_is_removed_by_the_next(tmp_path):
    """A kill -9 leaves the hidden staging directory (`.run.<random>.importing`, up to 28 MB) and
    possibly a `.replaced` run; the next import into the same place removes them (it holds the
    run's lock, so no live import owns them). Other names are left alone."""
    small_trace(tmp_path / "t.json")
    for name in (".run.k2j3.importing", ".run.ab12cd34.replaced", ".other.x.importing"):
        (tmp_path / name / "slices").mkdir(parents=True)
        (tmp_path / name / "slices" / "part.parquet").write_bytes(b"x" * 1000)
    assert cli(tmp_path, "import", "t.json", "-o", "run").returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.x.importing", "run", "t.json"]


def test_a_replaced_run_is_never_missing(tmp_path, monkeypatch):
    """`import --force` over a run swaps the new run in with one rename (renameat2 RENAME_EXCHANGE):
    a reader that opens the path meanwhile finds the old run or the new one, where between two
    renames it found nothing (a query failed with an internal IO error)."""
    small_trace(tmp_path / "t.json")
    run = prof_engine.import_trace([tmp_path / "t.json"], tmp_path / "run")
    first = json.loads((run / "manifest.json").read_text())["id"]
    seen = []
    rename = Path.rename

    def watched(self, target):
        result = rename(self, target)
        seen.append((run / "manifest.json").is_file())
        return result

    monkeypatch.setattr(Path, "rename", watched)
    prof_engine.import_trace([tmp_path / "t.json"], tmp_path / "run", force=True)
    assert all(seen), seen
    assert json.loads((run / "manifest.json").read_text())["id"] != first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "t.json"]


def test_exchange_swaps_two_directories(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "from_a").touch()
    (tmp_path / "b").mkdir()
    if not exchange(tmp_path / "a", tmp_path / "b"):
        pytest.skip("this system has no renameat2 RENAME_EXCHANGE")
    assert [p.name for p in (tmp_path / "b").iterdir()] == ["from_a"] and not any((tmp_path / "a").iterdir())


def _descendants(pid: int) -> list[int]:
    import psutil

    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _alive(pids: list[int]) -> list[int]:
    import psutil

    return [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


def test_workers_die_with_a_killed_import(tmp_path):
    """`import --jobs 2` killed with SIGKILL left its worker converting on its own, forever, holding
    the caller's stdout; the worker now dies with it."""
    for rank in range(3):
        subprocess.run(
            [
                sys.executable,
                str(REPO / "benchmarks" / "gen_kineto.py"),
                "--mb",
                "20",
                "--rank",
                str(rank),
                "-o",
                str(tmp_path / f"r{rank}.json"),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
    proc = subprocess.Popen(
        [sys.executable, "-m", "prof_engine", "import", "r0.json", "r1.json", "r2.json", "-o", "run", "--jobs", "2"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while not (workers := _descendants(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert workers, "the import started no worker"
        time.sleep(1.0)  # the workers are set up and converting
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 10
        while _alive(workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _alive(workers) == []
    finally:  # none left running, whatever failed
        proc.kill()
        for pid in _alive(workers):
            os.kill(pid, signal.SIGKILL)


def test_an_open_run_replaced_by_force_answers_from_the_new_run(tmp_path):
    """A query on a run opened before `import --force` replaced it failed with an internal IO
    error (its files were gone); it is answered from the run now at the path."""
    small_trace(tmp_path / "a.json")
    write_trace(
        tmp_path / "b.json",
        [x("ProfilerStep#1", 0, 100, cat="user_annotation"), *(x(f"aten::op{i}", 10 + i, 1) for i in range(5))],
    )
    run = prof_engine.import_trace([tmp_path / "a.json"], tmp_path / "run")
    with prof_engine.open(run) as r:
        assert r.sql("select count(*) from slices").rows() == [(2,)]
        prof_engine.import_trace([tmp_path / "b.json"], tmp_path / "run", force=True)
        assert r.sql("select count(*) from slices").rows() == [(6,)]
        assert r.manifest["id"] == json.loads((run / "manifest.json").read_text())["id"]
