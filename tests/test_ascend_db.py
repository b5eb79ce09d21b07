"""torch_npu's `.db` export (export_type=db) imports into the same canonical tables as its text export.

Fixtures: `ascend/torch_npu_2rank_level1_db` and `ascend/torch_npu_2rank_level1_text` are the same
script, ranks and profiler settings (Level1, one active step, ProfilerStep#50) but two collection
sessions, ~28 minutes apart: the db starts at ~1736410576 s, the text at ~1736408883 s, their
profiler_info `_export_type` differ, their HCCL ops are `hcom_allReduce__210_*` vs `__586_*`. So:

* What does not depend on the run agrees exactly between the two forms: records per kind, steps,
  devices, op types and core types with their counts (op_statistic), API levels and names with
  their counts (api_statistic) — except `aclrtQueryEventStatus`, a polling call whose count
  varies run to run (13 vs 10 on rank 0, 12 vs 11 on rank 1).
* Times cannot agree between two runs (op times differ by ~1 %, step lanes by up to 4 %), so the
  db form's times are checked against the same run's own numbers instead: step_trace against the
  vendor's analysis.db StepTraceTime (every column, to 0.001 µs — it matches to the ns), and
  op_statistic / api_statistic against aggregates computed straight from the database with sqlite3
  (msprof-analyze's compute_op_sum: COMPUTE_TASK_INFO ⋈ TASK; CANN_API by level and name).

Differences between the forms that the db cannot remove (all outside every view):
* Tasks that are not compute kernels have the host-side task type in the db (`MEMCPY_ASYNC`,
  `EVENT_RECORD`) where trace_view.json has the device SQE type (`PCIE_DMA_SQE`, `EVENT_RECORD_SQE`).
* The db lists 17 FFTS+ parent tasks per rank (compute-typed TASK rows without compute info whose
  subtasks are the kernels and HCCL tasks) that trace_view.json leaves out: kind `other` here.
* Only the db names the HCCL group of comm rows (`group_name`); trace_view.json does not.
"""

from __future__ import annotations

import sqlite3

import pytest

import prof_engine
from conftest import ascend_database, ascend_db_copy
from prof_engine.errors import InputError

POLLING_APIS = ("aclrtQueryEventStatus",)
STEP_TRACE_COLUMNS = {  # analysis.db StepTraceTime column → step_trace column
    "computing": "Computing",
    "communication_not_overlapped": "Communication(Not Overlapped)",
    "overlapped": "Overlapped",
    "communication": "Communication",
    "free": "Free",
    "stage": "Stage",
    "bubble": "Bubble",
    "communication_not_overlapped_and_exclude_receive": "Communication(Not Overlapped and Exclude Receive)",
    "preparing": "Preparing",
}


@pytest.fixture(scope="module")
def runs(torch_npu_db_run, torch_npu_text_run):
    """(db source, db run, text run), imported once for the session (conftest)."""
    return torch_npu_db_run[0], torch_npu_db_run[1], torch_npu_text_run[1]


def _rows(run, sql: str, *params) -> list[dict]:
    return run.sql(sql, list(params)).arrow().to_pylist()


def test_imports_as_torch_npu_with_ranks_devices_and_steps(runs):
    _, db_run, text_run = runs
    for run in (db_run, text_run):
        assert run.sql("""SELECT DISTINCT rank, device, step FROM slices WHERE device <> 'host' AND step IS NOT NULL
                          ORDER BY ALL""").rows() == [(0, "npu0", 50), (1, "npu1", 50)]
    (source,) = {s["format"] for s in db_run.manifest["sources"]}
    assert source == "torch_npu"


