"""torch_npu 2023 text export without trace_view.json: device tasks come from kernel_details.csv alone.

Fixture `ascend/torch_npu_2023_2rank_and_cluster_output_16rank`. One row of rank 0's
kernel_details.csv (a FlashAttentionScore) has 31 cells under a 32-column header: the exporter
left out its Mix Block Dim, so every later cell sits one column early ('NO' as Mix Block Dim, its
dtypes as Input Shapes, cycles as aicore_time). The oracle is the CSV read with Python's csv module.
"""

from __future__ import annotations

import csv
import json

import pytest

import prof_engine
from conftest import fixture_path


@pytest.fixture(scope="module")
def run_2023(tmp_path_factory):
    src = fixture_path("ascend", "torch_npu_2023_2rank_and_cluster_output_16rank")
    path = prof_engine.import_trace([src], tmp_path_factory.mktemp("npu2023") / "run")
    with prof_engine.open(path) as run:
        yield src, run, path


def _vendor(src, rank: int) -> tuple[list[str], list[list[str]]]:
    with open(src / f"test_rank_{rank}" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", newline="") as f:
        header, *rows = list(csv.reader(f))
    return header, rows


@pytest.mark.parametrize("rank", [0, 1])
def test_kernel_details_and_op_summary_have_every_row(run_2023, rank):
    """Every CSV row once, with its name, start and task id; the views read (a cast of 'NO' failed)."""
    src, run, _ = run_2023
    header, rows = _vendor(src, rank)
    col = {h: i for i, h in enumerate(header)}
    want = sorted(
        (
            r[col["Name"]],
            round(float(r[col["Start Time(us)"]]), 3),
            None if r[col["Task ID"]] == "N/A" else int(r[col["Task ID"]]),
        )
        for r in rows
    )
    for sql in (
        'SELECT "Name", "Start Time(us)", "Task ID" FROM kernel_details WHERE "Rank" = ?',
        'SELECT "Op Name", "Task Start Time(us)", "Task ID" FROM op_summary WHERE "Rank" = ?',
    ):
        got = sorted((n, float(s), t) for n, s, t in run.sql(sql, [rank]).rows())
        assert got == want and len(got) > 15


def test_a_row_with_a_cell_left_out_keeps_only_what_can_be_placed(run_2023):
    src, run, path = run_2023
    header, rows = _vendor(src, 0)
    (short,) = [r for r in rows if len(r) != len(header)]
    assert short[header.index("Mix Block Dim")] == "NO"  # the shift the test is about
    start = float(short[header.index("Start Time(us)")])
    (row,) = run.sql(
        """SELECT "Name", "Duration(us)", "Block Dim", "Mix Block Dim", "Input Shapes", "Metrics"
                        FROM kernel_details WHERE "Rank" = 0 AND "Start Time(us)" = ?""",
        [start],
    ).rows()
    assert row[0] == short[header.index("Name")] and row[2:] == (None, None, None, None)
    assert row[1] == pytest.approx(float(short[header.index("Duration(us)")]), abs=0.0005)  # to the ns
    (source,) = [
        s for s in json.loads((path / "manifest.json").read_text(encoding="utf-8"))["sources"] if s["rank"] == 0
    ]
    (finding,) = [f for f in source["info"]["findings"] if f["rule"] == "ragged_vendor_rows"]
    assert finding["count"] == 1 and "FlashAttentionScore" in finding["detail"]


def test_steps_the_records_state_are_the_runs_steps(run_2023):
    """This export has no step records: its steps are what kernel_details.csv's `Step Id` states.
    The manifest listed none (the import said "0 steps", `--step 2` was refused) while step_trace
    showed step 2. The oracle: the Step Id column of each rank's file."""
    src, run, path = run_2023
    stated = {(rank, int(row[0])) for rank in (0, 1) for row in _vendor(src, rank)[1] if row and row[0].isdigit()}
    assert stated and {(s["rank"], s["step"]) for s in run.manifest["steps"]} == stated
    with prof_engine.open(path, steps=[2]) as only:
        assert {r[0] for r in only.sql('SELECT "Step" FROM step_trace').rows()} == {2}
