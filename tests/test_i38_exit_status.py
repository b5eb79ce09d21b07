"""Exit status says what happened (issue 38, item 20).

When the collector's writer process died, `prof-engine collect` exited 0 and the run stayed
`state: recording` with `.pending/` left behind; an import whose post-import summary failed (out
of memory under a limit) exited 1 after publishing a complete run, naming a query setting. The
oracle: the writer's process killed by the test itself (kill -9, as test_collect_process does to
the program), the run directory's files, and the exit status.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

import prof_engine
from conftest import write_trace, x
from prof_engine import mstx
from prof_engine.cli import app

# Steps by optimizer steps; after the third it kills its own collector's writer (kill -9) and goes
# on stepping, then exits 0: the program is fine, its recording is not.
WRITER_KILLING_PROGRAM = """
import os, signal, time, torch
from prof_engine.collect import profiler
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(6):
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    if step == 3:
        deadline = time.monotonic() + 60  # until the writer has published a step (twice a second at most)
        while not any(profiler._running.run_path.glob("slices/**/*.parquet")) and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(profiler._running._writer.pid, signal.SIGKILL)
        time.sleep(0.2)
"""


def test_collect_exits_1_when_its_writer_dies_and_leaves_a_clear_run(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "prog.py").write_text(WRITER_KILLING_PROGRAM)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "prof_engine",
            "collect",
            "-o",
            "run",
            "--level",
            "Level_none",
            "--",
            "python",
            "prog.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    run = tmp_path / "run"
    assert done.returncode == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert "the collector's writer process was killed by SIGKILL before the run was complete" in done.stderr
    (error,) = [ln for ln in done.stderr.splitlines() if ln.startswith("Error:")]
    assert error.startswith("Error: the collector's writer process died before the run was complete")
    assert "marked interrupted" in error
    assert json.loads((run / "manifest.json").read_text())["state"] == "interrupted"
    assert not (run / ".pending").exists()
    with prof_engine.open(run) as r:  # what was published opens
        steps = len({s["step"] for s in r.manifest["steps"]})
    assert steps >= 1 and f"keeps the {steps} step(s)" in error


def test_a_profiler_whose_writer_died_marks_its_run_and_says_so(tmp_path, caplog):
    run = tmp_path / "run"
    prof = prof_engine.Profiler(run, profiler_level="Level_none", schedule=prof_engine.schedule(active=1))
    for _ in range(2):
        mstx.mark("m")
        prof.step()
    os.kill(prof._writer.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while prof._writer._proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    with caplog.at_level("ERROR", logger="prof_engine"):
        prof.step()
        prof.stop()
    said = [r.getMessage() for r in caplog.records if "before the run was complete" in r.getMessage()]
    assert said == [
        f"prof_engine: the collector's writer process was killed by SIGKILL before the run was complete: {run} "
        "keeps the steps it had published (state interrupted); the batch it was writing is lost"
    ]
    assert json.loads((run / "manifest.json").read_text())["state"] == "interrupted"
    assert not (run / ".pending").exists()
    with prof_engine.open(run) as r:
        assert r.manifest["state"] == "interrupted"


def _trace(tmp_path):
    events = [x("ProfilerStep#1", 0, 100, cat="user_annotation"), x("aten::mm", 10, 50)]
    return write_trace(tmp_path / "t.json", events)


def _failing_open(*args, **kwargs):
    raise MemoryError("Out of Memory Error: could not allocate block of size 256 KiB (set memory_limit)")


def test_an_import_whose_summary_fails_still_exits_0_with_one_warning(tmp_path, monkeypatch):
    monkeypatch.setattr(prof_engine, "open", _failing_open)
    done = CliRunner().invoke(app, ["import", str(_trace(tmp_path)), "-o", str(tmp_path / "run"), "--jobs", "2"])
    assert done.exit_code == 0, done.output
    lines = done.stderr.splitlines()
    assert any(ln.startswith(f"imported 1 file(s) (kineto) into {tmp_path / 'run'}: 2 records") for ln in lines)
    warned = [ln for ln in lines if "summary could not be computed" in ln]
    assert len(warned) == 1 and "out of memory" in warned[0] and "memory_limit" not in warned[0]
    assert f"`prof-engine check {tmp_path / 'run'}` computes it" in warned[0]
    monkeypatch.undo()
    with prof_engine.open(tmp_path / "run") as r:  # the run is complete and reads
        assert r.sql("SELECT count(*) FROM slices WHERE name = 'aten::mm'").rows() == [(1,)]
    # --strict cannot pass what it could not check
    monkeypatch.setattr(prof_engine, "open", _failing_open)
    strict = CliRunner().invoke(
        app, ["import", str(_trace(tmp_path)), "-o", str(tmp_path / "run2"), "--strict", "--jobs", "1"]
    )
    assert strict.exit_code == 1 and "summary could not be computed" in strict.stderr
