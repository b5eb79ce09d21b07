"""torch_npu Level0 text export: kernel_details.csv has 8 columns (no Task ID, Stream ID, Type or core
type), so its rows are matched to trace_view.json's tasks on name and start.

Fixture `ascend/torch_npu_2rank_level0_text` ships, per rank, the raw trace_view.json and
kernel_details.csv next to the vendor's step_trace_time.csv and operator_details.csv. At Level0
torch_npu writes no op_statistic.csv or api_statistic.csv (and trace_view.json has no CANN lane),
so op_statistic is checked against kernel_details.csv itself: its rows are the device's compute
tasks. Tolerances and their reasons are those of test_ascend_fidelity.py (same vendor, same rounding).
"""

from __future__ import annotations

import csv
import json

import pytest

from conftest import fixture_path
from test_ascend_fidelity import assert_step_trace_is_vendors


@pytest.fixture(scope="module")
def level0(tmp_path_factory):
    import prof_engine

    src = fixture_path("ascend", "torch_npu_2rank_level0_text")
    path = prof_engine.import_trace([src], tmp_path_factory.mktemp("npu_l0") / "run")
    run = prof_engine.open(path)
    yield src, run, path
    run.close()


def _vendor(src, rank: int, name: str) -> list[dict[str, str]]:
    with open(src / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / name, newline="") as f:
        return list(csv.DictReader(f))


def _compute_rows(src, rank: int) -> list[dict[str, str]]:
    return [r for r in _vendor(src, rank, "kernel_details.csv") if r["Accelerator Core"] != "HCCL"]


@pytest.mark.parametrize("rank", [0, 1])
def test_step_trace_matches_step_trace_time_csv(level0, rank):
    """Computing was 0 when the Level0 rows were not matched (every compute task became `other`)."""
    src, run, _ = level0
    assert_step_trace_is_vendors(src, run, rank)
    (computing,) = run.sql('SELECT "Computing" FROM step_trace WHERE "Rank" = ? AND "Step" IS NOT NULL', [rank]).rows()[
        0
    ]
    assert computing > 8000


@pytest.mark.parametrize("rank", [0, 1])
def test_op_statistic_counts_the_kernel_details_rows(level0, rank):
    """The device's op_statistic rows count every compute row of kernel_details.csv once, with its
    time (the CSV rounds each duration to the ns: at most 0.5 ns a row apart)."""
    src, run, _ = level0
    vendor = _compute_rows(src, rank)
    durations = [float(r["Duration(us)"]) for r in vendor]
    count, total, lo, hi = run.sql(
        """SELECT sum("Count"), sum("Total Time(us)"), min("Min Time(us)"), max("Max Time(us)") FROM op_statistic
           WHERE "Rank" = ? AND "Device" <> 'host'""",
        [rank],
    ).rows()[0]
    assert count == len(vendor) > 150
    assert total == pytest.approx(sum(durations), abs=0.0005 * len(vendor) + 0.01)
    assert lo == pytest.approx(min(durations), abs=0.01) and hi == pytest.approx(max(durations), abs=0.01)


@pytest.mark.parametrize("rank", [0, 1])
def test_kernel_details_has_the_csv_rows(level0, rank):
    """kernel_details lists kernel_details.csv's rows, in its order, with their timing and Block Dim;
    the core type comes from the trace's task (the CSV says N/A at Level0)."""
    src, run, _ = level0
    vendor = _vendor(src, rank, "kernel_details.csv")
    ours = run.sql('SELECT * FROM kernel_details WHERE "Rank" = ?', [rank]).arrow().to_pylist()
    assert len(ours) == len(vendor) > 150
    for o, v in zip(ours, vendor):
        assert (o["Step Id"], o["Name"], o["Block Dim"]) == (int(v["Step Id"]), v["Name"], int(v["Block Dim"]))
        assert float(o["Start Time(us)"]) == pytest.approx(float(v["Start Time(us)"].strip()), abs=0.001)
        assert o["Duration(us)"] == pytest.approx(float(v["Duration(us)"]), abs=0.0015)
        # a gap between a start and an end each rounded to the ns (the vendor's end is sub-ns)
        assert o["Wait Time(us)"] == pytest.approx(float(v["Wait Time(us)"]), abs=0.0025), o["Name"]
        assert o["Accelerator Core"] == ("HCCL" if v["Accelerator Core"] == "HCCL" else o["Accelerator Core"])
    assert {o["Accelerator Core"] for o in ours} >= {"AI_CORE", "HCCL"}


