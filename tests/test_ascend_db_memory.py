"""torch_npu's `.db` export imports memory as its text export does: `memory` / `memory_timeline` work.

The db (`ascend/torch_npu_2rank_level1_db`) and text (`ascend/torch_npu_2rank_level1_text`) fixtures
are two sessions of one script, so values are checked against the database itself (independent SQL
with sqlite3) and only the structure against the text form: components, devices, row counts.
"""

from __future__ import annotations

import sqlite3

import pytest

import prof_engine
from conftest import ascend_database, ascend_db_copy

MIB = 1024 * 1024
# Per component, every sample the text form's memory_record.csv / npu_module_mem.csv would hold:
# MEMORY_RECORD (PTA, GE, PTA+GE, WORKSPACE), NPU_MEM's `app` rows (APP: ddr + hbm, the CSV's
# memory(KB)), NPU_MODULE_MEM per ENUM_MODULE name. `memory` merges a component's memory/ and
# module_memory/ tracks (GE, APP are both), and lists those that ever held memory.
PEAKS_SQL = """
WITH samples(component, allocated, reserved) AS (
    SELECT s.value, m.totalAllocated, m.totalReserved
    FROM MEMORY_RECORD m JOIN STRING_IDS s ON s.id = m.component
    UNION ALL
    SELECT 'APP', NULL, n.ddr + n.hbm FROM NPU_MEM n JOIN STRING_IDS t ON t.id = n.type WHERE t.value = 'app'
    UNION ALL
    SELECT e.name, NULL, u.totalReserved FROM NPU_MODULE_MEM u JOIN ENUM_MODULE e ON e.id = u.moduleId
)
SELECT component, max(allocated), max(reserved), count(*) FROM samples GROUP BY component
HAVING coalesce(max(allocated), 0) > 0 OR coalesce(max(reserved), 0) > 0
"""


@pytest.fixture(scope="module")
def runs(torch_npu_db_run, torch_npu_text_run):
    """(db source, db run, text run), imported once for the session (conftest)."""
    return torch_npu_db_run[0], torch_npu_db_run[1], torch_npu_text_run[1]


def _memory(run, rank: int) -> dict[str, tuple]:
    rows = run.sql(
        """SELECT "Component", "Peak Allocated(MB)", "Peak Reserved(MB)", "Samples"
                      FROM memory WHERE "Rank" = ?""",
        [rank],
    ).rows()
    return {c: (a, r, n) for c, a, r, n in rows}


@pytest.mark.parametrize("rank", [0, 1])
def test_memory_peaks_equal_the_databases_maxima(runs, rank):
    src, db_run, _ = runs
    con = ascend_database(src, rank)
    try:
        expected = {c: (a, r, n) for c, a, r, n in con.execute(PEAKS_SQL)}
    finally:
        con.close()
    got = _memory(db_run, rank)
    assert set(got) == set(expected)
    for component, (allocated, reserved, samples) in expected.items():
        peak_allocated, peak_reserved, n = got[component]
        if allocated is None:
            assert peak_allocated is None, component
        else:
            assert peak_allocated == pytest.approx(allocated / MIB, abs=1e-6), component
        assert peak_reserved == pytest.approx(reserved / MIB, abs=1e-6), component
        assert n == samples, component
    assert {"PTA", "GE", "PTA+GE", "APP"} <= set(got)  # allocator pools and the app's own total


@pytest.mark.parametrize("rank", [0, 1])
def test_components_and_devices_are_the_text_forms(runs, rank):
    _, db_run, text_run = runs
    assert set(_memory(db_run, rank)) == set(_memory(text_run, rank))
    for run in (db_run, text_run):
        devices = [d for (d,) in run.sql('SELECT DISTINCT "Device" FROM memory WHERE "Rank" = ?', [rank]).rows()]
        assert devices == [f"npu{rank}"]
        devices = [
            d
            for (d,) in run.sql(
                """SELECT DISTINCT device FROM counters WHERE rank = ? AND name LIKE '%memory/%'
                                            UNION SELECT DISTINCT device FROM memory_events WHERE rank = ?""",
                [rank, rank],
            ).rows()
        ]
        assert devices == [f"npu{rank}"]


