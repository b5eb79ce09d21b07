"""Issue 38, item 19: damaged Ascend inputs are said, never read as empty or doubled.

Each test mutates a copy (in tmp_path) of one rank of a real torch_npu export and asserts an error
or a named finding with the right count; the oracle is the mutated file itself, read with sqlite3,
json or plain string splitting. A needed table, column or row that cannot be read is an error (one
line, what and where, nothing written) or a finding that names the file and counts what was left
out. The database tests empty the host tables of their copy (the damage is to the device tables):
each converts in a fraction of a second.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

import prof_engine
from conftest import fixture_path
from prof_engine.errors import InputError

TEXT = ("ascend", "torch_npu_2rank_level1_text", "rank0_ascend_pt", "ASCEND_PROFILER_OUTPUT")
DB = ("ascend", "torch_npu_2rank_level1_db", "rank0_ascend_pt", "ASCEND_PROFILER_OUTPUT")
HOST_AND_COUNTER_TABLES = (
    "PYTORCH_API",
    "CANN_API",
    "MEMORY_RECORD",
    "OP_MEMORY",
    "NPU_MEM",
    "NPU_MODULE_MEM",
    "AICORE_FREQ",
    "HBM",
    "LLC",
    "SOC_BANDWIDTH_LEVEL",
    "ACC_PMU",
)


def _null_sink(table, batch) -> None:
    """A converter sink that keeps nothing (the tests read the converter's counts and findings)."""


def _db_copy(tmp_path: Path) -> Path:
    """Rank 0's database in a rank directory of its own under tmp_path, host and counter rows gone."""
    out = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    db = out / "ascend_pytorch_profiler_0.db"
    shutil.copyfile(fixture_path(*DB, "ascend_pytorch_profiler_0.db"), db)
    with sqlite3.connect(db) as con:
        have = {n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for t in HOST_AND_COUNTER_TABLES:
            if t in have:
                con.execute(f"DELETE FROM {t}")
    con.close()
    return db


def _convert_db(db: Path):
    from prof_engine.importers import ascend_db

    return ascend_db.convert_db(db, 0, _null_sink)


def _findings(info: dict, rule: str) -> list[dict]:
    return [f for f in info.get("findings") or [] if f["rule"] == rule]


# -- (a) a .db without COMPUTE_TASK_INFO --------------------------------------------------------
def test_db_without_compute_task_info_is_refused_in_one_line(tmp_path):
    """Without the compute-op list every HCCL task read as compute (Computing 8,900 -> 99,002 µs):
    refused, one line naming the file and table (the user error `main` prints), no run written."""
    from typer.testing import CliRunner

    from prof_engine.cli import app

    db = _db_copy(tmp_path)
    with sqlite3.connect(db) as con:
        con.execute("DROP TABLE COMPUTE_TASK_INFO")
        (tasks,) = con.execute("SELECT count(*) FROM TASK").fetchone()
    con.close()
    assert tasks > 0
    done = CliRunner().invoke(app, ["import", str(tmp_path / "rank0_ascend_pt"), "-o", str(tmp_path / "run")])
    # `prof-engine`'s main() prints a ProfEngineError as one `Error:` line and exits 1
    assert isinstance(done.exception, InputError), done.output
    message = str(done.exception)
    assert "\n" not in message and "COMPUTE_TASK_INFO" in message and "ascend_pytorch_profiler_0.db" in message
    assert not (tmp_path / "run").exists()


# -- (b) TASK written as a view -----------------------------------------------------------------
def test_task_table_as_a_view_is_read(tmp_path):
    """A TASK that is a view (of a table of another name) is read like the table: every task."""
    db = _db_copy(tmp_path)
    with sqlite3.connect(db) as con:
        con.execute("ALTER TABLE TASK RENAME TO TASK_ROWS")
        con.execute("CREATE VIEW TASK AS SELECT * FROM TASK_ROWS")
        (want,) = con.execute(
            "SELECT count(*) FROM TASK_ROWS WHERE startNs IS NOT NULL AND endNs IS NOT NULL"
        ).fetchone()
    con.close()
    conv = _convert_db(db)
    assert want > 0 and conv.counts["TASK"] == want


# -- (e) impossible times in a .db --------------------------------------------------------------
def test_db_times_get_the_kineto_value_checks(tmp_path):
    """An endNs of 2^63-1 (a 237-year op) is dropped as `values_out_of_range`; a task that ends before
    it starts is read as 0 µs long and counted as `negative_durations`, as the Kineto path does."""
    from prof_engine.importers.chrome import anomalies

    db = _db_copy(tmp_path)
    with sqlite3.connect(db) as con:
        con.execute("UPDATE TASK SET endNs = 9223372036854775807 WHERE rowid = (SELECT min(rowid) FROM TASK)")
        con.execute(
            "UPDATE TASK SET startNs = endNs, endNs = startNs "
            "WHERE rowid IN (SELECT rowid FROM TASK WHERE endNs > startNs AND endNs < 9223372036854775807 LIMIT 5)"
        )
        huge, reversed_, total = con.execute(
            "SELECT count(*) FILTER (WHERE endNs - startNs > 7 * 86400 * 1000000000), "
            "count(*) FILTER (WHERE endNs < startNs), count(*) FROM TASK"
        ).fetchone()
    con.close()
    assert (huge, reversed_) == (1, 5)
    conv = _convert_db(db)
    found = anomalies(conv)
    (out_of_range,) = _findings(found, "values_out_of_range")
    assert out_of_range["count"] == huge
    assert found["negative_durations"] == reversed_
    assert conv.counts["TASK"] == total - huge


# -- (f) every TASK row twice ---------------------------------------------------------------------
def test_duplicate_task_rows_are_read_once_and_said(tmp_path):
    db = _db_copy(tmp_path)
    with sqlite3.connect(db) as con:
        con.execute("INSERT INTO TASK SELECT * FROM TASK")
        rows, distinct = con.execute(
            "SELECT count(*), (SELECT count(*) FROM (SELECT DISTINCT * FROM TASK)) FROM TASK"
        ).fetchone()
    con.close()
    assert rows == 2 * distinct
    conv = _convert_db(db)
    assert conv.counts["TASK"] == distinct
    (finding,) = _findings(conv.info, "duplicate_vendor_rows")
    assert finding["count"] == rows - distinct and "TASK" in finding["detail"]


# -- CSV damage -------------------------------------------------------------------------------------
class _Conv:
    """What the memory reader writes to: rows by table."""

    file_index = 0
    device_index = 0

    def __init__(self) -> None:
        self.rows: list[tuple[str, dict]] = []

    def add_row(self, table: str, row: dict) -> None:
        self.rows.append((table, row))


def _text_copy(tmp_path: Path, *names: str) -> Path:
    out = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    for name in names:
        shutil.copyfile(fixture_path(*TEXT, name), out / name)
    return out


def _mutate_line(path: Path, line_no: int, change) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[line_no - 1] = change(lines[line_no - 1])
    path.write_bytes(b"\n".join(lines))


# (c) a stray quote in l2_cache.csv
def test_stray_quote_in_l2_cache_leaves_out_one_row_and_says_so(tmp_path):
    """A `"` opening a cell swallowed the 124 lines after it: now only its row is left out, named
    with its line; every other row still gives its task its L2 rates."""
    from prof_engine.importers.ascend import KERNEL_COLUMNS, KERNEL_DERIVED, KERNEL_TIMES, read_csv, with_l2_cache

    out = _text_copy(tmp_path, "kernel_details.csv", "l2_cache.csv")
    l2 = out / "l2_cache.csv"
    _mutate_line(l2, 56, lambda line: line.replace(b",", b',"', 1))
    body = l2.read_text(encoding="utf-8").splitlines()[1:]
    damaged = [i + 2 for i, line in enumerate(body) if '"' in line]
    assert damaged == [56]
    rows = read_csv(out / "kernel_details.csv", KERNEL_COLUMNS, rest=KERNEL_DERIVED, times=KERNEL_TIMES)
    info: dict = {}
    with_l2_cache(rows, l2, info, "npu0")
    (finding,) = _findings(info, "vendor_rows_left_out")
    assert finding["count"] == len(damaged) and "l2_cache.csv" in finding["detail"] and "line 56" in finding["detail"]
    with_rates = sum(1 for r in rows if "L2 Victim Rate" in (r.get("_rest") or {}))
    assert with_rates == len(body) - len(damaged)


def test_row_cut_short_in_l2_cache_is_left_out_and_said(tmp_path):
    from prof_engine.importers.ascend import with_l2_cache

    out = _text_copy(tmp_path, "l2_cache.csv")
    l2 = out / "l2_cache.csv"
    _mutate_line(l2, 30, lambda line: line[:6])
    short = [line for line in l2.read_text(encoding="utf-8").splitlines()[1:] if line.count(",") < 4]
    info: dict = {}
    with_l2_cache([], l2, info, "npu0")
    (finding,) = _findings(info, "vendor_rows_left_out")
    assert finding["count"] == len(short) == 1 and "line 30" in finding["detail"]


# (d) a needed column missing, or a header only
@pytest.mark.parametrize("damage", ["no Timestamp(us) column", "header only"])
def test_memory_file_without_a_needed_column_or_rows_is_said(tmp_path, damage):
    from prof_engine.importers.ascend_memory import convert_memory

    out = _text_copy(tmp_path, "npu_module_mem.csv")
    path = out / "npu_module_mem.csv"
    text = path.read_text(encoding="utf-8")
    if damage == "header only":
        path.write_text(text.splitlines()[0] + "\n", encoding="utf-8")
    else:
        path.write_text(text.replace("Timestamp(us)", "Time", 1), encoding="utf-8")
    conv, info = _Conv(), {}
    convert_memory(out, conv, info)
    assert conv.rows == []
    (finding,) = _findings(info, "vendor_file_left_out")
    assert finding["count"] == 1 and "npu_module_mem.csv" in finding["detail"]
    assert ("Timestamp(us)" if damage != "header only" else "no rows") in finding["detail"]


# (g) a row cut short in operator_memory.csv
def test_row_cut_short_in_operator_memory_invents_no_leak(tmp_path):
    """The row cut after its allocation time read as an allocation never released (a 17 MB leak):
    left out and said; every other row gives what it gave. Imported end to end (a rank directory
    without trace_view.json: kernel_details.csv gives the device tasks)."""
    out = _text_copy(tmp_path, "kernel_details.csv", "operator_memory.csv")
    path = out / "operator_memory.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split(",")
    # the first row released in the capture, cut after its allocation time
    cut = next(i for i, line in enumerate(lines[1:], 2) if line.split(",")[3].strip())
    _mutate_line(path, cut, lambda line: b",".join(line.split(b",")[:3]))
    cells = [line.split(",") for line in path.read_text(encoding="utf-8").splitlines()[1:]]
    whole = [c for c in cells if len(c) == len(header)]
    assert len(cells) - len(whole) == 1
    want_allocs = sum(1 for c in whole if c[2].strip() and float(c[1]) > 0)
    want_releases = sum(1 for c in whole if c[3].strip())
    with prof_engine.open(prof_engine.import_trace([tmp_path / "rank0_ascend_pt"], tmp_path / "run")) as run:
        got = run.sql(
            "SELECT count(*) FILTER (WHERE bytes > 0), count(*) FILTER (WHERE bytes < 0) FROM memory_events"
        ).rows()
        assert got == [(want_allocs, want_releases)]
        (row,) = run.sql("""SELECT "Count", "Detail" FROM data_quality WHERE "Rule" = 'vendor_rows_left_out'""").rows()
    assert row[0] == 1 and "operator_memory.csv" in row[1] and f"line {cut}" in row[1]


# (h) a truncated kernel_details.csv
def test_truncated_kernel_details_is_said_and_types_the_rest_by_task_type(tmp_path):
    """kernel_details.csv cut in the middle: its last row is left out (truncated), and the trace's
    device tasks after its last whole row, which have no row because the file ends, are typed by
    their task type (not `other`, which halved Computing) and counted as `unlisted_device_tasks`.
    The trace is cut down to its metadata and Ascend Hardware lane to keep the test fast."""
    from conftest import load_events
    from prof_engine.importers import ascend

    out = _text_copy(tmp_path, "kernel_details.csv")
    _, events = load_events(fixture_path(*TEXT, "trace_view.json"))
    hardware = {
        e["pid"]
        for e in events
        if e.get("ph") == "M" and e["name"] == "process_name" and e["args"]["name"] == "Ascend Hardware"
    }
    kept = [e for e in events if e.get("ph") == "M" or (e.get("ph") == "X" and e["pid"] in hardware)]
    (out / "trace_view.json").write_text(json.dumps(kept, default=str), encoding="utf-8")
    path = out / "kernel_details.csv"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    text = path.read_text(encoding="utf-8")
    assert not text.endswith("\n")
    whole = text.splitlines()[1:-1]  # the last line is cut
    last_start = max(int(line.split(",")[8].strip().replace(".", "")) for line in whole)

    def ns(ts) -> int:
        whole_us, _, frac = str(ts).partition(".")
        return int(whole_us) * 1000 + int((frac + "000")[:3])

    after = sum(1 for e in kept if e.get("ph") == "X" and ns(e["ts"]) > last_start + 1)
    conv, info = ascend.convert_rank_dir(tmp_path / "rank0_ascend_pt", 0, _null_sink)
    (left_out,) = _findings(info, "vendor_rows_left_out")
    assert left_out["count"] == 1 and "truncated" in left_out["detail"]
    (unlisted,) = _findings(info, "unlisted_device_tasks")
    assert unlisted["count"] == after > 0
    assert conv.past_list == after


def test_csv_reader_without_findings_refuses_damage(tmp_path):
    """Where no finding can be recorded (`info` not given) a row that cannot be read is an error
    naming the file and line, not a row read as empty."""
    from prof_engine.importers.ascend import read_csv

    path = tmp_path / "op.csv"
    path.write_text(
        'Name,Start Time(us),Duration(us)\nA,1.000,2.000\n"B,3.000,4.000\nC,5.000,6.000\n', encoding="utf-8"
    )
    with pytest.raises(InputError, match=r"op\.csv: .*stray quote \(first: line 3\)"):
        read_csv(path, {"Name": ("Name",), "Start": ("Start Time(us)",), "Duration": ("Duration(us)",)})
    info: dict = {}
    rows = read_csv(path, {"Name": ("Name",), "Start": ("Start Time(us)",), "Duration": ("Duration(us)",)}, info=info)
    assert [r["Name"] for r in rows] == ["A", "C"]
    assert _findings(info, "vendor_rows_left_out")[0]["count"] == 1


def test_kernel_details_rows_written_twice_are_read_once_and_said(tmp_path):
    """Every kernel_details.csv row twice (a rank directory without trace_view.json: the rows are the
    device tasks) doubled every kernel count: each is read once, and counted as duplicate_vendor_rows."""
    from prof_engine.importers import ascend

    out = _text_copy(tmp_path, "kernel_details.csv")
    path = out / "kernel_details.csv"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text(lines[0] + "".join(lines[1:]) * 2, encoding="utf-8")
    body = path.read_text(encoding="utf-8").splitlines()[1:]
    distinct = len(set(body))
    conv, info = ascend.convert_rank_dir(tmp_path / "rank0_ascend_pt", 0, _null_sink)
    (finding,) = _findings(info, "duplicate_vendor_rows")
    assert finding["count"] == len(body) - distinct > 0 and "kernel_details.csv" in finding["detail"]
    assert conv.seq - (0 << 40) == distinct  # one slice per distinct row


def test_kernel_details_step_beyond_int32_gets_the_kineto_check(tmp_path):
    """A Step Id no int32 holds is no step (the Kineto path's rule for ProfilerStep#N): its row keeps
    no step and is counted as values_out_of_range."""
    from prof_engine.importers import ascend
    from prof_engine.importers.chrome import anomalies

    out = _text_copy(tmp_path, "kernel_details.csv")
    path = out / "kernel_details.csv"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[1] = "99999999999" + lines[1][lines[1].index(",") :]
    path.write_text("".join(lines), encoding="utf-8")
    huge = sum(1 for line in lines[1:] if int(line.split(",")[0]) > 2**31 - 1)
    conv, _ = ascend.convert_rank_dir(tmp_path / "rank0_ascend_pt", 0, _null_sink)
    (finding,) = _findings(anomalies(conv), "values_out_of_range")
    assert finding["count"] == huge == 1
