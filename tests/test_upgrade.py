"""Schema 2.0: a run of schema 1.x is refused in one line by every face, with a pointer to
`prof-engine upgrade`, which rewrites it (in place, atomically, or to -o OUT) as an import of today
stores it. (That an upgraded run equals a fresh import view for view: test_derived.py.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import prof_engine
from conftest import write_trace, x
from prof_engine import RunError, schema
from test_cli import cli, ok


def _kernel(name: str, ts: float, dur: float, correlation: int) -> dict:
    return x(name, ts, dur, cat="kernel", pid=0, tid=7, correlation=correlation, device=0, stream=7)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("upgrade")
    events = [
        x("ProfilerStep#1", 0, 100, cat="user_annotation"),
        x("aten::mm", 10, 20, **{"External id": 7}),
        x("cudaLaunchKernel", 12, 5, cat="cuda_runtime", correlation=11, **{"External id": 7}),
        _kernel("gemm", 20, 8, 11),
        _kernel("gemm", 40, 8, 12),
    ]
    return prof_engine.import_trace([write_trace(tmp / "t.json", events)], tmp / "run")


def _with_version(src: Path, dst: Path, version: str) -> Path:
    """A copy of `src` whose manifest says schema `version` (its derived columns dropped from the
    manifest's list, as a 1.x run of the collector had none)."""
    shutil.copytree(src, dst)
    manifest = json.loads((dst / "manifest.json").read_text())
    manifest["schema_version"] = version
    manifest.pop("derived")
    (dst / "manifest.json").write_text(json.dumps(manifest))
    return dst


def test_open_refuses_a_1x_run_in_one_line(fresh, tmp_path):
    old = _with_version(fresh, tmp_path / "old", "1.6")
    with pytest.raises(RunError) as e:
        prof_engine.open(old)
    assert str(e.value) == f"{old}: schema 1.6; run `prof-engine upgrade {old}` (or re-import the source)"
    future = _with_version(fresh, tmp_path / "future", "3.0")
    with pytest.raises(RunError, match=r"schema version 3\.0 is not readable by this prof-engine .*re-import"):
        prof_engine.open(future)
    with pytest.raises(RunError, match="not one this prof-engine upgrades"):
        prof_engine.upgrade(future)


@pytest.mark.parametrize(
    "args",
    [
        ["show"],
        ["info"],
        ["check"],
        ["query", "SELECT 1"],
        ["export"],
        ["report", "-o", "r.html"],
        ["compare", "RUN", "RUN"],
    ],
    ids=lambda a: a[0],
)
def test_every_command_refuses_a_1x_run_in_one_line(fresh, tmp_path, args):
    old = _with_version(fresh, tmp_path / "old", "1.6")
    command = [args[0], *(["old", *args[1:]] if args[0] != "compare" else ["old", "old"])]
    proc = cli(tmp_path, *command)
    assert proc.returncode == 1
    assert proc.stderr == "Error: old: schema 1.6; run `prof-engine upgrade old` (or re-import the source)\n"
    assert json.loads((old / "manifest.json").read_text())["schema_version"] == "1.6"  # nothing written


def test_upgrade_to_another_path_then_in_place(fresh, tmp_path):
    old = _with_version(fresh, tmp_path / "old", "1.6")
    (old / "traces").mkdir()  # what else the run holds (the collector's kept traces) goes with it
    (old / "traces" / "t.json").write_text("{}")
    proc = ok(cli(tmp_path, "upgrade", "old", "-o", "new"))
    assert proc.stderr.startswith(f"{tmp_path / 'new'}: schema {schema.schema_version()}")
    assert json.loads((old / "manifest.json").read_text())["schema_version"] == "1.6"  # left as it was
    assert cli(tmp_path, "upgrade", "old", "-o", "new").stderr == (
        f"Error: {tmp_path / 'new'}: already exists (pass --force to replace it)\n"
    )
    ok(cli(tmp_path, "upgrade", "old", "-o", "new", "--force"))
    ok(cli(tmp_path, "upgrade", "old"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "old"]  # nothing left beside them
    assert (old / "traces" / "t.json").read_text() == (tmp_path / "new" / "traces" / "t.json").read_text() == "{}"
    query = "SELECT * FROM kernel_launch"
    with prof_engine.open(fresh) as f, prof_engine.open(old) as o, prof_engine.open(tmp_path / "new") as n:
        assert o.manifest["derived"] == n.manifest["derived"] == schema.derived()
        assert o.manifest["id"] not in (f.manifest["id"], n.manifest["id"])  # a new run
        assert o.sql(query).rows() == n.sql(query).rows() == f.sql(query).rows() != []


def test_a_current_run_is_left_as_it_is_in_place(fresh, tmp_path):
    run = shutil.copytree(fresh, tmp_path / "run")
    before = (run / "manifest.json").read_text()
    assert prof_engine.upgrade(run) == run.absolute()
    assert (run / "manifest.json").read_text() == before


def test_a_recording_run_is_not_upgraded_in_place(fresh, tmp_path):
    live = _with_version(fresh, tmp_path / "live", schema.schema_version())
    manifest = json.loads((live / "manifest.json").read_text())
    (live / "manifest.json").write_text(json.dumps({**manifest, "state": "recording"}))
    with pytest.raises(RunError, match="still recording; upgrade it once its collector has closed it"):
        prof_engine.upgrade(live)
    copy = prof_engine.upgrade(live, tmp_path / "copy")  # a snapshot of it elsewhere
    with prof_engine.open(copy) as r:
        assert r.manifest["state"] == "recording" and r.manifest["derived"] == schema.derived()