@pytest.mark.parametrize("rank", [0, 1])
def test_counter_tracks_and_series_are_the_text_forms(runs, rank):
    """Same tracks (memory/<component>, module_memory/<module>) with the same series; GE has no active total.

    One module is named differently by the two sessions' CANN: ENUM_MODULE id 74 is `AMP` in the db,
    `AML` in the text session's npu_module_mem.csv (it never holds memory, so `memory` omits it)."""
    _, db_run, text_run = runs
    sql = "SELECT DISTINCT name, series FROM counters WHERE rank = ? AND name LIKE '%memory/%' ORDER BY ALL"
    db_tracks, text_tracks = (set(run.sql(sql, [rank]).rows()) for run in (db_run, text_run))
    assert len(db_tracks) == len(text_tracks) == 4 + 3 + 2 + 77  # reserved, allocated, active; 77 modules
    renamed = {("module_memory/AMP", "reserved_bytes"), ("module_memory/AML", "reserved_bytes")}
    assert db_tracks ^ text_tracks <= renamed


@pytest.mark.parametrize("rank", [0, 1])
def test_memory_events_are_op_memorys_allocations_and_releases(runs, rank):
    src, db_run, _ = runs
    con = ascend_database(src, rank)
    try:
        allocations, releases, allocated, released = con.execute(
            """SELECT count(*) FILTER (WHERE allocationTime IS NOT NULL AND size >= 0),
                      count(*) FILTER (WHERE releaseTime IS NOT NULL),
                      sum(size) FILTER (WHERE allocationTime IS NOT NULL AND size >= 0),
                      sum(abs(size)) FILTER (WHERE releaseTime IS NOT NULL) FROM OP_MEMORY"""
        ).fetchone()
        names = {
            n for (n,) in con.execute("SELECT DISTINCT s.value FROM OP_MEMORY o JOIN STRING_IDS s ON s.id = o.name")
        }
        peak = con.execute(
            "SELECT max(max(allocationTotalAllocated), max(coalesce(releaseTotalAllocated, 0))) FROM OP_MEMORY"
        ).fetchone()[0]
    finally:
        con.close()
    assert allocations > 0 and releases > 0
    ((n_alloc, n_release, plus, minus, got_names, got_peak, unnamed),) = db_run.sql(
        """SELECT count(*) FILTER (WHERE bytes > 0), count(*) FILTER (WHERE bytes < 0),
                  sum(bytes) FILTER (WHERE bytes > 0), -sum(bytes) FILTER (WHERE bytes < 0),
                  list(DISTINCT op_name), max(total_allocated), count(*) FILTER (WHERE op_name IS NULL)
           FROM memory_events WHERE rank = ?""",
        [rank],
    ).rows()
    assert (n_alloc, n_release) == (allocations, releases)
    assert (plus, minus) == (allocated, released)
    assert set(got_names) == names and unnamed == 0
    assert got_peak == peak


@pytest.mark.parametrize("rank", [0, 1])
def test_memory_events_rows_match_the_text_forms_shape(runs, rank):
    """Same number of allocation and release rows as operator_memory.csv of the other session."""
    _, db_run, text_run = runs
    sql = """SELECT count(*) FILTER (WHERE bytes > 0), count(*) FILTER (WHERE bytes < 0),
                    count(*) FILTER (WHERE total_allocated IS NULL) FROM memory_events WHERE rank = ?"""
    assert db_run.sql(sql, [rank]).rows() == text_run.sql(sql, [rank]).rows()


def test_missing_memory_tables_are_skipped_and_drifting_names_tolerated(tmp_path):
    """profile_memory off leaves the memory tables out: the rest imports, memory is empty."""
    db = ascend_db_copy(tmp_path)
    with sqlite3.connect(db) as con:
        for table in ("OP_MEMORY", "NPU_MEM", "NPU_MODULE_MEM"):
            con.execute(f"DROP TABLE {table}")
        con.execute("ALTER TABLE MEMORY_RECORD RENAME COLUMN timestamp TO timestampNs")
    con.close()
    run = prof_engine.open(prof_engine.import_trace([tmp_path], tmp_path / "run"))
    try:
        assert {c for (c,) in run.sql('SELECT "Component" FROM memory').rows()} == {"PTA", "GE", "PTA+GE"}
        assert run.sql("SELECT count(*) FROM memory_events").rows() == [(0,)]
    finally:
        run.close()
    with sqlite3.connect(db) as con:
        con.execute("DROP TABLE MEMORY_RECORD")
    con.close()
    run = prof_engine.open(prof_engine.import_trace([tmp_path], tmp_path / "run2"))
    try:
        assert run.sql("SELECT count(*) FROM memory").rows() == [(0,)]
        assert run.sql("SELECT count(*) FROM counters WHERE name LIKE '%memory/%'").rows() == [(0,)]
        assert run.sql("SELECT count(*) FROM slices WHERE kind = 'kernel'").rows() == [(187,)]
    finally:
        run.close()
