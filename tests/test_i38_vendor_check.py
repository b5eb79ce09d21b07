"""Issue 38, item 4: a rebuilt report that disagrees with the vendor's summary beside the records
is said at import, as the data-quality finding `vendor_summary_mismatch` (ours, theirs, which file).

Oracles: the vendor's own step_trace_time.csv and op_statistic.csv, read with the csv module.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import prof_engine
from conftest import fixture_path

OLD = ("ascend", "torch_npu_2023_2rank_and_cluster_output_16rank")
COLUMNS = (
    "Computing",
    "Communication(Not Overlapped)",
    "Overlapped",
    "Communication",
    "Free",
    "Stage",
    "Bubble",
    "Communication(Not Overlapped and Exclude Receive)",
)


def _mismatches(run) -> list[tuple]:
    return run.sql(
        """SELECT "Rank", "Count", "Detail" FROM data_quality WHERE "Rule" = 'vendor_summary_mismatch' ORDER BY 1"""
    ).rows()


def test_2023_export_whose_records_miss_most_of_the_step_says_so(tmp_path):
    """The 2023 rank 0 holds 21 kernel_details rows where its step_trace_time.csv sums 75 ms of
    Computing: the import says which values disagree, with both numbers and the file."""
    src = tmp_path / "test_rank_0"
    shutil.copytree(fixture_path(*OLD, "test_rank_0"), src)  # one rank: fast
    (src / "ASCEND_PROFILER_OUTPUT" / "communication.json").unlink()  # its disagreements would add to the count
    (vendor,) = list(csv.DictReader(open(src / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv", newline="")))
    with prof_engine.open(prof_engine.import_trace([src], tmp_path / "run")) as run:
        (ours,) = run.sql('SELECT * FROM step_trace WHERE "Step" IS NOT NULL').arrow().to_pylist()
        tasks = run.sql("SELECT count(*) FROM slices WHERE device <> 'host' AND step = ?", [ours["Step"]]).rows()[0][0]
        ((rank, count, detail),) = _mismatches(run)
    tolerance = 0.5 + tasks / 1000  # the vendor's rounding (vendor_check's docstring)
    differ = [c for c in COLUMNS if abs(ours[c] - float(vendor[c])) > tolerance]
    assert "Computing" in differ and float(vendor["Computing"]) > 2 * ours["Computing"]  # 75 ms vs 27 ms
    assert (rank, count) == (0, len(differ))
    assert "step_trace_time.csv" in detail
    assert f"Computing {ours['Computing']:,.3f} µs rebuilt, {float(vendor['Computing']):,.3f} µs in the file" in detail


def test_reports_that_match_the_vendors_say_nothing(torch_npu_text_run):
    """torch_npu_2rank_level1_text: step_trace and op_statistic reproduce the vendor's files
    (tests/test_ascend_fidelity.py): no finding; and the files were compared (an edited copy of
    one says so)."""
    src, run = torch_npu_text_run
    assert _mismatches(run) == []


def _check_edited(tmp_path: Path, src: Path, run) -> list[tuple]:
    """check_run on a copy of the text fixture's run whose rank 0 source is the folder
    tmp_path/rank0_ascend_pt (holding an edited summary): its vendor_summary_mismatch rows."""
    from prof_engine.vendor_check import check_run

    copy = tmp_path / "run"
    shutil.copytree(Path(run.path), copy)
    manifest = (copy / "manifest.json").read_text(encoding="utf-8")
    (copy / "manifest.json").write_text(
        manifest.replace(str(src / "rank0_ascend_pt"), str(tmp_path / "rank0_ascend_pt")), encoding="utf-8"
    )
    assert check_run(copy) == 1
    with prof_engine.open(copy) as edited:
        return _mismatches(edited)


def test_an_op_statistic_that_disagrees_is_said(tmp_path, torch_npu_text_run):
    """op_statistic.csv with one op type's count changed: one disagreement, that op type, named."""
    src, run = torch_npu_text_run
    out = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    rows = list(
        csv.DictReader(open(src / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv", newline=""))
    )
    rows[0]["Count"] = str(int(rows[0]["Count"]) + 1)
    with open(out / "op_statistic.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    ((rank, count, detail),) = _check_edited(tmp_path, src, run)
    assert (rank, count) == (0, 1)
    assert f"{rows[0]['OP Type']} ({rows[0]['Core Type']}) count" in detail and "op_statistic.csv" in detail


def test_a_communication_json_that_disagrees_is_said(tmp_path, torch_npu_text_run):
    """communication.json with one op's Elapse Time 0.01 ms longer: that op, both times, named."""
    import json

    src, run = torch_npu_text_run
    out = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    data = json.loads((src / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text())
    step, kinds = next(iter(data.items()))
    op, info = next((k, v) for kind in kinds.values() for k, v in kind.items() if k != "Total Op Info")
    time_info = info["Communication Time Info"]
    time_info["Elapse Time(ms)"] += 0.01
    (out / "communication.json").write_text(json.dumps(data), encoding="utf-8")
    ((rank, count, detail),) = _check_edited(tmp_path, src, run)
    assert (rank, count) == (0, 1)
    assert f"{step[:4]} {step[4:]} {op.split('@')[0]} Elapse Time" in detail
    assert f"{time_info['Elapse Time(ms)']:,.3f} ms in the file" in detail and "communication.json" in detail


def test_db_export_is_compared_with_its_analysis_db(tmp_path, torch_npu_db_run):
    """A `.db` export's analysis.db StepTraceTime is its step_trace_time.csv: the fixture's reports
    equal it (no finding); with a third of the compute tasks deleted from TASK, Computing disagrees
    with it, and the finding has both numbers (theirs read here with sqlite3)."""
    import sqlite3

    src, run = torch_npu_db_run
    assert _mismatches(run) == []
    out = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    shutil.copytree(src / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT", out)
    with sqlite3.connect(out / "ascend_pytorch_profiler_0.db") as con:
        con.execute(
            "DELETE FROM TASK WHERE globalTaskId IN (SELECT globalTaskId FROM COMPUTE_TASK_INFO WHERE rowid % 3 = 0)"
        )
    con.close()
    with sqlite3.connect(out / "analysis.db") as con:
        ((theirs,),) = con.execute("SELECT computing FROM StepTraceTime").fetchall()
    con.close()
    with prof_engine.open(prof_engine.import_trace([tmp_path / "rank0_ascend_pt"], tmp_path / "run")) as cut:
        ((ours,),) = cut.sql('SELECT "Computing" FROM step_trace WHERE "Step" IS NOT NULL').rows()
        ((rank, count, detail),) = _mismatches(cut)
    assert ours < theirs - 1
    assert rank == 0 and count >= 1 and "analysis.db" in detail
    assert f"Computing {ours:,.3f} µs rebuilt, {theirs:,.3f} µs in the file" in detail


def test_a_check_that_cannot_run_is_said_not_fatal(tmp_path, torch_npu_text_run, monkeypatch):
    """The run is published before the check: where the engine cannot compute the rebuilt reports
    (out of memory), the import still stands, and each source says its summaries were not compared."""
    import prof_engine.engine
    from prof_engine.vendor_check import check_run

    src, run = torch_npu_text_run
    copy = tmp_path / "run"
    shutil.copytree(Path(run.path), copy)

    def no_memory(*args, **kwargs):
        raise MemoryError("could not allocate block of size 256 KiB")

    monkeypatch.setattr(prof_engine.engine, "open_run", no_memory)
    assert check_run(copy) == 2
    monkeypatch.undo()
    with prof_engine.open(copy) as checked:
        rows = checked.sql(
            """SELECT "Rank", "Detail" FROM data_quality WHERE "Rule" = 'vendor_file_left_out' ORDER BY 1"""
        ).rows()
    assert [r for r, _ in rows] == [0, 1]
    assert all("not compared" in d and "MemoryError" in d and "step_trace_time.csv" in d for _, d in rows)
