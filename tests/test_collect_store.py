"""The live run store: batches published while a program runs, and a run opened mid-way or after a kill.

Records are written by hand into staging, as an importer would, so each expected value is known.
"""

from __future__ import annotations

import json
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import prof_engine
from prof_engine import RunError, schema
from prof_engine.store.builder import StagingSink
from prof_engine.store.live import LiveRun
from prof_engine.store.manifest import MANIFEST


def stage(live: LiveRun, index: int, steps: list[int], ops_per_step: int = 2) -> tuple:
    """One batch: a step record and `ops_per_step` host ops per step, ids `index << 40 | n`."""
    staging = live.staging_dir()
    table = schema.tables()["slices"]
    rows = {c: [] for c in table.column_names}
    seq = index << 40
    for step in steps:
        start = 1_000_000 * (step + 1)
        for kind, name, ts, dur in [("step", f"ProfilerStep#{step}", start, 900_000)] + [
            ("host_op", "aten::mm", start + 1000 * (i + 1), 500) for i in range(ops_per_step)
        ]:
            seq += 1
            values = {
                "id": seq,
                "rank": index,
                "device": "host",
                "step": step if kind == "step" else None,
                "kind": kind,
                "name": name,
                "ts": ts,
                "dur": dur,
                "pid": "1",
                "tid": "1",
            }
            for c in table.column_names:
                rows[c].append(values.get(c))
    sink = StagingSink(staging)
    sink("slices", pa.RecordBatch.from_pydict(rows, schema=table.arrow_schema))
    sink.close()
    return staging, [(index, 0, 0)]


def source() -> list[dict]:
    return [{"path": "test", "format": "collector", "rank": 0, "index": 0}]


def test_batches_become_partitions_with_unique_ids(tmp_path):
    live = LiveRun(tmp_path / "run", sources=source(), source_format="collector", manifest_interval_s=0)
    for index, steps in ((2, [0]), (3, [1, 2])):
        live.publish(*stage(live, index, steps))
    files = sorted((tmp_path / "run").rglob("*.parquet"))
    assert {p.relative_to(tmp_path / "run").parent.as_posix() for p in files} == {"slices/rank=0/device=host"}
    # a file per published batch, each holding its batch's whole steps
    assert sorted(sorted(set(pq.read_table(f, columns=["step"]).column(0).to_pylist())) for f in files) == [[0], [1, 2]]
    live.close({"k": "v"})
    assert not (tmp_path / "run" / ".pending").exists()
    with prof_engine.open(tmp_path / "run") as run:
        assert run.sql("select count(*), count(distinct id) from slices").rows() == [(9, 9)]
        assert run.sql("select step, count(*) from slices where kind = 'host_op' group by 1 order by 1").rows() == [
            (0, 2),
            (1, 2),
            (2, 2),
        ]
        assert run.manifest["state"] == "complete" and run.manifest["metadata"] == {"k": "v"}
        assert run.manifest["tables"]["slices"] == 9
        # closed, the run is finalised whole as an import is: every derived table and column stored
        assert run.manifest["schema_version"] == schema.schema_version()
        assert run.manifest["derived"] == schema.derived() and run.manifest["tables"]["lane_totals"] == 3
        assert [r[:3] for r in run.view("step_trace").rows()] == [(0, "host", 0), (0, "host", 1), (0, "host", 2)]


def test_a_run_opens_while_recording_and_after_a_kill(tmp_path):
    """The manifest on disk lags (written at most once a second); opening a run still `recording`
    recomputes rows, steps and span from the partition files; leftovers in .pending are ignored."""
    live = LiveRun(tmp_path / "run", sources=source(), source_format="collector", manifest_interval_s=3600)
    live.publish(*stage(live, 2, [0, 1]))
    live.publish(*stage(live, 3, [2]))
    half = live.staging_dir()  # a batch the kill interrupted: staged, never published
    shutil.copytree(next((tmp_path / "run" / "slices").rglob("*.parquet")).parent, half / "slices")
    on_disk = json.loads((tmp_path / "run" / MANIFEST).read_text())
    assert on_disk["state"] == "recording" and on_disk["steps"] == [] and on_disk["tables"]["slices"] == 0
    with prof_engine.open(tmp_path / "run") as run:
        assert sorted(s["step"] for s in run.manifest["steps"]) == [0, 1, 2]
        assert run.manifest["tables"]["slices"] == 9
        assert run.sql("select count(*) from slices").rows() == [(9,)]
        assert len(run.view("step_trace")) == 3
        assert run.manifest["start_ns"] == 1_000_000 and run.manifest["end_ns"] == 3_000_000 + 900_000


