"""op_summary's `Task ID` on Ascend is the hardware task id, as kernel_details.csv and msprof's
op_summary give it, not the CANN connection id that links a task to its launch; and op_summary's
rows come in one order, whatever the import.

Oracles: kernel_details.csv (text export), the database's TASK ⋈ COMPUTE_TASK_INFO read with
sqlite3 (`.db` export). The two fixtures are two sessions of one job (see test_ascend_db.py): their
tasks agree one to one, per stream in start order, with task ids a constant apart per stream (the
hardware counter starts where the session found it).
"""

from __future__ import annotations

import csv
from collections import defaultdict

import pytest

import prof_engine
from conftest import ascend_database, fixture_path

TASK_ROWS = """SELECT "Op Name", "Task Start Time(us)", "Task ID", "Stream ID", "Task Type" FROM op_summary
               WHERE "Rank" = ? ORDER BY "Task Start Time(us)", "Stream ID", "Task ID" """


def _ns(us_text: str) -> int:
    whole, _, frac = us_text.strip().strip("\t").partition(".")
    return int(whole) * 1000 + int(frac.ljust(3, "0")[:3])


def _ours(run, rank: int) -> dict[tuple[str, int], list[tuple[int | None, str]]]:
    """op_summary's rows by (name, start ns): their (Task ID, Task Type)."""
    out = defaultdict(list)
    for name, start, task, _, ttype in run.sql(TASK_ROWS, [rank]).rows():
        out[(name, int(start * 1000))].append((task, ttype))
    return out


def _find(ours: dict, name: str, start: int) -> list:
    """The rows of `name` at `start` ±1 ns (the trace and the CSV round the start apart)."""
    return next((ours[(name, s)] for s in (start, start - 1, start + 1) if (name, s) in ours), [])


@pytest.mark.parametrize("rank", [0, 1])
def test_text_task_ids_are_kernel_details_task_ids(torch_npu_text_run, rank):
    src, run = torch_npu_text_run
    path = src / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    with open(path, newline="") as f:
        vendor = list(csv.DictReader(f))
    ours = _ours(run, rank)
    for v in vendor:
        found = _find(ours, v["Name"], _ns(v["Start Time(us)"]))
        want = None if v["Task ID"] == "N/A" else int(v["Task ID"])  # communication ops: N/A
        assert [t for t, _ in found] == [want], (v["Name"], v["Start Time(us)"])
    assert sum(v["Task ID"] != "N/A" for v in vendor) > 150


@pytest.mark.parametrize("rank", [0, 1])
def test_db_task_ids_are_the_databases(torch_npu_db_run, rank):
    src, run = torch_npu_db_run
    with ascend_database(src, rank) as con:
        vendor = con.execute("""SELECT s.value, t.startNs, t.taskId FROM COMPUTE_TASK_INFO k
                                JOIN TASK t ON t.globalTaskId = k.globalTaskId
                                JOIN STRING_IDS s ON s.id = k.name""").fetchall()
        links = dict(con.execute("SELECT taskId, connectionId FROM TASK").fetchall())
    ours = _ours(run, rank)
    for name, start, task in vendor:
        assert [t for t, _ in ours[(name, start)]] == [task], (name, start)
    assert len(vendor) > 150 and any(links[t] != t for _, _, t in vendor)  # the connection id is another number
    hccl = [t for rows in ours.values() for t, ttype in rows if ttype == "HCCL"]
    assert hccl and set(hccl) == {None}  # communication ops have none (msprof: N/A)


@pytest.mark.parametrize("rank", [0, 1])
def test_text_and_db_give_the_same_tasks_per_stream(torch_npu_text_run, torch_npu_db_run, rank):
    """Per stream in start order: the same task names, and task ids one constant apart."""

    def per_stream(run):
        out = defaultdict(list)
        for name, _, task, stream, _ in run.sql(TASK_ROWS, [rank]).rows():
            if task is not None:
                out[stream].append((name, task))
        return out

    text, db = per_stream(torch_npu_text_run[1]), per_stream(torch_npu_db_run[1])
    assert text.keys() == db.keys() and len(text) >= 2
    for stream in text:
        assert [n for n, _ in text[stream]] == [n for n, _ in db[stream]], stream
        assert len({b - a for (_, a), (_, b) in zip(text[stream], db[stream])}) == 1, stream


def test_op_summary_order_is_total_and_the_same_on_every_import(tmp_path):
    """Two imports list op_summary's rows alike, sorted by rank, device and start, with tasks that
    start together (a collective and its first copy) ordered by stream and task id."""
    src = fixture_path("ascend", "torch_npu_2rank_level1_text", "rank0_ascend_pt")
    listings = []
    for i in range(2):
        with prof_engine.open(prof_engine.import_trace([src], tmp_path / f"run{i}")) as run:
            listings.append(run.sql("SELECT * FROM op_summary").rows())
    assert listings[0] == listings[1] and len(listings[0]) > 250

    def key(r):  # Rank, Device, Start, Stream (NULL first), Task ID (NULL first)
        return (r[0], r[1], r[8], r[4] is not None, r[4] or 0, r[3] is not None, r[3] or 0)

    rows = listings[0]
    assert rows == sorted(rows, key=key)
    assert len({(r[0], r[1], r[8]) for r in rows}) < len(rows)  # the fixture has tasks that start together