@pytest.mark.parametrize("rank", [0, 1])
def test_record_counts_per_kind_equal_the_text_form(runs, rank):
    _, db_run, text_run = runs
    sql = """SELECT device = 'host' AS host, kind, count(*) FROM slices WHERE rank = ? AND kind <> 'api'
              AND NOT (kind = 'other' AND device <> 'host') GROUP BY ALL ORDER BY ALL"""
    assert db_run.sql(sql, [rank]).rows() == text_run.sql(sql, [rank]).rows()
    apis = f"SELECT count(*) FROM slices WHERE rank = ? AND kind = 'api' AND name NOT LIKE '%@{POLLING_APIS[0]}'"
    assert db_run.sql(apis, [rank]).rows() == text_run.sql(apis, [rank]).rows()
    kinds = dict(db_run.sql("SELECT kind, count(*) FROM slices WHERE rank = ? GROUP BY kind", [rank]).rows())
    assert (kinds["kernel"], kinds["comm"], kinds["comm_task"], kinds["host_op"], kinds["step"]) == (
        187,
        4,
        296,
        859,
        1,
    )
    ((comm,),) = db_run.sql("SELECT count(*) FROM comm WHERE rank = ?", [rank]).rows()
    assert comm == 300  # one per HCCL op and one per plane task, as the text form


@pytest.mark.parametrize("rank", [0, 1])
def test_op_statistic_has_the_text_forms_op_types_and_counts(runs, rank):
    _, db_run, text_run = runs
    sql = """SELECT "Device", "OP Type", "Core Type", "Count" FROM op_statistic WHERE "Rank" = ? ORDER BY ALL"""
    ours, theirs = _rows(db_run, sql, rank), _rows(text_run, sql, rank)
    assert len(ours) > 60 and ours == theirs  # device kernels by op type and host ops by name


@pytest.mark.parametrize("rank", [0, 1])
def test_api_statistic_has_the_text_forms_apis_and_counts(runs, rank):
    _, db_run, text_run = runs
    sql = """SELECT "Level", "API Name", "Count" FROM api_statistic WHERE "Rank" = ? ORDER BY ALL"""
    ours = {(r["Level"], r["API Name"]): r["Count"] for r in _rows(db_run, sql, rank)}
    theirs = {(r["Level"], r["API Name"]): r["Count"] for r in _rows(text_run, sql, rank)}
    assert ours.keys() == theirs.keys() and {level for level, _ in ours} == {"acl", "node", "hccl"}
    assert {k: v for k, v in ours.items() if k[1] not in POLLING_APIS} == {
        k: v for k, v in theirs.items() if k[1] not in POLLING_APIS
    }


@pytest.mark.parametrize("rank", [0, 1])
def test_step_trace_matches_the_vendors_analysis_db(runs, rank):
    src, db_run, _ = runs
    with ascend_database(src, rank, "analysis.db") as con:
        (vendor,) = [dict(r) for r in con.execute("SELECT * FROM StepTraceTime")]
    (ours,) = _rows(db_run, """SELECT * FROM step_trace WHERE "Rank" = ? AND "Step" IS NOT NULL""", rank)
    assert ours["Step"] == int(vendor["step"])
    for col, view_col in STEP_TRACE_COLUMNS.items():
        assert ours[view_col] == pytest.approx(float(vendor[col]), abs=0.001), view_col


@pytest.mark.parametrize("rank", [0, 1])
def test_step_trace_has_the_text_forms_shape(runs, rank):
    """Same steps, devices and bubble; the times are another run's: the device lanes within 5 %
    (Preparing, host-side latency, differs most between runs: 14 % on rank 1)."""
    _, db_run, text_run = runs
    sql = """SELECT * FROM step_trace WHERE "Rank" = ? ORDER BY "Step" NULLS LAST"""
    ours, theirs = _rows(db_run, sql, rank), _rows(text_run, sql, rank)
    assert [(r["Device"], r["Step"], r["Bubble"]) for r in ours] == [
        (r["Device"], r["Step"], r["Bubble"]) for r in theirs
    ]
    for col in ("Computing", "Communication", "Free", "Stage"):
        assert ours[0][col] == pytest.approx(theirs[0][col], rel=0.05), col