def test_existing_run_is_not_replaced_without_force(tmp_path):
    LiveRun(tmp_path / "run", sources=source(), source_format="collector").close()
    with pytest.raises(RunError, match="already exists"):
        LiveRun(tmp_path / "run", sources=source(), source_format="collector")
    LiveRun(tmp_path / "run", sources=source(), source_format="collector", force=True).close()
    (tmp_path / "notarun").mkdir()
    (tmp_path / "notarun" / "precious.txt").write_text("x")
    with pytest.raises(RunError, match="not a prof-engine run"):
        LiveRun(tmp_path / "notarun", sources=source(), source_format="collector", force=True)


def test_live_files_are_owner_writable_only(tmp_path):
    old = os.umask(0)
    try:
        live = LiveRun(tmp_path / "run", sources=source(), source_format="collector")
        live.publish(*stage(live, 2, [0]))
        live.close()
    finally:
        os.umask(old)
    for p in (tmp_path / "run").rglob("*"):
        assert not p.stat().st_mode & 0o022, p


@pytest.mark.parametrize("closed", [False, True])
def test_stream_waits_span_batches(tmp_path, closed):
    """A stream's tasks may span batches, so a batch cannot know a task's wait: it is stored NULL
    in the batch's files. A run still recording opens through a snapshot finalised whole, and a
    closed run is finalised whole: op_summary has the waits across the two batches either way."""
    live = LiveRun(tmp_path / "run", sources=source(), source_format="collector", manifest_interval_s=0)
    table = schema.tables()["slices"]
    for index, kernels in ((2, [(1_000, 500), (2_000, 500)]), (3, [(4_000, 500)])):
        staging = live.staging_dir()
        rows = {c: [] for c in table.column_names}
        for n, (ts, dur) in enumerate(kernels, 1):
            values = {
                "id": (index << 40) | n,
                "rank": index,
                "device": "gpu0",
                "kind": "kernel",
                "name": "k",
                "ts": ts,
                "dur": dur,
                "stream": 7,
            }
            for c in table.column_names:
                rows[c].append(values.get(c))
        sink = StagingSink(staging)
        sink("slices", pa.RecordBatch.from_pydict(rows, schema=table.arrow_schema))
        sink.close()
        live.publish(staging, [(index, 0, 0)])
    batch_waits = pa.concat_tables(
        [pq.read_table(f, columns=["wait"]) for f in (tmp_path / "run" / "slices").rglob("*.parquet")]
    )
    assert batch_waits.column(0).null_count == 3
    if closed:
        live.close()
    with prof_engine.open(tmp_path / "run") as run:
        assert run.manifest["state"] == ("complete" if closed else "recording")
        assert run.sql("SELECT count(wait) FROM slices").rows() == [(3,)]
        waits = run.sql('SELECT "Task Wait Time(us)" FROM op_summary ORDER BY "Task Start Time(us)"').rows()
        assert waits == [(0.0,), (0.5,), (1.5,)]


def test_a_recording_run_is_read_through_a_snapshot_removed_at_close(tmp_path, monkeypatch):
    """Opening a run still recording changes nothing in it: its snapshot, finalised whole, lives in
    a private temporary directory, gone once the run is closed; a query with --safe reads it."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    live = LiveRun(tmp_path / "run", sources=source(), source_format="collector", manifest_interval_s=0)
    live.publish(*stage(live, 2, [0, 1]))
    before = sorted(p.relative_to(tmp_path / "run") for p in (tmp_path / "run").rglob("*"))
    with prof_engine.open(tmp_path / "run", read_only_sql=True) as run:
        assert [p.name.startswith("prof-engine-snapshot-") for p in (tmp_path / "tmp").iterdir()] == [True]
        assert run.sql("SELECT count(*) FROM lane_totals").rows() == [(2,)]
    assert not any(p.name.startswith("prof-engine-snapshot-") for p in (tmp_path / "tmp").iterdir())
    assert sorted(p.relative_to(tmp_path / "run") for p in (tmp_path / "run").rglob("*")) == before