def test_every_row_matched_so_no_finding(level0):
    _, _, path = level0
    manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    rules = [f["rule"] for s in manifest["sources"] for f in (s.get("info") or {}).get("findings", [])]
    assert "unmatched_vendor_rows" not in rules


HEADER = "Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Dim\r\n"


def _rank_dir(tmp_path, rows: list[str]):
    """A Level0-shaped rank directory: one Ascend Hardware task (Conv2D at 1700000000000000.000 µs,
    which the trace writes 1 ns later, as the two files round apart) and kernel_details `rows`."""
    out = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    events = [
        {"ph": "M", "name": "process_name", "pid": 800, "args": {"name": "Ascend Hardware"}},
        {"ph": "M", "name": "process_labels", "pid": 800, "args": {"labels": "NPU"}},
        {
            "ph": "X",
            "name": "Conv2D",
            "pid": 800,
            "tid": 2,
            "ts": "1700000000000000.001",
            "dur": 5.0,
            "args": {"Task Type": "AI_CORE", "Physic Stream Id": 2, "Task Id": 7, "connection_id": 99},
        },
    ]
    (out / "trace_view.json").write_text(json.dumps(events), encoding="utf-8")
    (out / "kernel_details.csv").write_text(HEADER + "".join(rows), encoding="utf-8")
    return tmp_path


def test_rows_match_on_name_and_start_and_the_rest_are_a_finding(tmp_path):
    """A Level0 row matches its task on name and start (±1 ns); a row of no task is counted as
    `unmatched_vendor_rows`, naming the file and the row, instead of vanishing."""
    import prof_engine

    src = _rank_dir(
        tmp_path / "src",
        [
            "1,Conv2D,N/A,N/A,1700000000000000.000\t,5.0,0,16\r\n",
            "1,MatMul,N/A,N/A,1700000000000100.000\t,3.0,95.0,8\r\n",  # no such task in the trace
        ],
    )
    path = prof_engine.import_trace([src], tmp_path / "run")
    with prof_engine.open(path) as run:
        assert run.sql("SELECT kind, name FROM slices WHERE device <> 'host'").rows() == [("kernel", "Conv2D")]
        assert run.sql('SELECT "Name", "Block Dim", "Task ID" FROM kernel_details').rows() == [("Conv2D", 16, 7)]
    (source,) = json.loads((path / "manifest.json").read_text(encoding="utf-8"))["sources"]
    (finding,) = [f for f in source["info"]["findings"] if f["rule"] == "unmatched_vendor_rows"]
    assert finding["count"] == 1 and "MatMul" in finding["detail"] and "kernel_details.csv" in finding["detail"]


@pytest.mark.parametrize("rank", [0, 1])
def test_operator_details_matches_operator_details_csv(level0, rank):
    """Every op call of operator_details.csv, in its order, with its host and device times: the
    ops' device work is found through the async_npu arrows to the tasks matched above. As at
    Level1 (test_ascend_fidelity.py), where a launch ran as two copies the vendor counts one:
    those rows exceed the vendor's by exactly one copy task's duration."""
    src, run, _ = level0
    vendor = _vendor(src, rank, "operator_details.csv")
    ours = (
        run.sql('SELECT * EXCLUDE ("Rank", "Step") FROM operator_details WHERE "Rank" = ?', [rank]).arrow().to_pylist()
    )
    copies = [
        d / 1000
        for (d,) in run.sql(
            "SELECT DISTINCT dur FROM slices WHERE rank = ? AND kind = 'memcpy' AND name = 'MEMCPY_ASYNC'", [rank]
        ).rows()
    ]
    assert len(ours) == len(vendor) > 800
    differing = 0
    for o, v in zip(ours, vendor):
        assert o["Name"] == v["Name"]
        for col in (
            "Host Self Duration(us)",
            "Host Total Duration(us)",
            "Device Self Duration With AICore(us)",
            "Device Total Duration With AICore(us)",
        ):
            assert o[col] == pytest.approx(float(v[col]), abs=0.01), (o["Name"], col)
        for col in ("Device Self Duration(us)", "Device Total Duration(us)"):
            extra = o[col] - float(v[col])
            if abs(extra) > 0.01:
                differing += col == "Device Total Duration(us)"
                assert any(abs(extra - c) <= 0.011 for c in copies), (o["Name"], col, extra)
    assert differing <= 20
    assert sum(o["Device Self Duration(us)"] for o in ours) > 8000  # the ops' kernels were found