@pytest.mark.parametrize("rank", [0, 1])
def test_op_statistic_times_match_the_database(runs, rank):
    """Device op_statistic = COMPUTE_TASK_INFO ⋈ TASK grouped by op type and core type, straight from sqlite."""
    src, db_run, _ = runs
    with ascend_database(src, rank) as con:
        want = {
            (r["op"], r["core"]): r
            for r in con.execute("""
            SELECT o.value AS op, c.value AS core, count(*) AS n, sum(t.endNs - t.startNs) / 1e3 AS total,
                   min(t.endNs - t.startNs) / 1e3 AS lo, avg(t.endNs - t.startNs) / 1e3 AS mean,
                   max(t.endNs - t.startNs) / 1e3 AS hi
            FROM COMPUTE_TASK_INFO k JOIN TASK t USING (globalTaskId)
            JOIN STRING_IDS o ON o.id = k.opType JOIN STRING_IDS c ON c.id = k.taskType GROUP BY 1, 2""")
        }
    grand = sum(r["total"] for r in want.values())
    ours = {
        (r["OP Type"], r["Core Type"]): r
        for r in _rows(db_run, """SELECT * FROM op_statistic WHERE "Rank" = ? AND "Device" <> 'host'""", rank)
    }
    assert ours.keys() == want.keys()
    for key, w in want.items():
        o = ours[key]
        assert o["Count"] == w["n"], key
        for col, v in (
            ("Total Time(us)", "total"),
            ("Min Time(us)", "lo"),
            ("Avg Time(us)", "mean"),
            ("Max Time(us)", "hi"),
        ):
            assert o[col] == pytest.approx(w[v], abs=0.01), (key, col)
        assert o["Ratio(%)"] == pytest.approx(100 * w["total"] / grand, abs=0.01), key


@pytest.mark.parametrize("rank", [0, 1])
def test_api_statistic_times_match_the_database(runs, rank):
    """api_statistic = CANN_API grouped by level (ENUM_API_TYPE) and name, straight from sqlite."""
    src, db_run, _ = runs
    with ascend_database(src, rank) as con:
        want = {
            (r["level"], r["name"]): r
            for r in con.execute("""
            SELECT e.name AS level, s.value AS name, count(*) AS n, sum(a.endNs - a.startNs) / 1e3 AS total,
                   min(a.endNs - a.startNs) / 1e3 AS lo, avg(a.endNs - a.startNs) / 1e3 AS mean,
                   max(a.endNs - a.startNs) / 1e3 AS hi
            FROM CANN_API a JOIN STRING_IDS s ON s.id = a.name JOIN ENUM_API_TYPE e ON e.id = a.type GROUP BY 1, 2""")
        }
    ours = {
        (r["Level"], r["API Name"]): r for r in _rows(db_run, """SELECT * FROM api_statistic WHERE "Rank" = ?""", rank)
    }
    assert ours.keys() == want.keys()
    for key, w in want.items():
        o = ours[key]
        assert o["Count"] == w["n"], key
        for col, v in (("Time(us)", "total"), ("Min(us)", "lo"), ("Avg(us)", "mean"), ("Max(us)", "hi")):
            assert o[col] == pytest.approx(w[v], abs=0.01), (key, col)


def test_api_names_and_levels_are_written_as_trace_view_writes_them(runs):
    _, db_run, text_run = runs
    sql = """SELECT DISTINCT regexp_extract(name, '^[^@]*@') AS layer, json_extract_string(args, '$.level') AS level
             FROM slices WHERE kind = 'api' ORDER BY ALL"""
    assert (
        db_run.sql(sql).rows()
        == text_run.sql(sql).rows()
        == [("AscendCL@", "acl"), ("Hccl@", "hccl"), ("Node@", "node")]
    )


def test_input_shapes_and_types_of_host_ops_are_not_swapped(runs):
    """This torch_npu writes PYTORCH_API's inputDtypes and inputShapes columns swapped; the importer
    recognises which is which (dims have no letters) and gives the text form's values."""
    _, db_run, text_run = runs
    sql = """SELECT name, input_shapes, input_types, count(*) FROM slices WHERE rank = 0 AND kind = 'host_op'
             AND input_types IS NOT NULL GROUP BY ALL ORDER BY ALL"""
    ours = db_run.sql(sql).rows()
    assert ours == text_run.sql(sql).rows()
    assert (
        "aten::empty",
        ";\r\n;\r\n;\r\n;\r\n;\r\n",
        "ScalarList;\r\nScalar;\r\nScalar;\r\nNone;\r\nScalar;\r\nNone",
    ) in [r[:3] for r in ours]


def _rank_dir(tmp_path):
    out = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    return out


def test_a_database_without_the_record_tables_is_one_error_naming_it(tmp_path):
    out = _rank_dir(tmp_path)
    with sqlite3.connect(out / "ascend_pytorch_profiler_0.db") as con:
        con.execute("CREATE TABLE META_DATA (name TEXT, value TEXT)")
    con.close()
    with pytest.raises(InputError, match=r"ascend_pytorch_profiler_0\.db: not an Ascend profiler database"):
        prof_engine.import_trace([tmp_path], tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_file_that_is_not_sqlite_is_one_error_naming_it(tmp_path):
    out = _rank_dir(tmp_path)
    (out / "ascend_pytorch_profiler_0.db").write_bytes(b"not a database, " * 100)
    with pytest.raises(InputError, match=r"ascend_pytorch_profiler_0\.db: cannot read as an SQLite"):
        prof_engine.import_trace([tmp_path], tmp_path / "run")


def test_column_names_that_drift_are_tolerated(tmp_path):
    """Newer schemas rename blockDim → blockNum and drop columns; a required column missing is an error."""
    db = ascend_db_copy(tmp_path)
    with sqlite3.connect(db) as con:
        con.execute("ALTER TABLE COMPUTE_TASK_INFO RENAME COLUMN blockDim TO blockNum")
        con.execute("ALTER TABLE TASK DROP COLUMN modelId")
        con.execute("ALTER TABLE CANN_API DROP COLUMN depth")
    con.close()
    run = prof_engine.open(prof_engine.import_trace([tmp_path], tmp_path / "run"))
    try:
        assert dict(
            run.sql("SELECT kind, count(*) FROM slices WHERE kind IN ('kernel', 'api') GROUP BY kind").rows()
        ) == {"kernel": 187, "api": 710}
    finally:
        run.close()
    with sqlite3.connect(db) as con:
        con.execute("ALTER TABLE TASK RENAME COLUMN startNs TO beginNs")
    con.close()
    with pytest.raises(InputError, match=r"ascend_pytorch_profiler_0\.db: table TASK lacks column startNs"):
        prof_engine.import_trace([tmp_path], tmp_path / "run2")


@pytest.mark.parametrize("rank", [0, 1])
def test_kernel_details_match_the_database(runs, rank):
    """kernel_details' compute tasks carry COMPUTE_TASK_INFO's block dims, formats and output shapes
    (unquoted, as the text export writes them) and TASK_PMU_INFO's metrics under the CSV's names and
    units, and its Wait Time is the database's own waitNs."""
    import json

    src, db_run, _ = runs
    with ascend_database(src, rank) as con:
        has_wait = "waitNs" in {r[1] for r in con.execute("PRAGMA table_info(COMPUTE_TASK_INFO)")}  # rank 1's has none
        want = [
            dict(r)
            for r in con.execute(f"""
            SELECT {"k.waitNs / 1e3" if has_wait else "NULL"} AS wait, k.blockDim AS block, f.value AS formats,
                   o.value AS out_shapes,
                   (SELECT p.value FROM TASK_PMU_INFO p JOIN STRING_IDS s ON s.id = p.name
                    WHERE p.globalTaskId = k.globalTaskId AND s.value = 'aiv_total_time') AS aiv_ns
            FROM COMPUTE_TASK_INFO k JOIN TASK t USING (globalTaskId)
            LEFT JOIN STRING_IDS f ON f.id = k.inputFormats LEFT JOIN STRING_IDS o ON o.id = k.outputShapes
            ORDER BY t.startNs""")
        ]
    ours = _rows(db_run, """SELECT * FROM kernel_details WHERE "Rank" = ? AND "Accelerator Core" <> 'HCCL'""", rank)
    assert len(ours) == len(want) > 100 and sum(w["aiv_ns"] is not None for w in want) > 100
    for o, w in zip(ours, want):
        assert (o["Block Dim"], o["Input Formats"], o["Output Shapes"]) == (
            w["block"],
            *(None if v in (None, "N/A") else v.strip('"') for v in (w["formats"], w["out_shapes"])),
        ), o["Name"]
        if has_wait:
            assert o["Wait Time(us)"] == pytest.approx(w["wait"], abs=0.001), o["Name"]
        metrics = json.loads(o["Metrics"]) if o["Metrics"] else {}
        assert metrics.get("aiv_time(us)") == (None if w["aiv_ns"] is None else pytest.approx(w["aiv_ns"] / 1e3)), o[
            "Name"
        ]
        assert not (o["Input Shapes"] or "").startswith('"')


def test_compute_info_of_no_task_is_a_finding(tmp_path):
    """A COMPUTE_TASK_INFO row whose TASK row is missing describes nothing the import can place:
    it is counted as `unmatched_vendor_rows` (as a kernel_details.csv row of no trace task is)."""
    import json

    db = ascend_db_copy(tmp_path)
    with sqlite3.connect(db) as con:
        con.execute("DELETE FROM TASK WHERE globalTaskId IN (SELECT globalTaskId FROM COMPUTE_TASK_INFO LIMIT 2)")
    con.close()
    path = prof_engine.import_trace([tmp_path], tmp_path / "run")
    with prof_engine.open(path) as run:
        assert run.sql("SELECT count(*) FROM slices WHERE kind = 'kernel'").rows() == [(185,)]
    (source,) = json.loads((path / "manifest.json").read_text(encoding="utf-8"))["sources"]
    (finding,) = [f for f in source["info"]["findings"] if f["rule"] == "unmatched_vendor_rows"]
    assert finding["count"] == 2 and "COMPUTE_TASK_INFO" in finding["detail"]


def test_a_read_only_copy_imports_every_rank_and_nothing_is_written_beside_it(tmp_path):
    """Inputs are opened read-only: rank 0's database is in WAL mode, for which SQLite's `mode=ro`
    still creates -wal/-shm files beside it, so from a read-only archive (an NFS export) that rank
    was left out. Now both ranks import and the copy's files are exactly what they were."""
    import os
    import shutil

    from conftest import fixture_path

    src = tmp_path / "archive"
    shutil.copytree(fixture_path("ascend", "torch_npu_2rank_level1_db"), src)
    before = {p: p.read_bytes() for p in src.rglob("*") if p.is_file()}
    for p in [*src.rglob("*"), src]:
        os.chmod(p, 0o555 if p.is_dir() else 0o444)
    try:
        with prof_engine.open(prof_engine.import_trace([src], tmp_path / "run")) as run:
            assert run.manifest["ranks"] == [0, 1] and not run.manifest["skipped"]
        assert {p: p.read_bytes() for p in src.rglob("*") if p.is_file()} == before
    finally:
        for p in [src, *src.rglob("*")]:
            os.chmod(p, 0o755 if p.is_dir() else 0o644)


def test_a_database_with_a_write_ahead_log_is_read_whole_from_a_private_copy(tmp_path):
    """A database whose write-ahead log still holds pages (a profiler killed before it closed) is
    read with them — from a copy, so nothing is written beside the input."""
    from prof_engine.importers.ascend_db import _Db

    path = tmp_path / "p.db"
    writer = sqlite3.connect(path)
    writer.execute("PRAGMA journal_mode=wal")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("CREATE TABLE t (x)")
    writer.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(100)])
    writer.commit()
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    for name in ("p.db", "p.db-wal"):  # the files as a killed writer leaves them
        (frozen / name).write_bytes((tmp_path / name).read_bytes())
    writer.close()
    db = _Db(frozen / "p.db")
    try:
        assert db.con.execute("SELECT count(*), sum(x) FROM t").fetchone() == (100, sum(range(100)))
    finally:
        db.close()
    assert sorted(p.name for p in frozen.iterdir()) == ["p.db", "p.db-wal"]


def test_a_blob_where_a_time_belongs_is_one_input_error(tmp_path):
    """SQLite keeps any value in any column: a BLOB in TASK's startNs was a TypeError traceback."""
    db = ascend_db_copy(tmp_path)
    con = sqlite3.connect(db)
    con.execute("UPDATE TASK SET startNs = x'0102' WHERE rowid IN (SELECT rowid FROM TASK LIMIT 3)")
    con.commit()
    con.close()
    with pytest.raises(InputError, match="a value of the wrong type in a profiler table") as e:
        prof_engine.import_trace([tmp_path], tmp_path / "run")
    assert str(db) in str(e.value) and not (tmp_path / "run").exists()
